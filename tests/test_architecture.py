"""The structure ARCHITECTURE.md describes: constants agree across self-contained modules, layers
point one way, and the settings' one declaration drives the flags, the hash and run.json."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import diningbench
from eval import cli, settings, types
from eval.settings import IDENTITY_FIELDS, RunSettings
from metrics.dining_accuracy import dining_accuracy
from metrics.nutrition_error import nutrition_error

ROOT = Path(__file__).resolve().parents[1]


def test_self_contained_copies_of_the_constants_agree():
    assert diningbench.CONFIGS == types.TASKS
    assert diningbench.NUTRIENTS == types.NUTRIENTS == nutrition_error.NUTRIENTS
    assert diningbench.LETTERS == types.LETTERS


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_metrics_import_nothing_of_the_harness():
    for path in (ROOT / "metrics").glob("*/*.py"):
        if path.name == "app.py":  # the metric's demo app may use the harness's judge adapter
            continue
        assert not any(m == "eval" or m.startswith("eval.") for m in _imports(path)), path


def test_harness_layers_point_one_way():
    lower = {"eval/types.py", "eval/settings.py", "eval/prompts.py", "eval/images.py", "eval/tasks.py",
             "eval/runner.py", "eval/store.py", "eval/runinfo.py", "eval/judge.py", "eval/numbers.py",
             "eval/scoring.py", "eval/stats.py"}
    for name in lower:
        imported = _imports(ROOT / name)
        assert not any(m.startswith(("eval.report", "eval.api", "eval.cli")) for m in imported), name
    for path in (ROOT / "eval" / "report").glob("*.py"):
        assert not any(m.startswith(("eval.api", "eval.cli")) for m in _imports(path)), path


def test_every_default_is_the_settings_one():
    parser = cli.build_parser()
    args = parser.parse_args(["run", "--task", "nutrition", "--model", "baseline:zero"])
    from_flags = settings.settings_from_args(args)
    assert dataclasses.replace(from_flags, task="all", model="") == RunSettings()
    sweep = parser.parse_args(["sweep", "--task", "nutrition", "--model", "baseline:zero", "--out", "x"])
    assert sweep.max_tokens == RunSettings().max_tokens == types.DEFAULT_MAX_TOKENS == 16384


def test_identity_fields_are_the_settings_that_change_the_question():
    assert set(IDENTITY_FIELDS) == {"model", "images", "image_order", "cot", "lang", "max_tokens", "reasoning_effort",
                                    "thinking_budget", "seed", "max_image_side"}


def test_the_letters_the_parser_reads_are_the_contracts():
    assert dining_accuracy.parse_choice("H") == "H" and types.LETTERS[-1] == "H"


def test_the_readme_shows_every_prompt_as_sent():
    from eval import prompts

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert prompts.PROMPT_VERSION in readme
    for task, kwargs in (("classification", {"options": ["{option A}", "{option B}"]}), ("nutrition", {}),
                         ("vqa", {"question": "{question}"})):
        for lang in ("zh", "en"):
            for cot in (False, True):
                assert prompts.task_prompt(task, lang, cot=cot, **kwargs) in readme, (task, lang, cot)
