"""Build a DiningBench-style release from a platform's raw restaurant export (paper Section 3.2); see README
"Building your own benchmark"."""
