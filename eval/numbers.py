"""The one place headline numbers (figures) and their intervals are computed, from scored items (scores.jsonl
lines), for metrics.json and every report alike; the formulas stay in the metrics modules."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

import numpy as np
import orjson

from eval import tasks
from eval.settings import N_BOOT
from eval.stats import (
    Statistic,
    can_resample,
    cluster_bootstrap_column_means_ci,
    cluster_bootstrap_mean_ci,
    mean_of_column_means,
    paired_bootstrap,
)
from eval.types import NUTRIENTS, ScoreRecord, TaskFigures
from metrics.nutrition_error.core import nutrition_figures, score_nutrition


# ---------------------------------------------------------------- figures
def score_nutrition_rows(rows: Sequence[ScoreRecord]) -> dict[str, Any]:
    """The nutrition metric's own figures for these items (unparsed/failed items stay unparsed). Read from
    each item's scores (its `abs_error` and `parsed`), as scoring wrote them: nothing is parsed or scored
    again. Items without them (written by other tools) are scored from `parsed`."""
    if rows and all(isinstance(r.get("abs_error"), dict) for r in rows):
        # A report asks for the same items' figures in several tables (headline, Table 2, the card).
        key = (id(rows), len(rows), id(rows[-1]))
        if key in _FIGURES_MEMO and _FIGURES_MEMO[key][0] is rows:
            return _FIGURES_MEMO[key][1]
        per_item = [{"parsed": r["parsed"] if isinstance(r.get("parsed"), dict) and not r.get("error") else None,
                     "abs_error": r["abs_error"]} for r in rows]
        found = nutrition_figures(per_item, [r["reference"] for r in rows])
        _remember(_FIGURES_MEMO, key, (rows, found), 64)  # holding `rows` keeps its id from being reused
        return found
    predictions = [r["parsed"] if isinstance(r.get("parsed"), dict) and not r.get("error") else ""
                   for r in rows]
    return score_nutrition(predictions, [r["reference"] for r in rows])


_FIGURES_MEMO: dict[tuple[int, int, int], tuple[Sequence[ScoreRecord], dict[str, Any]]] = {}


def _remember(memo: dict[Any, Any], key: Any, value: Any, limit: int = 256) -> None:
    if len(memo) > limit:  # long-lived callers (the Space) must not grow it forever
        memo.clear()
    memo[key] = value


def component(figures: dict[str, Any], nutrient: str, stat: str) -> float | None:
    """`calories_mae`-style key from the nutrition metric's output (flat or nested)."""
    value = figures.get(f"{nutrient}_{stat}")
    if value is None and isinstance(figures.get(nutrient), dict):
        value = figures[nutrient].get(stat)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def any_answered(rows: Sequence[ScoreRecord]) -> bool:
    """Whether any item got an answer (its generation did not fail)."""
    return any(r.get("error") is None for r in rows)


def headline(task: tasks.Task, rows: Sequence[ScoreRecord]) -> float | None:
    """The figure Table 2 ranks by: accuracy, or Average MAPE for nutrition (both fractions). None when no
    item was answered (every generation failed): 0% accuracy or 100% MAPE would score the server's refusals as
    the model's answers.

    >>> from eval.tasks.vqa import TASK as vqa
    >>> headline(vqa, [{"error": "HTTP 400", "correct": False}, {"error": "HTTP 400", "correct": False}]) is None
    True
    """
    if rows and not any_answered(rows):
        return None
    if task.measure == "ape":
        value = score_nutrition_rows(rows).get("avg_mape")
        return None if value is None else float(value)
    if not rows or all(r.get("correct") is None for r in rows):  # no item scored at all (VQA without a judge)
        return None
    return sum(r.get("correct") is True for r in rows) / len(rows)  # unparsed, failed, unscored: not correct


