"""Each answer is parsed and scored once per run: scoring reuses what generation parsed, and the
report, tables and intervals read the scores instead of parsing or scoring again."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from eval import api
from eval.api import RunSettings
from eval.tasks import nutrition as task_nutrition
from metrics.dining_accuracy import core as dining_accuracy
from metrics.nutrition_error import core as nutrition_error
from tests.helpers_harness import CLASSIFICATION_ANSWERS, make_release, read_jsonl


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Counts every call of the metrics' parsers and of the nutrition metric's per-item scorer."""
    counts: Counter = Counter()

    def counted(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    choice = counted("parse_choice", dining_accuracy.parse_choice)
    nutrition = counted("parse_nutrition", nutrition_error.parse_nutrition)
    monkeypatch.setattr(dining_accuracy, "parse_choice", choice)
    monkeypatch.setattr(nutrition_error, "parse_nutrition", nutrition)
    monkeypatch.setattr(task_nutrition, "parse_nutrition", nutrition)
    monkeypatch.setattr(nutrition_error, "score_item", counted("score_item", nutrition_error.score_item))
    return counts


def test_a_run_parses_and_scores_each_answer_once(release, tmp_path, calls):
    out = tmp_path / "run"
    # Two epochs: 6 classification, 4 nutrition and 3 VQA items (unjudged), each answered twice.
    api.run(RunSettings(task="all", model="baseline:median", dataset=str(release), out=out,
                        n_boot=50, epochs=2), progress=False)
    n_cls, n_nut = 2 * len(CLASSIFICATION_ANSWERS), 2 * 4
    assert len(read_jsonl(out / "predictions.jsonl")) == len(read_jsonl(out / "scores.jsonl")) == n_cls + n_nut + 6
    assert (out / "report.md").exists()
    assert calls == {"parse_choice": n_cls, "parse_nutrition": n_nut, "score_item": n_nut}


def test_rescoring_a_folder_parses_each_answer_once_more(release, tmp_path, calls):
    out = tmp_path / "run"
    api.run(RunSettings(task="nutrition", model="baseline:median", dataset=str(release), out=out, n_boot=50),
            progress=False)
    before = json.loads((out / "metrics.json").read_text())
    calls.clear()
    after = api.score(out, n_boot=50)  # another process may have a newer parser: it parses again, once
    assert calls == {"parse_nutrition": 4, "score_item": 4}
    assert after == before


def test_the_report_reuses_the_interval_scoring_computed(release, tmp_path, monkeypatch):
    """A nutrition interval resamples every item n_boot times: the report, reading the same items
    back from scores.jsonl, gets scoring's interval instead of computing it again."""
    from eval import numbers

    computed = []
    original = numbers.cluster_bootstrap_column_means_ci

    def counting(matrix, *args, **kwargs):
        computed.append(len(matrix))
        return original(matrix, *args, **kwargs)

    monkeypatch.setattr(numbers, "cluster_bootstrap_column_means_ci", counting)
    numbers._CI_BY_CONTENT.clear()
    out = tmp_path / "run"
    api.run(RunSettings(task="nutrition", model="baseline:median", dataset=str(release), out=out, n_boot=1000),
            progress=False)
    assert computed == [4]  # once, over the 4 items (the report's breakdowns are smaller slices: too few to resample)
    interval = json.loads((out / "metrics.json").read_text())["nutrition"]["avg_mape_ci95"]
    records = read_jsonl(out / "scores.jsonl")
    numbers._CI_BY_CONTENT.clear()
    assert list(numbers.headline_ci(task_nutrition.TASK, records, n_boot=1000)) == interval  # the same when recomputed
    assert computed == [4, 4]
