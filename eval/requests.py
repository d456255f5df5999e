"""A dataset row becomes a `Request`, as the run's protocol asks it (`eval.protocols`: the task's prompt
and the views as ordered, or the authors' prompt and images), with the request hash that is the resume
key. Backends never see the task's fields."""

from __future__ import annotations

from collections.abc import Callable

from eval import protocols, tasks
from eval.images import stored_views
from eval.settings import RunSettings
from eval.types import Request, Row


def rotations(task: tasks.Task, row: Row, settings: RunSettings) -> range:
    """The option rotations to ask: every one for a task with options under `--circular`, else only 0."""
    return range(task.rotations(row) if settings.circular else 1)


def request_job(task: tasks.Task, row: Row, settings: RunSettings, epoch: int = 0, rotation: int = 0,
                scope: str | None = None) -> Request | Callable[[], Request]:
    """The run's `Protocol.request`: the request, or the call that builds it in a worker thread."""
    return protocols.of(settings).request(task, row, settings, epoch, rotation, scope)


def build_request(task: tasks.Task, row: Row, settings: RunSettings, epoch: int = 0,
                  rotation: int = 0, scope: str | None = None) -> Request:
    """The request, built now (in this thread). An unusable image is an ImageError naming the task and
    the item."""
    return protocols.of(settings).build(task, row, settings, epoch, rotation, scope)


def views_sent_as_stored(row: Row, settings: RunSettings) -> bool:
    """True when every view of the row goes out as stored under our protocol: building its request
    takes microseconds (no Pillow), so it may run on the event loop."""
    return stored_views(row, n=settings.images, order=settings.image_order, seed=settings.seed,
                        max_side=settings.max_image_side) is not None
