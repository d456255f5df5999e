"""Scoring: saved predictions + dataset references -> scores.jsonl, metrics.json, report.md.

Generation and scoring meet only in predictions.jsonl, so a run can be re-scored (e.g. with a
judge added later) without asking the model again. Per-item verdicts come from the metrics modules'
pure functions (`metrics/*/`), figures and intervals from `eval.numbers`: this module joins.

scores.jsonl — one JSON object per line, one line per scored item (all tasks of the run folder):

    id             str    item id (unique within its task)
    task           str    "classification" | "nutrition" | "vqa"
    merchant_id    str    the bootstrap cluster
    cuisine        str
    category       str    the menu category
    vqa_category   str | null   (vqa only)
    nutrition_source str | null (nutrition only)
    epoch          int    0, or k for the k-th repeat of `--epochs`
    n_images       int    images actually sent with the request
    n_options      int | null   classification only: options offered (chance is 1 / n_options)
    parsed         the task parser's output: letter | {calories, protein, carbohydrates, fat} | answer
                   text (vqa); null when unparsed or when the sample failed
    error          str | null   generation error (a failed sample: scored as a failure, never dropped)
    truncated      bool   the token limit cut the answer (finish reason `length`)
    finish_reason  str | null   as the backend normalised it (`stop`, `length`, ...)
    usage          {prompt_tokens, completion_tokens, reasoning_tokens} | null   as the server reported
    reference      letter | {calories, protein, carbohydrates, fat} | reference answer text (vqa)
    correct        bool | null  classification: parsed == reference (unparsed/failed = false);
                                vqa: verdict == "C" (null while unscored); nutrition: null
    ape            {component: fraction | null} | null  nutrition only: |pred - gt| / gt; null for a
                   component whose gt == 0; 1.0 for every component when unparsed or failed
    abs_error      {component: float} | null  nutrition only: |pred - gt| (unparsed: |gt|)
    verdict        "C" | "I" | null   vqa only: judge or rule verdict; null = unscored
    injection_suspected bool   vqa only, when judged: the answer carried text aimed at the judge
    decided_by     "rule" | "judge" | null   vqa only: who decided the verdict

rotations.jsonl (`run --circular` only) — the classification answers to rotated options, the same
fields (reference and parsed letters as that rotation showed them) plus `rotation` (1..n-1) and
`n_options`; scores.jsonl keeps rotation 0, the item as stored (eval/circular.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from eval import circular, numbers, official, tasks
from eval.images import select_views
from eval.judge import BackendJudge, JudgeError
from eval.limiter import MAX_CONCURRENCY, START, threads_for
from eval.runinfo import read_run_json
from eval.settings import N_BOOT, RunSettings, image_indices
from eval.specs import SpecError, parse_spec
from eval.store import PREDICTIONS, Key, json_text, key_of, read_predictions, write_atomically
from eval.types import DEFAULT_MAX_TOKENS, Prediction, UserError
from metrics.judge_accuracy.core import (
    VerdictCache,
    final_answer,
    injection_suspected,
    judge_items,
    score_verdicts,
)

SCORES = "scores.jsonl"
METRICS = "metrics.json"
JUDGE_CACHE = "judge_cache"
# judge_items' provenance -> scores.jsonl's decided_by: a cached verdict was a judge's; a missing
# answer ("I") and an unscored item were decided by nobody.
DECIDED_BY = {"rule": "rule", "judge": "judge", "cache": "judge"}
NO_JUDGE_NOTE = ("VQA is not scored: no judge configured. Re-score with a judge, e.g. "
                 "`python -m eval score DIR --judge openai:gpt-4o` (set OPENAI_API_KEY) or "
                 "`--judge openai:MODEL --judge-base-url http://localhost:8000/v1` for a local server.")


class ScoringError(UserError):
    """A run folder that cannot be scored (one-line message)."""


# ---------------------------------------------------------------- per item
def item_record(task: str, row: dict[str, Any], prediction: Prediction, *, lang: str,
                n_images: int | None = None) -> dict[str, Any]:
    """The scores.jsonl line of one item before task scoring fills correct/ape/verdict."""
    spec = tasks.get(task)
    failed = prediction.error is not None
    record = {
        "id": str(row["id"]), "task": task, "epoch": prediction.epoch, "merchant_id": row.get("merchant_id"),
        "cuisine": row.get("cuisine"), "category": row.get("category"),
        "vqa_category": None, "nutrition_source": None,
        "n_images": prediction.n_images if n_images is None else n_images,
        "n_options": spec.n_options(row),
        "parsed": None if failed else prediction.parsed, "error": prediction.error,
        "truncated": prediction.truncated, "finish_reason": prediction.finish_reason, "usage": prediction.usage,
        "reference": spec.reference(row, lang),
        "correct": None, "ape": None, "abs_error": None, "verdict": None, "decided_by": None,
    }
    record.update({name: row.get(name) for name in spec.item_fields})
    return record


def score_prediction(prediction: Prediction, row: dict[str, Any], lang: str = "zh") -> dict[str, Any]:
    """One live prediction scored on its own (the Space): a scores.jsonl-like dict; a judged task's item
    stays unscored.

    Its answer was parsed when it was made (`prediction.parsed`), so it is not parsed again."""
    record = item_record(prediction.task, row, prediction, lang=lang)
    spec = tasks.get(prediction.task)
    if not spec.judged:
        spec.score([record], [record["parsed"]], [row], lang)
    return record


def parsed_answers(task: str, predictions: Sequence[Prediction], rows: Sequence[dict[str, Any]], lang: str,
                   fresh: Collection[Key] = ()) -> list[Any]:
    """Each prediction's parsed answer (None when it failed): kept as parsed when it was made in this
    process (`fresh`: its key), else parsed now from the raw text (an older parser may have written
    the saved one). Either way each answer is parsed once per run."""
    return [None if p.error is not None or p.raw is None
            else p.parsed if key_of(p) in fresh
            else tasks.parse_output(task, p.raw, row, lang)
            for p, row in zip(predictions, rows, strict=True)]


# ---------------------------------------------------------------- per task
def score_rotations(task: str, predictions: Sequence[Prediction], by_id: dict[str, dict[str, Any]],
                    plain: list[dict[str, Any]], lang: str, n_boot: int = N_BOOT, fresh: Collection[Key] = ()
                    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`--circular`: the rotated answers scored against the letter their rotation moved the answer to
    (rotations.jsonl lines), and the circular figures of the task's entry."""
    spec = tasks.get(task)
    rows = [spec.rotate(by_id[p.id], p.rotation) for p in predictions]
    records = [{**item_record(task, row, p, lang=lang), "rotation": p.rotation} for row, p in zip(rows, predictions, strict=True)]
    spec.score(records, parsed_answers(task, predictions, rows, lang, fresh), rows, lang)
    found = circular.circular_figures(plain, records, n_boot=n_boot) or {}
    headline = {k: found.pop(k, None) for k in ("circular_accuracy", "circular_accuracy_ci95")}
    return records, {**headline, "circular": found}


