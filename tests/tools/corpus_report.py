"""How well the three parsers read real model outputs: a per-source table over tests/corpus/real_*.jsonl.

Run from the repository root: `python -m tests.tools.corpus_report`. It lives with the corpora it reads
(a metric folder reads nothing outside itself). Each metric module is loaded by file path, as
`evaluate.load` would, so the metric folders stay self-contained.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"


def _module(name: str) -> ModuleType:
    """A metric's parsers: `metrics/<name>/core.py`, imported as the package it is (its module uses
    relative imports)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"metrics.{name}.core")


def _rows(name: str) -> list[dict[str, Any]]:
    """Rows of tests/corpus/real_{name}.jsonl; `name` may end in "_heldout" for the held-out slice."""
    with (CORPUS / f"real_{name}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _same(got: Any, expected: Any) -> bool:
    if isinstance(expected, dict) and isinstance(got, dict):
        return all(abs(float(got[k]) - float(v)) <= 1e-6 * max(1.0, abs(float(v))) for k, v in expected.items())
    return got == expected


def source_group(row: dict[str, Any]) -> str:
    """Group rows by repository and model: "owner/repo: model"."""
    repo = row["source"].partition(":")[0]
    return f"{repo}: {row['model']}" if row.get("model") else repo


def tally(rows: list[dict[str, Any]], parse: Callable[[dict[str, Any]], Any],
          group: Callable[[dict[str, Any]], str] = source_group) -> dict[str, dict[str, int]]:
    """Per group: n, answers present, recovered, wrong, false answers on no-answer rows, unparsed."""
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        got = parse(row)
        for key in (group(row), "all"):
            cell = table[key]
            cell["n"] += 1
            if row["expected"] is None:
                cell["no_answer"] += 1
                cell["false_answer"] += got is not None
            else:
                cell["answers"] += 1
                cell["recovered"] += _same(got, row["expected"])
                cell["wrong"] += got is not None and not _same(got, row["expected"])
                cell["unparsed"] += got is None
    return table


def markdown(table: dict[str, dict[str, int]]) -> str:
    """The tally as a Markdown table; percentages are of the rows that hold an answer."""
    lines = ["| source | n | recovered | wrong | answer on no-answer rows | unparsed |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for key in sorted(table, key=lambda k: (k == "all", k)):
        c = table[key]
        answers = max(c["answers"], 1)
        lines.append(f"| {'**all**' if key == 'all' else key} | {c['n']} | {100 * c['recovered'] / answers:.1f}% "
                     f"| {100 * c['wrong'] / answers:.1f}% | {c['false_answer']} of {c['no_answer']} "
                     f"| {100 * c['unparsed'] / answers:.1f}% |")
    return "\n".join(lines)


def reports() -> dict[str, dict[str, dict[str, int]]]:
    """The tallies of the real corpora that exist: the development sets (tests/corpus/real_{choice,nutrition,
    verdict}.jsonl, which the parsers were tuned on) under their name, and the held-out slices
    (real_*_heldout.jsonl, never tuned on: the headline rates) under "NAME_heldout"."""
    choice = _module("dining_accuracy").parse_choice
    nutrition = _module("nutrition_error").parse_nutrition
    verdict = _module("judge_accuracy").parse_verdict
    parsers: dict[str, Callable[[dict[str, Any]], Any]] = {
        "choice": lambda r: choice(r["text"], n_options=r.get("n_options", 8), options=r.get("options")),
        "nutrition": lambda r: nutrition(r["text"]),
        "verdict": lambda r: verdict(r["text"]),
    }
    return {f"{name}{part}": tally(_rows(f"{name}{part}"), parse) for name, parse in parsers.items()
            for part in ("", "_heldout") if (CORPUS / f"real_{name}{part}.jsonl").exists()}


def main() -> None:
    tables = reports()
    for name in ("choice", "nutrition", "verdict"):
        if name not in tables:
            print(f"## {name}: no real corpus yet (tests/corpus/real_{name}.jsonl)\n")
    for name, table in tables.items():
        kind = "held-out, never tuned on" if name.endswith("_heldout") else "development set, tuned on"
        print(f"## {name.removesuffix('_heldout')}: {kind} (tests/corpus/real_{name}.jsonl)\n")
        print(markdown(table) + "\n")


if __name__ == "__main__":
    main()
