"""The task registry: `tasks.get("nutrition")` is everything that differs by task, in one object.

The benchmark's three tasks register here, in the order releases and reports list them; others may too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Importing each task's module registers it, in this order (tests/test_task_registry.py holds it).
from eval.tasks import classification, nutrition, vqa  # noqa: F401
from eval.tasks.base import (
    MAX_PARSED_CHARS,
    Task,
    UnknownTask,
    all_tasks,
    get,
    is_task,
    names,
    parse_input,
    register,
    unregister,
)
from eval.tasks.classification import options_of, rotate_options
from eval.tasks.vqa import question_of
from eval.types import Row

__all__ = ["MAX_PARSED_CHARS", "Task", "UnknownTask", "all_tasks", "answer_format", "figure_of", "get", "is_judged",
           "is_task", "names", "options_of", "parse_input", "parse_output", "prompt_text", "question_of",
           "reference_of", "register", "rotate_options", "task_prompt", "unregister"]


def answer_format(task: object) -> str:
    """How the task's answer is given ("letter", "nutrients" or "text"); "text" for an unknown task."""
    return get(task).answer_format if is_task(task) else "text"


def figure_of(task: object) -> str:
    """metrics.json's key of the task's headline ("accuracy" for a task no module registered)."""
    return get(task).figure if is_task(task) else "accuracy"


def is_judged(task: object) -> bool:
    return is_task(task) and get(task).judged


def reference_of(task: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
    """The reference answer scoring compares against (VQA: in the prompt language). An unusable reference (a
    letter beyond the options, a missing or non-finite nutrient, an empty answer) is a ValueError naming the
    item: a bad row must stop a run, never be scored as if fine."""
    return get(task).reference(row, lang)


def parse_output(task: str, text: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
    """The task's parsed answer, with the metrics modules' own parsers (never a second copy)."""
    return get(task).read_answer(text, row, lang)


def task_prompt(task: str, lang: str, *, cot: bool = False, options: Sequence[str] | None = None,
                question: str | None = None) -> str:
    """The prompt for one task from its parts alone: `options` for classification, `question` for vqa.

    >>> task_prompt("classification", "en", cot=True, options=["noodles", "rice"]).splitlines()[-1][:31]
    'The last line must be "Final an'
    """
    row: Row = {}
    if options is not None:
        row["options"] = list(options)
    if question is not None:
        row["question"] = question
    try:
        return get(task).prompt(row, lang=lang, cot=cot)
    except KeyError as exc:
        raise ValueError(f"{task} needs its {exc.args[0]}") from None


def prompt_text(task: str, row: Mapping[str, Any], settings: Any) -> str:
    """The task's prompt for this row (direct, or its chain-of-thought variant with `settings.cot`)."""
    return get(task).prompt(row, lang=settings.lang, cot=bool(settings.cot))
