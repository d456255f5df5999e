"""This project's protocol (`--protocol ours`): the task's prompt, the views as ordered and resized, our
parsers and metrics, the judge_accuracy judge. Per-item records and figures: `eval.protocols.records`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import eval.protocols.base as base
from eval import tasks
from eval.images import ImageError, ImagePart, select_views, stored_views, views_for_request
from eval.limiter import threads_for
from eval.protocols.base import Protocol, Tally, TaskScoring, register, request_hash
from eval.protocols.records import (
    authors_rows,
    item_record,
    parsed_answers,
    score_judged,
    score_prediction,
    score_rotations,
    score_task,
    set_verdict,
    usable_reference,
)
from eval.settings import RunSettings, UsageError
from eval.types import GenerationConfig, Message, Prediction, Request, Row, ScoreRecord, TaskFigures


class Ours(Protocol):
    name = "ours"
    title = "this project's protocol"

    def check(self, settings: RunSettings) -> None:
        if settings.image_indices is not None:
            raise UsageError("--image-indices chooses images under --protocol official; with ours use --images N "
                             "and --image-order")

    def check_rows(self, task: tasks.Task, rows: Sequence[Mapping[str, Any]], settings: RunSettings) -> None:
        """A reference ours cannot read stops the run before any request is sent: a bad row of a release
        must never be scored as if fine. The authors' release is read as published: its rows without a
        usable reference are asked, and left out of the figures (counted)."""
        if authors_rows(rows):
            return
        try:
            for row in rows:
                task.reference(row, settings.lang)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def folder_parts(self, settings: RunSettings) -> list[str]:
        return [f"img{settings.images or 'all'}", settings.image_order]

    def describe(self, settings: RunSettings) -> str:
        return f"{settings.images or 'all'} views{', CoT' if settings.cot else ''}"

    def sweep_cell(self, cell: RunSettings, *, cot: bool, views: int) -> RunSettings:
        return dataclasses.replace(cell, cot=cot, images=views)

    # ------------------------------------------------------------ asking
    def generation(self, settings: RunSettings, epoch: int = 0) -> GenerationConfig:
        """Epoch k > 0 asks again with seed + k: a model that samples gives an independent answer."""
        return GenerationConfig(temperature=0.0, max_tokens=settings.max_tokens, seed=settings.seed + epoch,
                                reasoning_effort=settings.reasoning_effort, thinking_budget=settings.thinking_budget,
                                fit_to_context=settings.protocol_budget)

    def request(self, task: tasks.Task, row: Row, settings: RunSettings, epoch: int = 0, rotation: int = 0,
                scope: str | None = None) -> Request | Callable[[], Request]:
        views = stored_views(row, n=settings.images, order=settings.image_order, seed=settings.seed,
                             max_side=settings.max_image_side)
        if views is not None:
            return self.build(task, row, settings, epoch, rotation, scope, views)
        return partial(self.build, task, row, settings, epoch, rotation, scope)

    def build(self, task: tasks.Task, row: Row, settings: RunSettings, epoch: int = 0, rotation: int = 0,
              scope: str | None = None, views: list[ImagePart] | None = None) -> Request:
        """Images first (the views, in order), then the task text, in one user turn. An unusable image is an
        ImageError naming the task and the item. `metadata` carries what the prediction keeps: the views sent,
        the epoch and the option rotation. `scope` (the dataset's fingerprint) lets each view's hash be
        computed once and reused (`VIEW_HASHES`). `views`: the row's views as `stored_views` found them, when
        the caller has checked them already."""
        row = task.rotate(row, rotation)
        text = task.prompt(row, lang=settings.lang, cot=settings.cot)
        stored = views is not None  # the release's own bytes, as `stored_views` found them
        try:
            if views is None:
                views = views_for_request(row, n=settings.images, order=settings.image_order, seed=settings.seed,
                                          max_side=settings.max_image_side)
        except ImageError as exc:
            raise ImageError(f"{task.name}: {exc}") from None
        if scope is None:
            hashes = [hashlib.sha256(v.data).hexdigest() for v in views]
        else:
            chosen = select_views(row.get("image_roles") or [], settings.images, settings.image_order,
                                  seed=settings.seed, item_id=str(row["id"]))
            hashes = [base.VIEW_HASHES.digest(f"{scope}:{task.name}", str(row["id"]), i, settings.max_image_side,
                                              v.data, stored=stored)  # read at each call: tests replace it
                      for i, v in zip(chosen, views, strict=True)]
        digest = request_hash(settings, task.name, text, hashes, epoch, rotation, self.recorded)
        message = Message(role="user", content=(*views, text))
        return Request(id=str(row["id"]), task=task.name, messages=(message,), config=self.generation(settings, epoch),
                       request_hash=digest, metadata={"n_images": len(views), "epoch": epoch, "rotation": rotation})

    # ------------------------------------------------------------ scoring
    def scores_row(self, task: tasks.Task, row: Mapping[str, Any], lang: str) -> bool:
        return usable_reference(task, row, lang)

    def score(self, job: TaskScoring) -> tuple[list[ScoreRecord], TaskFigures]:
        answered = job.predictions
        mine = [p for p in answered if usable_reference(job.spec, job.by_id[p.id], job.lang)]
        rotated = [p for p in mine if p.rotation]  # --circular: scored apart, into rotations.jsonl
        mine = [p for p in mine if not p.rotation]
        records = records_of(job, mine)
        rows = [job.by_id[p.id] for p in mine]
        if job.spec.judged:
            raws = [tasks.parse_input(p.raw) if p.error is None and p.raw is not None else None for p in mine]
            entry = score_judged(job.spec, records, raws, [job.spec.question(row, job.lang) or "" for row in rows],
                                 job.judge_fn, job.judge, job.cache_dir, n_boot=job.n_boot,
                                 concurrency=threads_for(job.settings.concurrency, job.settings.max_concurrency))
        else:
            entry = score_task(job.spec, records, parsed_answers(job.spec, mine, rows, job.lang, job.fresh), rows,
                               job.lang, job.n_boot)
            if rotated:
                job.rotated, found = score_rotations(job.spec, rotated, job.by_id, records, job.lang, job.n_boot,
                                                     job.fresh)
                entry.update(found)
        left_out(entry, answered, mine, rotated)
        return records, entry

    def tally(self, task: tasks.Task, model: str, lang: str) -> Tally:
        return OursTally(task, lang)


def records_of(job: TaskScoring, predictions: Sequence[Prediction]) -> list[ScoreRecord]:
    """Each answer's scores.jsonl record before its score is filled."""
    return [item_record(job.spec, job.by_id[p.id], p, lang=job.lang,
                        n_images=None if p.n_images is not None or job.views_sent is None
                        else job.views_sent(job.by_id[p.id]))
            for p in predictions]


def left_out(entry: TaskFigures, answered: Sequence[Prediction], mine: Sequence[Prediction],
             rotated: Sequence[Prediction] = ()) -> None:
    """`ours_left_out`: answers to rows whose reference ours cannot read (the authors' release)."""
    if len(answered) > len(mine) + len(rotated):
        entry["ours_left_out"] = len(answered) - len(mine) - len(rotated)


class OursTally(Tally):
    """Ours, one answer at a time: the task's scoring, a judged task's verdict from the judge_accuracy
    rules and the operator's judge. A row whose reference ours cannot read is shown, not scored."""

    def __init__(self, task: tasks.Task, lang: str) -> None:
        self.task, self.lang = task, lang
        self.records, self.rows, self.decided = [], [], []
        self.answered = 0

    def add(self, prediction: Prediction, row: Row) -> ScoreRecord:
        self.answered += 1
        if not usable_reference(self.task, row, self.lang):
            return {"id": prediction.id, "reference": row.get("ground_truth")}
        record = score_prediction(self.task, prediction, row, self.lang)
        self.records.append(record)
        self.rows.append(row)
        return record

    async def judge(self, record: ScoreRecord, prediction: Prediction, row: Row, judge: Any) -> None:
        if not self.records or self.records[-1] is not record:
            return  # not scored by ours
        raw = prediction.raw if prediction.error is None else None
        verdict, decided_by = await judge.verdict(self.task.question(row, self.lang) or "",
                                                  record["reference"], raw)
        set_verdict(record, verdict, decided_by)
        self.decided.append(decided_by)

    def figures(self) -> TaskFigures:
        return {"ours_left_out": self.answered - len(self.records)} if self.answered > len(self.records) else {}


OURS = register(Ours())
