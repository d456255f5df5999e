"""Evaluation results as the Evaluate tab shows them: a live per-sample table and a summary line.

Thumbnails are small inline JPEGs so the table needs no file serving; all text is escaped.
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any

from PIL import Image

from eval.report.tables import (
    MISSING,
    SMALL_ITEMS_NOTE,
    SMALL_MARK,
    SMALL_NOTE,
    SMALL_SAMPLE,
    as_text,
    headline_cell,
    pct,
    readable,
)

from .evaluation import SampleResult

if TYPE_CHECKING:
    from eval.protocols import Protocol
    from eval.tasks import Task

THUMB_SIDE = 72
EMPTY_RESULTS = '<div class="db-empty">Results appear here as each item finishes.</div>'


def thumbnail_uri(image: Image.Image) -> str:
    """A data: URI of a small JPEG copy of `image`."""
    small = image.copy()
    small.thumbnail((THUMB_SIDE * 2, THUMB_SIDE * 2))  # 2x for sharp thumbnails on hi-dpi screens
    buffer = io.BytesIO()
    small.convert("RGB").save(buffer, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def _verdict(task: Task, result: SampleResult) -> tuple[str, str]:
    """(css class, label) of the outcome cell."""
    if result.error:
        return "db-bad", "failed"
    if task.measure == "ape":  # percentage errors (nutrition) rather than right or wrong
        if result.parsed is None:
            return "db-bad", "unparsed"
        return ("db-neutral", "—") if result.ape is None else ("db-neutral", f"APE {result.ape * 100:.1f}%")
    if result.parsed is None:
        return "db-bad", "unparsed ✗"
    if result.correct is None:
        return "db-neutral", "not judged"
    return ("db-good", "correct ✓") if result.correct else ("db-bad", "wrong ✗")


def results_table(task: Task, results: list[SampleResult], thumbs: dict[str, str]) -> str:
    """The per-sample table: views thumbnail, raw answer, parsed answer, reference, outcome."""
    if not results:
        return EMPTY_RESULTS
    rows = []
    for r in results:
        css, label = _verdict(task, r)
        thumb = f'<img class="db-thumb" src="{thumbs[r.id]}" alt="">' if r.id in thumbs else ""
        raw = as_text(readable(r.error if r.error else r.raw), lines=True)
        rows.append(f"<tr><td>{thumb}</td><td class='db-mono'>{as_text(r.id, lines=True)}</td>"
                    f"<td class='db-raw'>{raw}</td><td>{as_text(readable(r.parsed, 120), lines=True) or '—'}</td>"
                    f"<td>{as_text(readable(r.reference, 120), lines=True)}</td><td class='{css}'>{label}</td></tr>")
    head = "<tr><th>Views</th><th>Item</th><th>Model answer</th><th>Parsed</th><th>Reference</th><th>Outcome</th></tr>"
    return (f'<div class="db-scroll"><table class="db-results"><thead>{head}</thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _headline(task: Task, metrics: dict[str, Any]) -> tuple[str, str]:
    """(name, `24.45 [20.10, 28.80]`): the run's headline in the CLI's style, percent without the sign."""
    merchants = metrics.get("merchants")
    counts = {"failed": int(metrics.get("generation_failures") or 0), "n": int(metrics.get("n") or 0),
              "merchants": merchants if isinstance(merchants, int) and not isinstance(merchants, bool) else None}
    return (f"{task.figure_name} (%)",
            headline_cell(metrics.get(task.figure), metrics.get(f"{task.figure}_ci95"), **counts))


# The authors' headline figures (eval/tasks: `official_headline`) in words.
OFFICIAL_LABELS = {"acc": "accuracy (%)", "avg_mape": "Average MAPE (%)", "model_evaluate_accuracy": "judge accuracy (%)"}


def official_headline(task: Task, metrics: dict[str, Any]) -> tuple[str, str, str] | None:
    """(name, percent, `[low, high]` or "") of the figure the evaluation's protocol reports first (the
    authors' on their release), its interval the protocol's own (theirs resamples items); None when ours
    is the headline."""
    protocol = _protocol(metrics)
    found = protocol.headline(task, metrics)
    if found is None:
        return None
    name, value = found
    interval = protocol.interval(metrics)
    counted = protocol.counted(task, metrics)  # the items its figure read, as the Leaderboard counts them
    counted = metrics.get("n") if counted is None else counted
    small = isinstance(counted, int) and not isinstance(counted, bool) and counted < SMALL_SAMPLE
    shown = f"[{pct(interval[0])}, {pct(interval[1])}]{SMALL_MARK if small else ''}" if interval else ""
    return f"{protocol.name} {OFFICIAL_LABELS.get(str(name), str(name))}", pct(value), shown


def asked(metrics: dict[str, Any]) -> str:
    """How a live evaluation asked, in its protocol's words ("the authors' protocol, image indices 0"): the
    Space asks with the harness's default settings under the protocol the harness chose."""
    from eval.settings import RunSettings

    protocol = _protocol(metrics)
    return protocol.describe(RunSettings(protocol=protocol.name))


