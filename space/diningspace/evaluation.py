"""A visitor's evaluation: a few items through the harness, streamed as each one finishes.

The Space adds nothing to the harness's pipeline (`eval.api.iter_predictions`) and writes nothing to disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eval.redact import redact

from .guard import REDACTED, GuardError, allowed_base_url, check_model_name
from .limits import RequestSlots, SlotBackend
from .settings import KEY_PROVIDERS, SpaceSettings
from .warmup import warm_harness

if TYPE_CHECKING:
    from eval.protocols import Protocol, Tally
    from eval.settings import RunSettings
    from eval.tasks import Task

OWN_KEY = "Use my own API key"
OPERATOR_SECRETS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "HF_TOKEN")
REQUEST_TIMEOUT = 60.0  # seconds per attempt: a visitor waits for the table, not for a batch job
MAX_ATTEMPTS = 3
REDIRECTED = "the server redirected; not followed"
# A 3xx status in a backend's error: the client refuses to follow redirects (an allow-listed host
# could otherwise send a visitor's key and request anywhere), and the visitor should know why.
_REDIRECT = re.compile(r"\bHTTP 3\d\d\b|redirect", re.IGNORECASE)


@dataclass(frozen=True)
class EvalRequest:
    """What the visitor asked for. `api_key` is only ever held here, for the length of one call."""

    task: str
    model: str  # an offered spec, or OWN_KEY
    n_items: int
    provider: str = KEY_PROVIDERS[0]  # with OWN_KEY
    own_model: str = ""  # with OWN_KEY
    api_key: str = field(default="", repr=False)
    base_url: str = ""
    lang: str = "zh"


@dataclass
class SampleResult:
    """One finished sample as the live table shows it (model text already scrubbed and bounded)."""

    id: str
    raw: str | None
    parsed: Any
    reference: Any
    correct: bool | None
    error: str | None
    ape: float | None = None  # nutrition: mean absolute percentage error of the item (a fraction)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "raw": self.raw, "parsed": self.parsed, "reference": self.reference,
                "correct": self.correct, "error": self.error, "ape": self.ape}


@dataclass
class EvalUpdate:
    """A progress step: results so far; `metrics` is set once, at the end. `task`: the request's task."""

    spec: str
    task: Task
    total: int
    results: list[SampleResult]
    metrics: dict[str, Any] | None = None


def resolve(request: EvalRequest, settings: SpaceSettings) -> tuple[str, dict[str, Any]]:
    """(spec, backend options) for the request, or GuardError saying what is not allowed. A visitor's key
    always travels with an explicit base URL: the provider's public endpoint or an allow-listed one, never the
    operator's OPENAI_BASE_URL a backend would fall back to."""
    if request.task not in settings.tasks():
        raise GuardError(f"task: choose one of {', '.join(settings.tasks())}")
    if not 1 <= int(request.n_items) <= settings.max_items:
        raise GuardError(f"items: choose between 1 and {settings.max_items}")
    if request.lang not in ("zh", "en"):
        raise GuardError("prompt language: choose zh or en")
    if request.model != OWN_KEY:
        if request.model not in settings.model_choices(request.task):
            raise GuardError(f"model: {request.model!r} is not offered here")
        if request.base_url.strip():
            raise GuardError("base URL: only used with your own API key")
        return request.model, {}
    if request.provider not in KEY_PROVIDERS:
        raise GuardError(f"provider: choose one of {', '.join(KEY_PROVIDERS)}")
    if not request.api_key.strip():
        raise GuardError("API key: paste your key, or pick one of the offered models")
    if not supports_own_keys(request.provider):
        raise GuardError(f"{request.provider}: this installation cannot use a visitor's own key")
    spec = f"{request.provider}:{check_model_name(request.own_model)}"
    from eval.backends import traits

    base_url = allowed_base_url(request.base_url, settings.allowed_hosts) or traits(request.provider).public_endpoint
    return spec, {"api_key": request.api_key.strip(), "base_url": base_url}


def supports_own_keys(provider: str) -> bool:
    """Whether the harness's backend for `provider` takes a key (its declared traits)."""
    from eval.backends import traits

    return traits(provider).takes_key


def make_backend_for(spec: str, options: dict[str, Any], slots: RequestSlots) -> Any:
    """The backend of an API model, each request behind a Space-wide slot; None for the others
    (baselines need the dataset's references and send no requests: the harness builds them). A visitor's key
    goes into a backend of its own, for one evaluation, never into an environment variable."""
    from eval.backends import BackendOptions, make_backend, parse_spec

    provider, _ = parse_spec(spec)
    if provider not in KEY_PROVIDERS:
        return None
    return SlotBackend(make_backend(spec, BackendOptions(timeout=REQUEST_TIMEOUT, **options)), slots)


