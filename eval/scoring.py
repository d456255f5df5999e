"""Scoring: saved predictions + dataset references -> scores.jsonl, metrics.json, report.md.

Generation and scoring meet only in predictions.jsonl, so a run can be re-scored (e.g. with a
judge added later) without asking the model again. Every figure comes from the metrics modules'
pure functions (`metrics/*/`): this module joins, never re-implements a formula.

scores.jsonl — one JSON object per line, one line per scored item (all tasks of the run folder):

    id             str    item id (unique within its task)
    task           str    "classification" | "nutrition" | "vqa"
    merchant_id    str    the bootstrap cluster
    cuisine        str
    category       str    the menu category
    vqa_category   str | null   (vqa only)
    nutrition_source str | null (nutrition only)
    n_images       int    images actually sent with the request
    parsed         the task parser's output: letter | {calories, protein, carbohydrates, fat} | answer
                   text (vqa); null when unparsed or when the sample failed
    error          str | null   generation error (a failed sample: scored as a failure, never dropped)
    reference      letter | {calories, protein, carbohydrates, fat} | reference answer text (vqa)
    correct        bool | null  classification: parsed == reference (unparsed/failed = false);
                                vqa: verdict == "C" (null while unscored); nutrition: null
    ape            {component: fraction | null} | null  nutrition only: |pred - gt| / gt; null for a
                   component whose gt == 0; 1.0 for every component when unparsed or failed
    abs_error      {component: float} | null  nutrition only: |pred - gt| (unparsed: |gt|)
    verdict        "C" | "I" | null   vqa only: judge or rule verdict; null = unscored
    decided_by     "rule" | "judge" | null   vqa only: who decided the verdict
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eval import tasks
from eval.images import select_views
from eval.runinfo import read_run_json
from eval.stats import mean_of_column_means
from eval.store import PREDICTIONS, read_predictions, write_atomically
from eval.types import TASKS, ConfigError, GenerationConfig, Message, Prediction, Request

SCORES = "scores.jsonl"
METRICS = "metrics.json"
JUDGE_CACHE = "judge_cache"
N_BOOT = 1000
# judge_items' provenance -> scores.jsonl's decided_by: a cached verdict was a judge's; a missing
# answer ("I") and an unscored item were decided by nobody.
DECIDED_BY = {"rule": "rule", "judge": "judge", "cache": "judge"}
NO_JUDGE_NOTE = ("VQA is not scored: no judge configured. Re-score with a judge, e.g. "
                 "`python -m eval score DIR --judge openai:gpt-4o` (set OPENAI_API_KEY) or "
                 "`--judge openai:MODEL --judge-base-url http://localhost:8000/v1` for a local server.")


class ScoringError(ValueError):
    """A run folder that cannot be scored (one-line message)."""


# ---------------------------------------------------------------- per item
def item_record(task: str, row: dict[str, Any], prediction: Prediction, *, lang: str,
                n_images: int) -> dict[str, Any]:
    """The scores.jsonl line of one item before task scoring fills correct/ape/verdict."""
    return {
        "id": str(row["id"]), "task": task, "merchant_id": row.get("merchant_id"), "cuisine": row.get("cuisine"),
        "category": row.get("category"), "vqa_category": row.get("vqa_category") if task == "vqa" else None,
        "nutrition_source": row.get("nutrition_source") if task == "nutrition" else None,
        "n_images": n_images, "parsed": prediction.parsed if prediction.error is None else None,
        "error": prediction.error, "reference": tasks.reference_of(task, row, lang),
        "correct": None, "ape": None, "abs_error": None, "verdict": None, "decided_by": None,
    }


def score_prediction(prediction: Prediction, row: dict[str, Any], lang: str = "zh") -> dict[str, Any]:
    """One live prediction scored on its own (the Space): a scores.jsonl-like dict; VQA stays unscored."""
    record = item_record(prediction.task, row, prediction, lang=lang, n_images=0)
    raw = prediction.raw if prediction.error is None else None
    if prediction.task == "classification":
        from metrics.dining_accuracy.dining_accuracy import score_choices

        result = score_choices([raw], [record["reference"]], options=[tasks.options_of(row, lang)])
        record["correct"] = bool(result["correct"][0])
    elif prediction.task == "nutrition":
        from metrics.nutrition_error.nutrition_error import score_nutrition

        item = score_nutrition([raw], [record["reference"]])["per_item"][0]
        record["ape"], record["abs_error"] = item["ape"], item["abs_error"]
    return record


# ---------------------------------------------------------------- per task
def _ci(n: int, clusters: Sequence[str], statistic: Callable[[np.ndarray], float],
        n_boot: int = N_BOOT) -> list[float] | None:
    from eval.stats import can_resample, cluster_bootstrap_ci

    if not can_resample(n, clusters):
        return None
    low, high = cluster_bootstrap_ci(n, list(clusters), statistic, n_boot=n_boot, seed=0)
    return [float(low), float(high)]


def _failures(records: list[dict[str, Any]]) -> int:
    return sum(r["error"] is not None for r in records)


def score_classification(records: list[dict[str, Any]], raws: list[str | None],
                         options: list[list[str]], n_boot: int = N_BOOT) -> dict[str, Any]:
    from metrics.dining_accuracy.dining_accuracy import score_choices

    refs = [r["reference"] for r in records]
    result = score_choices(raws, refs, options=options)
    for record, correct, parsed in zip(records, result["correct"], result["parsed"], strict=True):
        record["correct"], record["parsed"] = bool(correct), parsed
    correct = np.array(result["correct"], dtype=float)

    def accuracy(indices: np.ndarray) -> float:
        # The metric's accuracy (correct / n) on the resample, from its per-item verdicts.
        return float(correct[indices].mean())

    metrics = {k: result[k] for k in ("accuracy", "n", "parse_failures")}
    metrics["generation_failures"] = _failures(records)
    metrics["accuracy_ci95"] = _ci(len(records), [str(r["merchant_id"]) for r in records], accuracy, n_boot)
    return metrics


def score_nutrition_task(records: list[dict[str, Any]], raws: list[str | None], n_boot: int = N_BOOT
                         ) -> dict[str, Any]:
    from metrics.nutrition_error.nutrition_error import score_nutrition

    refs = [r["reference"] for r in records]
    result = score_nutrition(raws, refs)
    for record, item in zip(records, result["per_item"], strict=True):
        record["parsed"], record["ape"], record["abs_error"] = item["parsed"], item["ape"], item["abs_error"]
    # The metric's per-item APEs (None = ground truth 0, left out); avg_mape of a resample is the
    # mean over components of their mean APE: vector operations, no re-parsing per resample.
    avg_mape = mean_of_column_means(np.array([[np.nan if item["ape"][c] is None else item["ape"][c]
                                               for c in tasks.NUTRIENTS] for item in result["per_item"]]))

    metrics = {k: v for k, v in result.items() if k != "per_item"}
    metrics["generation_failures"] = _failures(records)
    metrics["avg_mape_ci95"] = _ci(len(records), [str(r["merchant_id"]) for r in records], avg_mape, n_boot)
    return metrics


def score_vqa(records: list[dict[str, Any]], questions: list[str], judge: Callable[[str], str] | None,
              judge_model: str | None, cache_dir: Path, concurrency: int = 4, n_boot: int = N_BOOT
              ) -> dict[str, Any]:
    """Rule, cached or judge verdicts per item (judge_accuracy decides; failed samples are "I")."""
    if judge is None:
        return {"scored": False, "n": len(records), "generation_failures": _failures(records), "note": NO_JUDGE_NOTE}
    from metrics.judge_accuracy.judge_accuracy import judge_items, score_verdicts

    candidates = [r["parsed"] if r["error"] is None else None for r in records]
    results = judge_items(questions, [r["reference"] for r in records], candidates, judge, judge_model,
                          cache_dir, concurrency=concurrency)
    verdicts = [verdict for verdict, _, _ in results]
    decided = [decided_by for _, decided_by, _ in results]
    for record, verdict, decided_by in zip(records, verdicts, decided, strict=True):
        record["verdict"] = verdict
        record["decided_by"] = DECIDED_BY.get(decided_by)
        record["correct"] = None if verdict is None else verdict == "C"
    result = score_verdicts(verdicts, decided)

    def accuracy(indices: np.ndarray) -> float:
        return score_verdicts([verdicts[i] for i in indices], [decided[i] for i in indices])["accuracy"]

    metrics = {k: v for k, v in result.items() if k not in ("verdicts", "decided_by")}
    metrics.update(scored=True, judge=judge_model, generation_failures=_failures(records),
                   judge_errors=sum(d == "judge_error" for d in decided))
    metrics["accuracy_ci95"] = _ci(len(records), [str(r["merchant_id"]) for r in records], accuracy, n_boot)
    return metrics


# ---------------------------------------------------------------- the judge
class BackendJudge:
    """A sync `judge(prompt) -> text` over any backend, at temperature 0, with the runner's retries.

    The backend lives on its own event-loop thread, so this works from plain code and from code
    that already runs a loop (the Space). Built lazily: cached verdicts never need the backend.
    """

    def __init__(self, spec: str, base_url: str | None = None, *, timeout: float = 120.0,
                 max_attempts: int = 6) -> None:
        self.spec, self.base_url, self.timeout, self.max_attempts = spec, base_url, timeout, max_attempts
        self._backend: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting = threading.Lock()  # judge_items calls from several threads at once

    def _start(self) -> None:
        from eval.backends import SpecError, make_backend

        with self._starting:
            if self._backend is not None:  # another thread got here first
                return
            try:
                backend = make_backend(self.spec, base_url=self.base_url, timeout=self.timeout)
            except (SpecError, ConfigError) as exc:
                raise ScoringError(f"--judge: {exc}") from None
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="judge-loop")
            self._thread.start()
            self._backend = backend  # last: other threads take a set backend to mean a running loop

    def __call__(self, prompt: str) -> str:
        from eval.runner import RetryPolicy, call_with_retries

        if self._backend is None:
            self._start()
        digest = hashlib.sha256(prompt.encode()).hexdigest()[:32]
        request = Request(id=f"judge-{digest[:12]}", task="vqa", messages=(Message("user", (prompt,)),),
                          config=GenerationConfig(temperature=0.0, max_tokens=1024, seed=0), request_hash=digest)
        policy = RetryPolicy(max_attempts=self.max_attempts, request_timeout=self.timeout * 2 + 5)
        assert self._loop is not None
        outcome = asyncio.run_coroutine_threadsafe(call_with_retries(self._backend, request, policy),
                                                   self._loop).result()
        if outcome.response is None:
            raise ScoringError(f"judge {self.spec} failed: {outcome.error}")
        return outcome.response.text

    def close(self) -> None:
        if self._loop is not None:
            from eval.backends import release

            asyncio.run_coroutine_threadsafe(release(self._backend), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()
            self._loop = self._backend = None  # a later call starts afresh


# ---------------------------------------------------------------- a run folder
def _load_rows(task: str, source: str | None) -> dict[str, dict[str, Any]]:
    import diningbench

    try:
        dataset = diningbench.load(task, source, decode_images=False)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise ScoringError(f"cannot load {task} references from {source or 'the embedded sample'}: "
                           f"{' '.join(str(exc).split())[:300]}") from None
    meta = dataset.remove_columns([c for c in ("images",) if c in dataset.column_names])
    return {str(r["id"]): r for r in meta}


def score_run(run_dir: Path, *, judge: str | None = None, judge_base_url: str | None = None,
              write_report: bool = True, n_boot: int = N_BOOT) -> dict[str, Any]:
    """Score a run folder's predictions.jsonl; write scores.jsonl, metrics.json and report.md."""
    run_dir = Path(run_dir)
    info = read_run_json(run_dir)
    if info is None or not (run_dir / PREDICTIONS).exists():
        raise ScoringError(f"{run_dir} is not a run folder (needs run.json and {PREDICTIONS})")
    settings = info.get("settings") or {}
    lang = settings.get("lang") or "zh"
    if judge is None and info.get("judge"):
        judge = info["judge"].get("spec")
        if info["judge"].get("base_url_host") and judge_base_url is None:
            raise ScoringError(f"the run was judged through a server at {info['judge']['base_url_host']}: "
                               "pass --judge-base-url again (URLs are not stored)")
    predictions = read_predictions(run_dir / PREDICTIONS)
    judge_fn = BackendJudge(judge, judge_base_url, timeout=float(settings.get("timeout") or 120.0)) if judge else None
    metrics: dict[str, Any] = {}
    all_records: list[dict[str, Any]] = []
    try:
        for task in TASKS:
            mine = {i: p for (t, i), p in predictions.items() if t == task}
            if not mine:
                continue
            rows = _load_rows(task, settings.get("dataset"))
            unknown = sorted(set(mine) - set(rows))
            if unknown:
                raise ScoringError(f"{task}: predictions for ids not in the dataset ({', '.join(unknown[:5])}); "
                                   "was the run made on another --dataset?")
            ordered = [i for i in rows if i in mine]  # dataset order
            records = []
            for i in ordered:
                roles = rows[i].get("image_roles") or []
                n_images = len(select_views(roles, settings.get("images"), settings.get("image_order") or
                                            "reference-first", seed=int(settings.get("seed") or 0), item_id=i))
                records.append(item_record(task, rows[i], mine[i], lang=lang, n_images=n_images))
            raws = [mine[i].raw if mine[i].error is None else None for i in ordered]
            if task == "classification":
                metrics[task] = score_classification(records, raws, [tasks.options_of(rows[i], lang) for i in ordered],
                                                     n_boot)
            elif task == "nutrition":
                metrics[task] = score_nutrition_task(records, raws, n_boot)
            else:
                metrics[task] = score_vqa(records, [tasks.question_of(rows[i], lang) for i in ordered],
                                          judge_fn, judge, run_dir / JUDGE_CACHE,
                                          concurrency=int(settings.get("concurrency") or 4), n_boot=n_boot)
            all_records.extend(records)
    finally:
        if judge_fn is not None:
            judge_fn.close()
    write_atomically(run_dir / SCORES, (json.dumps(r, ensure_ascii=False) + "\n" for r in all_records))
    write_atomically(run_dir / METRICS, [json.dumps(metrics, indent=2, ensure_ascii=False) + "\n"])
    if write_report:
        _write_report(run_dir, metrics, info)
    return metrics


