"""The programmatic face of the harness: what the CLI, the Space and sweeps call.

`run(settings)` = generation (resumable) + scoring into one run folder; `score(run_dir)` re-scores
saved predictions; `iter_predictions(settings)` streams (Prediction, row) pairs for live displays.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.types import TASKS, Backend, Prediction

IMAGE_ORDERS = ("reference-first", "user-first", "random")
LANGS = ("zh", "en")


class UsageError(ValueError):
    """A user mistake (bad flag, unknown task, unreachable server...): printed as one `error:` line."""


@dataclass
class RunSettings:
    """Everything that defines a run. Fields that change a request's content are part of its hash.

    `task` is one task or "all"; `images` None = every view of the item; `engine_options` are
    passed through to the backend's `make` (tensor_parallel_size, max_pixels, ...).
    """

    task: str
    model: str
    base_url: str | None = None
    dataset: str | None = None  # release folder or Hub id; None -> DININGBENCH_SOURCE -> embedded sample
    limit: int | None = None
    ids: Sequence[str] | None = None
    images: int | None = None
    image_order: str = "reference-first"
    cot: bool = False
    lang: str = "zh"
    concurrency: int = 8
    max_tokens: int = 1024
    seed: int = 0
    judge: str | None = None
    judge_base_url: str | None = None
    out: Path | None = None
    max_image_side: int = 1024
    batch_size: int = 8
    timeout: float = 120.0
    max_attempts: int = 6
    overwrite: bool = False
    engine_options: dict[str, Any] = field(default_factory=dict)

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(TASKS) if self.task == "all" else (self.task,)

    def validate(self) -> None:
        """Raise UsageError (one line, naming the argument) for settings that cannot run."""
        if self.task != "all" and self.task not in TASKS:
            raise UsageError(f"unknown --task {self.task!r}; choose one of {', '.join((*TASKS, 'all'))}")
        if self.images is not None and self.images < 1:
            raise UsageError(f"--images must be at least 1 (got {self.images}); omit it to send every view")
        if self.image_order not in IMAGE_ORDERS:
            raise UsageError(f"unknown --image-order {self.image_order!r}; choose one of {', '.join(IMAGE_ORDERS)}")
        if self.lang not in LANGS:
            raise UsageError(f"unknown --lang {self.lang!r}; choose zh or en")
        for name in ("concurrency", "max_tokens", "max_image_side", "batch_size", "max_attempts"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(self, name)})")
        if self.limit is not None and self.limit < 1:
            raise UsageError(f"--limit must be at least 1 (got {self.limit})")
        if self.timeout <= 0:
            raise UsageError(f"--timeout must be positive (got {self.timeout})")

    def default_out(self) -> Path:
        """`results/<model>-<task>-<settings>/`, readable and unique per setting that changes answers."""
        model = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model).strip("-")
        parts = [model, self.task, self.lang, f"img{self.images or 'all'}", self.image_order]
        if self.cot:
            parts.append("cot")
        if self.seed:
            parts.append(f"seed{self.seed}")
        return Path("results") / "-".join(parts)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["out"] = str(self.out) if self.out is not None else None
        data["ids"] = list(self.ids) if self.ids is not None else None
        return data


def run(settings: RunSettings, *, on_prediction: Callable[[Prediction], None] | None = None,
        backend: Backend | None = None, progress: bool = True) -> Path:
    """Generate (resuming what is already answered) and score; return the run folder.

    Writes predictions.jsonl, run.json, scores.jsonl, metrics.json and report.md into
    `settings.out` (or `settings.default_out()`). `on_prediction` is called once per newly
    finished sample. `backend` overrides building one from `settings.model` (tests, the Space).
    """
    raise NotImplementedError  # filled in below by the pipeline (contract first)


def score(run_dir: Path | str, judge: str | None = None, judge_base_url: str | None = None) -> dict[str, Any]:
    """Re-score the saved predictions of a run folder; return (and write) metrics.json's content.

    The judge, when given, replaces the one recorded in run.json; cached verdicts are reused.
    """
    from eval.scoring import score_run

    return score_run(Path(run_dir), judge=judge, judge_base_url=judge_base_url)


async def iter_predictions(settings: RunSettings, backend: Backend | None = None
                           ) -> AsyncIterator[tuple[Prediction, dict[str, Any]]]:
    """Yield (Prediction, dataset row without images) as each sample finishes, nothing written.

    For live per-sample displays (the Space). Order is completion order. `prediction.parsed`
    is filled by the task's parser; correctness per item comes from `eval.scoring.score_item`.
    """
    raise NotImplementedError  # contract first
    yield  # pragma: no cover
