"""A visitor's evaluation: a few items through the harness (eval.api.run), streamed as they finish.

The Space adds nothing to the pipeline: prompts, parsing, retries and metrics are the harness's and
the metrics modules'. It only picks the backend (operator's or the visitor's own key), runs in a
throw-away folder, and turns each finished sample into a row for the live table.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .guard import GuardError, check_base_url, check_model_name, scrub
from .settings import KEY_PROVIDERS, SpaceSettings
from .warmup import warm_harness

OWN_KEY = "Use my own API key"
OPERATOR_SECRETS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "HF_TOKEN")


@dataclass(frozen=True)
class EvalRequest:
    """What the visitor asked for. `api_key` is only ever held here, for the length of one call."""

    task: str
    model: str  # an offered spec, or OWN_KEY
    n_items: int
    provider: str = "openai"  # with OWN_KEY
    own_model: str = ""  # with OWN_KEY
    api_key: str = field(default="", repr=False)
    base_url: str = ""
    lang: str = "zh"


@dataclass
class SampleResult:
    """One finished sample as the live table shows it (model text already scrubbed)."""

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
    """A progress step: results so far; `metrics` is set once, at the end."""

    spec: str
    total: int
    results: list[SampleResult]
    metrics: dict[str, Any] | None = None


def resolve(request: EvalRequest, settings: SpaceSettings) -> tuple[str, dict[str, Any]]:
    """(spec, backend options) for the request, or GuardError saying what is not allowed."""
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
    options: dict[str, Any] = {"api_key": request.api_key.strip()}
    base_url = check_base_url(request.base_url, settings.allowed_hosts)
    if base_url:
        options["base_url"] = base_url
    return spec, options


def _is_correct(task: str, parsed: Any, reference: Any) -> bool | None:
    """Classification: the parsed letter is the reference. Other tasks are judged in metrics."""
    if task == "classification":
        return parsed is not None and parsed == reference
    return None


def stream_evaluation(request: EvalRequest, settings: SpaceSettings, reference_of: Callable[[str], Any],
                      available: int | None = None) -> Iterator[EvalUpdate]:
    """Run the harness on the first `n_items` items; yield after every finished sample, then metrics.

    `reference_of(item_id)` gives the reference shown next to the answer; `available` is the
    number of items the task has (a smaller dataset caps the total). Raises GuardError for a
    refused request; any other failure is re-raised as RuntimeError with the key scrubbed out.
    """
    spec, options = resolve(request, settings)
    warm_harness()  # waits for the start-up imports if they are still running
    from eval.api import RunSettings, run

    # The operator's keys are scrubbed too: a model server may echo whatever key it was sent.
    secrets = [options.get("api_key"), *(os.environ.get(name) for name in OPERATOR_SECRETS)]
    base_url = options.pop("base_url", None)
    workdir = Path(tempfile.mkdtemp(prefix="diningbench-space-"))
    run_settings = RunSettings(
        task=request.task, model=spec, base_url=base_url, dataset=settings.dataset,
        limit=int(request.n_items), lang=request.lang, concurrency=settings.request_concurrency,
        judge=settings.judge if request.task == "vqa" else None, out=workdir / "run",
        max_attempts=3, timeout=60.0)
    finished: queue.Queue[Any] = queue.Queue()
    done = object()

    def work() -> None:
        try:
            # Offered models and baselines are built by the harness itself (baselines need the
            # dataset's references); a visitor's key goes straight into a backend of its own.
            backend = _keyed_backend(spec, options, base_url) if options else None
            finished.put(("out", run(run_settings, on_prediction=finished.put, backend=backend, progress=False)))
        except BaseException as exc:  # handed to the caller's thread, scrubbed there
            finished.put(("error", exc))
        finally:
            finished.put(done)

    thread = threading.Thread(target=work, name="space-eval", daemon=True)
    results: list[SampleResult] = []
    total = min(int(request.n_items), available) if available else int(request.n_items)
    out_dir: Path | None = None
    failure: BaseException | None = None
    try:
        run_settings.validate()
        thread.start()
        yield EvalUpdate(spec=spec, total=total, results=[])
        while (item := finished.get()) is not done:
            if isinstance(item, tuple) and item[0] == "out":
                out_dir = Path(item[1])
            elif isinstance(item, tuple) and item[0] == "error":
                failure = item[1]
            else:
                reference = reference_of(item.id)
                results.append(SampleResult(
                    id=item.id, raw=scrub(item.raw, secrets) if item.raw is not None else None,
                    parsed=_scrub_value(item.parsed, secrets), reference=reference,
                    correct=None if item.error else _is_correct(request.task, item.parsed, reference),
                    error=scrub(item.error, secrets) if item.error else None))
                yield EvalUpdate(spec=spec, total=total, results=list(results))
        if failure is not None:
            message = scrub(str(failure) or failure.__class__.__name__, secrets)
            raise RuntimeError(message.splitlines()[0] if message else "evaluation failed") from None
        metrics = _read_metrics(out_dir, request.task)
        _apply_item_scores(out_dir, results)
        yield EvalUpdate(spec=spec, total=total, results=results,
                         metrics=json.loads(scrub(json.dumps(metrics), secrets)))
    finally:
        thread.join(timeout=1.0)
        shutil.rmtree(workdir, ignore_errors=True)


def supports_own_keys(provider: str) -> bool:
    """Whether the harness's backend for `provider` takes a key as an argument (not only from env)."""
    from eval.backends import _REGISTRY

    module = importlib.import_module(_REGISTRY[provider])
    return "api_key" in inspect.signature(module.make).parameters


def _keyed_backend(spec: str, options: dict[str, Any], base_url: str | None) -> Any:
    """The backend for a visitor's own key. Never via environment variables: they are process-wide."""
    from eval.backends import make_backend, parse_spec

    provider, _ = parse_spec(spec)
    if not supports_own_keys(provider):
        raise GuardError(f"{provider}: this installation cannot use a visitor's own key")
    extra = {"base_url": base_url} if base_url else {}
    return make_backend(spec, timeout=60.0, **options, **extra)


def _scrub_value(value: Any, secrets: list[str | None]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    return value


def _read_metrics(out_dir: Path | None, task: str) -> dict[str, Any]:
    if out_dir is None or not (out_dir / "metrics.json").is_file():
        raise RuntimeError("the run finished without metrics")
    metrics = json.loads((out_dir / "metrics.json").read_text(encoding="utf-8"))
    return metrics.get(task, metrics)


def _apply_item_scores(out_dir: Path | None, results: list[SampleResult]) -> None:
    """Take per-item figures from the scorer (scores.jsonl): the judge's verdicts, nutrition APEs."""
    path = out_dir / "scores.jsonl" if out_dir else None
    if path is None or not path.is_file():
        return
    by_id = {r.id: r for r in results}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        result = by_id.get(row.get("id"))
        if result is None:
            continue
        if row.get("correct") is not None:
            result.correct = bool(row["correct"])
        apes = [v for v in (row.get("ape") or {}).values() if v is not None]
        if apes:
            result.ape = sum(apes) / len(apes)
