"""What the framework adapters share: DiningBench items exactly as the harness asks them, and their scores.

Everything comes from the run's protocol (`eval.protocols`), decided as `python -m eval run` decides it."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from eval import api, protocols, tasks
from eval import numbers as _numbers  # headline figures
from eval.prompts import PROMPT_VERSION
from eval.settings import LANGS, RunSettings, image_indices
from eval.types import DEFAULT_MAX_TOKENS, GenerationConfig, ImagePart, Prediction
from metrics.judge_accuracy.core import judge_items

ADAPTER_MODEL = "openai:adapter"  # the model field of the settings that build prompts (not part of any prompt)


@dataclass(frozen=True)
class Item:
    """One question as the harness asks it, with what scoring needs."""

    task: str
    id: str
    prompt: str
    views: tuple[ImagePart, ...]
    reference: Any  # None where the protocol scores the row by its own rules alone
    row: dict[str, Any]  # the dataset row without its images (breakdown fields, options, question)
    config: GenerationConfig  # temperature and token budget, as the protocol sends them


def settings_for(task: str, *, lang: str = "zh", views: int | None = None, cot: bool = False,
                 dataset: str | None = None, protocol: str | None = None,
                 indices: str | None = None) -> RunSettings:
    """The harness settings behind an adapter task's parameters, before the protocol is decided (a bad
    one is a one-line ValueError naming it)."""
    if not tasks.is_task(task):
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(tasks.names())}")
    if lang not in LANGS:
        raise ValueError(f"language {lang!r}: choose one of {', '.join(LANGS)}")
    if views is not None and (isinstance(views, bool) or not isinstance(views, int) or views < 1):
        raise ValueError(f"views must be a number of views of at least 1, or None for all (got {views!r})")
    if protocol is not None:
        protocols.get(protocol)  # an unknown name: one line naming the known ones
    if indices is not None:
        indices = ",".join(map(str, image_indices(indices)))  # `0,1,2` or `[0,1,2]`, one spelling
    return RunSettings(task=task, model=ADAPTER_MODEL, lang=lang, images=views, cot=bool(cot),
                       dataset=str(dataset) if dataset else None, protocol=protocol, image_indices=indices)


@dataclass
class Asked:
    """A task's settings with the protocol decided and checked, and the release rows it asks."""

    settings: RunSettings
    data: Any = field(repr=False)  # eval.api's task data: the rows' metadata and their images
    fingerprint: str

    @property
    def protocol(self) -> protocols.Protocol:
        return protocols.of(self.settings)


def asked(settings: RunSettings) -> Asked:
    """`settings` as the harness resolves them on the release (`eval.api.load_task_data`, `resolve_protocol`:
    a UsageError, one line, for a setting the protocol refuses), kept per process for the same settings:
    the lmms-eval functions ask once per document."""
    return _asked(*(getattr(settings, name) for name in _KEY))


_KEY = ("task", "lang", "images", "cot", "dataset", "protocol", "image_indices", "limit")


@functools.lru_cache(maxsize=16)
def _asked(task: str, lang: str, images: int | None, cot: bool, dataset: str | None, protocol: str | None,
           indices: str | None, limit: int | None) -> Asked:
    settings = RunSettings(task=task, model=ADAPTER_MODEL, lang=lang, images=images, cot=cot, dataset=dataset,
                           protocol=protocol, image_indices=indices, limit=limit)
    [data] = api.load_task_data(settings)
    return Asked(api.resolve_protocol(settings, [data]), data, data.fingerprint)


def described(found: Asked) -> dict[str, Any]:
    """What a framework's log records of the question, for `eval import`."""
    s = found.settings
    return {"task": s.task, "lang": s.lang, "images": s.images, "cot": s.cot, "dataset": s.dataset,
            "protocol": s.protocol, "image_indices": s.image_indices, "fingerprint": found.fingerprint,
            "prompt_version": PROMPT_VERSION}


