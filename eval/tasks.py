"""A dataset row becomes a task `Request`; a model's text becomes the task's parsed answer.

The one place that knows the three tasks: which fields form the prompt, which field is the
reference answer, which metrics parser reads the output. Backends never see any of this.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from eval import prompts
from eval.images import ImageError, select_views, sent_as_stored, views_for_request
from eval.types import GenerationConfig, Message, Request

NUTRIENTS = ("calories", "protein", "carbohydrates", "fat")
# Metadata columns the scorer and the Space need; the image columns are never among them.
META_COLUMNS = ("id", "merchant_id", "cuisine", "category", "vqa_category", "nutrition_source")


@dataclass(frozen=True)
class PromptSettings:
    """The settings that shape a request's content (and therefore its hash)."""

    model: str
    lang: str = "zh"
    cot: bool = False
    images: int | None = None
    image_order: str = "reference-first"
    max_image_side: int = 1024
    max_tokens: int = 1024
    seed: int = 0


def options_of(row: dict[str, Any], lang: str) -> list[str]:
    """The classification options in the prompt language (en falls back to zh if absent)."""
    if lang == "en" and row.get("options_en"):
        return list(row["options_en"])
    return list(row["options"])


def prompt_text(task: str, row: dict[str, Any], settings: PromptSettings) -> str:
    if task == "classification":
        text = prompts.classification_prompt(options_of(row, settings.lang), settings.lang)
    elif task == "nutrition":
        text = prompts.nutrition_prompt(settings.lang)
    elif task == "vqa":
        question = row.get("question_en") if settings.lang == "en" and row.get("question_en") else row["question"]
        text = prompts.vqa_prompt(question, settings.lang)
    else:
        raise ValueError(f"unknown task {task!r}")
    return prompts.with_cot(text, settings.lang) if settings.cot else text


def request_hash(model: str, text: str, image_hashes: list[str], config: GenerationConfig, task: str) -> str:
    """Identity of a request for resume: same hash = same question asked of the same model."""
    identity = {
        "model": model, "task": task, "prompt": text, "images": image_hashes,
        "temperature": config.temperature, "max_tokens": config.max_tokens, "seed": config.seed,
        "prompt_version": prompts.PROMPT_VERSION,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def views_sent_as_stored(row: dict[str, Any], settings: PromptSettings) -> bool:
    """True when every view of the row goes out as stored: building its request takes microseconds
    (no Pillow), so it may run on the event loop."""
    views, roles = row.get("images") or [], row.get("image_roles") or []
    if not views or len(views) != len(roles):
        return False  # the builder names the problem, in its turn
    chosen = select_views(roles, settings.images, settings.image_order, seed=settings.seed, item_id=str(row["id"]))
    return all(sent_as_stored(views[i], settings.max_image_side) for i in chosen)


def build_request(task: str, row: dict[str, Any], settings: PromptSettings) -> Request:
    """Images first (the views, in order), then the task text, in one user turn.

    An unusable image is an ImageError naming the task and the item.
    """
    text = prompt_text(task, row, settings)
    try:
        views = views_for_request(row, n=settings.images, order=settings.image_order, seed=settings.seed,
                                  max_side=settings.max_image_side)
    except ImageError as exc:
        raise ImageError(f"{task}: {exc}") from None
    config = GenerationConfig(temperature=0.0, max_tokens=settings.max_tokens, seed=settings.seed)
    digest = request_hash(settings.model, text, [hashlib.sha256(v.data).hexdigest() for v in views],
                          config, task)
    message = Message(role="user", content=(*views, text))
    return Request(id=str(row["id"]), task=task, messages=(message,), config=config, request_hash=digest,
                   metadata={"n_images": len(views), "n_options": len(row.get("options") or [])})


def request_job(task: str, row: dict[str, Any], settings: PromptSettings) -> Request | Callable[[], Request]:
    """The request itself when its views go out as stored (microseconds); otherwise the call that
    builds it (decode, shrink, re-encode), for a worker thread: what `runner.built_ahead` takes."""
    build = partial(build_request, task, row, settings)
    return build() if views_sent_as_stored(row, settings) else build


def reference_of(task: str, row: dict[str, Any], lang: str = "zh") -> Any:
    """The reference answer scoring compares against (VQA: in the prompt language).

    An unusable reference (a letter beyond the options, a missing or non-finite nutrient, an empty
    answer) is a ValueError naming the item: a bad row must stop a run, never be scored as if fine.
    """
    where = f"{task} item {row.get('id')}"
    hint = "check the release with `python diningbench.py validate SOURCE`"
    if task == "classification":
        answer, n = row.get("answer"), len(row.get("options") or [])
        if not (isinstance(answer, str) and len(answer) == 1 and "A" <= answer < chr(ord("A") + n)):
            raise ValueError(f"{where}: answer {answer!r} is not the letter of one of its {n} options; {hint}")
        return answer
    if task == "nutrition":
        values = {k: row.get(k) for k in NUTRIENTS}
        bad = [f"{k}={v}" for k, v in values.items()
               if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0)]
        if bad:
            raise ValueError(f"{where}: nutrition must be finite and >= 0 ({', '.join(bad)}); {hint}")
        return {k: float(v) for k, v in values.items()}
    if task == "vqa":
        answer = row.get("answer_en") if lang == "en" and row.get("answer_en") else row.get("answer")
        if not answer:
            raise ValueError(f"{where}: the reference answer is empty; {hint}")
        return answer
    raise ValueError(f"unknown task {task!r}")


def question_of(row: dict[str, Any], lang: str = "zh") -> str:
    return row.get("question_en") if lang == "en" and row.get("question_en") else row["question"]


_THINK = re.compile(r"<think>.*?</think>", re.S)
_FINAL = re.compile(r"(?:最终答案|最终回答|final answer)\s*[:：]\s*", re.I)


def final_answer_text(text: str) -> str:
    """The answer part of free text: drop <think> blocks, keep what follows the last final-answer mark.

    >>> final_answer_text("1. looks red\\nFinal answer: Not suitable, it is fried.")
    'Not suitable, it is fried.'
    """
    end = text.rfind("</think>") + len("</think>")
    if end >= len("</think>"):  # only up to the last closing tag: many unclosed <think> would be quadratic
        text = _THINK.sub("", text[:end]) + text[end:]
    marks = list(_FINAL.finditer(text))
    return (text[marks[-1].end():] if marks else text).strip()


_PARSER_MODULES = {"classification": "metrics.dining_accuracy.dining_accuracy",
                   "nutrition": "metrics.nutrition_error.nutrition_error"}


def load_parsers(task_names: tuple[str, ...] | list[str]) -> None:
    """Import the metrics modules up front: importing `evaluate` takes seconds, and doing it on the
    event loop in the middle of a run would stall every request in flight."""
    for task in task_names:
        if task in _PARSER_MODULES:
            importlib.import_module(_PARSER_MODULES[task])


def parse_output(task: str, text: str, row: dict[str, Any], lang: str = "zh") -> Any:
    """The task's parsed answer, with the metrics modules' own parsers (never a second copy)."""
    if task == "classification":
        from metrics.dining_accuracy.dining_accuracy import parse_choice

        options = options_of(row, lang)
        return parse_choice(text, n_options=len(options), options=options)
    if task == "nutrition":
        from metrics.nutrition_error.nutrition_error import parse_nutrition

        return parse_nutrition(text)
    if task == "vqa":
        return final_answer_text(text) or None
    raise ValueError(f"unknown task {task!r}")
