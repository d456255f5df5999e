"""Reports from run folders: the paper's Table 2 with intervals, comparisons, breakdowns, sweep
figures and model cards (`python -m eval report`). Reads scores.jsonl; never asks a model."""
