"""Fine-grained dish classification: which of eight dishes of the merchant's menu is pictured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval import prompts
from eval.tasks.base import VALIDATE_HINT, Task, register
from eval.types import Row, ScoreRecord


def options_of(row: Mapping[str, Any], lang: str) -> list[str]:
    """The options in the prompt language (en falls back to zh if absent)."""
    return list(row["options_en"] if lang == "en" and row.get("options_en") else row["options"])


def rotate_options(row: Row, rotation: int) -> Row:
    """The row with its options rotated left by `rotation` places, and the answer letter that follows
    the correct option (`--circular`). Rotation 0 is the row as stored.

    >>> rotated = rotate_options({"id": "x", "options": ["a", "b", "c"], "answer": "A"}, 1)
    >>> rotated["options"], rotated["answer"]
    (['b', 'c', 'a'], 'C')
    """
    n = len(row.get("options") or [])
    if not rotation or not n:
        return row
    shift = rotation % n
    rotated = dict(row, **{key: list(row[key])[shift:] + list(row[key])[:shift]
                           for key in ("options", "options_en") if row.get(key)})
    answer = row.get("answer")
    if isinstance(answer, str) and len(answer) == 1 and 0 <= ord(answer) - ord("A") < n:
        rotated["answer"] = chr(ord("A") + (ord(answer) - ord("A") - shift) % n)
    return rotated


class Classification(Task):
    name = "classification"
    title = "Classification"
    short = "Cls"
    hub_type = "image-classification"
    hub_name = "Fine-grained dish classification"
    has_options = True
    answer_format = "letter"
    human_question = "Which dish is this?"
    adapter_metric = "dining_accuracy"

    def prompt(self, row: Mapping[str, Any], *, lang: str, cot: bool) -> str:
        return prompts.classification_prompt(options_of(row, lang), lang, cot=cot)

    def rotate(self, row: Row, rotation: int) -> Row:
        return rotate_options(row, rotation)

    def reference(self, row: Mapping[str, Any], lang: str = "zh") -> Any:
        answer, n = row.get("answer"), len(row.get("options") or [])
        if not (isinstance(answer, str) and len(answer) == 1 and "A" <= answer < chr(ord("A") + n)):
            raise ValueError(f"{self.name} item {row.get('id')}: answer {answer!r} is not the letter of one of its "
                             f"{n} options; {VALIDATE_HINT}")
        return answer

    def parse(self, text: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
        # Imported here: its patterns take 20 ms to compile, which other tasks never need.
        from metrics.dining_accuracy.core import parse_choice

        try:
            options = options_of(row, lang)
        except (KeyError, TypeError):  # an authors' row whose prompt does not read as one with options
            return None
        # no options: nothing to choose among, no answer reads as a choice (its reference is unusable too)
        return parse_choice(text, n_options=len(options), options=options) if options else None

    def score(self, records: list[ScoreRecord], parsed: Sequence[Any], rows: Sequence[Mapping[str, Any]],
              lang: str) -> dict[str, Any]:
        from metrics.dining_accuracy.core import score_parsed_choices

        result = score_parsed_choices(list(parsed), [r["reference"] for r in records],
                                      options=[options_of(row, lang) for row in rows])
        for record, correct, letter in zip(records, result["correct"], result["parsed"], strict=True):
            record["correct"], record["parsed"] = bool(correct), letter
        return result


TASK = register(Classification())
