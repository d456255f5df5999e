"""DiningBench fine-grained classification accuracy: parse a model's option letter, score it.

The one parser for the classification task (`parse_choice`); the harness imports it from here.
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any

_CITATION = """\
@misc{diningbench,
  title = {DiningBench: A Hierarchical Multi-view Benchmark for Perception and Reasoning in the Dietary Domain}
}
"""

_DESCRIPTION = """\
Accuracy of multiple-choice dish identification. Each prediction is a model's raw text; the option
letter is parsed strictly (the lone letter) and then leniently ("Answer: C", "答案：C", "(C)", "选C",
"C. name", "**C**", the exact text of one option). With chain of thought the final answer wins.
Ambiguous or unreadable answers are counted in `parse_failures` and scored as wrong, never guessed.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): raw model outputs (None for a sample that failed to generate).
    references (`list` of `str`): the correct letters, e.g. "C".
    n_options (`int`, default 8): number of options; letters are the first `n_options` of A-Z.
    options (`list` of `list` of `str`, optional): the option names of each item, so that an
        answer naming exactly one option counts; their length then sets the letters per item.
Returns:
    accuracy (`float` in [0, 1]): correct / n, unparsed counted as wrong.
    n (`int`): number of items.
    parse_failures (`int`): predictions from which no single letter could be read.
    correct (`list` of `bool`), parsed (`list` of `str` or None): per item, for analysis.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/dining_accuracy")
    >>> metric.compute(predictions=["C", "Answer: B", "maybe A or D"], references=["C", "A", "D"])["accuracy"]
    0.3333333333333333