def visitor_error(error: str) -> str:
    """A sample's error as the visitor reads it (keys already scrubbed)."""
    return f"{REDIRECTED} ({error})" if _REDIRECT.search(error) else error


def bounded(text: str | None, limit: int) -> str | None:
    """At most `limit` characters of a model's answer are kept and shown."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit:,} more characters not shown]"


def _mean_ape(record: dict[str, Any]) -> float | None:
    apes = [v for v in (record.get("ape") or {}).values() if v is not None]
    return sum(apes) / len(apes) if apes else None


class _VqaJudge:
    """Verdicts for VQA answers as they arrive, through the Space's request slots: the metric's rules
    first, then the operator's judge (`verdict`), or a protocol's own judge prompt (`reply`), with the
    judge settings the run's protocol asks for (`options`)."""

    def __init__(self, spec: str, slots: RequestSlots, **options: Any) -> None:
        from eval.judge import make_judge

        self.spec, self.slots = spec, slots
        self.judge = make_judge(spec, timeout=REQUEST_TIMEOUT, **{"max_attempts": MAX_ATTEMPTS, **options})

    async def reply(self, prompt: str) -> str | None:
        """The judge's reply to one of the authors' judge prompts; None when every attempt failed."""
        from eval.judge import JudgeError

        async with self.slots.slot():
            try:
                return (await asyncio.to_thread(self.judge, prompt)).strip()
            except JudgeError:
                return None

    async def verdict(self, question: str, reference: str, raw: str | None) -> tuple[str | None, str]:
        from metrics.judge_accuracy.core import judge_items

        async with self.slots.slot():  # a judge call is a model request like any other
            [(verdict, decided_by, _)] = await asyncio.to_thread(judge_items, [question], [reference], [raw],
                                                                 self.judge, None, None)
        return verdict, decided_by

    async def close(self) -> None:
        await asyncio.to_thread(self.judge.close)


class EvalStream:
    """The updates of one evaluation: `async for` on a running loop (the Space does this), or a
    plain `for` in scripts and tests, which runs it on an event loop of its own."""

    def __init__(self, updates: AsyncIterator[EvalUpdate]) -> None:
        self._updates = updates

    def __aiter__(self) -> EvalStream:
        return self

    async def __anext__(self) -> EvalUpdate:
        return await anext(self._updates)

    async def aclose(self) -> None:
        await self._updates.aclose()  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[EvalUpdate]:
        loop = asyncio.new_event_loop()
        try:
            while True:
                try:
                    yield loop.run_until_complete(anext(self._updates))
                except StopAsyncIteration:
                    return
        finally:
            loop.run_until_complete(self.aclose())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


_DEFAULT_SLOTS: dict[int, RequestSlots] = {}


def stream_evaluation(request: EvalRequest, settings: SpaceSettings, slots: RequestSlots | None = None,
                      available: int | None = None) -> EvalStream:
    """Run the harness on the first `n_items` items; yield after every finished sample, then metrics. `slots`
    bounds the requests in flight across evaluations (default: one per `max_requests` value, shared by the
    process); `available` is the number of items the task has (a smaller dataset caps the total). Closing or
    cancelling the iteration cancels the requests in flight and sends no more. Raises GuardError for a refused
    request; any other failure is re-raised as RuntimeError with every key scrubbed out."""
    if slots is None:
        slots = _DEFAULT_SLOTS.setdefault(settings.max_requests, RequestSlots(settings.max_requests))
    return EvalStream(_updates(request, settings, slots, available))


class _Judging:
    """An evaluation's judge for a judged task (None otherwise): the operator's, with the judge settings of
    the protocol the harness chose once the first answer says which (`start`)."""

    def __init__(self, spec: str | None, slots: RequestSlots) -> None:
        self.spec, self.slots = spec, slots
        self.judge = _VqaJudge(spec, slots) if spec else None

    async def start(self, protocol: Protocol, task: Task, model: str, lang: str) -> Tally:
        """The protocol's tally, its own judge settings taken (the authors': their attempts and limit)."""
        if self.judge is not None and protocol.judge_options():
            await self.judge.close()
            self.judge = _VqaJudge(self.spec or "", self.slots, **protocol.judge_options())
        return protocol.tally(task, model, lang)

    async def close(self) -> None:
        if self.judge is not None:
            await self.judge.close()