def score_task(task: str, records: list[dict[str, Any]], parsed: list[Any], rows: Sequence[dict[str, Any]],
               lang: str, n_boot: int = N_BOOT) -> dict[str, Any]:
    """Each record's score from its parsed answer (None = unparsed or failed) and the task's figures."""
    result = tasks.get(task).score(records, parsed, rows, lang)
    return numbers.task_figures(task, records, result, n_boot=n_boot)


def score_judged(task: str, records: list[dict[str, Any]], raws: list[str | None], questions: list[str],
                 judge: Callable[[str], str] | None, judge_model: str | None, cache_dir: Path,
                 concurrency: int = START, n_boot: int = N_BOOT) -> dict[str, Any]:
    """Rule, cached or judge verdicts per item (judge_accuracy decides; failed samples are "I").

    The judge reads the raw answers through the metric's own `final_answer`, exactly as the
    judge_accuracy metric does, so both give one verdict (and one cache entry) per answer.
    """
    if judge is None:
        return {"scored": False, "n": len(records), **numbers.outcome_counts(records),
                "tokens": numbers.token_totals(records), "note": NO_JUDGE_NOTE}
    results = judge_items(questions, [r["reference"] for r in records], raws, judge, judge_model,
                          cache_dir, concurrency=concurrency)
    verdicts = [verdict for verdict, _, _ in results]
    decided = [decided_by for _, decided_by, _ in results]
    for record, raw, verdict, decided_by in zip(records, raws, verdicts, decided, strict=True):
        record["verdict"] = verdict
        record["decided_by"] = DECIDED_BY.get(decided_by)
        record["correct"] = None if verdict is None else verdict == "C"
        record["injection_suspected"] = injection_suspected(final_answer(raw))
    result = score_verdicts(verdicts, decided)
    metrics = numbers.task_figures(task, records, result, n_boot=n_boot)
    metrics.update(scored=True, judge=judge_model, judge_errors=sum(d == "judge_error" for d in decided),
                   injection_suspected=sum(r["injection_suspected"] for r in records))
    return metrics


