"""The review CSV and logs (construct/review.py): formula cells neutralised and given back exactly, a
whole file checked before anything is recorded and then written once, the line of any error named,
the sampled audit with agreement and Cohen's kappa, and bulk approval said as such on the card."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from construct import review
from construct.__main__ import main
from construct.work import BuildSettings, Stage, save_settings, write_jsonl
from synthetic.raw_export import write_raw_export


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("review-raw")
    write_raw_export(root)
    return root


def make_work(tmp_path: Path, raw: Path, n: int, **settings) -> Path:
    """A work folder whose translated items are `n` VQA items on the export's first photo."""
    work = tmp_path / "work"
    save_settings(work, BuildSettings(raw=str(raw), model="openai:gen", **settings))
    photo = json.loads((raw / "photos.jsonl").read_text(encoding="utf-8").splitlines()[0])
    rows = [{"id": f"vqa-{i:05d}", "task": "vqa", "dish_id": photo["dish_id"], "merchant_id": "merchant-01",
             "cuisine": "chinese", "category": "c", "photos": [photo["photo_id"]], "image_roles": ["reference"],
             "question": f"q{i}?", "answer": "a", "rationale": "r", "question_en": "q?", "answer_en": "a",
             "rationale_en": "r", "vqa_category": "cuisine_technique"} for i in range(n)]
    write_jsonl(Stage(work, "translate").dir / "items.jsonl", rows)
    return work


def fill(path: Path, decide) -> None:
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for k, row in enumerate(rows):
        row["decision"], row["note"] = decide(k, row)
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_formula_cells_are_neutralised_on_export_and_given_back_on_import(tmp_path, raw):
    work = make_work(tmp_path, raw, 3)
    notes = ['=HYPERLINK("http://evil","x")', "=cmd|' /C calc'!A0", "'=already quoted"]
    for i, note in enumerate(notes):
        review.record_decision(work, f"vqa-{i:05d}", "approve", note)
    path = tmp_path / "r.csv"
    review.export_csv(work, path)
    cells = [row["note"] for row in csv.DictReader(path.open(encoding="utf-8", newline=""))]
    assert cells == ["'" + n for n in notes]  # no cell a spreadsheet would run
    text = path.read_text(encoding="utf-8")
    assert "\n=" not in text and ",=" not in text and ',"=' not in text
    fill(path, lambda k, row: ("reject", row["note"]))  # the reviewer keeps the notes as exported
    review.import_csv(work, path, reviewer="ana")
    assert [review.get_item(work, f"vqa-{i:05d}").note for i in range(3)] == notes  # exactly the added ' removed


def test_an_import_of_3000_rows_is_checked_whole_and_written_once(tmp_path, raw, monkeypatch):
    work = make_work(tmp_path, raw, 3000)
    path = tmp_path / "r.csv"
    assert review.export_csv(work, path) == 3000
    fill(path, lambda k, row: ("approve" if k % 3 else "reject", "-2 g short" if k == 7 else ""))
    writes = []
    real = review._append
    monkeypatch.setattr(review, "_append", lambda w, stage, entries: (writes.append(len(entries)), real(w, stage, entries)))
    rows_read = []
    real_rows = review._rows
    monkeypatch.setattr(review, "_rows", lambda *a, **k: (rows_read.append(1), real_rows(*a, **k))[1])
    assert review.import_csv(work, path, reviewer="ana") == {"approve": 2000, "reject": 1000, "pending": 0}
    assert writes == [3000]  # one atomic write of the whole batch
    assert len(rows_read) <= 2  # the items are read once to check ids (and once to write decisions), not per row
    log = (work / "review" / "log.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(log) == 3000 and json.loads(log[7])["note"] == "-2 g short"
    kept = [d for d in Stage(work, "review").decisions() if d["verdict"] == "kept"]
    assert len(kept) == 2000 and kept[0]["detail"]["reviewer"] == "ana"


def test_a_refused_csv_names_its_line_and_records_nothing(tmp_path, raw):
    work = make_work(tmp_path, raw, 4)
    path = tmp_path / "r.csv"
    review.export_csv(work, path)
    fill(path, lambda k, row: ("maybe" if k == 2 else "approve", ""))
    with pytest.raises(ValueError, match=r"r\.csv line 4: decision 'maybe' is not approve or reject"):
        review.import_csv(work, path)
    assert not (work / "review" / "log.jsonl").exists()  # rows 1 and 2 were valid, and still nothing is recorded
    fill(path, lambda k, row: ("approve", ""))
    rows = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
    rows[3]["item_id"] = "vqa-99999"
    rows[0]["note"] = "two\nlines"  # a quoted cell over two lines: the next records' lines move down
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ValueError, match=r"line 6: item 'vqa-99999' is not in"):
        review.import_csv(work, path)
    assert not (work / "review" / "log.jsonl").exists()
    assert main(["review", str(work), "--import", str(path)]) == 2


def test_the_audit_draws_n_decided_items_per_task(tmp_path, raw):
    work = make_work(tmp_path, raw, 6)
    rows = Stage(work, "translate").items()
    for row in rows[:3]:
        row["task"] = "nutrition"
    write_jsonl(Stage(work, "translate").dir / "items.jsonl", rows)
    for i in (0, 1, 3, 4, 5):  # vqa-00002 (nutrition) stays pending: not audited
        review.record_decision(work, f"vqa-{i:05d}", "approve", reviewer="ana")
    sample = review.audit_sample(work, 2)
    assert len(sample) == 4 and {"vqa-00000", "vqa-00001"} <= set(sample) and "vqa-00002" not in sample
    assert review.audit_sample(work, 2) == sample  # seeded by the build's seed
    assert len(review.audit_sample(work, 9)) == 5