def request_of(found: Asked, row: dict[str, Any]) -> Item:
    """The item as the protocol asks it (`Protocol.build`): exactly what `python -m eval run` sends."""
    settings, protocol, spec = found.settings, found.protocol, found.data.spec
    request = protocol.build(spec, row, settings)
    meta = {k: v for k, v in row.items() if k != "images"}
    message = request.messages[0]
    reference = spec.reference(meta, settings.lang) if protocol.scores_row(spec, meta, settings.lang) else None
    return Item(task=spec.name, id=str(row["id"]), prompt=message.text, views=message.images, reference=reference,
                row=meta, config=request.config)


def items(found: Asked) -> Iterator[Item]:
    """The task's items in dataset order."""
    return (request_of(found, row) for row in found.data.iter_rows())


def generation(found: Asked) -> GenerationConfig:
    """Temperature and token budget as the protocol sends them (ours: 16,384; the authors': 14,336)."""
    return found.protocol.generation(found.settings)


# ---------------------------------------------------------------- scoring
class NoGrader(Exception):
    """A judged task's reply was asked of a judge that has no model behind it."""


class _Judge:
    """The judge a protocol's `Tally.judge` asks: `verdict` (our rule first, then the judge prompt; the
    rule alone without a grader) and `reply` (a prompt sent as it is). What it answered is kept, so the
    framework's summary folds the same answers again without asking twice."""

    def __init__(self, ask: Callable[[str], str] | None, answers: dict[str, list[Any]] | None = None) -> None:
        self.ask = ask
        self.replayed = answers  # answers recorded by an earlier fold: given back in order
        self.kept: dict[str, list[Any]] = {"replies": [], "verdicts": []}
        self.consulted = False  # asked anything, answered or not

    async def reply(self, prompt: str) -> str:
        self.consulted = True
        if self.replayed is not None:
            if not self.replayed["replies"]:
                raise NoGrader
            return str(self.replayed["replies"].pop(0))
        if self.ask is None:
            raise NoGrader
        reply = self.ask(prompt)  # a blocking call: each fold runs its own loop, in its own thread
        self.kept["replies"].append(reply)
        return reply

    async def verdict(self, question: str, reference: Any, raw: str | None) -> tuple[str | None, str]:
        self.consulted = True
        if self.replayed is not None:
            verdict, decided_by = self.replayed["verdicts"].pop(0)
            return verdict, decided_by
        text = tasks.parse_input(raw) if isinstance(raw, str) else raw
        verdict, decided_by, _ = judge_items([question], [reference], [text], self.ask)[0]
        self.kept["verdicts"].append([verdict, decided_by])
        return verdict, decided_by


def _fold(protocol: protocols.Protocol, tally: protocols.Tally, spec: tasks.Task, row: dict[str, Any],
          raw: str | None, lang: str, judge: _Judge, *, ask_judge: bool = True) -> dict[str, Any]:
    """One answer through the protocol's tally: read, scored, and judged where the task is."""
    text = tasks.parse_input(raw) if isinstance(raw, str) else raw
    if spec.judged:
        parsed = spec.read_answer(text or "", row, lang)
    elif isinstance(text, str) and protocol.scores_row(spec, row, lang):
        parsed = spec.read_answer(text, row, lang)
    else:
        parsed = None  # no answer, or a reference ours cannot read: the protocol's own reading alone
    prediction = Prediction(id=str(row["id"]), task=spec.name, raw=raw, parsed=parsed, error=None, attempts=1,
                            latency_s=0.0, usage=None, request_hash="")
    record = tally.add(prediction, row)
    if spec.judged and ask_judge:
        try:
            _run(tally.judge(record, prediction, row, judge))
        except NoGrader:
            pass  # no grader: what our rule decides stays, the rest unscored
    return record


def _run(job: Any) -> Any:
    """A tally's coroutine run to its end from synchronous code (a framework's scorer thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(job)
    with ThreadPoolExecutor(max_workers=1) as pool:  # this thread runs a loop already: another one's
        return pool.submit(asyncio.run, job).result()


@dataclass(frozen=True)
class Scoring:
    """What an answer is scored under: the task, and the run's settings with its protocol decided."""

    task: tasks.Task
    settings: RunSettings