def _run_settings(request: EvalRequest, spec: str, settings: SpaceSettings) -> RunSettings:
    from eval.settings import RunSettings

    found = RunSettings(task=request.task, model=spec, dataset=settings.dataset, limit=int(request.n_items),
                        lang=request.lang, concurrency="auto", max_concurrency=settings.request_concurrency,
                        max_attempts=MAX_ATTEMPTS, timeout=REQUEST_TIMEOUT)
    found.validate()
    return found


async def _updates(request: EvalRequest, settings: SpaceSettings, slots: RequestSlots,
                   available: int | None) -> AsyncIterator[EvalUpdate]:
    spec, options = resolve(request, settings)
    # The operator's keys are scrubbed too: a model server may echo whatever key it was sent.
    secrets = [options.get("api_key"), *(os.environ.get(name) for name in OPERATOR_SECRETS)]
    judging: _Judging | None = None
    try:
        await asyncio.to_thread(warm_harness)  # waits for the start-up imports if they still run
        from eval import protocols
        from eval.api import iter_predictions

        run_settings = _run_settings(request, spec, settings)
        backend = await asyncio.to_thread(make_backend_for, spec, options, slots)  # SDK imports off the loop
        (task,) = run_settings.selected_tasks  # the one task the Evaluate tab sent (checked in `resolve`)
        judging = _Judging(settings.judge if task.judged else None, slots)
        total = min(int(request.n_items), available) if available else int(request.n_items)
        yield EvalUpdate(spec=spec, task=task, total=total, results=[])
        results: list[SampleResult] = []
        tally: Tally | None = None  # the scoring of the protocol the harness chose, one answer at a time
        # Leaving this loop early (Stop, a cancelled API job, a closed page) stops the backend, then closes
        # the harness's generator at once rather than whenever it is collected.
        async with aclosing(iter_predictions(run_settings, backend=backend)) as predictions:
            try:
                async for prediction, row in predictions:
                    tally = tally or await judging.start(protocols.chosen(run_settings, [[row]]), task, spec,
                                                         request.lang)
                    record = tally.add(prediction, row)
                    if judging.judge is not None:
                        await tally.judge(record, prediction, row, judging.judge)
                    results.append(_sample_result(record, prediction, secrets, settings.max_answer_chars))
                    yield EvalUpdate(spec=spec, task=task, total=total, results=list(results))
            finally:
                if isinstance(backend, SlotBackend):
                    backend.stop()  # first: no retry of a cancelled request may go out meanwhile
        metrics = await asyncio.to_thread(_figures, tally or protocols.get(None).tally(task, spec, request.lang),
                                          request, task)
        yield EvalUpdate(spec=spec, task=task, total=total, results=results,
                         metrics=json.loads(redact(json.dumps(metrics, default=str), secrets, mark=REDACTED)))
    except GuardError:
        raise
    except Exception as exc:  # noqa: BLE001 - one scrubbed line, whatever failed
        message = redact(str(exc) or exc.__class__.__name__, secrets, mark=REDACTED).strip()
        raise RuntimeError(message.splitlines()[0] if message else "evaluation failed") from None
    finally:
        if judging is not None:
            await judging.close()


def _figures(tally: Tally, request: EvalRequest, task: Task) -> dict[str, Any]:
    """Ours from the records the tally scored (the metric module's result for the task, with outcome counts
    and the merchant-clustered 95% interval added by the harness's one function), then what the protocol
    adds (the authors' figures). Each record was scored as its answer came (`score_prediction`): nothing
    is parsed again."""
    from eval.numbers import score_nutrition_rows, task_figures

    records = tally.records
    if task.judged:
        from metrics.judge_accuracy.core import score_verdicts

        result = score_verdicts([r["verdict"] for r in records], tally.decided)
    elif task.measure == "ape":
        result = score_nutrition_rows(records)
    else:
        result = task.score([dict(r) for r in records], [r["parsed"] for r in records], tally.rows, request.lang)
    metrics = task_figures(task, records, result)
    metrics.update(tally.figures())
    return metrics


def _sample_result(record: dict[str, Any], prediction: Any, secrets: list[str | None], limit: int) -> SampleResult:
    parsed = record.get("parsed")
    if isinstance(parsed, str):
        parsed = bounded(redact(parsed, secrets, mark=REDACTED), limit)
    raw = bounded(redact(prediction.raw, secrets, mark=REDACTED), limit) if prediction.raw is not None else None
    error = visitor_error(bounded(redact(prediction.error, secrets, mark=REDACTED), limit) or "") if prediction.error else None
    return SampleResult(id=str(record["id"]), raw=raw, parsed=parsed, reference=record.get("reference"),
                        correct=None if error else record.get("correct"), error=error, ape=_mean_ape(record))