def test_the_audit_samples_decided_items_and_the_card_gives_agreement_and_kappa(tmp_path, raw):
    work = make_work(tmp_path, raw, 40)
    for i in range(40):
        review.record_decision(work, f"vqa-{i:05d}", "reject" if i % 4 == 0 else "approve", reviewer="ana")
    path = tmp_path / "audit.csv"
    assert main(["review", str(work), "--audit", "8", "--export", str(path)]) == 0
    rows = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
    sample = [r["item_id"] for r in rows]
    assert len(sample) == 8 and sample == review.audit_sample(work, 8) and {r["pass"] for r in rows} == {"audit"}
    assert all(r["decision"] == "" for r in rows)  # the second reviewer does not see the first decision
    first = {s: "reject" if int(s[-5:]) % 4 == 0 else "approve" for s in sample}
    flip = sample[0]  # the auditor disagrees on exactly one item
    fill(path, lambda k, row: ({"approve": "reject", "reject": "approve"}[first[row["item_id"]]]
                                if row["item_id"] == flip else first[row["item_id"]], ""))
    assert main(["review", str(work), "--import", str(path)]) == 2  # an audit needs --reviewer
    assert review.summary(work)["audit"]["n"] == 0
    assert main(["review", str(work), "--import", str(path), "--reviewer", "ben"]) == 0
    s = review.summary(work)["audit"]
    a = [first[i] for i in sample]
    b = [first[i] if i != flip else {"approve": "reject", "reject": "approve"}[first[i]] for i in sample]
    n = 8
    po = 7 / 8
    pe = sum((a.count(k) / n) * (b.count(k) / n) for k in ("approve", "reject"))
    assert s["n"] == 8 and s["reviewers"] == ["ben"] and s["agreement"] == po
    assert s["kappa"] == pytest.approx((po - pe) / (1 - pe))
    card = review.card_markdown(work)
    assert "Audit: 8 final items drawn at random, checked again by ben: agreement with the first decision 87.5%" in card
    assert f"Cohen's kappa {(po - pe) / (1 - pe):.2f}" in card
    # the first review is untouched by the audit
    assert all(review.get_item(work, i).decision == first[i] for i in sample)


def test_bulk_approval_is_recorded_and_carded_as_bulk_never_as_a_person(tmp_path, raw):
    work = make_work(tmp_path, raw, 5)
    review.record_decision(work, "vqa-00000", "reject", reviewer="ana")
    assert review.approve_all(work) == 4
    s = review.summary(work)["items"]
    assert (s["by_person"], s["bulk"], s["reviewers"]) == (1, 4, ["ana"])
    assert review.get_item(work, "vqa-00001").reviewer == review.BULK
    assert "| final items | 5 | 1 | 4 | 0 | 0 | ana |" in review.card_markdown(work)
    review.record_decision(work, "vqa-00000", "approve", reviewer=review.BULK)
    assert "No person reviewed the final items: all 5 were approved in bulk (`--approve-all`)." in review.card_markdown(work)
    with pytest.raises(ValueError, match="audit cannot be approved in bulk"):
        review.approve_all(work, stage="audit")


def test_a_negative_cuisine_ratio_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["run", "raw", "--out", "w", "--model", "openai:x", "--cuisine-ratio", "-1"])
    assert "--cuisine-ratio wants a number >= 0 (0: off), got '-1'" in capsys.readouterr().err


def _rewrite(path: Path, change) -> None:
    rows = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
    change(rows)
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows[1].update(note="x" * 200_000), r"r\.csv line 3: (a cell longer than|not a readable CSV record)"),
    (lambda rows: rows[1].update(summary="y" * 30_000), r"r\.csv line 3: a cell longer than 20,000 characters"),
    (lambda rows: rows[2].update(note="z" * 100_000), r"r\.csv line 4: (a cell longer|the note is)"),
    (lambda rows: rows[2].update(note="n" * 5_000), r"r\.csv line 4: the note is 5,000 characters; at most 2,000"),
    (lambda rows: rows.append({**rows[0], "decision": "reject"}), r"r\.csv lines 2 and 6: item 'vqa-00000' is decided twice"),
])
def test_oversized_cells_and_conflicting_decisions_are_one_line_errors_that_record_nothing(tmp_path, raw, change, message):
    work = make_work(tmp_path, raw, 4)
    path = tmp_path / "r.csv"
    review.export_csv(work, path)
    fill(path, lambda k, row: ("approve", ""))
    _rewrite(path, change)
    with pytest.raises(ValueError, match=message) as info:
        review.import_csv(work, path, reviewer="ana")
    assert "\n" not in str(info.value)
    assert not (work / "review" / "log.jsonl").exists()
    assert main(["review", str(work), "--import", str(path), "--reviewer", "ana"]) == 2  # no traceback


def test_a_note_over_the_limit_is_refused_from_the_review_tab_too(tmp_path, raw):
    work = make_work(tmp_path, raw, 1)
    with pytest.raises(ValueError, match="the note is 100,000 characters"):
        review.record_decision(work, "vqa-00000", "approve", "x" * 100_000)