def scoring(task: tasks.Task, lang: str, protocol: str | None) -> Scoring:
    """The settings an answer is scored under: the task, its language and the run's protocol (decided)."""
    return Scoring(task, RunSettings(task=task.name, model=ADAPTER_MODEL, lang=lang, protocol=protocol))


def judge_budget(settings: RunSettings) -> int:
    """The judge's token limit under the run's protocol (the authors' judge step: theirs)."""
    return int(judge_options(settings).get("max_tokens", DEFAULT_MAX_TOKENS))


def judge_options(settings: RunSettings) -> dict[str, Any]:
    """The judge's request settings under the run's protocol (BackendJudge keywords)."""
    return dict(protocols.of(settings).judge_options())


def score_answer(found: Scoring, row: dict[str, Any], raw: str | None, *, model: str | None = None,
                 judge: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The scores.jsonl record of one answer as the run's protocol scores it (ours: correct, ape or the
    VQA verdict, the rule first and then `judge(prompt) -> str` when given, unscored without one; the
    authors': their reading beside ours, their judge prompt sent to `judge`), with `asked`: what the
    framework's summary folds again (`summary`). `model`: the model's name as the framework gives it
    (their scripts strip a listed thinking model's reasoning by its name; lmms-eval tells a task none)."""
    settings = found.settings
    protocol = protocols.of(settings)
    name = model or ADAPTER_MODEL
    live = _Judge(judge)
    record = _fold(protocol, protocol.tally(found.task, name, settings.lang), found.task, row, raw,
                   settings.lang, live)
    record["asked"] = {"protocol": settings.protocol, "lang": settings.lang, "model": name, "row": row, "raw": raw,
                       "graded": judge is not None, "consulted": live.consulted, "judge": live.kept}
    return record


def item_value(found: Scoring, record: dict[str, Any]) -> float:
    """One answer's score as the protocol's headline reads it: 1/0 for right/wrong (unscored: 0), or the
    mean of its percentage errors (a fraction)."""
    spec = found.task
    read = protocols.of(found.settings).read_rows(spec, [record])
    if not read:
        return 0.0  # not counted by the protocol (a row without a reference)
    if spec.measure == "ape":
        apes = [v for v in (read[0].get("ape") or {}).values() if v is not None]
        return sum(apes) / len(apes) if apes else 0.0
    return 1.0 if read[0].get("correct") else 0.0


def summary(spec: tasks.Task, records: Sequence[dict[str, Any]]) -> float | None:
    """The figure the run's protocol reports first, as metrics.json has it (ours: accuracy, Average MAPE
    as a fraction; the authors': their script's figure, Average MAPE as a fraction too), folded again
    from each record's `asked` with the judge's answers given back, never asked twice."""
    found = [r["asked"] for r in records if isinstance(r.get("asked"), dict)]
    if not found:
        return _numbers.headline(spec, list(records))
    first = found[0]
    protocol = protocols.get(first["protocol"])
    tally = protocol.tally(spec, first["model"], first["lang"])
    for one in found:
        answers = {name: list(values) for name, values in (one.get("judge") or {}).items()}
        _fold(protocol, tally, spec, one["row"], one["raw"], one["lang"], _Judge(None, answers),
              ask_judge=bool(one.get("graded") or one.get("consulted")))
    figure = protocol.headline(spec, tally.figures())
    return _numbers.headline(spec, tally.records) if figure is None else figure[1]


def metric_value(spec: tasks.Task, records: Sequence[dict[str, Any]]) -> float:
    """`summary` as a framework's metric holds it: NaN where the protocol reports no figure."""
    value = summary(spec, records)
    return float("nan") if value is None else float(value)


def json_text(value: Any) -> str:
    """A reference or parsed answer as one line of JSON (what a framework's string fields hold)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def target_text(reference: Any) -> str:
    """The reference as a framework's target: a letter or an answer as it is, anything else as one line
    of JSON ("" for a row only the protocol's own rules score)."""
    return reference if isinstance(reference, str) else "" if reference is None else json_text(reference)
