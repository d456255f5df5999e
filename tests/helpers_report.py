"""Build run folders (run.json + scores.jsonl) by hand, with figures simple enough to check on paper."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.report import report


def cls_item(item_id: str, merchant: str, correct: bool, *, cuisine: str = "chinese",
             category: str = "noodles", n_images: int = 4, parsed: str | None = "") -> dict[str, Any]:
    """A scored classification item whose reference is always A (one release's question, whichever run
    answered it): the answer A when `correct`, else B, unless `parsed` says otherwise."""
    return {"id": item_id, "task": "classification", "merchant_id": merchant, "cuisine": cuisine,
            "category": category, "vqa_category": None, "nutrition_source": None, "n_images": n_images,
            "parsed": ("A" if correct else "B") if parsed == "" else parsed, "error": None, "reference": "A",
            "correct": correct, "ape": None, "abs_error": None, "verdict": None, "decided_by": None}


def nut_item(item_id: str, merchant: str, parsed: dict[str, float] | None, reference: dict[str, float], *,
             cuisine: str = "chinese", category: str = "noodles", source: str = "computed",
             n_images: int = 4, error: str | None = None) -> dict[str, Any]:
    ape = {k: (1.0 if parsed is None else abs(parsed[k] - v) / v) if v else None for k, v in reference.items()}
    abs_error = {k: abs((0.0 if parsed is None else parsed[k]) - v) for k, v in reference.items()}
    return {"id": item_id, "task": "nutrition", "merchant_id": merchant, "cuisine": cuisine,
            "category": category, "vqa_category": None, "nutrition_source": source, "n_images": n_images,
            "parsed": parsed, "error": error, "reference": reference, "correct": None, "ape": ape,
            "abs_error": abs_error, "verdict": None, "decided_by": None}


def vqa_item(item_id: str, merchant: str, verdict: str | None, *, vqa_category: str = "dietary_suggestion",
             cuisine: str = "chinese", n_images: int = 2) -> dict[str, Any]:
    return {"id": item_id, "task": "vqa", "merchant_id": merchant, "cuisine": cuisine, "category": "soups",
            "vqa_category": vqa_category, "nutrition_source": None, "n_images": n_images,
            "parsed": "answer", "error": None, "reference": "reference answer",
            "correct": None if verdict is None else verdict == "C", "ape": None, "abs_error": None,
            "verdict": verdict, "decided_by": None if verdict is None else "judge"}


def write_run(folder: Path, model: str, items: Sequence[dict[str, Any]], **settings: Any) -> Path:
    """A scored run folder as the harness leaves it (only the files a report reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    tasks = sorted({item["task"] for item in items})
    info = {"settings": {"model": model, "task": tasks[0] if len(tasks) == 1 else "all", "lang": "zh",
                         "images": None, "cot": False, **settings},
            "dataset": {"source": "embedded sample", "fingerprint": "abc123"}}
    (folder / "run.json").write_text(json.dumps(info), encoding="utf-8")
    (folder / "scores.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items),
                                         encoding="utf-8")
    return folder


def report_args(*argv: str) -> argparse.Namespace:
    """Parse `python -m eval report ...` arguments with the report's own parser."""
    parser = argparse.ArgumentParser(prog="python -m eval report")
    report.add_arguments(parser)
    return parser.parse_args(list(argv))


def table_rows(markdown: str, first_cell: str) -> list[list[str]]:
    """Cells of every markdown table row whose first cell is `first_cell`."""
    rows = []
    for line in markdown.splitlines():
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            if cells[0] == first_cell:
                rows.append(cells)
    return rows
