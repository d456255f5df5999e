"""The programmatic face of the harness: what the CLI, the Space and sweeps call."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval import protocols, requests, scoring, tasks
from eval.backends import SpecError, make_backend, release
from eval.circular import ROTATIONS
from eval.endpoints import check_reachable, host_of
from eval.images import ImageError
from eval.judge import BackendJudge, JudgeError
from eval.limiter import Limits
from eval.progress import Progress
from eval.report.report import build_report, write_run_report
from eval.report.runs import load_run
from eval.runinfo import RUN_JSON, build_run_json, read_run_json, write_run_json
from eval.runner import Outcome, RetryPolicy, built_ahead, execute
from eval.settings import N_BOOT, RunSettings, UsageError
from eval.store import LOCK, PREDICTIONS, Key, PredictionStore, key_of, locked
from eval.types import (
    Backend,
    BackendOptions,
    ConfigError,
    Metrics,
    Prediction,
    Request,
    Row,
    RunInfo,
    RunJudge,
)

__all__ = ["RunSettings", "UsageError", "iter_predictions", "run", "run_sweep", "score"]
RUN_FILES = (PREDICTIONS, RUN_JSON, scoring.SCORES, scoring.METRICS, ROTATIONS, "report.md")
# An answer longer than this is parsed in a worker thread (a model that loops to its limit writes
# megabytes), so one huge answer never stalls the requests in flight.
PARSE_INLINE_CHARS = 20_000


@dataclass
class _TaskData:
    """One task's dataset, read once: every row's metadata (read up front) and the image bytes of the
    rows to ask (read as they are asked, `iter_rows`)."""

    spec: tasks.Task
    release: Any  # diningbench.read_release: a release folder through pyarrow, a Hub id through datasets
    rows: list[Row]  # metadata (no images) of every row: references, baselines, scoring
    indices: list[int]  # positions of the rows to ask, in the order asked (dataset order, or as --ids names them)
    fingerprint: str

    @property
    def task(self) -> str:
        return self.spec.name

    @property
    def selected(self) -> list[Row]:
        """The metadata of the rows to ask."""
        return [self.rows[i] for i in self.indices]

    def iter_rows(self) -> Iterator[Row]:
        """Each row to ask, whole: its metadata joined to its image bytes, the image column read once."""
        yield from self.release.iter_rows(self.indices)


def load_task_data(settings: RunSettings) -> list[_TaskData]:
    """Each task's rows, selected by --ids then --limit; unknown ids or sources are a UsageError."""
    try:
        import diningbench
    except ImportError:
        raise UsageError("diningbench.py is not importable: run from the repository root") from None
    wanted = [str(i) for i in settings.ids] if settings.ids else None
    found: set[str] = set()
    data = []
    for spec in settings.selected_tasks:
        try:
            config = spec.source_config
            release = diningbench.read_release(config, settings.dataset, lang=settings.lang)
            fingerprint = diningbench.fingerprint(config, settings.dataset, lang=settings.lang)
        except (ValueError, FileNotFoundError, OSError) as exc:
            source = settings.dataset or "the embedded sample"
            why = " ".join(str(exc).split())[:500]
            if not why.startswith(f"cannot load {config!r} from "):  # the loader's own line names both already
                why = f"cannot load {spec.name} from {source}: {why}"
            raise UsageError(why) from None
        meta = release.rows
        indices = list(range(len(meta)))
        if wanted is not None:
            positions = {str(r["id"]): i for i, r in enumerate(meta)}
            indices = [positions[i] for i in wanted if i in positions]
            found.update(i for i in wanted if i in positions)
        indices = indices[: settings.limit]  # None: all of them
        data.append(_TaskData(spec, release, meta, indices, fingerprint))
    if wanted is not None and (missing := [i for i in wanted if i not in found]):
        raise UsageError(f"--ids: no item with id {', '.join(missing[:5])} in {', '.join(settings.tasks)}")
    return data


