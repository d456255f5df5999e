"""Human review, twice as in the paper: the base dishes after dish selection (before any task item is
generated), and every translated item before release; then a sampled audit of the final items by a
second reviewer, with agreement and Cohen's kappa on the release card."""

from __future__ import annotations

import csv
import json
import random
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from construct.errors import BuildError
from construct.raw import EXPORT_INDEX, load_raw
from construct.stages import DISH_REVIEW, DISHES, TRANSLATE
from construct.stages import REVIEW as NAME
from construct.work import Decision, Stage, dropped, kept, load_settings, read_jsonl, write_jsonl
from eval import tasks
from eval.store import write_atomically

DECISIONS = ("approve", "reject")
BULK = "bulk"  # the reviewer of an --approve-all decision
PASSES = ("items", "dishes", "audit")  # the final review, the base-dish review, the audit
CSV_FIELDS = ("pass", "task", "item_id", "dish_id", "merchant_id", "cuisine", "summary", "photos", "decision", "note")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class ReviewItem:
    """One item (or base dish, task "dish") as a reviewer sees it."""

    task: str
    item_id: str
    dish_id: str
    merchant_id: str
    cuisine: str
    summary: str  # the options and answer, the nutrition values, the question and answer, or the dish
    photos: list[tuple[str, str]] = field(default_factory=list)  # (absolute file path, reference|user)
    decision: str | None = None  # approve | reject | None (not reviewed yet)
    note: str = ""
    exempt: bool = False  # its task is released without review
    reviewer: str = ""


def _summary(row: dict[str, Any]) -> str:
    answer_format = tasks.answer_format(row["task"])
    if answer_format == "letter":
        opts = "; ".join(f"{'ABCDEFGH'[i]}. {o} / {e}" for i, (o, e) in enumerate(zip(row["options"], row["options_en"], strict=True)))
        return f"answer {row['answer']} | {opts}"
    if answer_format == "nutrients":
        usda = row.get("usda_check")
        flag = (f" | USDA CHECK: computed from the ingredients {usda['computed_kcal']:.0f} kcal vs {usda['released_kcal']:.0f} "
                f"kcal here ({usda['gap']:.0%} apart, {usda['coverage']:.0%} of the grams matched): check" if usda else "")
        return (f"{row['dish_name']} / {row['dish_name_en']} | {row['calories']:.0f} kcal, P {row['protein']:.1f} g, "
                f"C {row['carbohydrates']:.1f} g, F {row['fat']:.1f} g ({row['nutrition_source']}) | {row['portion']}{flag}")
    return f"[{row['vqa_category']}] Q: {row['question']} | A: {row['answer']} | Q_en: {row['question_en']} | A_en: {row['answer_en']}"


def is_exempt(row: dict[str, Any], exempt: set[str]) -> bool:
    """Released without review: its task is exempt and no check flagged it (a USDA flag always goes to a person)."""
    return row["task"] in exempt and not row.get("usda_check")


def _log_path(work: Path, stage: str) -> Path:
    if stage not in PASSES:
        raise BuildError(f"review stage must be one of {', '.join(PASSES)}, got {stage!r}")
    return work / (DISH_REVIEW if stage == "dishes" else NAME) / ("audit.jsonl" if stage == "audit" else "log.jsonl")


def _log(work: Path, stage: str = "items") -> dict[str, dict[str, Any]]:
    """A pass's append-only log (dish_review/log.jsonl, review/log.jsonl or review/audit.jsonl), the last
    word on an item winning; each entry names its reviewer, or "bulk"."""
    return {entry["item"]: entry for entry in read_jsonl(_log_path(Path(work), stage))}


def _rows(work: Path, stage: str = "items") -> list[dict[str, Any]]:
    """What a pass reviews: the dish stage's selected dishes, or the translated items (the audit too)."""
    if stage == "dishes":
        return [{**d, "id": d["dish_id"], "task": "dish"} for d in Stage(Path(work), DISHES).items()]
    return Stage(Path(work), TRANSLATE).items()


