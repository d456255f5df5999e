"""Take the test, in words and at the end: what a person is told after each answer, and the recap that
sets their answers beside the reference and the models' answers on the same items (pure functions over rows).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from eval.report.runs import ReportError, RunData, load_run, run_folders
from eval.report.tables import as_text
from eval.tasks import Task, answer_format, options_of
from eval.types import NUTRIENTS

from .human import HUMANS_FOLDER
from .leaderboard import HUMAN_PREFIX

MAX_RUNS_READ = 50  # the newest run folders read for a recap: its cost stays bounded however many there are
MAX_MODELS_SHOWN = 4  # per item; the rest are counted
UNITS = {"calories": "kcal", "protein": "g protein", "carbohydrates": "g carbohydrates", "fat": "g fat"}


def _number(value: Any) -> str:
    """`520`, `21.5`: at most one decimal, none when it is whole."""
    number = float(value)
    return f"{number:,.0f}" if number == int(number) else f"{number:,.1f}"


def nutrients_sentence(values: Any) -> str:
    """`520 kcal, 21.5 g protein, 60 g carbohydrates and 14 g fat` (a figure left out reads `?`).

    >>> nutrients_sentence({"calories": 520, "protein": 21.5, "carbohydrates": 60.0, "fat": 14})
    '520 kcal, 21.5 g protein, 60 g carbohydrates and 14 g fat'
    """
    values = values if isinstance(values, dict) else {}
    parts = []
    for key in NUTRIENTS:
        value = values.get(key)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        parts.append(f"{_number(value) if ok else '?'} {UNITS[key]}")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def option_name(row: dict[str, Any], letter: Any, lang: str) -> str:
    """The dish an option letter names (`""` for a letter that names none)."""
    options = options_of(row, lang) if row.get("options") else []
    index = ord(str(letter)) - ord("A") if isinstance(letter, str) and len(letter) == 1 else -1
    return str(options[index]) if 0 <= index < len(options) else ""


def feedback(task: str, raw: str, record: dict[str, Any], row: dict[str, Any], lang: str) -> tuple[str, str]:
    """What a person is told right after answering: (css class of the verdict, sentences as HTML
    in which only the verdict's words carry that class)."""
    if answer_format(task) == "letter":
        chosen, answer = record.get("parsed"), row.get("answer")
        you = f"You chose <b>{as_text(raw)}</b> ({as_text(option_name(row, chosen, lang))})."
        if record.get("correct"):
            return "db-good", f"{you} <span class='db-good'>That is the dish</span>: well done."
        return "db-bad", (f"{you} <span class='db-bad'>Not this time</span>: the dish is <b>{as_text(answer)}</b> "
                          f"({as_text(option_name(row, answer, lang))}).")
    if answer_format(task) == "nutrients":
        apes = record.get("ape") if isinstance(record.get("ape"), dict) else {}
        off = [f"{apes[k] * 100:.0f}% on {k}" for k in NUTRIENTS
               if isinstance(apes.get(k), int | float) and math.isfinite(apes[k])]
        text = (f"You estimated {as_text(nutrients_sentence(record.get('parsed')))}. The reference is "
                f"{as_text(_reference(task, row, lang))}.")
        if off:
            text += f" You were off by {', '.join(off[:-1])} and {off[-1]}." if len(off) > 1 else (
                f" You were off by {off[0]}.")
        return "db-neutral", text
    return "db-neutral", (f"You answered: “{as_text(raw, lines=True)}”. The judge compares it with the reference "
                          "answer below when you finish the test.")


# ---------------------------------------------------------------- the recap
def _outcome(task: str, row: dict[str, Any]) -> tuple[str, str]:
    """(css class, a few words) for one scored item."""
    if row.get("error"):
        return "db-bad", "failed"
    if row.get("parsed") is None:
        return "db-bad", "no answer read"
    if answer_format(task) == "nutrients":
        return "db-neutral", _average_off([row]) or "not scored"
    if row.get("correct") is None:
        return "db-neutral", "not scored"
    return ("db-good", "right ✓") if row["correct"] else ("db-bad", "wrong ✗")


def _answer(task: str, row: dict[str, Any], item: dict[str, Any], lang: str) -> str:
    parsed = row.get("parsed")
    if parsed is None:
        return "—"
    if answer_format(task) == "letter":
        name = option_name(item, parsed, lang)
        return f"{parsed} ({name})" if name else str(parsed)
    if answer_format(task) == "nutrients":
        return nutrients_sentence(parsed)
    text = " ".join(str(parsed).split())
    return text if len(text) <= 200 else text[:199] + "…"


def _reference(task: str, item: dict[str, Any], lang: str) -> str:
    if answer_format(task) == "letter":
        return f"{item.get('answer')} ({option_name(item, item.get('answer'), lang)})"
    if answer_format(task) == "nutrients":
        return nutrients_sentence({k: item.get(k) for k in NUTRIENTS})
    answer = item.get("answer_en") if lang == "en" and item.get("answer_en") else item.get("answer")
    return " ".join(str(answer or "").split())


def model_answers(results_dir: Path, task: Task, ids: list[str], *, exclude: Path | None = None,
                  max_runs: int = MAX_RUNS_READ) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """(run label, {item id: scored row}) of each model run under `results_dir` that answered any of `ids`
    (first epoch), newest first, each model + settings once (its newest run); people's runs are left out. Only
    the `max_runs` newest folders are read, and a folder that cannot be read is skipped."""
    wanted = set(ids)
    folders = [p for p in run_folders(results_dir) if HUMANS_FOLDER not in p.relative_to(results_dir).parts[:1]
               and (exclude is None or p.resolve() != exclude.resolve())]
    folders.sort(key=lambda p: (p / "scores.jsonl").stat().st_mtime, reverse=True)
    out = []
    seen: set[str] = set()
    for folder in folders[:max_runs]:
        try:
            run = load_run(folder, problems=[])
        except (ReportError, OSError):
            continue
        if run.model.startswith(HUMAN_PREFIX):
            continue
        found = {str(r["id"]): r for r in run.scores.get(task.name, []) if str(r["id"]) in wanted and not r.get("epoch")}
        if found and run.label not in seen:  # one entry per model + settings: its newest run
            seen.add(run.label)
            out.append((run.label + _reading_note(run, task), found))
    return out


def _reading_note(run: RunData, task: Task) -> str:
    """What a run's answers are read by here, when its protocol's headline reads them another way (the
    authors' on their release): the recap reads every run's answers and yours alike, by ours."""
    return "" if run.headline(task) is None else (
        f" (ours' reading; its headline is {run.protocol.title}'s, on the Leaderboard)")


def _average_off(rows: list[dict[str, Any]]) -> str | None:
    """`12% off on average` over the rows' finite APEs; None when none is."""
    apes = [v for r in rows for v in (r.get("ape") or {}).values() if isinstance(v, int | float) and math.isfinite(v)]
    return f"{sum(apes) / len(apes) * 100:.0f}% off on average" if apes else None


def _score_words(task: str, rows: list[dict[str, Any]]) -> str:
    if answer_format(task) == "nutrients":
        return _average_off(rows) or "no estimate scored"
    right = sum(r.get("correct") is True for r in rows)
    return f"{right} of {len(rows)} right"


def tally(task: str, mine: list[dict[str, Any]], models: list[tuple[str, dict[str, dict[str, Any]]]]) -> str:
    """One line for you and one per model (at most MAX_MODELS_SHOWN), on the items each answered.

    >>> tally("classification", [{"correct": True}, {"correct": False}], [("m", {"a": {"correct": True}})])
    '<li><b>You</b>: 1 of 2 right</li><li><b>m</b>: 1 of 1 right on the same items</li>'
    """
    return f"<li><b>You</b>: {_score_words(task, mine)}</li>" + "".join(
        f"<li><b>{as_text(label)}</b>: {_score_words(task, list(found.values()))} on the same items</li>"
        for label, found in models[:MAX_MODELS_SHOWN])


def recap(task: str, mine: list[dict[str, Any]], items: dict[str, dict[str, Any]], lang: str,
          models: list[tuple[str, dict[str, dict[str, Any]]]]) -> str:
    """The end-of-test recap: how you and each model did on these items, then per item your answer and how it
    went, the reference, and each model's answer on the same item (at most MAX_MODELS_SHOWN, the rest
    counted); `mine` are the person's scored rows in the order answered, `items` the dataset rows by id."""
    cards = []
    for row in mine:
        item_id = str(row["id"])
        item = items.get(item_id, {})
        css, words = _outcome(task, row)
        others = []
        answered = [(label, found[item_id]) for label, found in models if item_id in found]
        for label, found_row in answered[:MAX_MODELS_SHOWN]:
            model_css, model_words = _outcome(task, found_row)
            others.append(f"<li><b>{as_text(label)}</b>: {as_text(_answer(task, found_row, item, lang))} "
                          f"<span class='{model_css}'>{as_text(model_words)}</span></li>")
        if len(answered) > MAX_MODELS_SHOWN:
            others.append(f"<li>and {len(answered) - MAX_MODELS_SHOWN} more</li>")
        shown = f"<ul class='db-recap-models'>{''.join(others)}</ul>" if others else (
            "<p class='db-neutral'>No model run here answered this item.</p>")
        # One card per item, stacked: as readable on a phone as on a wide screen.
        cards.append(f"<div class='db-recap-item'><div class='db-id'>{as_text(item_id)}</div>"
                     f"<p><b>You</b>: {as_text(_answer(task, row, item, lang))} "
                     f"<span class='{css}'>{as_text(words)}</span></p>"
                     f"<p><b>Reference</b>: {as_text(_reference(task, item, lang))}</p>"
                     f"<p><b>Models on the same item</b></p>{shown}</div>")
    return f"<ul class='db-recap-tally'>{tally(task, mine, models)}</ul>" + "".join(cards)
