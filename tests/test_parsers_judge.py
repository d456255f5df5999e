"""parse_verdict and rule_verdict on realistic judge replies and answers, doctests and fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.judge_accuracy import core as judge_accuracy
from metrics.judge_accuracy.core import (
    JUDGE_PROMPT,
    JUDGE_PROMPT_VERSION,
    build_judge_prompt,
    parse_verdict,
    rule_verdict,
)
from tests.helpers_metrics import corpus, run_doctests

VERDICT_CORPUS = corpus("verdict")
RULE_CORPUS = corpus("rule")


@pytest.mark.parametrize("row", VERDICT_CORPUS, ids=[row["note"] for row in VERDICT_CORPUS])
def test_judge_reply_corpus(row):
    assert parse_verdict(row["text"]) == row["expected"], row["note"]


@pytest.mark.parametrize("row", RULE_CORPUS, ids=[row["note"] for row in RULE_CORPUS])
def test_rule_corpus(row):
    assert rule_verdict(row["question"], row["reference"], row["candidate"]) == row["expected"], row["note"]


def test_docstring_examples_run():
    assert run_doctests(judge_accuracy, "parse_verdict", "rule_verdict", "build_judge_prompt", "score_verdicts") >= 8


def test_prompt_is_versioned_and_asks_for_a_grade_line():
    assert JUDGE_PROMPT_VERSION.startswith("diningbench-judge-v")
    assert '"GRADE: C" or "GRADE: I"' in JUDGE_PROMPT
    prompt = build_judge_prompt("Is it vegan?", "No, it has cheese.", "<think>hmm</think>Yes.")
    assert "Is it vegan?" in prompt and "No, it has cheese." in prompt
    assert "hmm" not in prompt and prompt.rstrip().endswith('"GRADE: C" or "GRADE: I".')
    assert "(no answer)" in build_judge_prompt("Q?", "A.", None)


def test_unreadable_verdict_is_none_never_a_guess():
    assert parse_verdict("Looks right to me.") is None
    assert parse_verdict(None) is None


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_fuzz_parse_verdict(text):
    assert parse_verdict(text) in ("C", "I", None)


_WORDS = st.sampled_from(["Yes", "No", "yes and no", "符合", "不符合", "是", "否", "是的", "不适合", "comply",
                          "does not comply", ",", "。", " ", "\n", "**Answer:**", "<think>", "</think>", "吗"])


@settings(max_examples=300, deadline=None)
@given(question=st.lists(_WORDS, max_size=6), reference=st.lists(_WORDS, max_size=6),
       candidate=st.one_of(st.none(), st.lists(_WORDS, max_size=6).map("".join), st.text(max_size=80)))
def test_fuzz_rule_verdict(question, reference, candidate):
    assert rule_verdict("".join(question), "".join(reference), candidate) in ("C", "I", None)


REAL_VERDICT = corpus("real_verdict")


def test_real_judge_replies_are_read():
    """Real model_graded_fact replies from inspect_ai's committed logs (tests/corpus/README.md)."""
    got = [parse_verdict(row["text"]) for row in REAL_VERDICT]
    assert len(REAL_VERDICT) >= 60
    assert sum(g == row["expected"] for g, row in zip(got, REAL_VERDICT, strict=True)) / len(REAL_VERDICT) >= 0.98  # measured 100%
    assert sum(g not in (None, row["expected"]) for g, row in zip(got, REAL_VERDICT, strict=True)) == 0


REAL_VERDICT_HELDOUT = corpus("real_verdict_heldout")


def test_held_out_real_judge_replies_are_read_without_guessing():
    """Held-out slice, never tuned on: model_graded_qa replies (partial credit: C, P or I) of Claude 3.5/3.7 Sonnet
    and GPT-4o in tidyverse/vitals' committed logs (tests/corpus/README.md); a `GRADE: P` is no C/I verdict.
    Measured once, with the rules as they were: 109 of 110 verdicts read (99.1%), none wrong, none of the 41
    partial-credit replies given a verdict; the miss ended a long sentence with the grade marker ("... is GRADE: I."),
    a family the parser must read: the line-end rule that followed reads all 110 (the card says so)."""
    answers = [row for row in REAL_VERDICT_HELDOUT if row["expected"] is not None]
    partial = [row for row in REAL_VERDICT_HELDOUT if row["expected"] is None]
    got = {id(row): parse_verdict(row["text"]) for row in REAL_VERDICT_HELDOUT}
    assert len(answers) >= 110 and len(partial) >= 40
    assert {row["source"].partition(":")[0] for row in REAL_VERDICT_HELDOUT} == {"tidyverse/vitals"}
    assert sum(got[id(row)] == row["expected"] for row in answers) / len(answers) >= 0.97
    assert [row["item"] for row in answers if got[id(row)] not in (None, row["expected"])] == []
    assert [row["item"] for row in partial if got[id(row)] is not None] == []


@pytest.mark.parametrize(("text", "expected"), [
    ("Both name the same allergen.\n\nTherefore, I conclude with GRADE: C.", "C"),
    ("GRADE: C. No reason to downgrade.", "C"),
    ("Thus, I conclude with 'GRADE: I'.", "I"),
    ("GRADE:\u200b C", "C"), ("ＧＲＡＤＥ：Ｉ", "I"),
    ("GRADE: P", None), ("GRADE: CI", None), ("GRADE: C\nOn reflection it is partial.\nGRADE: P", None),
    ("Therefore GRADE: C or GRADE: I, depending on the reading.", None),
])
def test_inline_and_unusual_verdicts(text, expected):
    assert parse_verdict(text) == expected


@pytest.mark.parametrize("token", ["GRADE: C. ", "therefore grade: ", "\u200b"])
def test_new_verdict_shapes_stay_linear(token):
    import time

    text = (token * (60_000 // len(token) + 1))[:60_000]
    start = time.perf_counter()
    parse_verdict(text)
    assert time.perf_counter() - start < 3.0


@pytest.mark.parametrize(("text", "expected"), [
    ("GR\u200eADE: I", "I"), ("GRADE\u200f: C", "C"), ("\u2066GRADE: C\u2069", "C"), ("GRADE:\u00ad I", "I"),
    ("Both name the same allergen, so the grade is CORRECT.", "C"),
    ("The candidate misses the peanuts; therefore the grade is incorrect", "I"),
    ("My final verdict would be 'INCORRECT'.", "I"),
])
def test_format_characters_and_prose_verdicts(text, expected):
    assert parse_verdict(text) == expected


@pytest.mark.parametrize("text", [
    "The grade is C or I, depending on the reading.", "The grade is not CORRECT, strictly.",
    "I would grade this as correct.", "A grade is correct when the facts match; here they do not say.",
])
def test_prose_that_is_no_verdict(text):
    assert parse_verdict(text) is None
