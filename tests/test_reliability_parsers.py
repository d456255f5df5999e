"""Parsers under hostile text: huge, degenerate (a model stuck repeating one token), unicode edge
cases. Every parser returns in bounded time and never raises. (Fuzzing over ordinary text and the
corpus of realistic outputs live in tests/test_parsers_*.py; here we check they are there.)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.dining_accuracy.core import parse_choice
from metrics.judge_accuracy.core import final_answer, parse_verdict, rule_verdict
from metrics.nutrition_error.core import parse_nutrition

OPTIONS = [f"红烧肉 {i}" for i in range(8)]
PARSERS = {
    "choice": lambda text: parse_choice(text, n_options=8, options=OPTIONS),
    "nutrition": parse_nutrition,
    "verdict": parse_verdict,
    "rule": lambda text: rule_verdict("这道菜适合糖尿病患者吗？", "不适合", text),
    "vqa final answer": final_answer,
}
SIZE = 60_000  # characters: ~15k tokens, a long generation; a quadratic regex takes minutes here
TIME_BOUND_S = 3.0  # per parser call, generous for a loaded 2-core machine (linear ones take < 0.3 s)

# Degenerate outputs: a token repeated until max_tokens, markers without an answer, deep nesting.
DEGENERATE = {
    "open brackets": "(",
    "open brackets, full-width": "（【",
    "asterisks": "*",
    "spaces then nothing": " ",
    "newlines": "\n",
    "unclosed think": "<think>",
    "answer markers": "Answer: ",
    "zh answer markers": "答案：",
    "final answer markers": "Final answer: ",
    "option words": "option ",
    "grade markers": "GRADE: ",
    "digits": "1",
    "number ranges": "1-",
    "decimals": "1.",
    "open braces": "{",
    "unclosed strings": '{"calories": "',
    "code fences": "```json\n",
    "key pairs": '"calories": ',
    "units": "450 kcal ",
    "kilojoules": "热量约3千焦，",
    "letters": "A B C D ",
    "bold letters": "**A** ",
    "emoji and controls": "😀\u202e\u0301ｱ\x00",
}
CASES = {name: (token * (SIZE // len(token) + 1))[:SIZE] for name, token in DEGENERATE.items()}
CASES["deep json"] = "{" * 5_000 + '"calories": 1' + "}" * 5_000
CASES["huge json"] = '{"calories": 450, "protein": 20, "carbohydrates": 50, "fat": 10, "x": [' + "1," * 30_000 + "1]}"
CASES["think then answer"] = "<think>" + "嗯，" * 20_000 + "</think>答案：C"


@pytest.mark.parametrize("name", sorted(CASES))
def test_degenerate_output_parses_in_bounded_time(name):
    text = CASES[name]
    for parser_name, parse in PARSERS.items():
        start = time.perf_counter()
        parse(text)
        elapsed = time.perf_counter() - start
        assert elapsed < TIME_BOUND_S, f"{parser_name} took {elapsed:.1f} s on {name!r} ({len(text)} chars)"


def test_degenerate_outputs_are_not_answers():
    """Repetition without an answer is unparsed (a failure), never a guessed answer."""
    for name in ("open brackets", "asterisks", "answer markers", "zh answer markers", "unclosed think",
                 "spaces then nothing", "emoji and controls"):
        assert parse_choice(CASES[name], n_options=8, options=OPTIONS) is None, name
    for name in ("open braces", "unclosed strings", "code fences", "key pairs", "unclosed think"):
        assert parse_nutrition(CASES[name]) is None, name
    assert parse_verdict(CASES["grade markers"]) is None
    assert parse_choice(CASES["think then answer"], n_options=8, options=OPTIONS) == "C"
    assert parse_nutrition(CASES["huge json"]) == {"calories": 450.0, "protein": 20.0, "carbohydrates": 50.0,
                                                   "fat": 10.0}


# Any code point, lone surrogates included (they reach us from badly decoded model output).
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
MARKERS = st.sampled_from(["答案：", "Answer: ", "(", "**", "<think>", "</think>", "GRADE: C", "\n", "{", '"热量": ',
                           "450 kcal", "选项", "C", "最终答案："])


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=ANY_CHAR, max_size=300), pieces=st.lists(MARKERS, max_size=30))
def test_any_code_points_mixed_with_markers_never_raise(text, pieces):
    mixed = text + "".join(pieces) + text[::-1]
    for parse in PARSERS.values():
        parse(mixed)
    letter = parse_choice(mixed, n_options=8, options=OPTIONS)
    assert letter is None or letter in "ABCDEFGH"


CORPUS = Path(__file__).resolve().parent / "corpus"


def test_a_corpus_of_realistic_outputs_exists_and_is_run():
    """At least 100 realistic outputs with expected parses, each corpus file read by a parser test."""
    counts = {path.stem: sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
              for path in sorted(CORPUS.glob("*.jsonl")) if not path.stem.startswith("reliability_")}
    assert sum(counts.values()) >= 100, counts
    tests = "".join(p.read_text(encoding="utf-8") for p in CORPUS.parent.glob("test_parsers_*.py"))
    for name in counts:
        assert f'corpus("{name}")' in tests, f"tests/corpus/{name}.jsonl is not run by any parser test"