def clusters(rows: Sequence[ScoreRecord]) -> list[str]:
    """What each row's interval resamples it with: its merchant, or, where the release names none (the
    authors' release carries no merchant), the item itself, all its epochs together."""
    return [str(r["merchant_id"]) if r.get("merchant_id") is not None else f"item:{r.get('task')}:{r.get('id')}"
            for r in rows]


def resampled_unit(rows: Sequence[ScoreRecord]) -> str:
    """"merchants" when the rows name their merchants, else "items" (`clusters`)."""
    return "merchants" if any(r.get("merchant_id") is not None for r in rows) else "items"


def trials(rows: Sequence[ScoreRecord]) -> int:
    """How many merchants (or items, where none is named) an interval of these rows resamples (`clusters`)."""
    return len(set(clusters(rows)))


def resampled_words(units: set[str]) -> str:
    """How a text says what its intervals resampled, from the units the runs record (`resampled`).

    >>> resampled_words({"merchants"}), resampled_words({"items"})
    ('whole merchants (items of one restaurant are not independent)', 'items (the release names no merchant)')
    """
    if units <= {"merchants"}:
        return "whole merchants (items of one restaurant are not independent)"
    if units == {"items"}:
        return "items (the release names no merchant)"
    return "whole merchants where the release names them (items of one restaurant are not independent), else items"


def headline_ci(task: tasks.Task, rows: Sequence[ScoreRecord], *, n_boot: int = N_BOOT,
                seed: int = 0) -> tuple[float, float] | None:
    """95% interval for `headline`, resampling merchants (the items' `merchant_id`). Memoised per item list: a
    report shows the same interval in several tables and plots, and a nutrition interval calls the metric once
    per resample."""
    key = (task.name, id(rows), n_boot, seed)
    if key in _CI_MEMO and _CI_MEMO[key][0] is rows:
        return _CI_MEMO[key][1]
    # A nutrition interval costs O(items x resamples): the same items read back from scores.jsonl
    # (the report, right after scoring) get the interval scoring computed, by their content.
    by_ape = task.measure == "ape"
    content = (task.name, _content_digest(rows), n_boot, seed) if by_ape else None
    if content is not None and content in _CI_BY_CONTENT:
        _CI_MEMO[key] = (rows, _CI_BY_CONTENT[content])
        return _CI_BY_CONTENT[content]
    interval: tuple[float, float] | None = None
    merchants = clusters(rows)
    if rows and headline(task, rows) is not None and can_resample(len(rows), merchants):
        if by_ape:
            interval = cluster_bootstrap_column_means_ci(_nutrition_ape(rows), merchants, n_boot=n_boot, seed=seed)
        else:
            interval = cluster_bootstrap_mean_ci([float(r.get("correct") is True) for r in rows], merchants,
                                                 n_boot=n_boot, seed=seed)
    if interval is not None and interval[0] == interval[1] in (0.0, 1.0) and not by_ape:
        interval = one_sided_bound(interval[0], len(set(merchants)))
    _remember(_CI_MEMO, key, (rows, interval))  # holding `rows` keeps its id from being reused
    if content is not None:
        _remember(_CI_BY_CONTENT, content, interval)
    return interval


def one_sided_bound(value: float, merchants: int) -> tuple[float, float]:
    """All right (1.0) or all wrong (0.0): the bootstrap has nothing to resample and would say
    `[1.00, 1.00]`; the one-sided 95% Clopper-Pearson bound, counting merchants as the trials (items of
    one merchant are not independent, so this is the cautious count), instead.

    >>> [round(x, 4) for x in one_sided_bound(1.0, 5) + one_sided_bound(0.0, 30)]
    [0.5493, 1.0, 0.0, 0.095]
    """
    bound = 0.05 ** (1 / max(merchants, 1))
    return (bound, 1.0) if value >= 1.0 else (0.0, 1.0 - bound)


_CI_MEMO: dict[tuple[str, int, int, int], tuple[Sequence[ScoreRecord], tuple[float, float] | None]] = {}
_CI_BY_CONTENT: dict[tuple[str, str, int, int], tuple[float, float] | None] = {}


