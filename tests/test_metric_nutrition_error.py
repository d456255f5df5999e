"""nutrition_error: every figure checked against values computed by hand in the comments."""

from __future__ import annotations

import math

import gradio as gr
import pytest

from metrics.nutrition_error.core import NUTRIENTS, score_nutrition
from tests.helpers_metrics import ROOT, load_app, load_metric, run_doctests

REFERENCES = [
    {"calories": 500, "protein": 20, "carbohydrates": 60, "fat": 20},
    {"calories": 400, "protein": 0, "carbohydrates": 50, "fat": 10},  # protein 0: out of protein MAPE
    {"calories": 800, "protein": 40, "carbohydrates": 100, "fat": 40},
]
PREDICTIONS = [
    {"calories": 450, "protein": 25, "carbohydrates": 60, "fat": 30},                # a dict
    '```json\n{"calories": "480 kcal", "protein": 5, "carbohydrates": 40, "fat": 10}\n```',
    "I cannot estimate the nutrition of this dish.",                                 # unparsed -> 0
]

# Absolute errors per component (item 3 unparsed, so its error is the ground truth itself):
#   calories       |450-500| = 50, |480-400| = 80, |0-800| = 800
#   protein        |25-20|   = 5,  |5-0|     = 5,  |0-40|  = 40
#   carbohydrates  |60-60|   = 0,  |40-50|   = 10, |0-100| = 100
#   fat            |30-20|   = 10, |10-10|   = 0,  |0-40|  = 40
# APEs (ground-truth 0 left out):
#   calories 0.1, 0.2, 1.0     protein 0.25, -, 1.0
#   carbohydrates 0.0, 0.2, 1.0     fat 0.5, 0.0, 1.0
EXPECTED = {
    "calories_mae": 930 / 3,
    "calories_rmse": math.sqrt((50**2 + 80**2 + 800**2) / 3),
    "calories_mape": (0.1 + 0.2 + 1.0) / 3,
    "calories_median_ape": 0.2,
    "calories_wmape": 930 / 1700,
    "protein_mae": 50 / 3,
    "protein_rmse": math.sqrt((25 + 25 + 1600) / 3),
    "protein_mape": (0.25 + 1.0) / 2,
    "protein_median_ape": (0.25 + 1.0) / 2,
    "protein_wmape": 50 / 60,
    "carbohydrates_mae": 110 / 3,
    "carbohydrates_rmse": math.sqrt((0 + 100 + 10000) / 3),
    "carbohydrates_mape": (0.0 + 0.2 + 1.0) / 3,
    "carbohydrates_wmape": 110 / 210,
    "fat_mae": 50 / 3,
    "fat_rmse": math.sqrt((100 + 0 + 1600) / 3),
    "fat_mape": (0.5 + 0.0 + 1.0) / 3,
    "fat_wmape": 50 / 70,
    # mean of the four MAPEs: (0.4333 + 0.625 + 0.4 + 0.5) / 4
    "avg_mape": ((1.3 / 3) + 0.625 + 0.4 + 0.5) / 4,
    # 11 APEs sorted: 0, 0, 0.1, 0.2, 0.2, 0.25, 0.5, 1, 1, 1, 1 -> the 6th
    "median_ape": 0.25,
    "wmape": (930 / 1700 + 50 / 60 + 110 / 210 + 50 / 70) / 4,
    # Parsed items only (items 1 and 2):
    "calories_mae_parsed_only": (50 + 80) / 2,
    "calories_rmse_parsed_only": math.sqrt((2500 + 6400) / 2),
    "calories_mape_parsed_only": (0.1 + 0.2) / 2,
    "protein_mape_parsed_only": 0.25,
    "carbohydrates_mape_parsed_only": (0.0 + 0.2) / 2,
    "fat_mape_parsed_only": (0.5 + 0.0) / 2,
    "avg_mape_parsed_only": (0.15 + 0.25 + 0.1 + 0.25) / 4,
    # APEs 0.1, 0.2, 0.25, 0, 0.2, 0.5, 0 -> sorted 0, 0, 0.1, 0.2, 0.2, 0.25, 0.5 -> 0.2
    "median_ape_parsed_only": 0.2,
    "n": 3,
    "parse_failures": 1,
    "protein_zero_gt": 1,
    "calories_zero_gt": 0,
    "zero_gt_exclusions": 1,
}


