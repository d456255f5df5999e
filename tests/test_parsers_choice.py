"""parse_choice on realistic model outputs, its docstring examples, and fuzzing."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.dining_accuracy import core as dining_accuracy
from metrics.dining_accuracy.core import parse_choice
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


REAL_CHOICE = corpus("real_choice")


def _rates(rows):
    answers = [row for row in rows if row["expected"] is not None]
    no_answer = [row for row in rows if row["expected"] is None]
    got = {id(row): parse_choice(row["text"], n_options=row["n_options"], options=row.get("options")) for row in rows}
    recovered = sum(got[id(row)] == row["expected"] for row in answers) / len(answers)
    wrong = [row["item"] for row in answers if got[id(row)] not in (None, row["expected"])]
    false = [row["item"] for row in no_answer if got[id(row)] is not None]
    return answers, no_answer, recovered, wrong, false


def test_real_outputs_are_read_without_guessing():
    """Development set: real outputs of public MMMU/MMMU-Pro, LawBench and GAOKAO-Bench runs that the parser
    was tuned on (tests/corpus/README.md), reasoning-model answers to the 2026 gaokao maths papers, and GPT-4o's
    MMLU-Pro answers that box a letter or a value, and GPT-4o's JudgeBench answers in the five-times format.
    Measured: 99.5% of 653 answers read, none wrong, 2 of 177 no-answer rows given one; the thresholds sit a
    little under."""
    answers, no_answer, recovered, wrong, false = _rates(REAL_CHOICE)
    assert len(REAL_CHOICE) >= 825 and len(no_answer) >= 175
    assert recovered >= 0.98
    assert wrong == []
    assert len(false) / len(no_answer) <= 0.03, false


REAL_CHOICE_HELDOUT = corpus("real_choice_heldout")


@pytest.mark.parametrize("name", ["real_choice", "real_choice_heldout"])
def test_reasoning_model_answers_are_read_on_both_sides(name):
    """Real reasoning-model outputs (a <think> block naming several options, then <answer>X</answer>) are in
    the development set and the held-out slice; each is read as labelled, multi-select tags as None."""
    rows = [row for row in corpus(name) if row["text"].startswith("<think>") and "<answer>" in row["text"]]
    assert len(rows) >= 30
    assert any(row["expected"] is None for row in rows) and any(row["expected"] is not None for row in rows)
    got = [parse_choice(row["text"], n_options=row["n_options"]) for row in rows]
    assert [row["item"] for row, g in zip(rows, got, strict=True) if g != row["expected"]] == []


@pytest.mark.parametrize(("name", "least"), [("real_choice", 130), ("real_choice_heldout", 50)])
def test_boxed_real_answers_are_read_on_both_sides(name, least):
    """Real outputs that box their answer ("The answer is $\\boxed{C}$", "\\[ \\boxed{G} \\text{ (0.246)} \\]") or the
    value of an option ("\\boxed{50}") are in the development set (GPT-4o, MMLU-Pro) and the held-out slice
    (DeepSeek, MMLU-Pro). Measured: 127 of 128 read in development (a value the option list prints without its
    "×" is missed), 54 of 54 held out; none wrong."""
    rows = [row for row in corpus(name) if "\\boxed" in row["text"]]
    assert len(rows) >= least
    answers, _, recovered, wrong, false = _rates(rows)
    assert recovered >= 0.98 and wrong == [] and false == []


def test_held_out_real_outputs_are_read_without_guessing():
    """Held-out slice, never tuned on: other GAOKAO-Bench subjects, other LawBench one-shot outputs and
    MMLU-Pro chain-of-thought answers (those of DeepSeek that box their letter among them), reasoning-model
    answers to gaokao maths paper II, and Claude 3.5 Sonnet's JudgeBench answers in the five-times format
    ("… Hence my answer is:\nFFFFF"). Measured once the rules were final: 283 of 285 answers read (99.3%), none
    wrong, 2 of 32 no-answer rows given one (an echoed question, an answer its explanation contradicts). One
    row was relabelled: "The answer is (A), (D), and (H)." names three answers (tests/corpus/README.md)."""
    answers, no_answer, recovered, wrong, false = _rates(REAL_CHOICE_HELDOUT)
    assert len(REAL_CHOICE_HELDOUT) >= 315 and len(no_answer) >= 30
    assert recovered >= 0.98
    assert wrong == []
    assert len(false) <= 3, false


@pytest.mark.parametrize(("text", "expected"), [
    ("【答案】A", "A"), ("[正确答案]C", "C"), ("正确答案]B", "B"), ("so it is $\\boxed{F}$", "F"),
    ("Answer: $C$", "C"), ("Answer: \\( \\text{B} \\)", "B"), ("**Answer:** **A. Kung pao chicken**", "A"),
    ("- **Answer**: B (4.98 g)", "B"),
])
def test_bracketed_bold_and_tex_answers(text, expected):
    assert parse_choice(text, n_options=10) == expected


@pytest.mark.parametrize("name", ["real_choice", "real_choice_heldout"])
def test_five_times_answers_are_read_on_both_sides(name):
    """Real outputs that end with the letter repeated as the prompt asked ("FFFFF") are in the development
    set (GPT-4o, JudgeBench) and the held-out slice (Claude 3.5 Sonnet): each is that letter."""
    rows = [row for row in corpus(name) if row["source"].startswith("ScalerLab/JudgeBench")]
    assert len(rows) >= 60
    assert [row["item"] for row in rows if parse_choice(row["text"], n_options=row["n_options"]) != row["expected"]] == []


@pytest.mark.parametrize("end", ["<eoa>", "</s>", "<|im_end|>", "<|endoftext|>"])
def test_end_tokens_after_the_answer(end):
    assert parse_choice(f"C{end}") == "C"
    assert parse_choice(f"[正确答案]C{end}\n题目：下列哪一项正确？A:…;B:…\n答案：D{end}\n答案：B{end}") == "C"


def test_answer_first_then_bold_options_discussed():
    text = "**C**\n\n* **B. Stir-fried** is wrong: the pork is braised.\n* **D. Steamed** has no sauce."
    assert parse_choice(text) == "C"


@pytest.mark.parametrize(("text", "expected"), [
    ("经分析，因此选项A正确，选项B、C、D均不正确。", "A"), ("只有D行为构成盗窃罪。", "D"),
    ("下列说法正确的是选项D：几个鉴定人意见不一致时可以分别作出结论。", "D"), ("故C项正确。", "C"),
])
def test_chinese_prose_naming_one_option(text, expected):
    assert parse_choice(text, n_options=4) == expected


def test_answer_given_by_option_text():
    options = ["Paul Cezanne", "Georges Seurat", "Edgar Degas", "Andy Warhol"]
    assert parse_choice("The painting is called \"The Bathers\" and it was created by Georges Seurat.",
                        options=options) == "B"
    assert parse_choice("It was not painted by Georges Seurat.", options=options) is None
    assert parse_choice("正确答案: 古董由甲子女继承", options=["古董归国家所有", "古董由甲子女继承", "古董归乙", "古董归丙"]) == "B"


@pytest.mark.parametrize("text", [
    "(A) 2/38\n(B) 3/38\n(C) 4/38\n(D) 5/38\n(E) 6/38\n(J) 7/38",
    "None of the options match B's value.\n**Answer: None of the above**",
    "I'm sorry, I can't identify the dish from this photo.",
    "答案：A,B,C,D",
    "请你运用法律知识从A,B,C,D中选出一个正确的答案，并写在[正确答案]和<eoa>之间。例如[正确答案]A<eoa>。",
])
def test_outputs_without_an_answer_stay_unparsed(text):
    assert parse_choice(text, n_options=10) is None


@pytest.mark.parametrize("token", ["<eoa>", "\\boxed{", "$", "选项A", "只有", "例如[正确答案]", "A,", "**Answer:** **",
                                   "下面是一个例子:", "1. 答案：A\n", "(一)答案：B\n", "答案：B和", "Question: x\n", "错误的是"])
def test_new_shapes_stay_linear_on_degenerate_output(token):
    import time

    text = (token * (60_000 // len(token) + 1))[:60_000]
    start = time.perf_counter()
    parse_choice(text, n_options=8)
    assert time.perf_counter() - start < 3.0


# --- families: several answers, run-on generations, answers named by a wrong statement ------------------

@pytest.mark.parametrize("text", [
    "故选BC。", "故选：B、C", "答案：B和C", "答案是 B 和 D", "选 A 或 C", "Answer: B and C", "Answer: B & D",
    "The correct options are B (Paris) and C (Rome).",
    "the correct options are B, because the sauce is red, and C, because it has peanuts",
    "1. 答案：A\n2. 答案：C", "(1) Answer: B\n(2) Answer: D", "第一题答案：A\n第二题答案：B",
    "（一）【解析】第一空选C。<eoe>\n【答案】C<eoa>\n（二）【解析】应选B。<eoe>\n【答案】B<eoa>",
    "67. 【答案】 A <eoa>\n68. 【答案】 C <eoa>", "【答案】 CD <eoa>", "【答案】: B, C <eoa>", "所以，正确的答案是C和D。",
    "Answer: None of the above", "The answer is none of the above.",
])
def test_several_answers_or_none_of_the_above_is_no_single_answer(text):
    assert parse_choice(text, n_options=4) is None


@pytest.mark.parametrize(("text", "expected"), [
    ("Answer: C and a side of rice.", "C"),  # "and" followed by a word, not a letter
    ("Answer: B and I think it is clearly right.", "B"),  # the pronoun I, not option I
    ("The answer is B, and C is wrong because it is steamed.", "B"),
    ("1. The sauce is red.\n2. Only one dish has peanuts.\nAnswer: B", "B"),  # numbered reasoning, one answer
])
def test_one_answer_near_a_conjunction_or_numbered_reasoning_is_read(text, expected):
    assert parse_choice(text, n_options=10) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("答案：A\n问题：下列哪项正确？A. x B. y\n答案：D", "A"),  # closed by a new question
    ("Answer: B\nQuestion: Which is red? A. x B. y\nAnswer: C", "B"),
    ("Answer: B\n\nQuestion 2: Which is red?\nAnswer: C", "B"),
    ("B</s>Question: next? Answer: C", "B"),
    ("[正确答案]C<eoa>\n题目：下列哪一项正确？\n答案：D<eoa>", "C"),
])
def test_a_closed_first_answer_is_final(text, expected):
    assert parse_choice(text, n_options=4) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("答案：A\n答案：D", "D"),  # not closed: the last line's answer is the model's last word
    ("答案：A<eoa>\n因此答案为D", None),  # closed, but a conclusion after it names another letter
    ("Answer: B\nQuestion: Which is red?\nTherefore the answer is C.", None),
    ("Question: Which dish is spicy?\nA. Mapo tofu\nB. Congee\nC. Steamed egg\nD. Rice\nAnswer: A", "A"),  # echo first
])
def test_an_answer_that_is_not_clearly_closed_is_not_final(text, expected):
    assert parse_choice(text, n_options=4) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("错误的叙述是C。", "C"), ("不正确的是B。", "B"), ("下列说法错误的是D", "D"), ("说法有误的一项是A", "A"),
    ("The incorrect statement is C.", "C"), ("正确的选项是D", "D"), ("选项中正确的等式是D", "D"),
    ("The answer is option (C).", "C"), ("the correct option letter is C", "C"),
    ("The correct option letter is: B", "B"),
    ("正确的是A，不正确的是B。", "A"),  # the rejected option yields to the answer
])
def test_missed_answer_phrasings(text, expected):
    assert parse_choice(text, n_options=4) == expected


@pytest.mark.parametrize("text", [
    "下列说法不正确的是:A:法官应当首先使用文义解释的方法;B:还可以使用历史解释;C:目的解释;D:只能选择一种方法。",  # echoed
    "错误的是B，错误的是C。",
])
def test_a_wrong_statement_echoed_or_doubled_is_no_answer(text):
    assert parse_choice(text, n_options=4) is None


def test_an_echoed_one_shot_example_is_not_the_answer():
    echo = ("请你运用法律知识分析下列案件。下面是一个例子:\n幼儿园承担什么责任?A:无过错责任;B:过错推定责任;C:公平责任;"
            "D:一般过错责任。\n[正确答案]B<eoa>\n请你回答:\n张某的行为构成何罪?A:职务侵占罪;B:金融凭证诈骗罪;C:挪用资金罪;D:挪用公款罪。")
    assert parse_choice(echo, n_options=4) is None
    assert parse_choice(echo + "\n[正确答案]C<eoa>", n_options=4) == "C"


def test_numbered_reasoning_then_one_answer_is_one_answer():
    text = "1. 选项A错误。\n2. 选项B错误。\n3. 综合来看，答案是C。\n【答案】C<eoa>"
    assert parse_choice(text, n_options=4) == "C"


def test_an_echoed_question_then_an_answer_by_option_text():
    options = ["Mapo tofu", "Congee", "Steamed egg", "Rice"]
    text = "Question: Which dish is spicy?\nOptions: Mapo tofu, Congee, Steamed egg, Rice\nThe answer is Mapo tofu."
    assert parse_choice(text, options=options) == "A"


# --- boxed answers: the letter, a multi-select, or the value of one option ------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("The answer is \\( \\boxed{E} \\).", "E"), ("So, the answer is $\\boxed{D}$.", "D"),
    ("$\\boxed{\\text{B}}$", "B"), ("\\[ \\boxed{G} \\text{ (0.246 J/molK)} \\]", "G"), ("\\boxed{C. 2.618}", "C"),
    ("\\boxed{(D)}", "D"),
    ("<think>A gives 12, so maybe \\boxed{A}? No: B.</think>\n\nThe final answer is $\\boxed{B}$", "B"),
    ("the correct option is:\n\\[ \\boxed{6x^3 + 6x^2} \\]\nThe correct option is:\n\\[ \\boxed{D} \\]", "D"),
    # a boxed value is no letter, even when it starts with a capital: the letter after it is the answer
    ("the one that matches this form is:\n\\[ \\boxed{I^2/r_0} \\]\n\nThe answer is (J).", "J"),
    ("the other solution is:\n\\[ \\boxed{p + q - r} \\]\n\nThe answer is (B).", "B"),
    ("Therefore, the answer is \\( H. 55.92 \\, \\mathrm{m/s}^2 \\).", "H"),
])
def test_boxed_letters_are_final_answers(text, expected):
    assert parse_choice(text, n_options=10) == expected


@pytest.mark.parametrize(("text", "options", "expected"), [
    ("Adding these, we get 50.\n\nThe answer is \\( \\boxed{50} \\).", ["25", "50", "15", "20"], "B"),
    ("so P(W) is \\( \\frac{21}{32} \\).\n\nThe answer is \\( \\boxed{\\frac{21}{32}} \\).",
     ["$\\frac{19}{32}$", "$\\frac{13}{32}$", " $\\frac{21}{32}$"], "C"),
    ("\\[ \\boxed{2 - \\sqrt{2}} \\]Answer: $C$", ["$\\sqrt{2} - 1$", "$1-\\sqrt{2}$", "$\\frac{1}{2}$", "$2-\\sqrt{2}$"],
     "C"),  # the letter given outranks a boxed value that equals another option
])
def test_a_boxed_option_value_names_that_option(text, options, expected):
    assert parse_choice(text, options=options) == expected


@pytest.mark.parametrize(("text", "options"), [
    ("\\boxed{A, C}", None), ("Both hold, so \\boxed{AC}.", None), ("\\boxed{A} at first; in the end \\boxed{B, D}", None),
    ("So the force is \\[ \\boxed{I^2/r_0} \\]", None),  # a value, and no options to match it against
    ("The answer is \\( \\boxed{2.71828} \\).", ["19.85", "17.95", "16.75", "20.25"]),  # no option holds it
    ("The answer is \\( \\boxed{4} \\).", ["4", "4", "2", "1"]),  # two options hold it
    ("<think>It is \\boxed{B}, or maybe", None),  # cut off while thinking
])
def test_boxes_without_a_single_answer_stay_unparsed(text, options):
    assert parse_choice(text, n_options=10 if options is None else 8, options=options) is None


@pytest.mark.parametrize("token", ["\\boxed{A, ", "\\boxed{{x}", "\\( \\boxed{", "the answer is \\( "])
def test_boxes_stay_linear_on_degenerate_output(token):
    import time

    text = (token * (60_000 // len(token) + 1))[:60_000]
    start = time.perf_counter()
    parse_choice(text, options=["50", "25", "A, B"])
    assert time.perf_counter() - start < 3.0