def _content_digest(rows: Sequence[ScoreRecord]) -> str:
    """What a headline interval depends on, item by item, in order: equal digests, equal intervals."""
    fields = [[r.get("merchant_id"), r.get("correct"), r.get("ape"), r.get("abs_error"), r.get("parsed"),
               r.get("error") is not None, r.get("reference")] for r in rows]
    try:  # orjson: the same digest for the same content, about 8x faster than json.dumps
        text = orjson.dumps(fields, default=str, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson refuses (an integer past 64 bits, a non-text key)
        text = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(text).hexdigest()


def _nutrition_statistic(rows: Sequence[ScoreRecord]) -> Statistic:
    """avg_mape of a resample, from the items' APEs."""
    return mean_of_column_means(_nutrition_ape(rows))


def _nutrition_ape(rows: Sequence[ScoreRecord]) -> np.ndarray:
    """The items x nutrients APE matrix (NaN = not counted) whose mean of column means is avg_mape: the
    metric's per-item APEs, as scored (never one metric call per resample)."""
    # The records themselves when they carry their APEs, else the metric's per-item results (which do).
    per_item: Sequence[Mapping[str, Any]] = rows if all(isinstance(r.get("ape"), dict) for r in rows) else score_nutrition_rows(rows)["per_item"]
    return np.array([[np.nan if item["ape"][c] is None else item["ape"][c] for c in NUTRIENTS] for item in per_item],
                    dtype=float).reshape(len(per_item), len(NUTRIENTS))


def _correct_statistic(rows: Sequence[ScoreRecord]) -> Statistic:
    values = np.array([float(r.get("correct") is True) for r in rows])
    return lambda indices: float(values[indices].mean())


def paired_difference(task: tasks.Task, rows_a: Sequence[ScoreRecord], rows_b: Sequence[ScoreRecord], *,
                      n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any] | None:
    """Headline of run A minus run B on the items both scored, with a paired cluster-bootstrap interval."""
    by_id = {r["id"]: r for r in rows_b}
    common = [(a, by_id[a["id"]]) for a in rows_a if a["id"] in by_id]
    if not common:
        return None
    a_rows, b_rows = [a for a, _ in common], [b for _, b in common]
    if headline(task, a_rows) is None or headline(task, b_rows) is None:
        return None
    make = _nutrition_statistic if task.measure == "ape" else _correct_statistic  # one call per resample
    diff, interval = paired_bootstrap(len(common), clusters(a_rows),
                                      make(a_rows), make(b_rows), n_boot=n_boot, seed=seed)
    return {"n": len(common), "diff": diff, "ci95": interval}


def breakdown(rows: Sequence[ScoreRecord], dimension: str) -> list[tuple[str, list[ScoreRecord]]]:
    """Items grouped by one field, largest group first (image counts in numeric order)."""
    groups: dict[str, list[ScoreRecord]] = {}
    for row in rows:
        groups.setdefault("(none)" if (value := row.get(dimension)) is None else str(value), []).append(row)
    if dimension == "n_images":
        return sorted(groups.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0))
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


N_OPTIONS = 8  # options per classification item when a record does not say (every release has 8)


def chance_accuracy(records: Sequence[ScoreRecord]) -> float | None:
    """Expected classification accuracy of a uniform guess: the mean over items of 1/options.

    >>> chance_accuracy([{"n_options": 8}, {"n_options": 4}])
    0.1875
    >>> chance_accuracy([{"id": "c1"}])  # a record written before n_options was kept: 8 options
    0.125
    """
    return sum(1 / int(r.get("n_options") or N_OPTIONS) for r in records) / len(records) if records else None


# ---------------------------------------------------------------- a task's metrics.json entry
TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")


