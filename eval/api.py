"""The programmatic face of the harness: what the CLI, the Space and sweeps call.

`run(settings)` = generation (resumable) + scoring into one run folder; `score(run_dir)` re-scores
saved predictions; `iter_predictions(settings)` streams (Prediction, row) pairs for live displays.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eval import tasks
from eval.backends import SpecError, make_backend, parse_spec, release
from eval.backends._retry import host_of
from eval.images import ImageError
from eval.progress import Progress
from eval.runinfo import RUN_JSON, build_run_json, read_run_json, write_run_json
from eval.runner import Outcome, RetryPolicy, built_ahead, execute
from eval.store import PREDICTIONS, PredictionStore, read_predictions
from eval.types import TASKS, Backend, ConfigError, Prediction, Request

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
    max_tokens: int = 4096
    seed: int = 0
    judge: str | None = None
    judge_base_url: str | None = None
    out: Path | None = None
    max_image_side: int = 1024
    batch_size: int = 8
    timeout: float = 120.0
    max_attempts: int = 6
    retry_base_delay: float = 1.0  # seconds before the first retry without Retry-After; doubles, jittered
    n_boot: int = 1000  # bootstrap resamples for the 95% intervals in metrics.json
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
        for flag, spec in (("--model", self.model), ("--judge", self.judge)):
            if spec is not None:
                try:
                    parse_spec(spec)
                except SpecError as exc:
                    raise UsageError(f"{flag}: {exc}") from None

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


@dataclass
class _TaskData:
    """One task's dataset: the rows to ask (lazily read, image bytes included) and every row's metadata."""

    task: str
    selected: Any  # datasets.Dataset of the rows to ask, in dataset order
    rows: list[dict[str, Any]]  # metadata (no images) of every row: baselines leave one out of these
    fingerprint: str


def load_task_data(settings: RunSettings) -> list[_TaskData]:
    """Each task's rows, selected by --ids then --limit; unknown ids or sources are a UsageError."""
    try:
        import diningbench
    except ImportError:
        raise UsageError("diningbench.py is not importable: run from the repository root") from None
    wanted = [str(i) for i in settings.ids] if settings.ids else None
    found: set[str] = set()
    data = []
    for task in settings.tasks:
        try:
            dataset = diningbench.load(task, settings.dataset, decode_images=False)
            fingerprint = diningbench.fingerprint(task, settings.dataset)
        except (ValueError, FileNotFoundError, OSError) as exc:
            source = settings.dataset or "the embedded sample"
            raise UsageError(f"cannot load {task} from {source}: {' '.join(str(exc).split())[:300]}") from None
        meta = dataset.remove_columns([c for c in ("images",) if c in dataset.column_names]).to_list()
        try:  # a reference that cannot be scored stops the run before any request is sent
            for row in meta:
                tasks.reference_of(task, row, settings.lang)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        indices = list(range(len(meta)))
        if wanted is not None:
            positions = {str(r["id"]): i for i, r in enumerate(meta)}
            indices = [positions[i] for i in wanted if i in positions]
            found.update(i for i in wanted if i in positions)
        if settings.limit is not None:
            indices = indices[: settings.limit]
        data.append(_TaskData(task, dataset.select(indices), meta, fingerprint))
    if wanted is not None and (missing := [i for i in wanted if i not in found]):
        raise UsageError(f"--ids: no item with id {', '.join(missing[:5])} in {', '.join(settings.tasks)}")
    return data


def max_views(data: list[_TaskData]) -> int:
    """The most views any selected item has: what a local engine must accept per prompt."""
    return max((len(roles or []) for d in data for roles in d.selected["image_roles"]), default=1) or 1


def check_judge(settings: RunSettings) -> None:
    """Build the judge once before generation, so a missing key fails now, not after hours of work."""
    if not settings.judge:
        return
    check_reachable(settings.judge_base_url, "--judge-base-url")
    try:
        make_backend(settings.judge, base_url=settings.judge_base_url, timeout=settings.timeout)
    except (SpecError, ConfigError) as exc:
        raise UsageError(f"--judge: {exc}") from None


def baseline_items(data: list[_TaskData], lang: str) -> dict[str, list[dict[str, Any]]]:
    """What `baseline:` backends may see: each item's id, groups and reference answer."""
    return {d.task: [{"id": str(r["id"]), "group": r.get("category"), "vqa_category": r.get("vqa_category"),
                      "reference": tasks.reference_of(d.task, r, lang)} for r in d.rows] for d in data}