def list_items(work: str | Path, task: str | None = None, status: str | None = None,
               stage: str = "items") -> list[ReviewItem]:
    """Items (or with stage="dishes" the base dishes) awaiting or past review; `status` filters:
    pending | approve | reject."""
    work = Path(work)
    settings = load_settings(work)
    raw = load_raw(settings.raw, index=work / EXPORT_INDEX)  # the build's photo index, reused
    log = _log(work, stage)
    exempt = set(settings.review_exempt)
    out = []
    for row in _rows(work, stage):
        if task and row["task"] != task:
            continue
        entry = log.get(row["id"], {})
        decision = entry.get("decision")
        if status and (decision or "pending") != status:
            continue
        photos: Iterable[tuple[str, str]]
        if stage == "dishes":
            dish = raw.dishes[row["dish_id"]]
            summary = f"{dish.name} | {dish.menu_category} | {'; '.join(dish.ingredients)} | {dish.portion}"
            photos = [(row["reference"], "reference")] + [(p, "user") for p in row["user_photos"]]
            unreviewed = "dishes" in exempt
        else:
            roles = row.get("image_roles") or ["reference"] + ["user"] * (len(row["photos"]) - 1)
            summary = _summary(row)
            photos = zip(row["photos"], roles, strict=True)
            unreviewed = is_exempt(row, exempt)
        out.append(ReviewItem(row["task"], row["id"], row["dish_id"], row["merchant_id"], row["cuisine"], summary,
                              [(str(raw.photo_path(p)), r) for p, r in photos], decision, entry.get("note", ""),
                              unreviewed, entry.get("reviewer", "")))
    return out


def get_item(work: str | Path, item_id: str, stage: str = "items") -> ReviewItem:
    for item in list_items(work, stage=stage):
        if item.item_id == item_id:
            return item
    raise BuildError(f"no item {item_id!r} awaits review in {work}")


def _append(work: Path, stage: str, entries: list[dict[str, Any]]) -> None:
    """Add `entries` to a pass's log in one atomic write (the old log plus the new lines, then a rename):
    a kill leaves the old log or the new one, never part of a batch."""
    path = _log_path(work, stage)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_bytes() if path.exists() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    write_atomically(path, [old, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries).encode()])
    if stage == "dishes":
        write_dish_decisions(work)
    elif stage == "items":
        write_decisions(work)


def _entry(item_id: str, decision: str, note: str, reviewer: str) -> dict[str, Any]:
    return {"item": item_id, "decision": decision, "note": note, "reviewer": reviewer, "at": time.time()}


