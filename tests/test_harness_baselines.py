"""Reference baselines run through the same runner and metrics, with hand-checked numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import api
from eval.api import RunSettings
from tests.helpers_harness import CLASSIFICATION_ANSWERS, make_release, read_jsonl


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def run_baseline(release: Path, out: Path, name: str, task: str = "all", **extra) -> dict:
    api.run(RunSettings(task=task, model=f"baseline:{name}", dataset=str(release), out=out, n_boot=200, **extra),
            progress=False)
    return json.loads((out / "metrics.json").read_text())


def test_zero_gives_exactly_100_percent_mape(release, tmp_path):
    metrics = run_baseline(release, tmp_path / "zero", "zero", task="nutrition")["nutrition"]
    assert metrics["avg_mape"] == 1.0
    assert all(metrics[f"{c}_mape"] == 1.0 for c in ("calories", "protein", "carbohydrates", "fat"))
    assert metrics["parse_failures"] == 0


def test_first_scores_the_share_of_answer_a(release, tmp_path):
    metrics = run_baseline(release, tmp_path / "first", "first", task="classification")["classification"]
    assert metrics["accuracy"] == CLASSIFICATION_ANSWERS.count("A") / len(CLASSIFICATION_ANSWERS) == 0.5


def test_median_is_leave_one_out(release, tmp_path):
    out = tmp_path / "median"
    metrics = run_baseline(release, out, "median")
    # Classification: the most common other answer is A for every item, right for c1, c3, c5.
    assert metrics["classification"]["accuracy"] == 0.5
    predictions = {p["id"]: p for p in read_jsonl(out / "predictions.jsonl")}
    # n1 = (400, 20, 50, 10); the others' medians: kcal (600, 200, 300) -> 300, protein (30, 10, 0) -> 10,
    # carbs (70, 20, 30) -> 30, fat (20, 8, 12) -> 12.
    assert predictions["n1"]["parsed"] == {"calories": 300.0, "protein": 10.0, "carbohydrates": 30.0, "fat": 12.0}
    calories = (100 / 400 + 300 / 600 + 200 / 200 + 100 / 300) / 4
    protein = (10 / 20 + 20 / 30 + 10 / 10) / 3  # n4 has protein 0: left out
    carbs = (20 / 50 + 40 / 70 + 30 / 20 + 20 / 30) / 4
    fat = (2 / 10 + 10 / 20 + 4 / 8 + 2 / 12) / 4
    assert metrics["nutrition"]["avg_mape"] == pytest.approx((calories + protein + carbs + fat) / 4)


def test_category_mean_uses_the_same_menu_category(release, tmp_path):
    out = tmp_path / "catmean"
    metrics = run_baseline(release, out, "category-mean")
    predictions = {p["id"]: p for p in read_jsonl(out / "predictions.jsonl")}
    # n3 (salad) sees only n4: (300, 0, 30, 12); n1 (noodles) sees only n2.
    assert predictions["n3"]["parsed"] == {"calories": 300.0, "protein": 0.0, "carbohydrates": 30.0, "fat": 12.0}
    assert predictions["n1"]["parsed"] == {"calories": 600.0, "protein": 30.0, "carbohydrates": 70.0, "fat": 20.0}
    # 主食 answers A, B, A and 沙拉 answers C, A, D: ties go to the first seen; only c3 is right.
    assert metrics["classification"]["accuracy"] == pytest.approx(1 / 6)
    assert metrics["vqa"]["scored"] is False


def test_random_is_seeded_and_reproducible(release, tmp_path):
    a = run_baseline(release, tmp_path / "a", "random", task="classification", seed=1)
    b = run_baseline(release, tmp_path / "b", "random", task="classification", seed=1)
    assert read_jsonl(tmp_path / "a" / "predictions.jsonl")[0]["raw"] == \
        read_jsonl(tmp_path / "b" / "predictions.jsonl")[0]["raw"]
    assert a["classification"]["accuracy"] == b["classification"]["accuracy"]
    letters = {p["raw"] for p in read_jsonl(tmp_path / "a" / "predictions.jsonl")}
    assert letters <= set("ABCDEFGH")
