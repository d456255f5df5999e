"""Benchmarks that show the harness is never the bottleneck (`python -m bench.run_all`).

Each module measures one thing side by side with its reference in the same run and reports ratios;
see bench/README.md for the figures, the machine and the exact commands.
"""