def record_decision(work: str | Path, item_id: str, decision: str, note: str = "", reviewer: str = "",
                    stage: str = "items") -> None:
    """Record approve / reject for one item (appended; a later decision replaces an earlier one)."""
    if decision not in DECISIONS:
        raise BuildError(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
    if len(note) > MAX_NOTE:
        raise BuildError(f"the note is {len(note):,} characters; at most {MAX_NOTE:,}")
    work = Path(work)
    if item_id not in {r["id"] for r in _rows(work, stage)}:
        raise BuildError(f"no item {item_id!r} awaits review in {work}")
    _append(work, stage, [_entry(item_id, decision, note, reviewer)])


def approve_all(work: str | Path, note: str = "approved in bulk", stage: str = "items") -> int:
    """Approve every item still pending (decided items keep their decision), reviewer "bulk", each with
    `note`, so that the log and the card say no person looked at them. Returns how many were approved."""
    if stage == "audit":
        raise BuildError("an audit cannot be approved in bulk: it is a second person's check")
    work = Path(work)
    decided = _log(work, stage)
    pending = [r["id"] for r in _rows(work, stage) if r["id"] not in decided]
    _append(work, stage, [_entry(i, "approve", note, BULK) for i in pending])
    return len(pending)


def neutralise(cell: str) -> str:
    """A cell a spreadsheet would run as a formula gets a leading `'` (OWASP CSV injection advice); so does
    one that already starts with quotes before a formula start, so that `restore` gives every cell back.

    >>> neutralise('=HYPERLINK("http://x")'), neutralise("-5 g"), neutralise("beef"), neutralise("'=x")
    ('\\'=HYPERLINK("http://x")', "'-5 g", 'beef', "''=x")
    """
    return "'" + cell if cell.lstrip("'").startswith(FORMULA_START) else cell


def restore(cell: str) -> str:
    """Undo `neutralise`: exactly the one `'` it added is removed, nothing else.

    >>> restore("'=1+1"), restore("'quoted"), restore("''=x"), restore("=typed by hand")
    ('=1+1', "'quoted", "'=x", '=typed by hand')
    """
    return cell[1:] if cell.startswith("'") and cell.lstrip("'").startswith(FORMULA_START) else cell


def audit_sample(work: str | Path, n: int, seed: int | None = None) -> list[str]:
    """`n` item ids per task drawn at random (seeded by the build's seed) from the items the first review
    decided, as the paper's external audit drew 70 per task (exempt and pending items are not audited)."""
    work = Path(work)
    if n < 1:
        raise BuildError(f"--audit wants a positive number of items per task, got {n}")
    decided = _log(work, "items")
    rng = random.Random(load_settings(work).seed if seed is None else seed)
    rows = _rows(work)
    picked: list[str] = []
    for task in sorted({r["task"] for r in rows}):
        pool = sorted(r["id"] for r in rows if r["task"] == task and r["id"] in decided)
        picked += rng.sample(pool, min(n, len(pool)))
    return sorted(picked)


def export_csv(work: str | Path, path: str | Path, stage: str = "items", audit: int | None = None) -> int:
    """Write the items of a pass (or with `audit` N a sample of decided items, decisions blank) to CSV."""
    work = Path(work)
    if audit is not None:
        sample = set(audit_sample(work, audit))
        done = _log(work, "audit")
        rows = [(it, done.get(it.item_id, {})) for it in list_items(work) if it.item_id in sample]
        kind = "audit"
    else:
        rows = [(it, {"decision": it.decision, "note": it.note}) for it in list_items(work, stage=stage)]
        kind = stage
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, CSV_FIELDS)
        writer.writeheader()
        for it, entry in rows:
            writer.writerow({k: neutralise(str(v)) for k, v in {
                "pass": kind, "task": it.task, "item_id": it.item_id, "dish_id": it.dish_id,
                "merchant_id": it.merchant_id, "cuisine": it.cuisine, "summary": it.summary,
                "photos": " ".join(p for p, _ in it.photos), "decision": entry.get("decision") or "",
                "note": entry.get("note") or ""}.items()})
    return len(rows)


MAX_CELL = 20_000  # characters in one CSV cell (the summary of a long VQA item is a few thousand)
MAX_NOTE = 2_000  # characters of a reviewer's note


