"""Shared helpers for the metric and parser tests: the corpus files and module doctests."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from types import ModuleType
from typing import Any

CORPUS = Path(__file__).resolve().parent / "corpus"
ROOT = Path(__file__).resolve().parents[1]


def corpus(name: str) -> list[dict[str, Any]]:
    """Rows of tests/corpus/<name>.jsonl (realistic model outputs with their expected parse)."""
    with (CORPUS / f"{name}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run_doctests(module: ModuleType, *names: str) -> int:
    """Run the docstring examples of the named functions; returns how many examples ran."""
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    ran = 0
    for name in names:
        for test in finder.find(getattr(module, name), name, globs=dict(vars(module))):
            result = runner.run(test)
            assert result.failed == 0, f"doctest of {name} failed"
            ran += result.attempted
    return ran


def load_metric(name: str, monkeypatch: Any) -> Any:
    """`evaluate.load("metrics/<name>")` from the repository root, offline, as a user would."""
    import evaluate

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return evaluate.load(f"metrics/{name}")


def load_app(name: str) -> ModuleType:
    """Import metrics/<name>/app.py the way `python app.py` would, without launching it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_app", ROOT / "metrics" / name / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
