"""Build a DiningBench-style release from a platform's raw restaurant export (paper Section 3.2).

`python -m construct run RAW --out WORK --model SPEC`: photo filters -> dish selection -> the three
task pipelines -> translation; then `review` and `release`. See README "Building your own benchmark".
"""