def _records(path: Path) -> Iterable[tuple[int, dict[str, str]]]:
    """(first CSV line of the record, its cells with neutralisation undone); a cell over MAX_CELL
    characters (or one the csv module cannot read) is a BuildError naming its line."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        start = 2
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:  # e.g. a cell over the csv module's own limit
                raise BuildError(f"{path} line {start}: not a readable CSV record ({str(exc)[:80]})") from None
            if any(v is not None and (not isinstance(v, str) or len(v) > MAX_CELL) for v in row.values()):
                raise BuildError(f"{path} line {start}: a cell longer than {MAX_CELL:,} characters")
            yield start, {k: restore(v or "") for k, v in row.items() if k is not None}
            start = reader.line_num + 1


def import_csv(work: str | Path, path: str | Path, reviewer: str = "", stage: str | None = None) -> dict[str, int]:
    """Record every filled `decision` cell; blank ones stay pending. The whole file is checked first (an
    unknown item or decision, a row of another pass, an audit without a reviewer: an error naming its
    CSV line, nothing recorded); then its decisions are appended in one atomic write."""
    work, path = Path(work), Path(path)
    counts = {"approve": 0, "reject": 0, "pending": 0}
    entries: list[dict[str, Any]] = []
    first: dict[str, tuple[int, str]] = {}  # item -> the CSV line and decision that decided it
    kind: str | None = None
    known: dict[str, set[str]] = {}
    for line, row in _records(path):
        row_kind = row.get("pass") or stage or "items"
        if row_kind not in PASSES:
            raise BuildError(f"{path} line {line}: pass {row_kind!r} is not one of {', '.join(PASSES)}")
        if stage is not None and row_kind != stage and not (stage == "items" and row_kind == "audit"):
            raise BuildError(f"{path} line {line}: a row of the {row_kind} pass in a {stage} import")
        if kind is not None and row_kind != kind:
            raise BuildError(f"{path} line {line}: a row of the {row_kind} pass among rows of the {kind} pass")
        kind = row_kind
        if kind == "audit" and not reviewer:
            raise BuildError(f"{path} line {line}: an audit import needs --reviewer NAME (the second reviewer)")
        decision = (row.get("decision") or "").strip().lower()
        if not decision:
            counts["pending"] += 1
            continue
        if decision not in DECISIONS:
            raise BuildError(f"{path} line {line}: decision {decision!r} is not approve or reject")
        if kind not in known:
            known[kind] = {r["id"] for r in _rows(work, kind)}
        item = row.get("item_id") or ""
        if item not in known[kind]:
            raise BuildError(f"{path} line {line}: item {item!r} is not in {work}")
        note = (row.get("note") or "").strip()
        if len(note) > MAX_NOTE:
            raise BuildError(f"{path} line {line}: the note is {len(note):,} characters; at most {MAX_NOTE:,}")
        if item in first:
            raise BuildError(f"{path} lines {first[item][0]} and {line}: item {item!r} is decided twice "
                             f"({first[item][1]} and {decision}); keep one row per item")
        first[item] = line, decision
        entries.append(_entry(item, decision, note, reviewer))
        counts[decision] += 1
    if entries:
        _append(work, kind or "items", entries)
    return counts


def _decide(item: str, task: str | None, entry: dict[str, Any], by: dict[str, str], exempt: bool) -> Decision:
    """One item's review verdict: its logged decision (`by`: who and the note), else exempt or not reviewed."""
    if entry.get("decision") == "approve":
        return kept(item, task, **by)
    if entry.get("decision") == "reject":
        return dropped(item, "rejected_in_review", task, **by)
    return kept(item, task, review="exempt") if exempt else dropped(item, "not_reviewed", task)


def write_decisions(work: str | Path) -> None:
    """WORK/review/decisions.jsonl from the log: approved or exempt items kept, the others dropped."""
    work = Path(work)
    exempt = set(load_settings(work).review_exempt)
    log = _log(work)
    decisions = []
    for row in _rows(work):
        entry = log.get(row["id"], {})
        by = {"note": entry.get("note", ""), "reviewer": entry.get("reviewer", "")}
        decisions.append(_decide(row["id"], row["task"], entry, by, is_exempt(row, exempt)))
    write_jsonl(Stage(work, NAME).dir / "decisions.jsonl", (asdict(d) for d in decisions))


def write_dish_decisions(work: str | Path) -> int:
    """WORK/dish_review/: decisions on the selected dishes and, as items, the approved ones (what the task
    stages read); "dishes" in `review_exempt` passes them unreviewed. Returns how many still await review."""
    work = Path(work)
    settings = load_settings(work)
    log = _log(work, "dishes")
    decisions, items, pending = [], [], 0
    for row in Stage(work, DISHES).items():
        entry = log.get(row["dish_id"], {})
        by = {"reviewer": entry.get("reviewer", ""), "note": entry.get("note", "")}
        decisions.append(_decide(row["dish_id"], None, entry, by, "dishes" in settings.review_exempt))
        if decisions[-1].verdict == "kept":
            items.append(row)
        pending += decisions[-1].reason == "not_reviewed"
    stage = Stage(work, DISH_REVIEW)
    write_jsonl(stage.dir / "decisions.jsonl", (asdict(d) for d in decisions))
    write_jsonl(stage.dir / "items.jsonl", items)
    return pending