class OutcomeCounts(TypedDict):
    """`outcome_counts`: the two counts every entry of metrics.json carries (TaskFigures' keys of the name)."""

    generation_failures: int
    truncated: int


def outcome_counts(rows: Sequence[ScoreRecord]) -> OutcomeCounts:
    """Items whose generation failed (scored as failures) and items the token limit cut off."""
    return {"generation_failures": sum(r.get("error") is not None for r in rows),
            "truncated": sum(r.get("truncated") is True for r in rows)}


def token_totals(rows: Sequence[ScoreRecord]) -> dict[str, int]:
    """Prompt, completion and reasoning tokens summed over items (as the servers reported them)."""
    totals = dict.fromkeys(TOKEN_KEYS, 0)
    for row in rows:
        usage = row.get("usage")
        if isinstance(usage, dict):
            for key in TOKEN_KEYS:
                value = usage.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    totals[key] += int(value)
    return totals


def epoch_agreement(task: tasks.Task, rows: Sequence[ScoreRecord]) -> dict[str, Any] | None:
    """With `--epochs K`: K, and the share of items answered alike in every epoch (the same letter;
    the same verdict for VQA; for nutrition the same parsed values). None for a single epoch.

    >>> rows = [{"id": "a", "epoch": 0, "parsed": "A"}, {"id": "a", "epoch": 1, "parsed": "A"},
    ...         {"id": "b", "epoch": 0, "parsed": "B"}, {"id": "b", "epoch": 1, "parsed": "C"}]
    >>> from eval.tasks.classification import TASK as classification
    >>> epoch_agreement(classification, rows)
    {'epochs': 2, 'items': 2, 'agreement': 0.5}
    """
    epochs = {int(r.get("epoch") or 0) for r in rows}
    if len(epochs) < 2:
        return None
    answers: dict[str, list[Any]] = {}
    for row in rows:
        answer = task.agreement_answer(row)
        answers.setdefault(str(row["id"]), []).append(repr(answer) if answer is not None else None)
    complete = [a for a in answers.values() if len(a) == len(epochs)]
    agree = sum(a[0] is not None and len(set(a)) == 1 for a in complete)
    return {"epochs": len(epochs), "items": len(complete),
            "agreement": agree / len(complete) if complete else None}


def task_figures(task: tasks.Task, rows: Sequence[ScoreRecord], metric_result: dict[str, Any], *,
                 n_boot: int = N_BOOT) -> TaskFigures:
    """A task's metrics.json entry: the metric's own figures, the outcome counts, token totals and
    the headline's 95% merchant-clustered interval (`accuracy_ci95` or `avg_mape_ci95`).

    With several epochs the rows are items x epochs: the figures are means over both, the interval
    still resamples merchants (all epochs of an item travel together), and `epochs` says how often
    the model answered alike."""
    # Built by name from the metric's result, whose keys vary by task (TaskFigures' undeclared escape).
    figures: dict[str, Any] = {k: v for k, v in metric_result.items()
                               if k not in ("per_item", "correct", "parsed", "verdicts", "decided_by")}
    figures.update(outcome_counts(rows))
    figures["tokens"] = token_totals(rows)
    interval = headline_ci(task, rows, n_boot=n_boot)
    figures["merchants"] = trials(rows)  # below 20 the interval is marked
    figures["resampled"] = resampled_unit(rows)  # what the interval resamples: merchants, or items where none is named
    figures[f"{task.figure}_ci95"] = None if interval is None else [float(interval[0]), float(interval[1])]
    if rows and not any_answered(rows):  # no headline: the table shows "–" with the failed count
        figures[task.figure] = None
        # Nor any other figure scored from nothing (100% MAPE per nutrient, 0% accuracy): the counts stay.
        figures.update({name: None for name, value in metric_result.items()
                        if isinstance(value, float) and name in figures})
    if (agreement := epoch_agreement(task, rows)) is not None:
        figures["epochs"] = agreement
    return cast(TaskFigures, figures)
