"""parse_nutrition on realistic model outputs, its docstring examples, and fuzzing."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.nutrition_error import nutrition_error
from metrics.nutrition_error.nutrition_error import NUTRIENTS, nutrition_from_mapping, parse_nutrition
from tests.helpers_metrics import corpus, run_doctests

NUTRITION_CORPUS = corpus("nutrition")


def test_corpus_is_large_and_varied():
    assert len(NUTRITION_CORPUS) >= 50
    assert any(row["expected"] is None for row in NUTRITION_CORPUS)
    assert any("```json" in row["text"] for row in NUTRITION_CORPUS)
    assert any("<think>" in row["text"] for row in NUTRITION_CORPUS)


@pytest.mark.parametrize("row", NUTRITION_CORPUS, ids=[row["note"] for row in NUTRITION_CORPUS])
def test_corpus_output_parses_as_a_reader_would(row):
    got = parse_nutrition(row["text"])
    if row["expected"] is None:
        assert got is None, row["note"]
    else:
        assert got is not None, row["note"]
        assert list(got) == list(NUTRIENTS)
        for nutrient, value in row["expected"].items():
            assert math.isclose(got[nutrient], value, rel_tol=1e-9, abs_tol=1e-9), (row["note"], nutrient)


def test_docstring_examples_run():
    assert run_doctests(nutrition_error, "parse_nutrition", "nutrition_from_mapping", "score_nutrition") >= 8


def test_kilojoules_are_converted_to_kcal():
    got = parse_nutrition('{"energy": "1046 kJ", "protein": 10, "carbs": 20, "fat": 5}')
    assert got is not None and math.isclose(got["calories"], 1046 / 4.184)  # = 250 kcal


def test_range_midpoint():
    # (300 + 400) / 2 = 350; (10 + 13) / 2 = 11.5
    got = parse_nutrition('{"calories": "300-400", "protein": "10-13 g", "carbohydrates": 40, "fat": 9}')
    assert got == {"calories": 350.0, "protein": 11.5, "carbohydrates": 40.0, "fat": 9.0}


def test_dicts_are_read_with_the_same_rules():
    assert nutrition_from_mapping({"热量": "2092千焦", "蛋白质": 25, "碳水": 55, "脂肪": 20})["calories"] == 500.0
    assert nutrition_from_mapping({"calories": 500, "protein": 20}) is None
    assert parse_nutrition({"calories": 1, "protein": 2, "carbohydrates": 3, "fat": 4})["fat"] == 4.0


def test_saturated_fat_is_not_fat():
    assert parse_nutrition('{"calories": 600, "protein": 25, "carbohydrates": 70, "saturated fat": 8}') is None


def test_non_text_is_unparsed():
    assert parse_nutrition(None) is None
    assert parse_nutrition(42) is None


def _assert_valid(result):
    assert result is None or (
        list(result) == list(NUTRIENTS) and all(math.isfinite(v) and v >= 0 for v in result.values())
    )


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=400))
def test_fuzz_text_never_raises(text):
    _assert_valid(parse_nutrition(text))


_JSONISH = st.sampled_from(['{', '}', '"calories"', '"热量"', '"protein"', '"carbs"', '"fat"', '"脂肪"', ':',
                            ',', '"450 kcal"', '"300-400"', '12.5', '-3', 'null', '[', ']', '```json', '```',
                            "'", "//", "\n", "kJ", "1e999", "NaN", "<think>", "</think>"])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_JSONISH, max_size=40))
def test_fuzz_json_like_fragments(pieces):
    _assert_valid(parse_nutrition("".join(pieces)))


_VALUES = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(min_value=-10**6, max_value=10**6), st.text(max_size=20))


@settings(max_examples=200, deadline=None)
@given(values=st.fixed_dictionaries({n: _VALUES for n in NUTRIENTS}))
def test_fuzz_values_of_any_type(values):
    _assert_valid(nutrition_from_mapping(values))
    _assert_valid(parse_nutrition(json.dumps(values, default=str)))


@pytest.mark.parametrize(
    "text",
    [
        '{"a":' * 5000 + "1" + "}" * 5000,               # nesting beyond Python's recursion limit
        '{"a":[' * 3000 + "1" + "]}" * 3000,
        "```json\n" + "[" * 5000 + "]" * 5000 + "\n```",
        '{"calories": ' + "9" * 20000,                   # an endless number, cut off
        "{" * 5000,
    ],
    ids=["deep-objects", "deep-lists", "deep-fenced", "huge-number", "open-braces"],
)
def test_pathological_outputs_are_unparsed_not_errors(text):
    assert parse_nutrition(text) is None