# ---------------------------------------------------------------- the authors' protocol
def served_name(spec: str | None) -> str:
    """The model name their scripts know a model by (`--model_name`): the spec's model part."""
    try:
        return parse_spec(spec or "")[1]
    except SpecError:
        return str(spec or "")


def official_preds(task: str, predictions: Sequence[Prediction], rows: Sequence[dict[str, Any]],
                   model: str | None, indices: str | None = None) -> dict[int, dict[str, Any]]:
    """Each answer as a line of their prediction file, by `idx`: `model_pred` (their cleaning of the
    text, or the failure marker) and, for classification, the `gt_answer` their inference writes.
    A request their script cannot make for a row (`Task.official_fails`) is their failure marker."""
    spec, name = tasks.get(task), served_name(model)
    chosen = image_indices(indices)
    found: dict[int, dict[str, Any]] = {}
    for p, row in zip(predictions, rows, strict=True):
        kept = p.official or {}  # an imported line: what their file says
        broken = spec.official_fails(row, chosen)
        line: dict[str, Any] = {"model_pred": kept["model_pred"] if isinstance(kept.get("model_pred"), str)
                                else official.infer_error(broken) if broken
                                else official.model_pred(p.raw, p.error, name)}
        if spec.has_options:
            line["gt_answer"] = kept["gt_answer"] if "gt_answer" in kept else official.classification_gt(row)
        if isinstance(kept.get("eval_match"), bool):
            line.update(eval_match=kept["eval_match"], eval_result=kept.get("eval_result"))
        found[int(row["idx"])] = line
    return found


def official_judge(records: list[dict[str, Any]], preds: dict[int, dict[str, Any]],
                   file_rows: Sequence[dict[str, Any]], judge: BackendJudge | None, judge_model: str | None,
                   cache_dir: Path, concurrency: int) -> None:
    """Their judge step: the Chinese judge prompt for each answer that counts, its reply read by their
    keywords (`eval_match`, `eval_result` on the prediction line); an empty or failed answer is wrong
    without a call; a judge that fails its attempts gives `__EVAL_ERROR__` and counts wrong, as theirs."""
    by_idx = {r["official"]["idx"]: r for r in records if "official" in r}
    for i, record in by_idx.items():  # verdicts their file already holds (an imported, judged run)
        if "eval_match" in preds.get(i, {}):
            record["official"].update(correct=preds[i]["eval_match"], judge_reply=preds[i].get("eval_result"),
                                      strict=official.strict_verdict(preds[i].get("eval_result")))
    if judge is None:
        return
    cache = VerdictCache(cache_dir, judge_model or "")
    error = official.facts()["error_marker"]["judge"]
    pending = []
    for i, answer, reference, question, failed in official.vqa_tasks(file_rows, preds):
        if "eval_match" in preds[i]:
            continue
        if failed:
            preds[i].update(eval_match=False, eval_result=official.facts()["error_marker"]["inference"])
        else:
            pending.append((i, official.judge_prompt(question, reference, answer)))

    def ask(prompt: str) -> str:
        hit = cache.get(prompt)
        if hit is not None:
            return str(hit["raw"])
        try:
            reply = judge(prompt).strip()
        except JudgeError:
            return error
        cache.put(prompt, "C" if official.keyword_verdict(reply) else "I", reply)
        return reply

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        replies = list(pool.map(ask, [prompt for _, prompt in pending]))
    for (i, _), reply in zip(pending, replies, strict=True):
        match = reply != error and official.keyword_verdict(reply)
        preds[i].update(eval_match=match, eval_result=reply)
        found = by_idx.get(i)
        if found is not None:
            found["official"].update(correct=match, judge_reply=reply, strict=official.strict_verdict(reply))


