"""Judge reliability (`python -m eval judge-agreement`): how far the VQA figure depends on who judges.

Each judge re-judges a run's answers; agreement and Cohen's kappa per pair, and the rule against each judge.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np

from diningbench import MAX_JSON_DEPTH, file_problem, iter_jsonl_objects, read_json_file
from eval import tasks
from eval.endpoints import host_of
from eval.judge import BackendJudge, JudgeError
from eval.limiter import START, threads_for
from eval.runinfo import read_run_json, recorded_judge
from eval.scoring import JUDGE_CACHE, METRICS, ScoringError, load_rows
from eval.settings import N_BOOT, RunSettings
from eval.stats import can_resample, cluster_bootstrap_ci
from eval.store import PREDICTIONS, RUN_FILE_BYTES, read_predictions
from metrics.judge_accuracy.core import (
    Judge,
    VerdictCache,
    build_judge_prompt,
    final_answer,
    judge_items,
    parse_verdict,
    rule_verdict,
)

AGREEMENT_JSON = "judge_agreement.json"
HUMAN = "human"
RULE = "rule"
MAX_LISTED = 50  # disagreements listed in the JSON and printed; the counts cover them all
_SPEC_URL_RE = re.compile(r"^(?P<spec>[^@]+)@(?P<url>https?://\S+)$")


# ---------------------------------------------------------------- figures
def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """Cohen's kappa of two raters' verdicts: (observed - chance agreement) / (1 - chance agreement). None
    when chance agreement is 1 (both raters gave one and the same verdict throughout: kappa is undefined,
    however perfect the agreement looks).

    >>> round(cohen_kappa("CCCI", "CCII"), 4)  # po 0.75, pe 0.75*0.5 + 0.25*0.5 = 0.5
    0.5
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"kappa needs two equal, non-empty verdict lists (got {len(a)} and {len(b)})")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    chance = sum((list(a).count(k) / n) * (list(b).count(k) / n) for k in set(a) | set(b))
    if math.isclose(chance, 1.0):
        return None
    return (observed - chance) / (1 - chance)


class Figures(TypedDict):
    """Two raters' agreement on the items both gave a verdict (fractions; an interval None where merchants
    cannot be resampled, kappa None where it is undefined)."""

    n: int
    agreement: float | None
    agreement_ci95: list[float] | None
    kappa: float | None
    kappa_ci95: list[float] | None


class Pair(Figures):
    a: str  # a rater: a judge's spec, or "human"
    b: str


class RuleCheck(Figures):
    judge: str  # the judge whose own verdicts the deterministic rule is held to


class Agreement(TypedDict, total=False):
    """judge_agreement.json: what `eval judge-agreement` found on a run's judged answers."""

    run: str  # the run folder's name
    raters: list[str]
    judge_all: bool  # every answer judged by each judge, or the verdicts the accuracy uses
    items: int
    judged: int  # answers compared (the others were empty or failed)
    no_answer: int
    rule_decided: int
    accuracy: dict[str, float | None]  # rater -> accuracy on the judged answers
    pairs: list[Pair]
    rule_vs_judge: list[RuleCheck]
    n_disagreements: int
    disagreements: list[dict[str, Any]]  # the first MAX_LISTED: id, epoch, merchant, question, answer, verdicts
    servers: dict[str, str | None]  # judge -> its server's host, never a URL