"""

# Markers of a concluding answer. Why a separate "final" tier: chain-of-thought text mentions many
# letters while weighing options; only a concluding marker says which one the model settled on.
_FINAL_MARKERS = (
    r"final\s+answer", r"final\s+choice", r"final\s+option", r"final\s+verdict",
    r"最终答案", r"最终选择", r"最终选项", r"最终结论", r"最终的?答案", r"综上所述", r"综上",
    r"therefore,?\s+the\s+answer\s+is", r"so\s+the\s+answer\s+is", r"thus,?\s+the\s+answer\s+is",
)
_ANSWER_MARKERS = (
    r"correct\s+(?:answer|option|choice)", r"best\s+(?:answer|option|choice)",
    r"the\s+answer\s+is", r"my\s+answer", r"answer", r"i\s+(?:would\s+)?(?:choose|pick|select|go\s+with)",
    r"i(?:'d|\s+would)\s+say",
    r"正确答案", r"正确选项", r"答案", r"答(?=\s*:)", r"应选择?", r"故选", r"我选择?", r"选择", r"选项为", r"选",
)
# After a marker: optional verbs and punctuation, then the letter, bracketed or bold.
_GLUE = r"(?:\s*(?:is|would\s+be|should\s+be|为|是|应为|应该是|:|=|-|—)\s*)*\s*(?:option\s*|选项\s*)?[\(\[\*【「]*\s*"
# A letter is a capital not glued to other Latin letters; "I" followed by a lowercase word is the
# English pronoun ("Answer: I think ..."), not option I.
_LETTER = r"(?!I\s+[a-z])([A-Z])(?![A-Za-z])"
_FINAL_RE = re.compile(r"(?:" + "|".join(_FINAL_MARKERS) + r")" + _GLUE + _LETTER, re.IGNORECASE)
_ANSWER_RE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(_ANSWER_MARKERS) + r")" + _GLUE + _LETTER, re.IGNORECASE)
_FINAL_TEXT_RE = re.compile(r"(?:" + "|".join(_FINAL_MARKERS + _ANSWER_MARKERS) + r")" + _GLUE.replace(
    r"[\(\[\*【「]*\s*", "") + r"(.+)$", re.IGNORECASE)
# Shapes that are an answer only when they stand alone on a line: "(C)", "**C**", "C.", "C. name".
_BRACKETED_RE = re.compile(r"(?<![A-Za-z])[\(\[（【]\s*([A-Z])\s*[\)\]）】]")
_BOLD_RE = re.compile(r"\*\*\s*([A-Z])\s*[.)]?\s*\*\*")
_LINE_START_RE = re.compile(r"^[\s>*#\-•]*([A-Z])\s*\**\s*(?:[.．、):：]|$)")
_LONE_RE = re.compile(r"^[\s*_`'\"(\[（【]*(?:(?:option|选项)\s*[\s*_`'\"(\[（【]*)?([A-Za-z])[\s*_`'\")\]）】.。!！]*$",
                      re.IGNORECASE)


def _strip_reasoning(text: str) -> str:
    """Drop <think>...</think> blocks: the answer is what follows them, not the scratchpad."""
    if "</think>" in text.lower():
        text = re.split(r"</think>", text, flags=re.IGNORECASE)[-1]
    # An unclosed <think> means the output was cut off while still thinking: no answer was given.
    return re.split(r"<think>", text, flags=re.IGNORECASE)[0]


def _normalize(text: str) -> str:
    """NFKC folds full-width letters and punctuation (Ｃ, ：, （）) that Chinese answers use."""
    return unicodedata.normalize("NFKC", text)


def _letters(n_options: int) -> str:
    if not isinstance(n_options, int) or isinstance(n_options, bool) or not 1 <= n_options <= 26:
        raise ValueError(f"n_options must be an integer from 1 to 26, got {n_options!r}")
    return string.ascii_uppercase[:n_options]


def _match_option_text(answer: str, options: Sequence[str] | None) -> str | None:
    """The letter of the one option whose name equals `answer` (case, spaces and quotes ignored)."""
    if not options:
        return None

    def key(s: str) -> str:
        return re.sub(r"[\s\"'“”‘’「」《》*`.。!！]+", "", _normalize(s)).casefold()

    wanted = key(answer)
    if not wanted:
        return None
    hits = [i for i, option in enumerate(options) if key(str(option)) == wanted]
    return string.ascii_uppercase[hits[0]] if len(hits) == 1 else None


def _mentions(line: str, *, line_start: bool = True) -> list[str]:
    """Letters that a line presents as an answer (markers, brackets, bold, "C. name" at line start)."""
    found = [m.group(1) for m in _ANSWER_RE.finditer(line)]
    found += [m.group(1) for m in _BRACKETED_RE.finditer(line)]
    found += [m.group(1) for m in _BOLD_RE.finditer(line)]
    start = _LINE_START_RE.match(line) if line_start else None
    if start:
        found.append(start.group(1))
    return found


def _in_range(letter: str | None, letters: str) -> str | None:
    # A letter beyond the option count is not a valid answer, even if clearly stated.
    return letter if letter is not None and letter in letters else None


def parse_choice(text: str | None, n_options: int = 8, options: Sequence[str] | None = None) -> str | None:
    """Read the option letter a model chose, or None when there is no single clear answer.

    Strict first (the whole answer is one letter), then lenient shapes; with chain of thought the
    final answer wins; several different letters and no concluding marker is ambiguous (None).
    When `options` (the option names) is given, its length sets the letters and an answer that is
    exactly one option's name counts.

    >>> parse_choice("C")
    'C'
    >>> parse_choice("答案：C")
    'C'
    >>> parse_choice("选C。")
    'C'
    >>> parse_choice("(B) 宫保鸡丁")
    'B'
    >>> parse_choice("**D**")
    'D'
    >>> parse_choice("A has peanuts, B has none, so B or C.\\nFinal answer: C")
    'C'
    >>> parse_choice("It could be A or D.") is None
    True
    >>> parse_choice("J") is None  # only A-H exist for 8 options
    True
    >>> parse_choice("鱼香肉丝", options=["宫保鸡丁", "鱼香肉丝", "回锅肉", "麻婆豆腐"])
    'B'
    >>> parse_choice("<think>A? no, maybe B.</think>\\nB")
    'B'
    """
    letters = _letters(len(options) if options is not None else n_options)
    if not isinstance(text, str):
        return None
    text = _normalize(_strip_reasoning(text)).strip()
    if not text:
        return None

    lone = _LONE_RE.match(text)
    if lone:
        return _in_range(lone.group(1).upper(), letters)

    # A concluding marker ("Final answer: C", "最终答案：C") overrides everything said before it.
    finals = list(_FINAL_RE.finditer(text))
    if finals:
        return _in_range(finals[-1].group(1), letters)

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1]
    # An explicit "Answer: C" / "答案：C" outranks letters merely shown in brackets or bold
    # ("Answer: C. Unlike (B), ..."): if every marked answer agrees, that is the answer.
    marked = [m.group(1) for m in _ANSWER_RE.finditer(text)]
    if marked:
        if len(set(marked)) == 1:
            return _in_range(marked[0], letters)
        on_last = {m.group(1) for m in _ANSWER_RE.finditer(last)}
        return _in_range(on_last.pop(), letters) if len(on_last) == 1 else None

    mentioned = [letter for line in lines for letter in _mentions(line)]
    if len(set(mentioned)) == 1:
        return _in_range(mentioned[0], letters)

    # Several letters were discussed: the answer must stand on the last line, and alone there.
    last_lone = _LONE_RE.match(last)
    if last_lone and last_lone.group(1).isupper():
        return _in_range(last_lone.group(1), letters)
    # "B. name" as the last line after several letters is more likely the end of an echoed
    # option list than an answer, so only explicit shapes count here.
    on_last = set(_mentions(last, line_start=False))
    if mentioned and len(on_last) == 1:
        return _in_range(on_last.pop(), letters)

    # No letter at all: the model may have answered with an option's name.
    if not mentioned:
        named = _match_option_text(text, options)
        if named is None and options:
            marked = _FINAL_TEXT_RE.search(last)
            if marked:
                named = _match_option_text(marked.group(1), options)
        return _in_range(named, letters)
    return None


def score_choices(
    predictions: Sequence[str | None],
    references: Sequence[str],
    n_options: int = 8,
    options: Sequence[Sequence[str] | None] | None = None,
) -> dict[str, Any]:
    """Accuracy over raw predictions; unparsed answers count as wrong and are reported.

    `options`, when given, holds each item's option names (one list per item).

    >>> r = score_choices(["C", "Answer: B", "A or D?"], ["C", "A", "D"])
    >>> (r["accuracy"], r["n"], r["parse_failures"], r["parsed"])
    (0.3333333333333333, 3, 1, ['C', 'B', None])
    """
    if len(predictions) != len(references):
        raise ValueError(f"predictions ({len(predictions)}) and references ({len(references)}) differ in length")
    if options is not None and len(options) != len(references):
        raise ValueError(f"options ({len(options)}) must give one list of option names per reference ({len(references)})")
    if not references:
        raise ValueError("no predictions to score: predictions and references are empty")
    parsed: list[str | None] = []
    correct: list[bool] = []
    for i, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
        item_options = options[i] if options is not None else None
        letters = _letters(len(item_options) if item_options is not None else n_options)
        gold = reference.strip().upper() if isinstance(reference, str) else None
        if gold is None or len(gold) != 1 or gold not in letters:
            raise ValueError(f"reference {i} is {reference!r}; expected one of the letters {letters}")
        choice = parse_choice(prediction, n_options=n_options, options=item_options)
        parsed.append(choice)
        correct.append(choice == gold)
    n = len(references)
    return {
        "accuracy": sum(correct) / n,
        "n": n,
        "parse_failures": sum(choice is None for choice in parsed),
        "correct": correct,
        "parsed": parsed,
    }


def _define_metric() -> type:
    """Build the `evaluate.Metric` class.

    Deferred because `import evaluate` also imports transformers (seconds of CPU), while the
    harness imports this module for its parser and scoring functions alone.
    """
    import datasets
    import evaluate

    @evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
    class DiningAccuracy(evaluate.Metric):
        """`evaluate` wrapper around `score_choices`."""

        def _info(self) -> evaluate.MetricInfo:
            return evaluate.MetricInfo(
                description=_DESCRIPTION,
                citation=_CITATION,
                inputs_description=_KWARGS_DESCRIPTION,
                features=datasets.Features(
                    {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
                ),
                reference_urls=[],
            )

        def _compute(
            self,
            predictions: list[str | None],
            references: list[str],
            n_options: int = 8,
            options: Sequence[Sequence[str] | None] | None = None,
        ) -> dict[str, Any]:
            return score_choices(predictions, references, n_options=n_options, options=options)

    DiningAccuracy.__qualname__ = "DiningAccuracy"
    return DiningAccuracy


if "evaluate" in sys.modules:
    # `evaluate.load` (which has imported evaluate) finds the metric by scanning this module's
    # attributes, so the class must exist right after import in that case.
    DiningAccuracy = _define_metric()


def __getattr__(name: str) -> Any:
    if name == "DiningAccuracy":
        globals()[name] = metric_class = _define_metric()
        return metric_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
