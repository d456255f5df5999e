"""Metric cards and module files are ready for the Hub: YAML header, printed policies, no repo imports."""

from __future__ import annotations

import sys

import pytest
import yaml
from evaluate.loading import get_imports

from metrics.judge_accuracy.core import JUDGE_PROMPT, JUDGE_PROMPT_VERSION
from tests.helpers_metrics import ROOT

METRICS = ("dining_accuracy", "nutrition_error", "judge_accuracy")
ALLOWED_IMPORTS = {"datasets", "evaluate", "numpy", "__future__"} | set(sys.stdlib_module_names)


def _header(name: str) -> tuple[dict, str]:
    text = (ROOT / "metrics" / name / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(header), body


@pytest.mark.parametrize("name", METRICS)
def test_card_header_is_a_gradio_space(name):
    header, body = _header(name)
    for key in ("title", "emoji", "description", "sdk", "sdk_version", "app_file", "pinned", "tags"):
        assert key in header, key
    assert header["sdk"] == "gradio" and header["app_file"] == "app.py" and header["pinned"] is False
    assert str(header["sdk_version"]).startswith("6.")
    assert {"evaluate", "metric"} <= set(header["tags"])
    for section in ("## Metric Description", "## How to Use", "### Inputs", "### Output Values",
                    "### Policies", "### Examples", "## Limitations and Bias", "## Citation"):
        assert section in body, (name, section)


@pytest.mark.parametrize("name", METRICS)
def test_module_is_self_contained(name):
    # evaluate installs what a Hub module imports; ours must need only stdlib, evaluate, datasets, numpy,
    # and the one file beside it that evaluate copies with it (core.py: the parsers and scorers).
    imports = get_imports(str(ROOT / "metrics" / name / f"{name}.py"))
    assert {(kind, module) for kind, module, *_ in imports if kind != "library"} == {("internal", "core")}
    core = get_imports(str(ROOT / "metrics" / name / "core.py"))
    for found in (imports, core):
        assert {module for kind, module, *_ in found if kind == "library"} <= ALLOWED_IMPORTS
    assert {kind for kind, *_ in core} <= {"library"}
    requirements = (ROOT / "metrics" / name / "requirements.txt").read_text(encoding="utf-8")
    assert "evaluate" in requirements and "gradio" in requirements


def test_judge_card_prints_the_exact_prompt_and_version():
    _, body = _header("judge_accuracy")
    assert JUDGE_PROMPT in body
    assert JUDGE_PROMPT_VERSION in body


def test_nutrition_card_states_the_policies():
    _, body = _header("nutrition_error")
    assert "Unparsed prediction = predicting 0" in body
    assert "Ground truth 0" in body
    assert "fractions" in body


@pytest.mark.parametrize("name", METRICS)
def test_card_calls_the_tuning_corpus_a_development_set(name):
    _, body = _header(name)
    assert "development set" in " ".join(body.split()), name