def compare(a: Sequence[str | None], b: Sequence[str | None], merchants: Sequence[str], *,
            n_boot: int = N_BOOT, seed: int = 0) -> Figures:
    """Agreement and kappa of two raters on the items both gave a verdict, with 95% intervals
    resampling merchants (NaN resamples, where kappa is undefined, are left out)."""
    kept = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x is not None and y is not None]
    out: Figures = {"n": len(kept), "agreement": None, "agreement_ci95": None, "kappa": None,
                           "kappa_ci95": None}
    if not kept:
        return out
    xs, ys = np.array([a[i] for i in kept]), np.array([b[i] for i in kept])
    clusters = [str(merchants[i]) for i in kept]
    out["agreement"] = float(np.mean(xs == ys))
    out["kappa"] = cohen_kappa(list(xs), list(ys))
    if can_resample(len(kept), clusters):
        def kappa_of(idx: np.ndarray) -> float:
            value = cohen_kappa(list(xs[idx]), list(ys[idx]))
            return float("nan") if value is None else value

        out["agreement_ci95"] = list(cluster_bootstrap_ci(len(kept), clusters, lambda idx: float(np.mean(
            xs[idx] == ys[idx])), n_boot=n_boot, seed=seed))
        if out["kappa"] is not None:
            low, high = cluster_bootstrap_ci(len(kept), clusters, kappa_of, n_boot=n_boot, seed=seed)
            out["kappa_ci95"] = None if math.isnan(low) else [low, high]
    return out


# ---------------------------------------------------------------- the run's items
@dataclass
class Item:
    """One VQA answer of the run, as judges see it."""

    id: str
    epoch: int
    merchant_id: str
    question: str
    reference: str
    raw: str | None
    rule: str | None  # the deterministic rule's verdict, None where it cannot decide

    @property
    def answer(self) -> str:
        return final_answer(self.raw)


def vqa_answers(run_dir: Path) -> list[Item]:
    """The run's VQA answers in dataset order, each with its rule verdict."""
    info = read_run_json(run_dir)
    if info is None or not (run_dir / PREDICTIONS).exists():
        raise ScoringError(f"{run_dir} is not a run folder (needs run.json and {PREDICTIONS})")
    settings = RunSettings.from_saved(info.get("settings") or {})
    lang = settings.lang
    predictions = [p for p in read_predictions(run_dir / PREDICTIONS).values() if tasks.is_judged(p.task)]
    if not predictions:
        raise ScoringError(f"{run_dir} has no VQA answers to judge")
    task = tasks.get(predictions[0].task)
    predictions = [p for p in predictions if p.task == task.name]
    rows = load_rows(task, settings.dataset)
    order = {item_id: n for n, item_id in enumerate(rows)}
    items = []
    for p in sorted(predictions, key=lambda p: (p.epoch, order.get(p.id, len(order)))):
        if p.id not in rows:
            raise ScoringError(f"{task.name}: a prediction for id {p.id} is not in the dataset; was the run made on "
                               "another --dataset?")
        row = rows[p.id]
        question, reference = task.question(row, lang) or "", task.reference(row, lang)
        raw = p.raw if p.error is None else None
        items.append(Item(p.id, p.epoch, str(row.get("merchant_id")), question, reference, raw,
                          rule_verdict(question, reference, final_answer(raw) or None)))
    return items


def judge_verdicts(items: Sequence[Item], judge: Judge, judge_model: str, cache_dir: Path, *,
                   concurrency: int = START) -> tuple[list[str | None], list[str | None]]:
    """(verdicts as the accuracy uses them, the judge's own verdicts) per item. The first come from the
    metric's `judge_items` (rule, then cache, then judge); the judge's own verdict on the items the rule
    decides is asked with the same prompt and the same cache, so it is asked once whatever is compared later.
    A failed or unreadable judge call is None."""
    results = judge_items([i.question for i in items], [i.reference for i in items], [i.raw for i in items],
                          judge, judge_model, cache_dir, concurrency=concurrency)
    used = [verdict for verdict, _, _ in results]
    own = list(used)
    ruled = [n for n, item in enumerate(items) if item.rule is not None]
    cache = VerdictCache(cache_dir, judge_model)

    def ask(n: int) -> str | None:
        prompt = build_judge_prompt(items[n].question, items[n].reference, items[n].raw)
        hit = cache.get(prompt)
        if hit is not None:
            return hit["verdict"]
        try:
            raw = judge(prompt)
        except Exception:  # noqa: BLE001 - a failed judge call leaves the item without this judge's verdict
            return None
        verdict = parse_verdict(raw)
        if verdict is not None:
            cache.put(prompt, verdict, raw)
        return verdict

    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        for n, verdict in zip(ruled, pool.map(ask, ruled), strict=True):
            own[n] = verdict
    return used, own


