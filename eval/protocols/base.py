"""What a protocol is: how a row is asked, how an answer is read and which figures a run reports.

One object, like a task: a run records its name; everything downstream asks the object, never the name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from eval import prompts, tasks
from eval.images import ViewHashes
from eval.settings import IDENTITY_FIELDS, RunSettings, UsageError
from eval.store import Key
from eval.types import GenerationConfig, Prediction, Request, Row, ScoreRecord, TaskFigures


def request_hash(settings: RunSettings, task: str, text: str, image_hashes: list[str], epoch: int = 0,
                 rotation: int = 0, recorded: Collection[str] = ()) -> str:
    """Identity of a request for resume: same hash = same question asked of the same model. Made of the
    settings' identity fields (eval/settings.py marks them), the prompt and the images; epoch and rotation
    only when not 0, so the plain request keeps its hash (and its answer is reused). `protocol` and
    `image_indices` count only for a protocol that records them (`recorded`): requests made before there was a
    choice keep their hashes."""
    identity = {name: value for name, value in ((name, getattr(settings, name)) for name in IDENTITY_FIELDS)
                if (value is not None if name in recorded else name not in ("protocol", "image_indices"))}
    identity.update(task=task, prompt=text, images=image_hashes, prompt_version=prompts.PROMPT_VERSION)
    identity.update({name: value for name, value in (("epoch", epoch), ("rotation", rotation)) if value})
    return hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def _kept_view_hashes() -> Path:
    from dataset import load  # where the datasets cache folder is decided (tests move it)

    return load.datasets_cache() / "diningbench-view-hashes"


# The view hashes of every dataset this process has asked about (bounded), those of views sent as
# stored also kept on disk for the next run over the same release (`eval.api.run` saves them).
VIEW_HASHES = ViewHashes(folder=_kept_view_hashes)


@dataclass
class TaskScoring:
    """One task of a run folder, as scoring hands it to the run's protocol: the answers in dataset order
    (epoch by epoch), the rows by id, and what the judge step needs."""

    spec: tasks.Task
    predictions: list[Prediction]
    by_id: dict[str, Row]
    settings: RunSettings
    lang: str
    judge: str | None  # the judge's spec
    judge_base_url: str | None
    judge_fn: Any  # eval.judge.BackendJudge with the run's settings, or None
    cache_dir: Path
    n_boot: int
    fresh: Collection[Key] = ()
    views_sent: Callable[[Row], int] | None = None  # lines written before n_images was kept
    rotated: list[ScoreRecord] = field(default_factory=list)  # rotations.jsonl lines (--circular)

    @property
    def task(self) -> str:
        return self.spec.name


class Tally:
    """A live evaluation's scoring, one answer at a time (the Space), by the same functions a run folder's
    scoring calls: `add` reads and scores an answer, `judge` takes a judged task's verdict, and at the end
    `records`/`rows`/`decided` give ours and `figures` what the protocol adds to the task's entry."""

    records: list[ScoreRecord]  # ours: each record our figures read
    rows: list[Row]
    decided: list[str]  # a judged task: who decided each of `records`' verdicts

    def add(self, prediction: Prediction, row: Row) -> ScoreRecord:
        """The answer's record (what the page shows)."""
        raise NotImplementedError

    async def judge(self, record: ScoreRecord, prediction: Prediction, row: Row, judge: Any) -> None:
        """A judged task's verdict for one record; `judge` has `reply(prompt)` and `verdict(question,
        reference, raw)` (the Space's request-slot judge)."""
        raise NotImplementedError

    def figures(self) -> TaskFigures:
        return {}