def _check(result):
    for key, value in EXPECTED.items():
        assert result[key] == pytest.approx(value, rel=1e-12), key


def test_every_figure_matches_the_hand_computation():
    _check(score_nutrition(PREDICTIONS, REFERENCES))


def test_per_item_apes_for_the_harness():
    items = score_nutrition(PREDICTIONS, REFERENCES)["per_item"]
    assert items[0]["ape"] == pytest.approx({"calories": 0.1, "protein": 0.25, "carbohydrates": 0.0, "fat": 0.5})
    assert items[1]["ape"]["protein"] is None  # ground truth 0
    assert items[2]["parsed"] is None and items[2]["ape"]["fat"] == 1.0
    assert items[1]["parsed"] == {"calories": 480.0, "protein": 5.0, "carbohydrates": 40.0, "fat": 10.0}


def test_predicting_zero_equals_an_unparsed_answer():
    zero = {c: 0 for c in NUTRIENTS}
    as_zero = score_nutrition([zero], [REFERENCES[0]])
    unparsed = score_nutrition(["no idea"], [REFERENCES[0]])
    assert as_zero["avg_mape"] == unparsed["avg_mape"] == 1.0
    assert as_zero["calories_mae"] == unparsed["calories_mae"] == 500.0
    assert unparsed["avg_mape_parsed_only"] is None and as_zero["avg_mape_parsed_only"] == 1.0


def test_all_zero_ground_truth_component_has_no_mape():
    result = score_nutrition([{c: 1 for c in NUTRIENTS}], [{"calories": 10, "protein": 0, "carbohydrates": 1, "fat": 1}])
    assert result["protein_mape"] is None and result["avg_mape"] is None
    assert result["protein_mae"] == 1.0 and result["protein_zero_gt"] == 1


@pytest.mark.parametrize(
    ("references", "message"),
    [
        ([{"calories": 1, "protein": 1, "carbohydrates": 1}], "reference 0: fat"),
        ([{"calories": -1, "protein": 1, "carbohydrates": 1, "fat": 1}], "reference 0: calories"),
        ([{"calories": float("nan"), "protein": 1, "carbohydrates": 1, "fat": 1}], "reference 0: calories"),
        (["500"], "reference 0 must be a dict"),
    ],
)
def test_bad_references_are_one_line_errors(references, message):
    with pytest.raises(ValueError, match=message) as info:
        score_nutrition(["x"], references)
    assert "\n" not in str(info.value)


def test_length_mismatch_and_empty_input():
    with pytest.raises(ValueError, match="differ in length"):
        score_nutrition(["x", "y"], REFERENCES[:1])
    with pytest.raises(ValueError, match="empty"):
        score_nutrition([], [])


def test_through_evaluate_load_with_mixed_text_and_dicts(monkeypatch):
    metric = load_metric("nutrition_error", monkeypatch)
    # Dataset rows carry more fields than the four nutrients; they are ignored.
    references = [dict(r, dish_name="红烧肉", nutrition_source="computed") for r in REFERENCES]
    _check(metric.compute(predictions=PREDICTIONS, references=references))


def test_evaluate_add_one_at_a_time(monkeypatch):
    metric = load_metric("nutrition_error", monkeypatch)
    for prediction, reference in zip(PREDICTIONS, REFERENCES, strict=True):
        metric.add(prediction=prediction, reference=reference)
    _check(metric.compute())


def test_app_builds_and_scores():
    app = load_app("nutrition_error")
    assert isinstance(app.demo, gr.Blocks)
    result = app.score(app.EXAMPLE_PREDICTIONS, app.EXAMPLE_REFERENCES)
    # calories APEs: 50/500 = 0.1, |600-640|/640 = 0.0625, unparsed 1.0
    assert result["calories_mape"] == pytest.approx((0.1 + 0.0625 + 1.0) / 3)
    assert result["parse_failures"] == 1
    assert "reference line 1" in app.score('["x"]', "not json")["error"]


def test_class_docstring_example_runs_from_the_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    from metrics.nutrition_error import nutrition_error as module

    assert run_doctests(module, "NutritionError") >= 2
