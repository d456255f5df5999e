"""Run the stages in order on one work folder; each stage skips itself when its inputs are unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from construct import classification, dishes, nutrition, photos, translate, vqa
from construct.context import Context
from construct.models import Models
from construct.raw import load_raw
from construct.review import write_decisions, write_dish_decisions
from construct.shard import parse_shard, restrict
from construct.work import BuildSettings, save_settings

STAGE_RUNNERS: tuple[tuple[str, Callable[[Context], None]], ...] = (
    (photos.NAME, photos.run), (dishes.NAME, dishes.run), (classification.NAME, classification.run),
    (nutrition.NAME, nutrition.run), (vqa.NAME, vqa.run), (translate.NAME, translate.run))


def run(work: str | Path, settings: BuildSettings, *, models: Models | None = None,
        on_stage: Callable[[str], None] | None = None) -> Context:
    """Every model stage, then the review decisions as they stand (nothing approved yet on a first run).

    After dish selection the base dishes go to review: while any awaits a decision the run stops there
    (`pending_dish_review` says how many); the same run, once they are reviewed, continues."""
    work = Path(work)
    if not settings.model:
        raise ValueError("--model is required (backend:model, e.g. openai:gpt-4o or gemini:gemini-2.5-pro)")
    raw = load_raw(settings.raw)
    shard = parse_shard(settings.shard)
    if shard:
        raw = restrict(raw, *shard)
    save_settings(work, settings)
    ctx = Context(raw, work, settings, models or Models(settings, work))
    for name, stage in STAGE_RUNNERS:
        if on_stage:
            on_stage(name)
        stage(ctx)
        if name == dishes.NAME and write_dish_decisions(work):
            return ctx
    write_decisions(work)
    return ctx


def pending_dish_review(work: str | Path) -> int:
    """Base dishes selected but not yet approved or rejected (0 once reviewed, exempt, or in a shard)."""
    return write_dish_decisions(Path(work)) if (Path(work) / dishes.NAME / "items.jsonl").exists() else 0