def released_rows(work: str | Path) -> list[dict[str, Any]]:
    """The translated items that review lets through."""
    write_decisions(work)
    ok = {d["item"] for d in Stage(Path(work), NAME).decisions() if d["verdict"] == "kept"}
    return [r for r in _rows(Path(work)) if r["id"] in ok]


def summary(work: str | Path) -> dict[str, Any]:
    """Who reviewed what: per pass the items decided by a person, approved in bulk, exempt, pending;
    the audit's size, reviewers, agreement with the first decisions and Cohen's kappa."""
    from eval.agreement import cohen_kappa

    work = Path(work)
    exempt = set(load_settings(work).review_exempt)
    out: dict[str, Any] = {}
    for stage in ("dishes", "items"):
        log = _log(work, stage)
        rows = _rows(work, stage)
        counts = {"total": len(rows), "by_person": 0, "bulk": 0, "exempt": 0, "pending": 0}
        reviewers: set[str] = set()
        for row in rows:
            entry = log.get(row["id"])
            if entry is None:
                counts["exempt" if (is_exempt(row, exempt) or (stage == "dishes" and "dishes" in exempt)) else "pending"] += 1
            elif entry.get("reviewer") == BULK:
                counts["bulk"] += 1
            else:
                counts["by_person"] += 1
                reviewers.add(entry.get("reviewer") or "unnamed")
        out[stage] = {**counts, "reviewers": sorted(reviewers)}
    first, audit = _log(work, "items"), _log(work, "audit")
    both = sorted(i for i in audit if i in first)
    a, b = [first[i]["decision"] for i in both], [audit[i]["decision"] for i in both]
    out["audit"] = {"n": len(both), "reviewers": sorted({audit[i].get("reviewer", "") for i in both}),
                    "first_pass_bulk": sum(first[i].get("reviewer") == BULK for i in both),
                    "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(both) if both else None,
                    "kappa": cohen_kappa(a, b) if both else None}
    return out


def card_markdown(work: str | Path) -> str:
    """The release card's review section: bulk approval said as such, never as a human check."""
    s = summary(work)
    lines = ["### Human review", "", "| pass | items | decided by a person | approved in bulk (no person looked) "
             "| exempt | pending | reviewers |", "|---|---:|---:|---:|---:|---:|---|"]
    for stage, label in (("dishes", "base dishes (before task generation)"), ("items", "final items")):
        c = s[stage]
        lines.append(f"| {label} | {c['total']} | {c['by_person']} | {c['bulk']} | {c['exempt']} | {c['pending']} | "
                     f"{', '.join(c['reviewers']) or '-'} |")
    a = s["audit"]
    lines.append("")
    if not a["n"]:
        lines.append("Audit: none (no second reviewer checked a sample of the final items).")
    else:
        kappa = "undefined (one verdict throughout)" if a["kappa"] is None else f"{a['kappa']:.2f}"
        lines.append(f"Audit: {a['n']} final items drawn at random, checked again by {', '.join(a['reviewers'])}: "
                     f"agreement with the first decision {a['agreement']:.1%}, Cohen's kappa {kappa}.")
        if a["first_pass_bulk"]:
            lines.append(f"{a['first_pass_bulk']} of those first decisions were bulk approvals, not a person's.")
    for stage, label in (("dishes", "base dishes"), ("items", "final items")):
        c = s[stage]
        if c["bulk"] and not c["by_person"]:
            lines.append(f"\nNo person reviewed the {label}: all {c['bulk']} were approved in bulk (`--approve-all`).")
    return "\n".join(lines) + "\n"
