"""A dataset row becomes a `Request`: the task's prompt (`eval.tasks`), the row's views as sent, and
the request hash that is the resume key. Backends never see the task's fields.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from eval import official, prompts, tasks
from eval.images import ImageError, ViewHashes, select_views, stored_bytes, stored_views, views_for_request
from eval.settings import IDENTITY_FIELDS, RunSettings, image_indices
from eval.types import DEFAULT_MAX_TOKENS, GenerationConfig, ImagePart, Message, Request


def rotations(task: str, row: dict[str, Any], settings: RunSettings) -> range:
    """The option rotations to ask: every one for a task with options under `--circular`, else only 0."""
    return range(tasks.get(task).rotations(row) if settings.circular else 1)


def generation_config(settings: RunSettings, epoch: int = 0) -> GenerationConfig:
    """What the run asks of every request (each backend's policy decides what is sent).

    Epoch k > 0 asks again with seed + k: a model that samples gives an independent answer. The
    authors' protocol sends temperature 0 and their budget (14,336 tokens, unless --max-tokens says
    otherwise) and no seed, as their scripts do.
    """
    if settings.protocol == "official":
        budget = official.facts()["generation"]
        tokens = budget["max_tokens"] if settings.max_tokens == DEFAULT_MAX_TOKENS else settings.max_tokens
        return GenerationConfig(temperature=budget["temperature"], max_tokens=tokens,
                                seed=settings.seed + epoch if epoch else None)
    return GenerationConfig(temperature=0.0, max_tokens=settings.max_tokens, seed=settings.seed + epoch,
                            reasoning_effort=settings.reasoning_effort, thinking_budget=settings.thinking_budget)


def request_hash(settings: RunSettings, task: str, text: str, image_hashes: list[str], epoch: int = 0,
                 rotation: int = 0) -> str:
    """Identity of a request for resume: same hash = same question asked of the same model.

    Made of the settings' identity fields (eval/settings.py marks them), the prompt and the images;
    epoch and rotation only when not 0, so the plain request keeps its hash (and its answer is reused).
    """
    identity = {name: getattr(settings, name) for name in IDENTITY_FIELDS}
    for name in ("protocol", "image_indices"):  # absent under our protocol: earlier runs keep their hashes
        if identity.get(name) in (None, "ours"):
            identity.pop(name, None)
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
    from dataset import load  # where the datasets cache folder is decided (tests move it)

    return load.datasets_cache() / "diningbench-view-hashes"


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
    spec = tasks.get(task)
    if settings.protocol == "official":
        return official_request(task, row, settings, epoch)
    row = spec.rotate(row, rotation)
    text = spec.prompt(row, lang=settings.lang, cot=settings.cot)
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


def official_views(task: str, row: dict[str, Any], settings: RunSettings) -> list[ImagePart]:
    """The images the authors' scripts send for this row: chosen by the task's rule from
    --image-indices, each the file's bytes as stored, labelled image/jpeg as they label every image."""
    cells = row.get("images") or []
    roles = row.get("image_roles") or []
    mime = official.facts()["generation"]["image_mime"]
    item = str(row["id"])
    try:
        return [ImagePart(stored_bytes(cells[k], item_id=item, index=k), mime,
                          roles[k] if k < len(roles) else "user")
                for k in tasks.get(task).official_images(row, image_indices(settings.image_indices))]
    except ImageError as exc:
        raise ImageError(f"{task}: {exc}") from None


def official_request(task: str, row: dict[str, Any], settings: RunSettings, epoch: int = 0) -> Request:
    """The request of the authors' protocol: the images, then the row's prompt verbatim, in one user turn."""
    text = str(row.get("prompt") or "")
    views = official_views(task, row, settings)
    hashes = [hashlib.sha256(v.data).hexdigest() for v in views]
    digest = request_hash(settings, task, text, hashes, epoch)
    return Request(id=str(row["id"]), task=task, messages=(Message(role="user", content=(*views, text)),),
                   config=generation_config(settings, epoch), request_hash=digest,
                   metadata={"n_images": len(views), "epoch": epoch, "rotation": 0})


def request_job(task: str, row: dict[str, Any], settings: RunSettings, epoch: int = 0, rotation: int = 0,
                scope: str | None = None) -> Request | Callable[[], Request]:
    """The request itself when its views go out as stored (microseconds); otherwise the call that
    builds it (decode, shrink, re-encode), for a worker thread: what `runner.built_ahead` takes."""
    if settings.protocol == "official":  # the stored bytes, never re-encoded: microseconds
        return build_request(task, row, settings, epoch, rotation, scope)
    views = _stored(row, settings)
    if views is not None:
        return build_request(task, row, settings, epoch, rotation, scope, views)
    return partial(build_request, task, row, settings, epoch, rotation, scope)