def resolve_protocol(settings: RunSettings, data: list[_TaskData]) -> RunSettings:
    """The settings with `protocol` decided (`protocols.chosen`: the one asked, else the one that claims
    the rows) and checked, on the settings and on the rows, before any request is sent."""
    protocol = protocols.chosen(settings, [d.rows for d in data])
    read = {lang for d in data if (lang := getattr(d.release, "lang", None))}
    lang = read.pop() if len(read) == 1 else settings.lang  # one file of theirs is in its own language
    resolved = dataclasses.replace(settings, protocol=protocol.name, lang=lang)
    resolved.validate()
    protocol.check(resolved)
    for d in data:
        protocol.check_rows(d.spec, d.rows, resolved)
    return resolved


def default_out(settings: RunSettings) -> Path:
    """The run folder a run without --out writes, named by its protocol's question too."""
    return settings.default_out(protocols.of(settings).folder_parts(settings))


def max_views(data: list[_TaskData]) -> int:
    """The most views any selected item has: what a local engine must accept per prompt."""
    return max((len(r.get("image_roles") or []) for d in data for r in d.selected), default=1) or 1


def check_judge(settings: RunSettings) -> None:
    """Build the judge once before generation, so a missing key fails now, not after hours of work."""
    if not settings.judge:
        return
    check_reachable(settings.judge_base_url, "--judge-base-url")
    judge = BackendJudge.from_settings(settings.judge, settings.judge_base_url, settings)
    try:
        judge.check()
    except JudgeError as exc:
        raise UsageError(str(exc)) from None
    finally:
        judge.close()


def baseline_items(data: list[_TaskData], lang: str) -> dict[str, list[Row]]:
    """What `baseline:` backends may see: each item's id, groups and reference answer."""
    return {d.task: [{"id": str(r["id"]), "group": r.get("category"),
                      **{name: r.get(name) for name in d.spec.item_fields},
                      "reference": d.spec.reference(r, lang)} for r in d.rows
                     if scoring.usable_reference(d.spec, r, lang)] for d in data}  # a published row may lack one


def build_backend(settings: RunSettings, data: list[_TaskData]) -> Backend:
    """The backend for settings.model, built from one options type; what it generates is the protocol's
    config (`generation`), the same its requests carry."""
    options = BackendOptions(
        base_url=settings.base_url, timeout=settings.timeout, generation=protocols.of(settings).generation(settings),
        images_per_prompt=settings.images or max_views(data), batch_size=settings.batch_size,
        engine=settings.engine_options, lang=settings.lang,
        dataset_items=baseline_items(data, settings.lang) if settings.model.startswith("baseline:") else None)
    try:
        return make_backend(settings.model, options)
    except (SpecError, ConfigError) as exc:
        raise UsageError(str(exc)) from None
    except ImportError as exc:
        raise UsageError(f"{settings.model}: a package is missing ({exc.name or exc}): "
                         "pip install -r requirements.txt") from None


def to_prediction(outcome: Outcome, parsed: Any = None) -> Prediction:
    """A runner outcome as a predictions.jsonl line (`parsed` by the task's one parser)."""
    request, response = outcome.request, outcome.response
    common = {"id": request.id, "task": request.task, "attempts": outcome.attempts,
              "latency_s": round(outcome.latency_s, 4), "request_hash": request.request_hash,
              "n_images": request.metadata.get("n_images"), "epoch": request.metadata.get("epoch", 0),
              "rotation": request.metadata.get("rotation", 0)}
    if response is None:
        return Prediction(raw=None, parsed=None, error=outcome.error, usage=None, **common)
    return Prediction(raw=response.text, parsed=parsed, error=None, usage=response.usage,
                      finish_reason=response.finish_reason, truncated=response.truncated, **common)


async def parse(task: tasks.Task, outcome: Outcome, row: Row, lang: str) -> Any:
    """The task's parsed answer; a long answer is parsed in a worker thread, off the event loop. A rotated
    request (`--circular`) is read against the options in the order it showed them."""
    if outcome.response is None:
        return None
    if rotation := outcome.request.metadata.get("rotation", 0):
        row = task.rotate(row, rotation)
    text = outcome.response.text
    if len(text) <= PARSE_INLINE_CHARS:
        return task.read_answer(text, row, lang)
    return await asyncio.to_thread(task.read_answer, text, row, lang)


