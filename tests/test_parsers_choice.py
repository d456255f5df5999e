"""parse_choice on realistic model outputs, its docstring examples, and fuzzing."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.dining_accuracy import dining_accuracy
from metrics.dining_accuracy.dining_accuracy import parse_choice
from tests.helpers_metrics import corpus, run_doctests

CHOICE_CORPUS = corpus("choice")


def test_corpus_is_large_and_varied():
    assert len(CHOICE_CORPUS) >= 60
    assert any(row["expected"] is None for row in CHOICE_CORPUS)
    assert any("<think>" in row["text"] for row in CHOICE_CORPUS)
    assert any("最终答案" in row["text"] for row in CHOICE_CORPUS)


@pytest.mark.parametrize("row", CHOICE_CORPUS, ids=[row["note"] for row in CHOICE_CORPUS])
def test_corpus_output_parses_as_a_reader_would(row):
    got = parse_choice(row["text"], n_options=row.get("n_options", 8), options=row.get("options"))
    assert got == row["expected"], row["note"]


def test_docstring_examples_run():
    assert run_doctests(dining_accuracy, "parse_choice", "score_choices") >= 10


def test_letters_follow_the_option_count():
    assert parse_choice("D", n_options=4) == "D"
    assert parse_choice("E", n_options=4) is None
    assert parse_choice("B", options=["Greek Salad", "Cobb Salad"]) == "B"
    assert parse_choice("C", options=["Greek Salad", "Cobb Salad"]) is None


def test_option_text_must_match_exactly_one_option():
    duplicated = ["Cobb Salad", "Cobb Salad", "Greek Salad"]
    assert parse_choice("Cobb Salad", options=duplicated) is None
    assert parse_choice("greek salad", options=duplicated) == "C"


def test_answer_first_then_explanation_keeps_the_answer():
    assert parse_choice("Answer: C\n\nUnlike option (B), the pork is sliced, not shredded.") == "C"


def test_two_different_marked_answers_on_one_line_are_ambiguous():
    assert parse_choice("Answer: B. Hmm no, answer: C") is None


@pytest.mark.parametrize("bad", [0, 27, -1, 2.5, True])
def test_bad_option_count_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="n_options"):
        parse_choice("A", n_options=bad)


def test_non_text_is_unparsed():
    assert parse_choice(None) is None


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300), n_options=st.integers(min_value=1, max_value=26))
def test_fuzz_never_raises_and_stays_in_range(text, n_options):
    got = parse_choice(text, n_options=n_options)
    assert got is None or got in string.ascii_uppercase[:n_options]


_PIECES = st.sampled_from(["Answer:", "答案：", "Final answer:", "最终答案：", "选", "(", ")", "**", "\n",
                           " ", "A", "C", "H", "J", "I think", "<think>", "</think>", ".", "。", "option"])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=25))
def test_fuzz_answer_like_fragments(pieces):
    got = parse_choice("".join(pieces))
    assert got is None or got in "ABCDEFGH"


def test_long_chain_of_thought_is_read_quickly():
    text = "Option A has peanuts, (B) does not. " * 3000 + "\nFinal answer: C"
    assert parse_choice(text) == "C"
