"""Scoring: saved predictions + dataset references -> scores.jsonl, metrics.json, report.md.

Generation and scoring meet only in predictions.jsonl, so a run can be re-scored (e.g. with a
judge added later) without asking the model again. Each task is scored by the run's protocol
(`eval.protocols`: ours, or the authors' with ours beside it); per-item records and their schema are
`eval.protocols.records`; this module joins a run folder's tasks and writes the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from eval import circular, protocols, tasks
from eval.images import select_views
from eval.judge import BackendJudge, JudgeError
from eval.protocols.base import TaskScoring
from eval.protocols.records import (  # noqa: F401 - the per-item API, as callers import it from here
    DECIDED_BY,
    NO_JUDGE_NOTE,
    item_record,
    parsed_answers,
    score_prediction,
    usable_reference,
)
from eval.runinfo import read_run_json
from eval.settings import N_BOOT, RunSettings
from eval.store import PREDICTIONS, Key, json_text, read_predictions, write_atomically
from eval.types import Prediction, UserError

SCORES = "scores.jsonl"
METRICS = "metrics.json"
JUDGE_CACHE = "judge_cache"


class ScoringError(UserError):
    """A run folder that cannot be scored (one-line message)."""


# ---------------------------------------------------------------- a run folder
def load_rows(task: str, source: str | None, lang: str = "zh") -> dict[str, dict[str, Any]]:
    """Every item's metadata (no images) by id: references and breakdown fields."""
    import diningbench

    try:
        release = diningbench.read_release(tasks.get(task).source_config, source, lang=lang)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise ScoringError(f"cannot load {task} references from {source or 'the embedded sample'}: "
                           f"{' '.join(str(exc).split())[:300]}") from None
    return {str(r["id"]): r for r in release.rows}


def _views_sent(settings: RunSettings) -> Callable[[dict[str, Any]], int]:
    """Views a prediction line written before `n_images` was kept had: recomputed from its settings."""
    def count(row: dict[str, Any]) -> int:
        return len(select_views(row.get("image_roles") or [], settings.images, settings.image_order,
                                seed=settings.seed, item_id=str(row["id"])))
    return count


def score_run(run_dir: Path, *, judge: str | None = None, judge_base_url: str | None = None,
              n_boot: int = N_BOOT, rows: dict[str, Sequence[dict[str, Any]]] | None = None,
              judge_cache: Path | None = None, fresh: Collection[Key] = (),
              predictions: dict[Key, Prediction] | None = None) -> dict[str, Any]:
    """Score a run folder's predictions.jsonl; write scores.jsonl and metrics.json; return the metrics.

    `rows` (each task's item metadata) saves loading the dataset again when the caller has it;
    `judge_cache` (default: the run folder's judge_cache/) may be shared by several runs; `fresh`
    holds the keys of predictions this process parsed as they came (their `parsed` is used as is);
    `predictions`, the folder's predictions as `read_predictions` gives them, when the caller holds them.
    """
    run_dir = Path(run_dir)
    info = read_run_json(run_dir)
    if info is None or not (run_dir / PREDICTIONS).exists():
        raise ScoringError(f"{run_dir} is not a run folder (needs run.json and {PREDICTIONS})")
    settings = RunSettings.from_saved(info.get("settings") or {})
    protocol = protocols.of(settings)
    if judge is None and isinstance(info.get("judge"), dict):
        judge = info["judge"].get("spec")
        if info["judge"].get("base_url_host") and judge_base_url is None:
            raise ScoringError(f"the run was judged through a server at {info['judge']['base_url_host']}: "
                               "pass --judge-base-url again (URLs are not stored)")
    if predictions is None:
        predictions = read_predictions(run_dir / PREDICTIONS)
    judge_fn = BackendJudge(judge, judge_base_url, timeout=settings.timeout, max_tokens=settings.max_tokens,
                            concurrency=settings.concurrency, max_concurrency=settings.max_concurrency) if judge else None
    metrics: dict[str, Any] = {}
    all_records: list[dict[str, Any]] = []
    rotated_records: list[dict[str, Any]] = []
    try:
        if judge_fn is not None and any(tasks.get(p.task).judged for p in predictions.values() if tasks.is_task(p.task)):
            try:
                judge_fn.check()  # a missing key fails here, before anything is written
            except JudgeError as exc:
                raise ScoringError(str(exc)) from None
        for task in tasks.names():
            mine = [p for p in predictions.values() if p.task == task]
            if not mine:
                continue
            by_id = {str(r["id"]): r for r in rows[task]} if rows and task in rows else load_rows(
                task, settings.dataset, settings.lang)
            unknown = sorted({p.id for p in mine} - set(by_id))
            if unknown:
                raise ScoringError(f"{task}: predictions for ids not in the dataset ({', '.join(unknown[:5])}); "
                                   "was the run made on another --dataset?")
            order = {item_id: n for n, item_id in enumerate(by_id)}
            mine.sort(key=lambda p: (p.epoch, order[p.id], p.rotation))  # dataset order, epoch by epoch
            job = TaskScoring(task, mine, by_id, settings, settings.lang, judge, judge_base_url, judge_fn,
                              Path(judge_cache or run_dir / JUDGE_CACHE), n_boot, fresh, _views_sent(settings))
            records, metrics[task] = protocol.score(job)
            rotated_records.extend(job.rotated)
            all_records.extend(records)
    finally:
        if judge_fn is not None:
            judge_fn.close()
    write_atomically(run_dir / SCORES, (json_text(r) + "\n" for r in all_records))
    if rotated_records:
        write_atomically(run_dir / circular.ROTATIONS,
                         (json_text(r) + "\n" for r in rotated_records))
    else:
        (run_dir / circular.ROTATIONS).unlink(missing_ok=True)
    write_atomically(run_dir / METRICS, [json.dumps(metrics, indent=2, ensure_ascii=False) + "\n"])
    return metrics
