"""The DiningBench data contract, one module per concern; `diningbench.py` beside this package is its
entry point (`import diningbench`, `python diningbench.py ...`)."""
