"""Run the stages in order on one work folder; each stage skips itself when its inputs are unchanged."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path

from construct.context import Context
from construct.engine import make_engine
from construct.errors import BuildError, StageFailed
from construct.models import Models
from construct.raw import EXPORT_INDEX, load_raw
from construct.review import write_decisions, write_dish_decisions
from construct.stages import DISHES, STAGES
from construct.work import BuildSettings, read_json, save_settings, write_json
from eval.endpoints import check_reachable, require_http_url
from eval.settings import UsageError
from eval.types import ConfigError


def stage_runs() -> list[tuple[str, Callable[[Context], None]]]:
    """(name, run) of each stage the pipeline runs, in order: `construct/<name>.py`'s `run(ctx)`. Importing
    a stage's module also declares its prompts (and any stand-in answer it registers)."""
    return [(s.name, importlib.import_module(f"construct.{s.name}").run) for s in STAGES if s.runs]


def run(work: str | Path, settings: BuildSettings, *, models: Models | None = None,
        on_stage: Callable[[str], None] | None = None) -> Context:
    """Every model stage, then the review decisions as they stand (nothing approved yet on a first run).

    After dish selection the base dishes go to review: while any awaits a decision the run stops there
    (`pending_dish_review` says how many); the same run, once they are reviewed, continues."""
    work = Path(work)
    if not settings.model:
        raise BuildError("--model is required (backend:model, e.g. openai:gpt-4o or gemini:gemini-2.5-pro)")
    work.mkdir(parents=True, exist_ok=True)
    raw = load_raw(settings.raw, index=work / EXPORT_INDEX)
    save_settings(work, settings)
    engine = make_engine(settings, work)
    try:
        ctx = Context(raw, work, settings, models or Models(settings, work, engine=engine), engine)
        for name, stage in stage_runs():
            if on_stage:
                on_stage(name)
            start = time.monotonic()
            stage(ctx)
            record_wall(work, name, time.monotonic() - start, ctx.models.stats.get(name))
            check_failures(name, ctx.models.stats.get(name))
            if name == DISHES and write_dish_decisions(work):
                return ctx
        write_decisions(work)
        return ctx
    finally:
        engine.close()
        raw.close()


WALL = "stage_seconds.json"


def record_wall(work: Path, stage: str, seconds: float, stats: dict | None) -> None:
    """WORK/stage_seconds.json: the wall time of each stage's last run that asked a model or had no
    finished record yet (a stage skipped as unchanged keeps the time it took when it ran)."""
    path = work / WALL
    recorded = read_json(path)
    if stage not in recorded or (stats and stats["asked"]):
        write_json(path, {**recorded, stage: round(seconds, 3)})


def pending_dish_review(work: str | Path) -> int:
    """Base dishes selected but not yet approved or rejected (0 once reviewed or exempt)."""
    return write_dish_decisions(Path(work)) if (Path(work) / DISHES / "items.jsonl").exists() else 0


def check_servers(settings: BuildSettings) -> None:
    """Before any stage spends a call: every base URL is http(s), carries no credential and answers,
    a server that is still starting (`vllm serve`, the stand-in) given `--connect-wait` seconds."""
    for url, flag in settings.base_urls().items():
        try:
            require_http_url(url, flag)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        deadline = time.monotonic() + settings.connect_wait
        while True:
            try:
                check_reachable(url, flag)
                break
            except UsageError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)


def check_failures(stage: str, stats: dict | None, share: float = 0.5) -> None:
    """Raise StageFailed, with the commonest errors, when more than `share` of the calls a stage made failed.

    >>> check_failures("photos", {"asked": 4, "failed": 2, "errors": {}})
    >>> check_failures("photos", {"asked": 4, "failed": 3, "errors": {"HTTP 500": 3}})
    Traceback (most recent call last):
    ...
    construct.errors.StageFailed: stage photos: 3 of 4 model call(s) failed (HTTP 500 x3); fix the server or model and run the same command again (answered calls are kept)
    """
    if not stats or not stats["asked"] or stats["failed"] <= share * stats["asked"]:
        return
    top = sorted(stats["errors"].items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    raise StageFailed(f"stage {stage}: {stats['failed']} of {stats['asked']} model call(s) failed ("
                      + "; ".join(f"{e} x{n}" for e, n in top) + "); fix the server or model and run the same "
                      "command again (answered calls are kept)")
