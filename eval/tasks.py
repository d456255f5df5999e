"""A dataset row becomes a task `Request`; a model's text becomes the task's parsed answer.

The one place that knows the three tasks: which fields form the prompt, which field is the
reference answer, which metrics parser reads the output. Backends never see any of this.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from eval import prompts
from eval.images import ImageError, ViewHashes, select_views, stored_views, views_for_request
from eval.settings import IDENTITY_FIELDS, RunSettings
from eval.types import NUTRIENTS, GenerationConfig, ImagePart, Message, Request
from metrics.judge_accuracy.judge_accuracy import final_answer
from metrics.nutrition_error.nutrition_error import parse_nutrition


def options_of(row: dict[str, Any], lang: str) -> list[str]:
    """The classification options in the prompt language (en falls back to zh if absent)."""
    if lang == "en" and row.get("options_en"):
        return list(row["options_en"])
    return list(row["options"])


def rotate_options(row: dict[str, Any], rotation: int) -> dict[str, Any]:
    """The classification row with its options rotated left by `rotation` places, and the answer
    letter that follows the correct option (`--circular`). Rotation 0 is the row as stored.

    >>> rotated = rotate_options({"id": "x", "options": ["a", "b", "c"], "answer": "A"}, 1)
    >>> rotated["options"], rotated["answer"]
    (['b', 'c', 'a'], 'C')
    """
    options = list(row.get("options") or [])
    if not rotation or not options:
        return row
    n = len(options)
    shift = rotation % n
    rotated = dict(row, options=options[shift:] + options[:shift])
    if row.get("options_en"):
        rotated["options_en"] = list(row["options_en"])[shift:] + list(row["options_en"])[:shift]
    answer = row.get("answer")
    if isinstance(answer, str) and len(answer) == 1 and 0 <= ord(answer) - ord("A") < n:
        rotated["answer"] = chr(ord("A") + (ord(answer) - ord("A") - shift) % n)
    return rotated


def rotations(task: str, row: dict[str, Any], settings: RunSettings) -> range:
    """The option rotations to ask: every one for classification under `--circular`, else only 0."""
    if settings.circular and task == "classification":
        return range(max(1, len(row.get("options") or [])))
    return range(1)


def prompt_text(task: str, row: dict[str, Any], settings: RunSettings) -> str:
    """The task's prompt for this row (direct, or its chain-of-thought variant with `cot`)."""
    if task == "classification":
        return prompts.task_prompt(task, settings.lang, cot=settings.cot, options=options_of(row, settings.lang))
    if task == "vqa":
        return prompts.task_prompt(task, settings.lang, cot=settings.cot, question=question_of(row, settings.lang))
    return prompts.task_prompt(task, settings.lang, cot=settings.cot)


def generation_config(settings: RunSettings, epoch: int = 0) -> GenerationConfig:
    """What the run asks of every request (each backend's policy decides what is sent).

    Epoch k > 0 asks again with seed + k: a model that samples gives an independent answer.
    """
    return GenerationConfig(temperature=0.0, max_tokens=settings.max_tokens, seed=settings.seed + epoch,
                            reasoning_effort=settings.reasoning_effort, thinking_budget=settings.thinking_budget)


def request_hash(settings: RunSettings, task: str, text: str, image_hashes: list[str], epoch: int = 0,
                 rotation: int = 0) -> str:
    """Identity of a request for resume: same hash = same question asked of the same model.

    Made of the settings' identity fields (eval/settings.py marks them), the prompt and the images;
    epoch and rotation only when not 0, so the plain request keeps its hash (and its answer is reused).
    """
    identity = {name: getattr(settings, name) for name in IDENTITY_FIELDS}
    identity.update(task=task, prompt=text, images=image_hashes, prompt_version=prompts.PROMPT_VERSION)
    if epoch:
        identity["epoch"] = epoch
    if rotation:
        identity["rotation"] = rotation
    return hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def views_sent_as_stored(row: dict[str, Any], settings: RunSettings) -> bool:
    """True when every view of the row goes out as stored: building its request takes microseconds
    (no Pillow), so it may run on the event loop."""
    return _stored(row, settings) is not None


def _stored(row: dict[str, Any], settings: RunSettings) -> list[ImagePart] | None:
    return stored_views(row, n=settings.images, order=settings.image_order, seed=settings.seed,
                        max_side=settings.max_image_side)


def _kept_view_hashes() -> Path:
    import diningbench

    return diningbench.datasets_cache() / "diningbench-view-hashes"


# The view hashes of every dataset this process has asked about (bounded), those of views sent as
# stored also kept on disk for the next run over the same release (`eval.api.run` saves them).
VIEW_HASHES = ViewHashes(folder=_kept_view_hashes)