def build_backend(settings: RunSettings, data: list[_TaskData]) -> Backend:
    """The backend for settings.model, with the options every backend may use (unknown ones ignored)."""
    options: dict[str, Any] = {
        "base_url": settings.base_url, "timeout": settings.timeout, "images": settings.images or max_views(data),
        "max_tokens": settings.max_tokens, "seed": settings.seed, "batch_size": settings.batch_size,
        "lang": settings.lang, **settings.engine_options,
    }
    if settings.model.startswith("baseline:"):
        options["dataset_items"] = baseline_items(data, settings.lang)
    try:
        return make_backend(settings.model, **options)
    except (SpecError, ConfigError) as exc:
        raise UsageError(str(exc)) from None
    except ImportError as exc:
        raise UsageError(f"{settings.model}: a package is missing ({exc.name or exc}): "
                         "pip install -r requirements.txt") from None


def prompt_settings(settings: RunSettings) -> tasks.PromptSettings:
    return tasks.PromptSettings(model=settings.model, lang=settings.lang, cot=settings.cot, images=settings.images,
                                image_order=settings.image_order, max_image_side=settings.max_image_side,
                                max_tokens=settings.max_tokens, seed=settings.seed)


def to_prediction(outcome: Outcome, row: dict[str, Any], lang: str) -> Prediction:
    """A runner outcome as a predictions.jsonl line; `parsed` by the task's one parser."""
    request = outcome.request
    if outcome.response is None:
        return Prediction(id=request.id, task=request.task, raw=None, parsed=None, error=outcome.error,
                          attempts=outcome.attempts, latency_s=round(outcome.latency_s, 4), usage=None,
                          request_hash=request.request_hash)
    raw = outcome.response.text
    return Prediction(id=request.id, task=request.task, raw=raw, parsed=tasks.parse_output(request.task, raw, row, lang),
                      error=None, attempts=outcome.attempts, latency_s=round(outcome.latency_s, 4),
                      usage=outcome.response.usage, request_hash=request.request_hash)


def _policy(settings: RunSettings) -> RetryPolicy:
    return RetryPolicy(max_attempts=settings.max_attempts, base_delay=settings.retry_base_delay,
                       request_timeout=settings.timeout * 2 + 5)


async def _requests(data: list[_TaskData], settings: RunSettings,
                    skip: Callable[[Request], bool] | None = None) -> AsyncIterator[Request]:
    """Requests in dataset order, a few rows ahead; any that must re-encode views are built in
    worker threads (`runner.built_ahead`), so a large photo never stalls the requests in flight."""
    prompt = prompt_settings(settings)
    try:
        async for request in built_ahead(tasks.request_job(d.task, row, prompt) for d in data for row in d.selected):
            if skip is None or not skip(request):
                yield request
    except ImageError as exc:  # names the task and the item
        raise UsageError(str(exc)) from None


def _check_folder(out: Path, info: dict[str, Any], overwrite: bool) -> None:
    """Refuse to mix two different runs' predictions in one folder."""
    if overwrite:
        for name in (PREDICTIONS, RUN_JSON, "scores.jsonl", "metrics.json", "report.md"):
            (out / name).unlink(missing_ok=True)
        return
    previous = read_run_json(out)
    if not (out / PREDICTIONS).exists() or (out / PREDICTIONS).stat().st_size == 0 or previous is None:
        return
    old, new = previous.get("identity") or {}, info["identity"]
    changed = [k for k in new if k != "dataset" and old.get(k) != new[k]]
    shared = set(old.get("dataset") or {}) & set(new["dataset"])
    changed += [f"dataset {t}" for t in sorted(shared) if old["dataset"][t] != new["dataset"][t]]
    if changed:
        raise UsageError(f"{out} holds predictions of a different run (differs in {', '.join(changed)}); "
                         "use another --out or add --overwrite")