def score_official(task: str, records: list[dict[str, Any]], predictions: Sequence[Prediction],
                   by_id: dict[str, dict[str, Any]], settings: dict[str, Any], judge: BackendJudge | None,
                   judge_model: str | None, cache_dir: Path) -> dict[str, Any]:
    """The `official` object of a task's metrics.json entry: exactly the figures their script prints
    for these answers (epoch 0), and each record's `official` reading beside ours."""
    spec = tasks.get(task)
    file_rows = sorted(by_id.values(), key=lambda r: int(r["idx"]))
    plain = [p for p in predictions if p.epoch == 0 and not p.rotation]
    item_rows = [by_id[p.id] for p in plain]
    preds = official_preds(task, plain, item_rows, settings.get("model"), settings.get("image_indices"))
    scored = {r["id"]: r for r in records if r.get("epoch", 0) == 0}
    for p, row in zip(plain, item_rows, strict=True):
        line = preds[int(row["idx"])]
        if p.id in scored:
            scored[p.id]["official"] = {"idx": int(row["idx"]), "model_pred": line["model_pred"],
                                        **spec.official_item(line["model_pred"], row, line.get("gt_answer"))}
    if spec.judged:
        official_judge(records, preds, file_rows, judge, judge_model, cache_dir,
                       threads_for(settings.get("concurrency") or RunSettings.concurrency,
                                   int(settings.get("max_concurrency") or MAX_CONCURRENCY)))
    figures = spec.official_figures(file_rows, preds)
    return {"official": figures, "official_disagreements": disagreements(task, list(scored.values()))}


def strict_verdict_of(record: dict[str, Any]) -> str | None:
    """Ours beside theirs for one judged answer, set on its record: wrong when their step did not judge
    it (empty or failed), else their judge's reply read strictly; None (unscored) for a reply that says
    neither yes nor no plainly, or none."""
    mine = record.get("official") or {}
    if mine.get("judged") is False:
        verdict: str | None = "I"
    elif mine.get("strict") is not None:
        verdict = "C" if mine["strict"] else "I"
    else:
        verdict = None
    record.update(verdict=verdict, decided_by="judge" if verdict else None,
                  correct=None if verdict is None else verdict == "C")
    return verdict


def score_strict_judged(task: str, records: list[dict[str, Any]], judge_model: str | None,
                        n_boot: int = N_BOOT) -> dict[str, Any]:
    """Ours beside theirs for a judged task under the authors' protocol: the same judge reply read
    strictly (one word that says yes or no, `official.strict_verdict`); a failed or empty answer is
    wrong; a reply that says neither plainly leaves the item unscored."""
    verdicts = [strict_verdict_of(record) for record in records]
    has_replies = any("judge_reply" in (r.get("official") or {}) for r in records)
    if not has_replies:
        return {"scored": False, "n": len(records), **numbers.outcome_counts(records),
                "tokens": numbers.token_totals(records), "note": NO_JUDGE_NOTE}
    result = score_verdicts(verdicts, ["judge" if v else "unscored" for v in verdicts])
    found = numbers.task_figures(task, records, result, n_boot=n_boot)
    found.update(scored=True, judge=judge_model, judge_errors=0, injection_suspected=0)
    return found


def usable_reference(task: str, row: dict[str, Any], lang: str) -> bool:
    """Whether this project's scoring can read the row's reference (the authors' scoring runs either way)."""
    try:
        tasks.reference_of(task, row, lang)
    except (ValueError, TypeError, KeyError):
        return False
    return True


def disagreements(task: str, records: Sequence[dict[str, Any]]) -> int:
    """Items on which their reading and ours differ: right against wrong (classification, VQA), or
    read against unread or other values (nutrition)."""
    spec, count = tasks.get(task), 0
    for record in records:
        mine = record.get("official") or {}
        if spec.measure == "ape":
            ours = record.get("parsed")
            theirs = mine.get("read")
            if ours is None or theirs is None:
                same = ours is None and theirs is None
            else:
                same = all(_number(theirs.get(k)) == _number(ours.get(k)) for k in spec.components)
            count += not same
        elif spec.judged:
            strict = mine.get("strict")
            count += mine.get("correct") is not None and strict is not None and strict != mine.get("correct")
        else:
            count += bool(mine.get("correct")) != bool(record.get("correct"))
    return count


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


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