def read_human_labels(path: Path) -> dict[str, str]:
    """A JSONL file of `{"id": ..., "verdict": "C" | "I"}`; a bad line is an error naming it."""
    labels = {}
    for number, row in iter_jsonl_objects(Path(path), str(path), error=ScoringError, max_depth=MAX_JSON_DEPTH):
        if not isinstance(row.get("id"), str | int) or row.get("verdict") not in ("C", "I"):
            raise ScoringError(f'{path}: line {number} must be {{"id": ..., "verdict": "C" or "I"}}')
        labels[str(row["id"])] = row["verdict"]
    return labels


# ---------------------------------------------------------------- the whole comparison
def judge_agreement(run_dir: Path | str, judges: Mapping[str, Judge], *,
                    human_labels: Mapping[str, str] | None = None, judge_all: bool = False, n_boot: int = N_BOOT,
                    concurrency: int = START, cache_dir: Path | None = None) -> Agreement:
    """Re-judge a run's VQA answers with every judge (name -> callable) and compare; the result is what
    `judge_agreement.json` holds (written by `agreement_of_specs`). The verdicts compared are the ones the
    accuracy uses (the rule's where it decides), or with `judge_all` each judge's own; empty or failed answers
    are "I" for everybody and left out (nobody judged them); human labels are one more rater, on epoch 0."""
    run_dir = Path(run_dir)
    if len(judges) + (human_labels is not None) < 2:
        raise ScoringError("judge agreement needs two raters: give two judges, or a judge and human labels")
    items = vqa_answers(run_dir)
    judged = [i for i in items if i.answer]
    merchants = [i.merchant_id for i in judged]
    cache = Path(cache_dir or run_dir / JUDGE_CACHE)
    raters: dict[str, list[str | None]] = {}
    own_verdicts: dict[str, list[str | None]] = {}
    rule_checks: list[RuleCheck] = []
    ruled = [n for n, i in enumerate(judged) if i.rule is not None]
    for name, judge in judges.items():
        used, own = judge_verdicts(judged, judge, name, cache, concurrency=concurrency)
        raters[name] = own if judge_all else used
        own_verdicts[name] = own
        rule_checks.append({"judge": name, **compare([judged[n].rule for n in ruled], [own[n] for n in ruled],
                                                     [merchants[n] for n in ruled], n_boot=n_boot)})
    if human_labels is not None:
        raters[HUMAN] = [human_labels.get(i.id) if i.epoch == 0 else None for i in judged]
    names = list(raters)
    pairs: list[Pair] = [{"a": a, "b": b, **compare(raters[a], raters[b], merchants, n_boot=n_boot)}
             for k, a in enumerate(names) for b in names[k + 1:]]
    disagreements = []
    for n, item in enumerate(judged):
        # Where the rule decides, each judge's own verdict is shown beside it: that is where they can differ.
        verdicts = {name: own_verdicts[name][n] if name in own_verdicts else raters[name][n] for name in names}
        if item.rule is not None:
            verdicts[RULE] = item.rule
        if len({v for v in verdicts.values() if v is not None}) > 1:
            disagreements.append({"id": item.id, "epoch": item.epoch, "merchant_id": item.merchant_id,
                                  "question": item.question, "reference": item.reference,
                                  "answer": item.answer[:400], "verdicts": verdicts})
    return {"run": run_dir.name, "raters": names, "judge_all": judge_all, "items": len(items),
            "judged": len(judged), "no_answer": len(items) - len(judged), "rule_decided": len(ruled),
            "accuracy": {name: (sum(v == "C" for v in raters[name]) / len(judged) if judged else None)
                         for name in names},
            "pairs": pairs, "rule_vs_judge": rule_checks, "n_disagreements": len(disagreements),
            "disagreements": disagreements[:MAX_LISTED]}


