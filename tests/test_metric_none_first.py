"""A failed answer is None wherever it falls: `evaluate` type-checks only a batch's first prediction
and refused None there (while None later passed); each metric now takes None first through `compute`
and `add_batch`, and a judge that fails warns once with the count."""

from __future__ import annotations

import warnings
from pathlib import Path

import evaluate
import pytest

ROOT = Path(__file__).resolve().parents[1]
REF = {"calories": 500.0, "protein": 20.0, "carbohydrates": 60.0, "fat": 18.0}
EXACT = '{"calories": 500, "protein": 20, "carbohydrates": 60, "fat": 18}'


def load(name: str):
    return evaluate.load(str(ROOT / "metrics" / name))


def test_dining_accuracy_takes_none_first_in_compute_and_add_batch() -> None:
    metric = load("dining_accuracy")
    first = metric.compute(predictions=[None, "A"], references=["A", "A"])
    last = metric.compute(predictions=["A", None], references=["A", "A"])
    assert first["accuracy"] == last["accuracy"] == 0.5 and first["parse_failures"] == 1
    metric.add_batch(predictions=[None, "B"], references=["A", "B"])
    metric.add_batch(predictions=["C"], references=["C"])
    assert metric.compute()["accuracy"] == pytest.approx(2 / 3)


def test_nutrition_error_takes_none_first_in_compute_and_add_batch() -> None:
    metric = load("nutrition_error")
    first = metric.compute(predictions=[None, EXACT], references=[REF, REF])
    last = metric.compute(predictions=[EXACT, None], references=[REF, REF])
    assert first["parse_failures"] == last["parse_failures"] == 1
    assert first["avg_mape"] == last["avg_mape"]
    metric.add_batch(predictions=[None], references=[REF])
    metric.add_batch(predictions=[EXACT], references=[REF])
    assert metric.compute()["parse_failures"] == 1


def test_judge_accuracy_takes_none_first_and_warns_once_when_the_judge_fails() -> None:
    metric = load("judge_accuracy")
    questions = ["Is it vegan?", "Is it vegan?"]
    refs = ["No, it has cheese.", "No. The sauce contains cheese."]
    ok = metric.compute(predictions=[None, "No, it contains cheese."], references=refs, questions=questions,
                        judge=lambda prompt: "GRADE: C")
    assert ok["accuracy"] == 0.5 and ok["decided_by"][0] == "no_answer"

    def broken(prompt: str) -> str:
        raise RuntimeError("no OPENAI_API_KEY")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = metric.compute(predictions=["It has cheese, so no.", "Yes, vegan."], references=refs,
                                questions=questions, judge=broken)
    judged = [w for w in caught if "judge_accuracy: the judge failed" in str(w.message)]
    failed = result["decided_by"].count("judge_error")
    assert failed >= 1 and len(judged) == 1 and f"on {failed} of 2 items" in str(judged[0].message)
    metric.add_batch(predictions=[None], references=refs[:1], questions=questions[:1])
    assert metric.compute(judge=lambda prompt: "GRADE: C")["n"] == 1