class Protocol:
    """One protocol. Subclasses set `name` and override what differs."""

    name: ClassVar[str]
    title: ClassVar[str]  # "the authors' protocol": what summaries call it
    # Settings that change the question under this protocol and are part of its requests' identity
    # (`request_hash`) beside IDENTITY_FIELDS' own.
    recorded: ClassVar[tuple[str, ...]] = ()
    # Whether its requests are the release's rows as published (their prompt, their images), so that the
    # authors' scripts may score its answers (`eval export --format official`).
    asks_as_published: ClassVar[bool] = False

    # ------------------------------------------------------------ which runs are its own
    def claims(self, rows: Sequence[Mapping[str, Any]]) -> bool:
        """Whether these rows are asked this way when the run names no protocol."""
        return False

    def check(self, settings: RunSettings) -> None:
        """A UsageError (one line, naming the flag) for a setting this protocol cannot honour."""

    def check_rows(self, task: tasks.Task, rows: Sequence[Mapping[str, Any]], settings: RunSettings) -> None:
        """A UsageError for rows this protocol cannot ask (before any request is sent)."""

    def folder_parts(self, settings: RunSettings) -> list[str]:
        """What names the question in the default run folder's name, after model, task and language."""
        raise NotImplementedError

    def describe(self, settings: RunSettings) -> str:
        """How the items were asked, for the run's first line ("all views, CoT")."""
        raise NotImplementedError

    def sweep_cell(self, cell: RunSettings, *, cot: bool, views: int) -> RunSettings:
        """A sweep's cell for (CoT, view count) under this protocol."""
        raise NotImplementedError

    def indices_sent(self, settings: RunSettings) -> tuple[int, ...] | None:
        """The image indices each request names (positions in a row's images), for what a run's figures
        say they were asked with; None: views are sent by count (`--images`, all when unset)."""
        return None

    # ------------------------------------------------------------ asking
    def generation(self, settings: RunSettings, epoch: int = 0) -> GenerationConfig:
        raise NotImplementedError

    def request(self, task: tasks.Task, row: Row, settings: RunSettings, epoch: int = 0, rotation: int = 0,
                scope: str | None = None) -> Request | Callable[[], Request]:
        """The request itself when building it takes microseconds (views sent as stored), else the call
        that builds it (decode, shrink, re-encode) for a worker thread: what `runner.built_ahead` takes."""
        raise NotImplementedError

    def build(self, task: tasks.Task, row: Row, settings: RunSettings, epoch: int = 0, rotation: int = 0,
              scope: str | None = None) -> Request:
        """The request, built now (in this thread)."""
        job = self.request(task, row, settings, epoch, rotation, scope)
        return job if isinstance(job, Request) else job()

    def prompt_text(self, task: tasks.Task, row: Row, settings: RunSettings) -> str:
        """The text of a row's request (no views, no rotation): what a viewer searches and shows."""
        return task.prompt(row, lang=settings.lang, cot=bool(settings.cot))

    # ------------------------------------------------------------ reading and scoring
    def scores_row(self, task: tasks.Task, row: Mapping[str, Any], lang: str) -> bool:
        """Whether our figures read this row (its reference is readable); every row is asked."""
        return True

    def score(self, job: TaskScoring) -> tuple[list[ScoreRecord], TaskFigures]:
        """The task's scores.jsonl records and its metrics.json entry."""
        raise NotImplementedError

    def tally(self, task: tasks.Task, model: str, lang: str) -> Tally:
        raise NotImplementedError

    def judge_options(self) -> dict[str, Any]:
        """The judge's request settings under this protocol (BackendJudge keywords)."""
        return {}

    def judge_reply(self, record: Mapping[str, Any]) -> str | None:
        """The judge's reply to a scored answer as this protocol kept it on its record; None: the run's
        verdict cache holds it under our judge prompt (ours)."""
        return None

    # ------------------------------------------------------------ what a run reports
    def headline(self, task: tasks.Task, entry: TaskFigures) -> tuple[str, float | None] | None:
        """(name, fraction) of the figure this protocol reports first for a task's metrics.json entry,
        when it is not ours (`task.figure`); None: ours is the headline."""
        return None

    def interval(self, entry: TaskFigures) -> tuple[float, float] | None:
        """The 95% interval of `headline` (a fraction), when the protocol's headline is not ours."""
        return None

    def counted(self, task: tasks.Task, entry: TaskFigures) -> int | None:
        """How many items `headline` reads, as this protocol counted them for a task's metrics.json entry, when
        its headline is not ours; None: ours, which reads the items scored."""
        return None

    def component(self, task: tasks.Task, entry: TaskFigures, part: str, stat: str) -> float | None:
        """A component's figure (`mae`, `rmse`; `mape` as a fraction) under this protocol's reading, when its
        headline is not ours."""
        return None

    def read_rows(self, task: tasks.Task, rows: Sequence[ScoreRecord]) -> list[ScoreRecord]:
        """scores.jsonl records as this protocol's headline reads them (`correct`, or `ape` per component),
        for what resamples or pairs items (`eval compare`, breakdowns): ours reads them as scored."""
        return list(rows)

    def own_figures(self, entry: TaskFigures) -> Mapping[str, Any] | None:
        """The figures this protocol adds to a task's metrics.json entry beside ours; None: ours alone."""
        return None

    def headline_note(self, task: tasks.Task, entry: TaskFigures) -> str:
        """One line saying what the headline is and what ours beside it is."""
        return ""

    def __repr__(self) -> str:
        return f"<protocol {self.name}>"


_REGISTRY: dict[str, Protocol] = {}
DEFAULT = "ours"  # what a run that names no protocol was asked with, before there was a choice


def register(protocol: Protocol) -> Protocol:
    """Add a protocol under its name (a second one of that name replaces the first: tests and plugins)."""
    if not isinstance(getattr(protocol, "name", None), str) or not protocol.name.isidentifier():
        raise ValueError(f"a protocol needs a name made of letters, digits and _ (got {getattr(protocol, 'name', None)!r})")
    _REGISTRY[protocol.name] = protocol
    return protocol


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str | None) -> Protocol:
    """The protocol called `name` (None: ours, what a run recorded before there was a choice)."""
    try:
        return _REGISTRY[name or DEFAULT]
    except (KeyError, TypeError):
        raise UsageError(f"unknown --protocol {name!r}; choose one of {', '.join(sorted(_REGISTRY))}") from None


def of(settings: RunSettings | Mapping[str, Any] | None) -> Protocol:
    """The protocol a run's settings (RunSettings, or run.json's `settings`) name."""
    if isinstance(settings, RunSettings):
        return get(settings.protocol)
    return get(RunSettings.saved_value(dict(settings) if isinstance(settings, Mapping) else None, "protocol"))


def chosen(settings: RunSettings, rows: Sequence[Sequence[Mapping[str, Any]]]) -> Protocol:
    """The protocol a run uses: the one asked, else the first (in registration order after ours) that
    claims every task's rows, else ours."""
    if settings.protocol is not None:
        return get(settings.protocol)
    claiming = (p for p in _REGISTRY.values() if p.name != DEFAULT and rows and all(map(p.claims, rows)))
    return next(claiming, None) or get(DEFAULT)
