"""Stage 7, human review: every translated item is approved or rejected by a person (or released
without review when its task is in `review_exempt`).

Two faces on one log (WORK/review/log.jsonl, append-only, the last word on an item wins):
- CSV: `python -m construct review WORK --export review.csv`, fill the `decision` column with
  approve / reject, then `--import review.csv`;
- functions for an app tab: `list_items`, `get_item` (with photo paths), `record_decision`;
- `--approve-all` (`approve_all`): approve every pending item with the note "approved in bulk",
  for a demo or a build whose items were checked elsewhere; the note stays in the decisions.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from construct.raw import load_raw
from construct.translate import NAME as TRANSLATE
from construct.work import Stage, dropped, kept, load_settings, read_jsonl, write_jsonl

NAME = "review"
DECISIONS = ("approve", "reject")
CSV_FIELDS = ("task", "item_id", "dish_id", "merchant_id", "cuisine", "summary", "photos", "decision", "note")


@dataclass
class ReviewItem:
    """One item as a reviewer sees it."""

    task: str
    item_id: str
    dish_id: str
    merchant_id: str
    cuisine: str
    summary: str  # the options and answer, the nutrition values, or the question and answer
    photos: list[tuple[str, str]] = field(default_factory=list)  # (absolute file path, reference|user)
    decision: str | None = None  # approve | reject | None (not reviewed yet)
    note: str = ""
    exempt: bool = False  # its task is released without review


def _summary(row: dict[str, Any]) -> str:
    if row["task"] == "classification":
        opts = "; ".join(f"{'ABCDEFGH'[i]}. {o} / {e}" for i, (o, e) in enumerate(zip(row["options"], row["options_en"], strict=True)))
        return f"answer {row['answer']} | {opts}"
    if row["task"] == "nutrition":
        return (f"{row['dish_name']} / {row['dish_name_en']} | {row['calories']:.0f} kcal, P {row['protein']:.1f} g, "
                f"C {row['carbohydrates']:.1f} g, F {row['fat']:.1f} g ({row['nutrition_source']}) | {row['portion']}")
    return f"[{row['vqa_category']}] Q: {row['question']} | A: {row['answer']} | Q_en: {row['question_en']} | A_en: {row['answer_en']}"


def _log(work: Path) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for entry in read_jsonl(Path(work) / NAME / "log.jsonl"):
        latest[entry["item"]] = entry
    return latest


def _rows(work: Path) -> list[dict[str, Any]]:
    return Stage(Path(work), TRANSLATE).items()


def list_items(work: str | Path, task: str | None = None, status: str | None = None) -> list[ReviewItem]:
    """Items awaiting or past review; `status` filters: pending | approve | reject."""
    work = Path(work)
    settings = load_settings(work)
    raw = load_raw(settings.raw)
    log = _log(work)
    out = []
    for row in _rows(work):
        if task and row["task"] != task:
            continue
        entry = log.get(row["id"], {})
        decision = entry.get("decision")
        if status and (decision or "pending") != status:
            continue
        roles = row.get("image_roles") or ["reference"] + ["user"] * (len(row["photos"]) - 1)
        out.append(ReviewItem(row["task"], row["id"], row["dish_id"], row["merchant_id"], row["cuisine"], _summary(row),
                              [(str(raw.photo_path(p)), r) for p, r in zip(row["photos"], roles, strict=True)],
                              decision, entry.get("note", ""), row["task"] in settings.review_exempt))
    return out


def get_item(work: str | Path, item_id: str) -> ReviewItem:
    for item in list_items(work):
        if item.item_id == item_id:
            return item
    raise KeyError(f"no item {item_id!r} awaits review in {work}")


def record_decision(work: str | Path, item_id: str, decision: str, note: str = "") -> None:
    """Record approve / reject for one item (appended; a later decision replaces an earlier one)."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
    work = Path(work)
    if item_id not in {r["id"] for r in _rows(work)}:
        raise KeyError(f"no item {item_id!r} awaits review in {work}")
    path = work / NAME / "log.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"item": item_id, "decision": decision, "note": note, "at": time.time()},
                            ensure_ascii=False) + "\n")
    write_decisions(work)


def approve_all(work: str | Path, note: str = "approved in bulk") -> int:
    """Approve every item still pending (decided items keep their decision), each with `note`, so that
    the log says no person looked at them one by one. Returns how many were approved."""
    work = Path(work)
    decided = _log(work)
    pending = [r["id"] for r in _rows(work) if r["id"] not in decided]
    path = work / NAME / "log.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for item_id in pending:
            fh.write(json.dumps({"item": item_id, "decision": "approve", "note": note, "at": time.time()},
                                ensure_ascii=False) + "\n")
    write_decisions(work)
    return len(pending)


def export_csv(work: str | Path, path: str | Path) -> int:
    items = list_items(work)
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, CSV_FIELDS)
        writer.writeheader()
        for it in items:
            writer.writerow({"task": it.task, "item_id": it.item_id, "dish_id": it.dish_id, "merchant_id": it.merchant_id,
                             "cuisine": it.cuisine, "summary": it.summary, "photos": " ".join(p for p, _ in it.photos),
                             "decision": it.decision or "", "note": it.note})
    return len(items)


def import_csv(work: str | Path, path: str | Path) -> dict[str, int]:
    """Record every filled `decision` cell; blank ones stay pending. Unknown values are an error naming the row."""
    counts = {"approve": 0, "reject": 0, "pending": 0}
    with Path(path).open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for lineno, row in enumerate(rows, 2):
        decision = (row.get("decision") or "").strip().lower()
        if not decision:
            counts["pending"] += 1
            continue
        if decision not in DECISIONS:
            raise ValueError(f"{path} line {lineno}: decision {decision!r} is not approve or reject")
        record_decision(work, row["item_id"], decision, (row.get("note") or "").strip())
        counts[decision] += 1
    return counts


def write_decisions(work: str | Path) -> None:
    """WORK/review/decisions.jsonl from the log: approved or exempt items kept, the others dropped."""
    work = Path(work)
    exempt = set(load_settings(work).review_exempt)
    log = _log(work)
    decisions = []
    for row in _rows(work):
        entry = log.get(row["id"], {})
        if entry.get("decision") == "approve":
            decisions.append(kept(row["id"], row["task"], note=entry.get("note", "")))
        elif entry.get("decision") == "reject":
            decisions.append(dropped(row["id"], "rejected_in_review", row["task"], note=entry.get("note", "")))
        elif row["task"] in exempt:
            decisions.append(kept(row["id"], row["task"], review="exempt"))
        else:
            decisions.append(dropped(row["id"], "not_reviewed", row["task"]))
    stage = Stage(work, NAME)
    write_jsonl(stage.dir / "decisions.jsonl", (asdict(d) for d in decisions))


def released_rows(work: str | Path) -> list[dict[str, Any]]:
    """The translated items that review lets through."""
    write_decisions(work)
    ok = {d["item"] for d in Stage(Path(work), NAME).decisions() if d["verdict"] == "kept"}
    return [r for r in _rows(work) if r["id"] in ok]