def build_request(task: str, row: dict[str, Any], settings: RunSettings, epoch: int = 0,
                  rotation: int = 0, scope: str | None = None, views: list[ImagePart] | None = None) -> Request:
    """Images first (the views, in order), then the task text, in one user turn.

    An unusable image is an ImageError naming the task and the item. `metadata` carries what the
    prediction keeps: the views sent, the epoch and the option rotation. `scope` (the dataset's
    fingerprint) lets each view's hash be computed once and reused (`VIEW_HASHES`). `views`: the
    row's views as `stored_views` found them, when the caller has checked them already.
    """
    row = rotate_options(row, rotation) if task == "classification" else row
    text = prompt_text(task, row, settings)
    stored = views is not None  # the release's own bytes, as `stored_views` found them
    try:
        if views is None:
            views = views_for_request(row, n=settings.images, order=settings.image_order, seed=settings.seed,
                                      max_side=settings.max_image_side)
    except ImageError as exc:
        raise ImageError(f"{task}: {exc}") from None
    if scope is None:
        hashes = [hashlib.sha256(v.data).hexdigest() for v in views]
    else:
        chosen = select_views(row.get("image_roles") or [], settings.images, settings.image_order,
                              seed=settings.seed, item_id=str(row["id"]))
        hashes = [VIEW_HASHES.digest(f"{scope}:{task}", str(row["id"]), i, settings.max_image_side, v.data,
                                     stored=stored)
                  for i, v in zip(chosen, views, strict=True)]
    digest = request_hash(settings, task, text, hashes, epoch, rotation)
    message = Message(role="user", content=(*views, text))
    return Request(id=str(row["id"]), task=task, messages=(message,), config=generation_config(settings, epoch),
                   request_hash=digest,
                   metadata={"n_images": len(views), "epoch": epoch, "rotation": rotation})


def request_job(task: str, row: dict[str, Any], settings: RunSettings, epoch: int = 0, rotation: int = 0,
                scope: str | None = None) -> Request | Callable[[], Request]:
    """The request itself when its views go out as stored (microseconds); otherwise the call that
    builds it (decode, shrink, re-encode), for a worker thread: what `runner.built_ahead` takes."""
    views = _stored(row, settings)
    if views is not None:
        return build_request(task, row, settings, epoch, rotation, scope, views)
    return partial(build_request, task, row, settings, epoch, rotation, scope)


def reference_of(task: str, row: dict[str, Any], lang: str = "zh") -> Any:
    """The reference answer scoring compares against (VQA: in the prompt language).

    An unusable reference (a letter beyond the options, a missing or non-finite nutrient, an empty
    answer) is a ValueError naming the item: a bad row must stop a run, never be scored as if fine.
    """
    if task == "classification":
        answer, n = row.get("answer"), len(row.get("options") or [])
        if not (isinstance(answer, str) and len(answer) == 1 and "A" <= answer < chr(ord("A") + n)):
            raise ValueError(f"{task} item {row.get('id')}: answer {answer!r} is not the letter of one of its "
                             f"{n} options; {_VALIDATE_HINT}")
        return answer
    if task == "nutrition":
        values = {k: row.get(k) for k in NUTRIENTS}
        bad = [f"{k}={v}" for k, v in values.items()
               if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0)]
        if bad:
            raise ValueError(f"{task} item {row.get('id')}: nutrition must be finite and >= 0 ({', '.join(bad)}); "
                             f"{_VALIDATE_HINT}")
        return {k: float(v) for k, v in values.items()}
    if task == "vqa":
        answer = row.get("answer_en") if lang == "en" and row.get("answer_en") else row.get("answer")
        if not answer:
            raise ValueError(f"{task} item {row.get('id')}: the reference answer is empty; {_VALIDATE_HINT}")
        return answer
    raise ValueError(f"unknown task {task!r}")


_VALIDATE_HINT = "check the release with `python diningbench.py validate SOURCE`"


def question_of(row: dict[str, Any], lang: str = "zh") -> str:
    return row.get("question_en") if lang == "en" and row.get("question_en") else row["question"]


# Parsers read at most this much of an answer: its first and last halves. A model that loops to its
# limit can write megabytes, and its answer, if it gave one, sits at one end (answer first, or a
# final answer last). The raw text is kept whole in predictions.jsonl.
MAX_PARSED_CHARS = 200_000


def parse_input(text: str) -> str:
    """What the parsers read of an answer: all of it up to MAX_PARSED_CHARS, else both ends.

    >>> len(parse_input("x" * 1_000_000)) <= MAX_PARSED_CHARS + 2
    True
    """
    if len(text) <= MAX_PARSED_CHARS:
        return text
    half = MAX_PARSED_CHARS // 2
    return text[:half] + "\n\n" + text[-half:]


def parse_output(task: str, text: str, row: dict[str, Any], lang: str = "zh") -> Any:
    """The task's parsed answer, with the metrics modules' own parsers (never a second copy)."""
    text = parse_input(text)
    if task == "classification":
        # Imported here: its patterns take 20 ms to compile, which other tasks never need.
        from metrics.dining_accuracy.dining_accuracy import parse_choice

        options = options_of(row, lang)
        return parse_choice(text, n_options=len(options), options=options)
    if task == "nutrition":
        return parse_nutrition(text)
    if task == "vqa":
        return final_answer(text) or None
    raise ValueError(f"unknown task {task!r}")
