"""A scored item: the scores.jsonl line of one answer, built and scored by this project's reading.

Both protocols build records (`eval.types.ScoreRecord`) here, the authors' with its reading under `official`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from eval import circular, numbers, tasks
from eval.limiter import START
from eval.settings import N_BOOT
from eval.store import Key, key_of
from eval.types import Prediction, Row, ScoreRecord, TaskFigures
from metrics.judge_accuracy.core import final_answer, injection_suspected, judge_items, score_verdicts

# judge_items' provenance -> scores.jsonl's decided_by: a cached verdict was a judge's; a missing
# answer ("I") and an unscored item were decided by nobody.
DECIDED_BY = {"rule": "rule", "judge": "judge", "cache": "judge"}
NO_JUDGE_NOTE = ("VQA is not scored: no judge configured. Re-score with a judge, e.g. "
                 "`python -m eval score DIR --judge openai:gpt-4o` (set OPENAI_API_KEY) or "
                 "`--judge openai:MODEL --judge-base-url http://localhost:8000/v1` for a local server.")


def authors_rows(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether rows are the authors' release as published (or its conversion): they carry its prompt.
    The one place the protocols look at a row's shape."""
    return bool(rows) and "prompt" in rows[0]


# ---------------------------------------------------------------- per item
def item_record(task: tasks.Task, row: Row, prediction: Prediction, *, lang: str,
                n_images: int | None = None) -> ScoreRecord:
    """The scores.jsonl line of one item before task scoring fills correct/ape/verdict."""
    failed = prediction.error is not None
    record: ScoreRecord = {
        "id": str(row["id"]), "task": task.name, "epoch": prediction.epoch, "merchant_id": row.get("merchant_id"),
        "cuisine": row.get("cuisine"), "category": row.get("category"),
        "vqa_category": None, "nutrition_source": None,
        "n_images": prediction.n_images if n_images is None else n_images, "n_options": task.n_options(row),
        "parsed": None if failed else prediction.parsed, "error": prediction.error,
        "truncated": prediction.truncated, "finish_reason": prediction.finish_reason, "usage": prediction.usage,
        "reference": task.reference(row, lang),
        "correct": None, "ape": None, "abs_error": None, "verdict": None, "decided_by": None,
    }
    # The task's own item fields (`vqa_category`, `nutrition_source`) are keys of ScoreRecord; the names
    # come from the task object, so mypy cannot see them as literal keys.
    record.update(cast(ScoreRecord, {name: row.get(name) for name in task.item_fields}))
    return record


def score_prediction(task: tasks.Task, prediction: Prediction, row: Row, lang: str = "zh") -> ScoreRecord:
    """One live prediction scored on its own (the Space): a scores.jsonl-like dict; a judged task's item stays
    unscored. Its answer was parsed when it was made (`prediction.parsed`), so it is not parsed again."""
    record = item_record(task, row, prediction, lang=lang)
    if not task.judged:
        task.score([record], [record["parsed"]], [row], lang)
    return record


def parsed_answers(task: tasks.Task, predictions: Sequence[Prediction], rows: Sequence[Row], lang: str,
                   fresh: Collection[Key] = ()) -> list[Any]:
    """Each prediction's parsed answer (None when it failed): kept as parsed when it was made in this
    process (`fresh`: its key), else parsed now from the raw text (an older parser may have written
    the saved one). Either way each answer is parsed once per run."""
    return [None if p.error is not None or p.raw is None
            else p.parsed if key_of(p) in fresh
            else task.read_answer(p.raw, row, lang)
            for p, row in zip(predictions, rows, strict=True)]


# ---------------------------------------------------------------- per task
def score_rotations(task: tasks.Task, predictions: Sequence[Prediction], by_id: dict[str, Row],
                    plain: list[ScoreRecord], lang: str, n_boot: int = N_BOOT, fresh: Collection[Key] = ()
                    ) -> tuple[list[ScoreRecord], TaskFigures]:
    """`--circular`: the rotated answers scored against the letter their rotation moved the answer to
    (rotations.jsonl lines), and the circular figures of the task's entry."""
    rows = [task.rotate(by_id[p.id], p.rotation) for p in predictions]
    records: list[ScoreRecord] = [{**item_record(task, row, p, lang=lang), "rotation": p.rotation} for row, p in zip(rows, predictions, strict=True)]
    task.score(records, parsed_answers(task, predictions, rows, lang, fresh), rows, lang)
    found = circular.circular_figures(plain, records, n_boot=n_boot) or {}
    return records, {"circular_accuracy": found.pop("circular_accuracy", None),
                     "circular_accuracy_ci95": found.pop("circular_accuracy_ci95", None), "circular": found}


def score_task(task: tasks.Task, records: list[ScoreRecord], parsed: list[Any], rows: Sequence[Row],
               lang: str, n_boot: int = N_BOOT) -> TaskFigures:
    """Each record's score from its parsed answer (None = unparsed or failed) and the task's figures."""
    return numbers.task_figures(task, records, task.score(records, parsed, rows, lang), n_boot=n_boot)


def score_judged(task: tasks.Task, records: list[ScoreRecord], raws: list[str | None], questions: list[str],
                 judge: Callable[[str], str] | None, judge_model: str | None, cache_dir: Path,
                 concurrency: int = START, n_boot: int = N_BOOT) -> TaskFigures:
    """Rule, cached or judge verdicts per item (judge_accuracy decides; failed samples are "I"). The judge
    reads the raw answers through the metric's own `final_answer`, exactly as the judge_accuracy metric does,
    so both give one verdict (and one cache entry) per answer."""
    if judge is None:
        return unjudged(records)
    results = judge_items(questions, [r["reference"] for r in records], raws, judge, judge_model,
                          cache_dir, concurrency=concurrency)
    for record, raw, (verdict, decided_by, _) in zip(records, raws, results, strict=True):
        set_verdict(record, verdict, decided_by)
        record["injection_suspected"] = injection_suspected(final_answer(raw))
    decided = [decided_by for _, decided_by, _ in results]
    result = score_verdicts([verdict for verdict, _, _ in results], decided)
    metrics = numbers.task_figures(task, records, result, n_boot=n_boot)
    metrics.update({"scored": True, "judge": judge_model, "judge_errors": sum(d == "judge_error" for d in decided),
                    "injection_suspected": sum(r["injection_suspected"] for r in records)})
    return metrics


def unjudged(records: Sequence[ScoreRecord]) -> TaskFigures:
    """A judged task's figures when no judge read its answers: not scored, with its outcome counts, tokens
    and the note saying how to score it."""
    return {"scored": False, "n": len(records), **numbers.outcome_counts(records),
            "tokens": numbers.token_totals(records), "note": NO_JUDGE_NOTE}


def set_verdict(record: ScoreRecord, verdict: str | None, decided_by: str) -> None:
    """A judged answer's verdict on its record ("C", "I"; None: unscored), and who decided it."""
    record.update({"verdict": verdict, "decided_by": DECIDED_BY.get(decided_by),
                   "correct": None if verdict is None else verdict == "C"})


def usable_reference(task: tasks.Task, row: Mapping[str, Any], lang: str) -> bool:
    """Whether this project's scoring can read the row's reference (the authors' scoring runs either way)."""
    try:
        task.reference(row, lang)
    except (ValueError, TypeError, KeyError):
        return False
    return True


