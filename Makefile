# Two commands: `make demo` (evaluate a baseline on the embedded sample) and `make test`.
# Each creates .venv and installs what it needs the first time.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint sample bench bench-peers space

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

demo: $(VENV)/.runtime
	$(PY) -m eval run --task all --model baseline:category-mean --out results/demo-baseline-category-mean

test: $(VENV)/.dev
	$(PY) -m ruff check .
	$(PY) -m pytest -q

lint: $(VENV)/.dev
	$(PY) -m ruff check .

sample: $(VENV)/.runtime
	$(PY) diningbench.py sample --out diningbench

space: $(VENV)/.runtime
	$(PY) space/app.py

bench: $(VENV)/.dev
	$(PY) -m bench.run_all

# inspect_ai beside DiningBench on the same workload; inspect_ai goes into its own environment
# (PEERS_VENV), never into $(VENV).
PEERS_VENV ?= /tmp/diningbench-peers
bench-peers: $(VENV)/.dev
	$(PY) -m bench.peers --install --venv $(PEERS_VENV)