def _views_sent(row: dict[str, Any], settings: dict[str, Any]) -> int:
    """Views a prediction line written before `n_images` was kept had: recomputed from its settings."""
    return len(select_views(row.get("image_roles") or [], settings.get("images"),
                            settings.get("image_order") or RunSettings.image_order,
                            seed=int(settings.get("seed") or 0), item_id=str(row["id"])))


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
    settings = info.get("settings") or {}
    lang = settings.get("lang") or "zh"
    if judge is None and isinstance(info.get("judge"), dict):
        judge = info["judge"].get("spec")
        if info["judge"].get("base_url_host") and judge_base_url is None:
            raise ScoringError(f"the run was judged through a server at {info['judge']['base_url_host']}: "
                               "pass --judge-base-url again (URLs are not stored)")
    if predictions is None:
        predictions = read_predictions(run_dir / PREDICTIONS)
    concurrency = settings.get("concurrency") or RunSettings.concurrency
    max_concurrency = int(settings.get("max_concurrency") or MAX_CONCURRENCY)
    judge_fn = BackendJudge(judge, judge_base_url, timeout=float(settings.get("timeout") or RunSettings.timeout),
                            max_tokens=int(settings.get("max_tokens") or DEFAULT_MAX_TOKENS), concurrency=concurrency,
                            max_concurrency=max_concurrency) if judge else None
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
                task, settings.get("dataset"), lang)
            unknown = sorted({p.id for p in mine} - set(by_id))
            if unknown:
                raise ScoringError(f"{task}: predictions for ids not in the dataset ({', '.join(unknown[:5])}); "
                                   "was the run made on another --dataset?")
            order = {item_id: n for n, item_id in enumerate(by_id)}
            mine.sort(key=lambda p: (p.epoch, order[p.id], p.rotation))  # dataset order, epoch by epoch
            answered = mine  # every answer: the authors' scoring reads them all
            if settings.get("protocol") == "official":  # ours reads the rows whose reference it can read
                mine = [p for p in mine if usable_reference(task, by_id[p.id], lang)]
            rotated = [p for p in mine if p.rotation]  # --circular: scored apart, into rotations.jsonl
            mine = [p for p in mine if not p.rotation]
            records = [item_record(task, by_id[p.id], p, lang=lang,
                                   n_images=None if p.n_images is not None else _views_sent(by_id[p.id], settings))
                       for p in mine]
            spec = tasks.get(task)
            official_protocol = settings.get("protocol") == "official"
            if spec.judged and official_protocol:
                pass  # ours reads the authors' judge's reply strictly (score_strict_judged, below): one call per item
            elif spec.judged:
                raws = [tasks.parse_input(p.raw) if p.error is None and p.raw is not None else None for p in mine]
                metrics[task] = score_judged(task, records, raws, [spec.question(by_id[p.id], lang) or "" for p in mine],
                                             judge_fn, judge, Path(judge_cache or run_dir / JUDGE_CACHE),
                                             concurrency=threads_for(concurrency, max_concurrency),
                                             n_boot=n_boot)
            else:
                item_rows = [by_id[p.id] for p in mine]
                metrics[task] = score_task(task, records, parsed_answers(task, mine, item_rows, lang, fresh), item_rows,
                                           lang, n_boot)
                if rotated:
                    rotated_records, found = score_rotations(task, rotated, by_id, records, lang, n_boot, fresh)
                    metrics[task].update(found)
            if official_protocol:
                official_judge_fn = None
                if spec.judged and judge:
                    official_judge_fn = BackendJudge(judge, judge_base_url, seed=None, concurrency=concurrency,
                                                     max_concurrency=max_concurrency,
                                                     timeout=float(settings.get("timeout") or RunSettings.timeout),
                                                     max_attempts=int(official.facts()["vqa"]["judge_attempts"]),
                                                     max_tokens=int(official.facts()["vqa"]["judge_max_tokens"]))
                try:
                    found = score_official(task, records, answered, by_id, settings, official_judge_fn,
                                           judge, Path(judge_cache or run_dir / JUDGE_CACHE))
                    if spec.judged:
                        metrics[task] = score_strict_judged(task, records, judge, n_boot)
                    metrics[task].update(found)
                    if len(answered) > len(mine):
                        metrics[task]["ours_left_out"] = len(answered) - len(mine)
                finally:
                    if official_judge_fn is not None:
                        official_judge_fn.close()
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