def _policy(settings: RunSettings) -> RetryPolicy:
    """`--timeout` is the wall-clock limit of one attempt, whatever the server trickles."""
    return RetryPolicy(max_attempts=settings.max_attempts, base_delay=settings.retry_base_delay,
                       request_timeout=settings.timeout)


async def _requests(data: list[_TaskData], settings: RunSettings,
                    skip: Callable[[Request], bool] | None = None) -> AsyncIterator[Request]:
    """Requests in dataset order (epoch by epoch, each item's option rotations together under `--circular`),
    a few rows ahead (`runner.built_ahead`)."""
    jobs = (requests.request_job(d.spec, row, settings, epoch, rotation, d.fingerprint)
            for epoch in range(settings.epochs) for d in data for row in d.iter_rows()
            for rotation in requests.rotations(d.spec, row, settings))
    try:
        async for request in built_ahead(jobs):
            if skip is None or not skip(request):
                yield request
    except ImageError as exc:  # names the task and the item
        raise UsageError(str(exc)) from None


def check_out(out: Path) -> None:
    """Refuse, before anything is written, an --out that is not ours: a file, the root or home
    folder, or a folder holding someone's files but no run."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    resolved = out.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise UsageError(f"--out {out} is the filesystem root or the home folder; name a run folder inside it")
    if out.is_dir() and read_run_json(out) is None:
        if foreign := sorted(p.name for p in out.iterdir() if p.name != LOCK):
            raise UsageError(f"--out {out} holds files but no run ({', '.join(foreign[:3])}"
                             f"{', ...' if len(foreign) > 3 else ''}); choose a new or empty folder")


def _check_folder(out: Path, info: RunInfo, overwrite: bool) -> None:
    """Refuse to mix two different runs' predictions in one folder (called holding its lock)."""
    if overwrite:
        for name in RUN_FILES:
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


def run(settings: RunSettings, *, on_prediction: Callable[[Prediction], None] | None = None,
        backend: Backend | None = None, progress: bool = True) -> Path:
    """Generate (resuming what is already answered), score and report; return the run folder. Writes
    predictions.jsonl, run.json, scores.jsonl, metrics.json and report.md into `settings.out` (or
    `default_out(settings)`). `on_prediction` is called once per newly finished sample. `backend` overrides
    building one from `settings.model` (tests)."""
    settings.validate()
    check_reachable(settings.base_url, "--base-url")
    check_judge(settings)
    if settings.out is not None:
        check_out(Path(settings.out))
    data = load_task_data(settings)
    settings = resolve_protocol(settings, data)
    out = Path(settings.out) if settings.out is not None else default_out(settings)
    check_out(out)
    backend = backend or build_backend(settings, data)
    _call(check_backend(backend))
    fingerprints = {d.task: d.fingerprint for d in data}
    judge_info: RunJudge | None = {"spec": settings.judge, "base_url_host": host_of(settings.judge_base_url)} \
        if settings.judge else None
    info = build_run_json(settings=settings.to_json(), tasks=list(settings.tasks), backend=backend.describe(),
                          dataset_source=settings.dataset, fingerprints=fingerprints, judge=judge_info)
    if revisions := {d.task: d.release.revision for d in data if getattr(d.release, "revision", None)}:
        info["dataset_revision"] = revisions  # the Hub commit of the authors' release each task was read from
    limits = Limits.of(settings)
    with locked(out):
        _check_folder(out, info, settings.overwrite)
        write_run_json(out, info)
        try:
            fresh, done = _call(_generate(settings, data, backend, out, on_prediction, progress, limits))
        finally:
            protocols.base.VIEW_HASHES.save()  # for the next run over the same release (an interrupted one too)
        info["backend"] = backend.describe()  # with what the request policy learnt during the run
        if (found := limits.describe()) is not None:  # what each server's limiter settled on, and its trace
            info["concurrency"] = found
        info["counts"] = {d.task: {"predictions": sum(1 for k in done if k[0] == d.task),
                                   "failed": sum(1 for k, p in done.items() if k[0] == d.task and p.error),
                                   "truncated": sum(1 for k, p in done.items() if k[0] == d.task and p.truncated)}
                          for d in data}
        write_run_json(out, info)
        scoring.score_run(out, judge=settings.judge, judge_base_url=settings.judge_base_url,
                          n_boot=settings.n_boot, rows={d.task: d.rows for d in data},
                          judge_cache=settings.judge_cache, fresh=fresh, predictions=done)
        write_run_report(out)
    return out


