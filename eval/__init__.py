"""DiningBench evaluation harness: `python -m eval run|score|report|sweep`."""