def summary_line(task: Task, spec: str, metrics: dict[str, Any]) -> str:
    """The headline of a finished run in words, as in the paper (percentages). On the authors' release
    their figure is the headline with its interval, named with the protocol and the image indices, ours
    beside it."""
    n, failures = metrics.get("n"), metrics.get("parse_failures")
    tail = f" · {n} items" + (f" · {failures} unparsed" if failures else "")
    name, value = _headline(task, metrics)
    theirs = official_headline(task, metrics)
    if theirs is not None:
        left = metrics.get("ours_left_out")
        differ = metrics.get("official_disagreements") or 0
        interval = f" {as_text(theirs[2])}" if theirs[2] else ""
        small = f" · {as_text(SMALL_ITEMS_NOTE)}" if SMALL_MARK in theirs[2] else ""
        return (f"**{as_text(spec)}** — {theirs[0]} **{as_text(theirs[1])}**{interval} ({as_text(asked(metrics))}) "
                f"· ours: {name} {as_text(value)}{tail} · {differ} read differently"
                + (f" · {left} left out of ours (reference unreadable)" if left else "") + small)
    why = ""
    if SMALL_MARK in value:
        why = SMALL_NOTE
    elif "no interval" not in value and value != MISSING and metrics.get(f"{task.figure}_ci95") is None:
        why = "no interval: too few items or merchants to resample"
    return f"**{as_text(spec)}** — {name} **{as_text(value)}**{tail}" + (f" · {as_text(why)}" if why else "")


def metrics_table(task: Task, metrics: dict[str, Any] | None) -> str:
    """The end figures as a small table (not JSON): per nutrient MAPE, median APE and MAE for nutrition."""
    if not metrics:
        return ""
    theirs = official_headline(task, metrics)
    if task.measure != "ape":
        name, value = _headline(task, metrics)
        rows = [*([(theirs[0], f"{theirs[1]} {theirs[2]}".strip()), (f"ours: {name}", value)] if theirs
                  else [(name, value)]),
                ("items", str(metrics.get("n", MISSING))), ("unparsed", str(metrics.get("parse_failures") or 0))]
        body = "".join(f"<tr><td>{as_text(k, lines=True)}</td><td class='db-num'>{as_text(v, lines=True)}</td></tr>" for k, v in rows)
        return f"<div class='db-scroll'><table class='db-metrics'><tbody>{body}</tbody></table></div>"
    body = [f"<tr><td>{key.capitalize()}</td><td class='db-num'>{pct(metrics.get(f'{key}_mape'))}</td>"
            f"<td class='db-num'>{pct(metrics.get(f'{key}_median_ape'))}</td>"
            f"<td class='db-num'>{_mae(metrics.get(f'{key}_mae'), 'kcal' if key == 'calories' else 'g')}</td></tr>"
            for key in task.components]
    name, value = _headline(task, metrics)
    body.append(f"<tr class='db-total'><td>Average</td><td class='db-num'>{as_text(value, lines=True)}</td>"
                f"<td class='db-num'>{pct(metrics.get('median_ape'))}</td><td></td></tr>")
    figures = _protocol(metrics).own_figures(metrics)
    if theirs and figures:  # their MAPE is in percent already, their averages the means of the four nutrients
        body.insert(0, f"<tr class='db-total'><td>{as_text(theirs[0], lines=True)}</td>"
                       f"<td class='db-num'>{as_text(f'{theirs[1]} {theirs[2]}'.strip(), lines=True)}</td><td></td>"
                       f"<td class='db-num' title='their Avg MAE: the mean of the MAE of the four nutrients'>"
                       f"{_mae(figures.get('avg_mae'), '(avg)')}</td></tr>")
        body.insert(1, "<tr><td colspan='4' class='db-hint'>Ours, per nutrient:</td></tr>")
    head = ("<tr><th>Nutrient</th><th class='db-num' title='mean absolute percentage error'>MAPE %</th>"
            "<th class='db-num' title='median absolute percentage error'>Median APE %</th>"
            "<th class='db-num' title='mean absolute error'>MAE</th></tr>")
    return (f"<div class='db-scroll'><table class='db-metrics'><thead>{head}</thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _protocol(metrics: dict[str, Any]) -> Protocol:
    """The protocol the evaluation's metrics name (ours when they name none)."""
    from eval import protocols

    return protocols.get(metrics.get("protocol") if isinstance(metrics.get("protocol"), str) else None)


def _mae(value: Any, unit: str) -> str:
    return MISSING if value is None else f"{float(value):.1f} {unit}"