async def check_backend(backend: Backend) -> None:
    """The backend's own start-up check, when it has one (`openai:` asks a local server its context,
    so an explicit --max-tokens that cannot fit fails now, in one line, not once per item)."""
    check = getattr(backend, "check", None)
    if check is None:
        return
    try:
        await check()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    finally:
        await release(backend)  # its connections belong to this loop


async def _generate(settings: RunSettings, data: list[_TaskData], backend: Backend, out: Path,
                    on_prediction: Callable[[Prediction], None] | None, show_progress: bool,
                    limits: Limits) -> tuple[set[Key], dict[Key, Prediction]]:
    """Ask what is not answered yet; return the keys of the predictions parsed here (scoring reuses
    their parsed answers instead of parsing them again) and every prediction of the folder, as
    predictions.jsonl now holds them (scoring reads them from here, not from the file again)."""
    fresh: set[Key] = set()
    rows = {(d.task, str(r["id"])): (d.spec, r) for d in data for r in d.rows}
    asked = {(d.task, str(r["id"]), e, rotation) for e in range(settings.epochs) for d in data
             for r in d.selected for rotation in requests.rotations(d.spec, r, settings)}
    with PredictionStore(out) as store:
        # Failed samples of this selection are asked again; drop their old lines first.
        if any(p.error for k, p in store.done.items() if k in asked):
            store.compact(keep=lambda p: p.error is None or key_of(p) not in asked)
        bar = Progress(len(asked), label=settings.model, enabled=show_progress, limits=limits)

        def skip(request: Request) -> bool:
            if store.is_answered(request.task, request.id, request.request_hash, request.metadata.get("epoch", 0),
                                 request.metadata.get("rotation", 0)):
                bar.skip()
                return True
            return False

        outcomes = execute(backend, _requests(data, settings, skip), limits=limits,
                           batch_size=settings.batch_size, policy=_policy(settings), on_retry=bar.retry)
        try:
            async for outcome in outcomes:
                spec, row = rows[(outcome.request.task, outcome.request.id)]
                prediction = to_prediction(outcome, await parse(spec, outcome, row, settings.lang))
                store.append(prediction)
                fresh.add(key_of(prediction))
                bar.advance(failed=prediction.error is not None)
                if on_prediction is not None:
                    on_prediction(prediction)
        finally:
            await outcomes.aclose()  # an interrupted run stops its workers before the backend goes
            bar.close()
            await release(backend)
        with store.path.open(encoding="utf-8") as lines:
            if len(store.done) != sum(1 for _ in lines):
                store.compact()  # an item re-asked, or a malformed line skipped: one line per sample
        return fresh, store.done


