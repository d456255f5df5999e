"""Benchmarks that show the harness is never the bottleneck (`python -m bench.run_all`).

Each module measures one thing beside its reference in the same run; bench/README.md has the figures."""
