"""Scoring: saved predictions + dataset references -> scores.jsonl and metrics.json, by the run's protocol.

Generation and scoring meet only in predictions.jsonl, so a run can be re-scored (e.g. with a judge added
later) without asking the model again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

from eval import circular, protocols, tasks
from eval.images import select_views
from eval.judge import BackendJudge, JudgeError
from eval.protocols.base import TaskScoring
from eval.protocols.records import (  # noqa: F401 - the per-item API, as callers import it from here
    DECIDED_BY,
    NO_JUDGE_NOTE,
    item_record,
    parsed_answers,
    score_judged,
    score_prediction,
    score_rotations,
    score_task,
    usable_reference,
)
from eval.runinfo import read_run_json, recorded_judge
from eval.settings import N_BOOT, RunSettings
from eval.store import PREDICTIONS, Key, json_text, read_predictions, write_atomically
from eval.types import Metrics, Prediction, Row, RunInfo, ScoreRecord, UserError

SCORES = "scores.jsonl"
METRICS = "metrics.json"
JUDGE_CACHE = "judge_cache"


class ScoringError(UserError):
    """A run folder that cannot be scored (one-line message)."""


# ---------------------------------------------------------------- a run folder
def load_rows(task: tasks.Task, source: str | None, lang: str = "zh") -> dict[str, Row]:
    """Every item's metadata (no images) by id: references and breakdown fields."""
    import diningbench

    try:
        release = diningbench.read_release(task.source_config, source, lang=lang)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise ScoringError(f"cannot load {task.name} references from {source or 'the embedded sample'}: "
                           f"{' '.join(str(exc).split())[:300]}") from None
    return {str(r["id"]): r for r in release.rows}


def _views_sent(settings: RunSettings) -> Callable[[Row], int]:
    """Views a prediction line written before `n_images` was kept had: recomputed from its settings."""
    return lambda row: len(select_views(row.get("image_roles") or [], settings.images, settings.image_order,
                                        seed=settings.seed, item_id=str(row["id"])))


def score_run(run_dir: Path, *, judge: str | None = None, judge_base_url: str | None = None,
              n_boot: int = N_BOOT, rows: dict[str, Sequence[Row]] | None = None,
              judge_cache: Path | None = None, fresh: Collection[Key] = (),
              predictions: dict[Key, Prediction] | None = None) -> Metrics:
    """Score a run folder's predictions.jsonl; write scores.jsonl and metrics.json; return the metrics. `rows`
    (each task's item metadata) saves loading the dataset again when the caller has it; `judge_cache`
    (default: the run folder's judge_cache/) may be shared by several runs; `fresh` holds the keys of
    predictions this process parsed as they came (their `parsed` is used as is); `predictions`, the folder's
    predictions as `read_predictions` gives them, when the caller holds them."""
    run_dir = Path(run_dir)
    info = read_run_json(run_dir)
    if info is None or not (run_dir / PREDICTIONS).exists():
        raise ScoringError(f"{run_dir} is not a run folder (needs run.json and {PREDICTIONS})")
    settings = RunSettings.from_saved(info.get("settings") or {})
    judge = _run_judge(info, judge, judge_base_url)
    if predictions is None:
        predictions = read_predictions(run_dir / PREDICTIONS)
    judge_fn = _judge_for(settings, judge, judge_base_url, predictions.values())
    metrics: Metrics = {}
    all_records: list[ScoreRecord] = []
    rotated_records: list[ScoreRecord] = []
    try:
        for task in tasks.all_tasks():
            mine = [p for p in predictions.values() if p.task == task.name]
            if not mine:
                continue
            by_id = _rows_by_id(task, mine, rows, settings)
            job = TaskScoring(task, mine, by_id, settings, settings.lang, judge, judge_base_url, judge_fn,
                              Path(judge_cache or run_dir / JUDGE_CACHE), n_boot, fresh, _views_sent(settings))
            records, metrics[task.name] = protocols.of(settings).score(job)
            rotated_records.extend(job.rotated)
            all_records.extend(records)
    finally:
        if judge_fn is not None:
            judge_fn.close()
    _write_scores(run_dir, all_records, rotated_records, metrics)
    return metrics


def _run_judge(info: RunInfo, judge: str | None, judge_base_url: str | None) -> str | None:
    """The judge to score with: the one asked, else the one the run recorded (its server named again)."""
    if judge is None:
        judge, host = recorded_judge(info)
        if host and judge_base_url is None:
            raise ScoringError(f"the run was judged through a server at {host}: "
                               "pass --judge-base-url again (URLs are not stored)")
    return judge


def _judge_for(settings: RunSettings, judge: str | None, judge_base_url: str | None,
               predictions: Iterable[Prediction]) -> BackendJudge | None:
    """The judge backend with the run's settings, checked (a missing key fails here, before anything is
    written) when a judged task has answers; None without a judge."""
    if not judge:
        return None
    judge_fn = BackendJudge.from_settings(judge, judge_base_url, settings)
    if any(tasks.is_judged(p.task) for p in predictions):
        try:
            judge_fn.check()
        except JudgeError as exc:
            judge_fn.close()
            raise ScoringError(str(exc)) from None
    return judge_fn


def _rows_by_id(task: tasks.Task, mine: list[Prediction], rows: dict[str, Sequence[Row]] | None,
                settings: RunSettings) -> dict[str, Row]:
    """The task's rows by id, in dataset order; `mine` sorted in that order, epoch by epoch."""
    by_id = {str(r["id"]): r for r in rows[task.name]} if rows and task.name in rows else load_rows(
        task, settings.dataset, settings.lang)
    if unknown := sorted({p.id for p in mine} - set(by_id)):
        raise ScoringError(f"{task.name}: predictions for ids not in the dataset ({', '.join(unknown[:5])}); "
                           "was the run made on another --dataset?")
    order = {item_id: n for n, item_id in enumerate(by_id)}
    mine.sort(key=lambda p: (p.epoch, order[p.id], p.rotation))
    return by_id


def _write_scores(run_dir: Path, records: list[ScoreRecord], rotated: list[ScoreRecord],
                  metrics: Metrics) -> None:
    write_atomically(run_dir / SCORES, (json_text(r) + "\n" for r in records))
    if rotated:
        write_atomically(run_dir / circular.ROTATIONS, (json_text(r) + "\n" for r in rotated))
    else:
        (run_dir / circular.ROTATIONS).unlink(missing_ok=True)
    write_atomically(run_dir / METRICS, [json.dumps(metrics, indent=2, ensure_ascii=False) + "\n"])
