# Two commands: `make demo` (evaluate a baseline on the embedded sample) and `make test`.
# Each creates .venv and installs what it needs the first time.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The inspect_ai and lmms-eval adapters' tests run in their own environment: those frameworks pin
# versions (click, datasets, huggingface_hub) that the main install must not be held to.
# inspect and lmms-eval load the task files by path: the checkout is installed there (pip install -e .), so
# the harness imports from anywhere.
VENV_ADAPTERS ?= .venv-adapters
PYA := $(VENV_ADAPTERS)/bin/python
# `construct run --engine ray` is optional: Ray Data (requirements-ray.txt) goes into its own environment,
# where tests/test_construct_ray.py runs on a local Ray (the main suite skips those tests but one).
VENV_RAY ?= .venv-ray
PYR := $(VENV_RAY)/bin/python

.PHONY: demo test test-adapters test-ray lint sample bench bench-peers space

$(VENV)/.runtime: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	# the checkout on the import path, so `python -m eval` and the `diningbench` command work from any folder
	$(PY) -m pip install -q "setuptools>=77" wheel  # 77: the license as an SPDX string (pyproject.toml)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

$(VENV_ADAPTERS)/.installed: requirements.txt requirements-dev.txt adapters/requirements.txt pyproject.toml
	test -x $(PYA) || $(PYTHON) -m venv $(VENV_ADAPTERS)
	$(PYA) -m pip install -q --upgrade pip
	$(PYA) -m pip install -q -r requirements-dev.txt -r adapters/requirements.txt setuptools wheel
	$(PYA) -m pip uninstall -q -y torchvision  # lmms-eval pulls it; the index's build breaks beside torch 2.13.0
	$(PYA) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

$(VENV_RAY)/.installed: requirements.txt requirements-ray.txt
	test -x $(PYR) || $(PYTHON) -m venv $(VENV_RAY)
	$(PYR) -m pip install -q --upgrade pip
	$(PYR) -m pip install -q -r requirements.txt -r requirements-ray.txt "pytest>=8" "pytest-asyncio>=0.23"
	touch $@

demo: $(VENV)/.runtime
	$(PY) -m eval run --task all --model baseline:category-mean --out results/demo-baseline-category-mean

test: $(VENV)/.dev $(VENV_ADAPTERS)/.installed $(VENV_RAY)/.installed
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q
	DININGBENCH_REQUIRE_ADAPTERS=1 $(PYA) -m pytest -q tests/test_adapters_frameworks.py
	DININGBENCH_REQUIRE_RAY=1 $(PYR) -m pytest -q tests/test_construct_ray.py

test-ray: $(VENV_RAY)/.installed
	DININGBENCH_REQUIRE_RAY=1 $(PYR) -m pytest -q tests/test_construct_ray.py

test-adapters: $(VENV_ADAPTERS)/.installed
	DININGBENCH_REQUIRE_ADAPTERS=1 $(PYA) -m pytest -q tests/test_adapters_frameworks.py

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
