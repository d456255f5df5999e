"""dining_accuracy: figures checked against hand-computed values, via the function and evaluate.load."""

from __future__ import annotations

import gradio as gr
import pytest

from metrics.dining_accuracy.core import score_choices
from tests.helpers_metrics import ROOT, load_app, load_metric, run_doctests

PREDICTIONS = [
    "C",                                    # right
    "答案：B",                               # wrong (gold A)
    "Step 1 ... A or D?\nFinal answer: D",  # right
    "It is either E or F.",                 # unparsed -> wrong
    "J",                                    # beyond H -> unparsed -> wrong
]
REFERENCES = ["C", "A", "D", "E", "B"]


def test_accuracy_counts_unparsed_as_wrong():
    result = score_choices(PREDICTIONS, REFERENCES)
    # correct: items 0 and 2 -> 2 / 5 = 0.4; unparsed: items 3 and 4 -> 2
    assert result["accuracy"] == pytest.approx(2 / 5)
    assert result["n"] == 5
    assert result["parse_failures"] == 2
    assert result["correct"] == [True, False, True, False, False]
    assert result["parsed"] == ["C", "B", "D", None, None]


def test_per_item_options_name_the_answer():
    options = [["Greek Salad", "Cobb Salad"], ["宫保鸡丁", "鱼香肉丝", "回锅肉"]]
    result = score_choices(["Cobb Salad", "回锅肉"], ["B", "B"], options=options)
    # item 0: "Cobb Salad" is option B -> right; item 1: 回锅肉 is C, gold B -> wrong: 1 / 2
    assert result["accuracy"] == 0.5
    assert result["parsed"] == ["B", "C"]


def test_a_failed_generation_is_an_unparsed_wrong_answer():
    result = score_choices([None, "A"], ["A", "A"])
    assert (result["accuracy"], result["parse_failures"]) == (0.5, 1)


@pytest.mark.parametrize(
    ("predictions", "references", "message"),
    [
        (["A"], ["A", "B"], "differ in length"),
        (["A"], ["Z"], "reference 0"),
        (["A", "B"], ["A", "AB"], "reference 1"),
        ([], [], "empty"),
    ],
)
def test_bad_input_is_a_one_line_error(predictions, references, message):
    with pytest.raises(ValueError, match=message) as info:
        score_choices(predictions, references)
    assert "\n" not in str(info.value)


def test_through_evaluate_load(monkeypatch):
    metric = load_metric("dining_accuracy", monkeypatch)
    result = metric.compute(predictions=PREDICTIONS, references=REFERENCES)
    assert result["accuracy"] == pytest.approx(0.4)
    assert result["parse_failures"] == 2
    # four options: "E" is out of range, "D" is the last letter -> 1 / 2
    four = metric.compute(predictions=["E", "D"], references=["A", "D"], n_options=4)
    assert four["accuracy"] == 0.5 and four["parsed"] == [None, "D"]


def test_incremental_batches_give_the_same_result(monkeypatch):
    metric = load_metric("dining_accuracy", monkeypatch)
    metric.add_batch(predictions=PREDICTIONS[:2], references=REFERENCES[:2])
    metric.add_batch(predictions=PREDICTIONS[2:], references=REFERENCES[2:])
    assert metric.compute()["accuracy"] == pytest.approx(0.4)


def test_app_builds_and_scores():
    app = load_app("dining_accuracy")
    assert isinstance(app.demo, gr.Blocks)
    result = app.score("C\nAnswer: B\n答案：D\nIt could be A or E.", "C\nA\nD\nE", 8)
    assert result["accuracy"] == 0.5 and result["parse_failures"] == 1  # C and D right: 2 / 4
    assert "error" in app.score("A\nB", "A", 8)
    assert app.score('["Let me think.\\nFinal answer: B"]', "B", 8)["accuracy"] == 1.0


def test_class_docstring_example_runs_from_the_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    from metrics.dining_accuracy import dining_accuracy as module

    assert run_doctests(module, "DiningAccuracy") >= 2