def _call(coro: Any) -> Any:
    """Run a coroutine from sync code, also when the caller already runs an event loop (Gradio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def score(run_dir: Path | str, judge: str | None = None, judge_base_url: str | None = None, *,
          n_boot: int = N_BOOT) -> Metrics:
    """Re-score the saved predictions of a run folder and rewrite its report; return metrics.json's content.
    The judge, when given, replaces the one recorded in run.json; cached verdicts are reused."""
    check_reachable(judge_base_url, "--judge-base-url")
    run_dir = Path(run_dir)
    with locked(run_dir) if run_dir.is_dir() else contextlib.nullcontext():
        metrics = scoring.score_run(run_dir, judge=judge, judge_base_url=judge_base_url, n_boot=n_boot)
        write_run_report(run_dir)
    return metrics


async def iter_predictions(settings: RunSettings, backend: Backend | None = None
                           ) -> AsyncIterator[tuple[Prediction, Row]]:
    """Yield (Prediction, row metadata without images) as each sample finishes; nothing is written. For live
    per-sample displays (the Space). Order is completion order. `prediction.parsed` is filled by the task's
    parser; `eval.scoring.score_prediction(task, prediction, row)` says whether it is correct (classification)
    or its per-nutrient errors (nutrition). Closing the generator (or cancelling its task) cancels the
    requests in flight and starts no new ones."""
    settings.validate()
    if backend is None:
        await asyncio.to_thread(check_reachable, settings.base_url, "--base-url")
    data = await asyncio.to_thread(load_task_data, settings)  # never block the caller's loop (Gradio)
    settings = resolve_protocol(settings, data)
    backend = backend or build_backend(settings, data)
    await check_backend(backend)
    rows = {(d.task, str(r["id"])): (d.spec, r) for d in data for r in d.rows}
    try:
        # aclosing: a closed or cancelled generator cancels the requests in flight and starts no new one
        async with contextlib.aclosing(execute(backend, _requests(data, settings), concurrency=settings.concurrency,
                                               max_concurrency=settings.max_concurrency, batch_size=settings.batch_size,
                                               policy=_policy(settings))) as outcomes:
            async for outcome in outcomes:
                spec, row = rows[(outcome.request.task, outcome.request.id)]
                yield to_prediction(outcome, await parse(spec, outcome, row, settings.lang)), row
    finally:
        await release(backend)


# ---------------------------------------------------------------- sweeps
def sweep_cells(base: RunSettings, *, models: Sequence[str], langs: Sequence[str], cots: Sequence[bool],
                images: Sequence[int], out: Path) -> list[RunSettings]:
    """One RunSettings per (model, language, CoT, view count), each in its own subfolder of `out`; a view
    count means what the run's protocol says (`Protocol.sweep_cell`)."""
    protocol = protocols.get(base.protocol) if base.protocol else protocols.chosen(
        base, [load_rows_of(base, task) for task in base.selected_tasks])
    cells = []
    for model, lang, cot, n in itertools.product(models, langs, cots, images):
        cell = protocol.sweep_cell(dataclasses.replace(base, model=model, lang=lang, out=None), cot=cot, views=n)
        cell.validate()
        protocol.check(cell)
        cell.out = Path(out) / default_out(cell).name
        cells.append(cell)
    return cells


def load_rows_of(settings: RunSettings, task: tasks.Task) -> list[Row]:
    """A task's rows (metadata) from the settings' source: what decides its protocol."""
    import diningbench

    try:
        return diningbench.read_release(task.source_config, settings.dataset, lang=settings.lang).rows
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise UsageError(f"cannot load {task.name} from {settings.dataset or 'the embedded sample'}: "
                         f"{' '.join(str(exc).split())[:300]}") from None


def run_sweep(cells: Sequence[RunSettings], out: Path, *, progress: bool = True,
              log: Callable[[str], None] | None = None) -> str:
    """Run every cell (each resumable like any run) and write the sweep's report.md; return its text."""
    run_dirs = []
    for number, cell in enumerate(cells, start=1):
        if log is not None:
            log(f"[{number}/{len(cells)}] {Path(cell.out or '').name}")
        run_dirs.append(run(cell, progress=progress))
    out = Path(out)
    (out / "sweep.json").write_text(json.dumps({"cells": [c.to_json() for c in cells]}, indent=2,
                                               ensure_ascii=False) + "\n", encoding="utf-8")
    text = build_report([load_run(path) for path in run_dirs], reported=False,
                        n_boot=cells[0].n_boot if cells else N_BOOT, plot_dir=out)
    (out / "report.md").write_text(text, encoding="utf-8")
    return text


def run_settings(run_dir: Path) -> RunSettings:
    """The settings a run folder was asked with, as its run.json keeps them."""
    return RunSettings.from_saved((read_run_json(Path(run_dir)) or {}).get("settings") or {})


def read_metrics(run_dir: Path) -> Metrics:
    """metrics.json of a scored run folder (this process's own: not checked)."""
    return json.loads((Path(run_dir) / scoring.METRICS).read_text(encoding="utf-8"))