def parse_judge_spec(text: str) -> tuple[str, str | None]:
    """`SPEC` or `SPEC@BASE_URL` (a judge on its own server).

    >>> parse_judge_spec("openai:Qwen3-VL@http://localhost:8000/v1")
    ('openai:Qwen3-VL', 'http://localhost:8000/v1')
    >>> parse_judge_spec("openai:gpt-4o")
    ('openai:gpt-4o', None)
    """
    text = text.strip()
    match = _SPEC_URL_RE.match(text)
    return (match["spec"], match["url"]) if match else (text, None)


def agreement_of_specs(run_dir: Path | str, specs: Sequence[str], *, human_labels: Path | None = None,
                       judge_all: bool = False, n_boot: int = N_BOOT, base_url: str | None = None
                       ) -> Agreement:
    """`judge_agreement` with judges built from specs (`SPEC` or `SPEC@BASE_URL`; `base_url` for the
    others); writes judge_agreement.json and returns its content. Only a server's host is recorded."""
    run_dir = Path(run_dir)
    info = read_run_json(run_dir) or {}
    settings = RunSettings.from_saved(info.get("settings") or {})
    parsed = [parse_judge_spec(s) for s in specs if s.strip()]
    if len({spec for spec, _ in parsed}) != len(parsed):
        raise ScoringError("--judges: each judge once (the same spec twice would be compared with itself)")
    judges = {}
    try:
        for spec, url in parsed:
            judge = BackendJudge.from_settings(spec, url or base_url, settings)
            judges[spec] = judge
            judge.check()
        labels = read_human_labels(human_labels) if human_labels is not None else None
        result = judge_agreement(run_dir, judges, human_labels=labels, judge_all=judge_all, n_boot=n_boot,
                                 concurrency=threads_for(settings.concurrency, settings.max_concurrency))
    except JudgeError as exc:
        raise ScoringError(str(exc)) from None
    finally:
        for judge in judges.values():
            judge.close()
    result["servers"] = {spec: host_of(url or base_url) for spec, url in parsed}
    (run_dir / AGREEMENT_JSON).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


def _folder_json(run_dir: Path, name: str) -> dict[str, Any] | None:
    """A JSON object file of a run folder, which may come from anywhere, or None: absent, not a regular file,
    a link out of the folder, past the run files' size, nested too deep, or not a JSON object."""
    path = Path(run_dir) / name
    try:
        if not path.exists() or file_problem(path, Path(run_dir), max_bytes=RUN_FILE_BYTES) is not None:
            return None
        found = read_json_file(path, max_bytes=RUN_FILE_BYTES)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _pair(found: Any) -> bool:
    """A judge_agreement.json pair the report can show: two raters' names, a count, an agreement and a kappa."""
    return (isinstance(found, dict) and isinstance(found.get("a"), str) and isinstance(found.get("b"), str)
            and isinstance(found.get("n"), int) and not isinstance(found["n"], bool)
            and all(found.get(k) is None or isinstance(found[k], int | float) and not isinstance(found[k], bool)
                    for k in ("agreement", "kappa")))


def read_agreement(run_dir: Path | str) -> Agreement | None:
    """judge_agreement.json of a run folder, or None (absent or unreadable); its `pairs` are those that hold
    what a report shows (the raters' names, a count, numbers), any other left out."""
    found = _folder_json(Path(run_dir), AGREEMENT_JSON)
    if found is None:
        return None
    pairs = found.get("pairs")
    return cast(Agreement, {**found, "pairs": [p for p in pairs if _pair(p)] if isinstance(pairs, list) else []})


def scoring_judge(run_dir: Path | str) -> str | None:
    """The judge that scored the run's judged task last (metrics.json; run.json's when the run judged as it
    went)."""
    metrics = _folder_json(Path(run_dir), METRICS) or {}
    for task in tasks.all_tasks():
        entry = metrics.get(task.name)
        if task.judged and isinstance(entry, dict) and isinstance(entry.get("judge"), str):
            return entry["judge"]
    return recorded_judge(read_run_json(Path(run_dir)) or {})[0]