def check_reachable(url: str | None, flag: str) -> None:
    """Fail fast, in one line, when --base-url points at nothing (instead of N failed samples)."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag} {url!r} is not an http(s) URL, e.g. http://localhost:8000/v1")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=5).close()
    except OSError:
        raise UsageError(f"cannot reach {parts.hostname}:{port} ({flag}): is the server running?") from None


def run(settings: RunSettings, *, on_prediction: Callable[[Prediction], None] | None = None,
        backend: Backend | None = None, progress: bool = True) -> Path:
    """Generate (resuming what is already answered) and score; return the run folder.

    Writes predictions.jsonl, run.json, scores.jsonl, metrics.json and report.md into
    `settings.out` (or `settings.default_out()`). `on_prediction` is called once per newly
    finished sample. `backend` overrides building one from `settings.model` (tests, the Space).
    """
    settings.validate()
    check_reachable(settings.base_url, "--base-url")
    check_judge(settings)
    out = Path(settings.out) if settings.out is not None else settings.default_out()
    data = load_task_data(settings)
    backend = backend or build_backend(settings, data)
    fingerprints = {d.task: d.fingerprint for d in data}
    judge_info = {"spec": settings.judge, "base_url_host": host_of(settings.judge_base_url)} if settings.judge else None
    info = build_run_json(settings=settings.to_json(), tasks=list(settings.tasks), backend=backend.describe(),
                          dataset_source=settings.dataset, fingerprints=fingerprints, judge=judge_info)
    out.mkdir(parents=True, exist_ok=True)
    _check_folder(out, info, settings.overwrite)
    write_run_json(out, info)
    tasks.load_parsers(settings.tasks)
    _call(_generate(settings, data, backend, out, on_prediction, progress))
    store_done = read_predictions(out / PREDICTIONS)
    info["counts"] = {d.task: {"predictions": sum(1 for k in store_done if k[0] == d.task),
                               "failed": sum(1 for k, p in store_done.items() if k[0] == d.task and p.error)}
                      for d in data}
    write_run_json(out, info)
    from eval.scoring import score_run

    score_run(out, judge=settings.judge, judge_base_url=settings.judge_base_url, n_boot=settings.n_boot)
    return out


async def _generate(settings: RunSettings, data: list[_TaskData], backend: Backend, out: Path,
                    on_prediction: Callable[[Prediction], None] | None, show_progress: bool) -> None:
    rows = {(d.task, str(r["id"])): r for d in data for r in d.rows}
    total = sum(len(d.selected) for d in data)
    with PredictionStore(out) as store:
        asked = {(d.task, str(i)) for d in data for i in d.selected["id"]}
        # Failed samples of this selection are asked again; drop their old lines first.
        if any(p.error for k, p in store.done.items() if k in asked):
            store.compact(keep=lambda p: p.error is None or (p.task, p.id) not in asked)
        bar = Progress(total, label=settings.model, enabled=show_progress)

        def skip(request: Request) -> bool:
            if store.is_answered(request.task, request.id, request.request_hash):
                bar.skip()
                return True
            return False

        try:
            async for outcome in execute(backend, _requests(data, settings, skip), concurrency=settings.concurrency,
                                         batch_size=settings.batch_size, policy=_policy(settings),
                                         on_retry=bar.retry):
                prediction = to_prediction(outcome, rows[(outcome.request.task, outcome.request.id)], settings.lang)
                store.append(prediction)
                bar.advance(failed=prediction.error is not None)
                if on_prediction is not None:
                    on_prediction(prediction)
        finally:
            bar.close()
            await release(backend)
        with store.path.open(encoding="utf-8") as lines:
            if len(store.done) != sum(1 for _ in lines):
                store.compact()  # an item re-asked after a prompt/data change: keep its newest line only


def _call(coro: Any) -> Any:
    """Run a coroutine from sync code, also when the caller already runs an event loop (Gradio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def score(run_dir: Path | str, judge: str | None = None, judge_base_url: str | None = None, *,
          n_boot: int = 1000) -> dict[str, Any]:
    """Re-score the saved predictions of a run folder; return (and write) metrics.json's content.

    The judge, when given, replaces the one recorded in run.json; cached verdicts are reused.
    """
    from eval.scoring import score_run

    check_reachable(judge_base_url, "--judge-base-url")
    return score_run(Path(run_dir), judge=judge, judge_base_url=judge_base_url, n_boot=n_boot)


async def iter_predictions(settings: RunSettings, backend: Backend | None = None
                           ) -> AsyncIterator[tuple[Prediction, dict[str, Any]]]:
    """Yield (Prediction, row metadata without images) as each sample finishes; nothing is written.

    For live per-sample displays (the Space). Order is completion order. `prediction.parsed`
    is filled by the task's parser; `eval.scoring.score_prediction(prediction, row)` says
    whether it is correct (classification) or its per-nutrient errors (nutrition).
    """
    settings.validate()
    if backend is None:
        check_reachable(settings.base_url, "--base-url")
    data = load_task_data(settings)
    backend = backend or build_backend(settings, data)
    rows = {(d.task, str(r["id"])): r for d in data for r in d.rows}
    await asyncio.to_thread(tasks.load_parsers, settings.tasks)
    try:
        async for outcome in execute(backend, _requests(data, settings), concurrency=settings.concurrency,
                                     batch_size=settings.batch_size, policy=_policy(settings)):
            row = rows[(outcome.request.task, outcome.request.id)]
            yield to_prediction(outcome, row, settings.lang), row
    finally:
        await release(backend)