def _write_report(run_dir: Path, metrics: dict[str, Any], info: dict[str, Any]) -> None:
    try:
        from eval.report import write_run_report
    except ImportError:
        write_run_report = None
    if write_run_report is not None:
        write_run_report(run_dir)
        return
    text = f"# {info.get('model')}\n\n{results_table(metrics)}\n"
    write_atomically(run_dir / "report.md", [text])


# ---------------------------------------------------------------- the printed table
def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{100 * float(value):.2f}%"


def _pct_ci(value: Any, ci: Any) -> str:
    text = _pct(value)
    return f"{text} [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else text


def results_table(metrics: dict[str, Any]) -> str:
    """The end-of-run table: headline figures in percent with their 95% intervals (markdown)."""
    lines = ["| task | n | headline | 95% CI (merchant bootstrap) | unparsed | failed |",
             "|---|---|---|---|---|---|"]
    notes = []
    for task in TASKS:
        m = metrics.get(task)
        if m is None:
            continue
        failed = m.get("generation_failures", 0)
        if task == "classification":
            lines.append(f"| classification | {m['n']} | accuracy {_pct(m['accuracy'])} | "
                         f"{_pct_ci(m['accuracy'], m.get('accuracy_ci95')).partition(' ')[2] or '-'} | "
                         f"{m['parse_failures']} | {failed} |")
        elif task == "nutrition":
            parts = ", ".join(f"{c} {_pct(m.get(f'{c}_mape'))}" for c in tasks.NUTRIENTS)
            lines.append(f"| nutrition | {m['n']} | Average MAPE {_pct(m['avg_mape'])} | "
                         f"{_pct_ci(m['avg_mape'], m.get('avg_mape_ci95')).partition(' ')[2] or '-'} | "
                         f"{m['parse_failures']} | {failed} |")
            notes.append(f"nutrition MAPE per component: {parts}")
        elif not m.get("scored"):
            lines.append(f"| vqa | {m['n']} | not scored (no judge) | - | - | {failed} |")
            notes.append(m["note"])
        else:
            lines.append(f"| vqa | {m['n']} | accuracy {_pct(m['accuracy'])} | "
                         f"{_pct_ci(m['accuracy'], m.get('accuracy_ci95')).partition(' ')[2] or '-'} | "
                         f"{m.get('unscored', 0)} unscored | {failed} |")
    return "\n".join(lines + [""] + notes).rstrip()
