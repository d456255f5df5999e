"""The work folder of a build: its settings, and per stage the decisions and the items it passes on.

WORK/config.json holds the settings; WORK/<stage>/decisions.jsonl says, for every item the stage saw,
`kept` or `dropped` and why; WORK/<stage>/items.jsonl is what the next stage reads; WORK/<stage>/done.json
marks a finished stage with the key of its inputs (`inputs_key`), so a rerun skips it unless they changed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from eval.store import read_jsonl, write_atomically

STAGES = ("photos", "dishes", "dish_review", "classification", "nutrition", "vqa", "translate", "review")
KEPT, DROPPED = "kept", "dropped"


@dataclass
class BuildSettings:
    """Every setting of a build, once: the CLI flags are made from these fields."""

    raw: str = ""
    model: str = ""
    filter_models: list[str] = field(default_factory=list)  # the two classification / audit passes
    embed_model: str | None = None  # openai:MODEL of a /v1/embeddings endpoint: more dedupe candidates
    embed_base_url: str | None = None  # where that endpoint is (default: the first --base-url)
    base_url: str | None = None
    fdc: str | None = None  # folder of the FDC CSV download (food.csv, nutrient.csv, food_nutrient.csv)
    concurrency: int = 8
    seed: int = 0
    timeout: float = 120.0
    min_side: int = 128  # px; smaller photos are dropped before any model sees them
    dhash_distance: int = 6  # of 64 bits: at or below, two photos of one dish are the same upload
    min_user_photos: int = 3
    cuisine_caps: dict[str, int] = field(default_factory=dict)  # cuisine -> most dishes kept
    cuisine_ratio: float | None = 7.3  # others: at most this times the largest other cuisine (Table 3's balance)
    atwater_tolerance: float = 0.10
    fdc_tolerance: float = 0.40  # largest relative kcal gap between an estimate and its FDC sum
    review_exempt: list[str] = field(default_factory=list)  # tasks released without human approval
    price_per_mtok: tuple[float, float] | None = None  # (prompt, completion) USD per million tokens
    shard: str | None = None  # "K/N": only the merchants of shard K (construct/shard.py); None = all

    def filter_pair(self) -> list[str]:
        """Two filter models; with fewer given, the main model fills in (recorded in config.json)."""
        models = list(self.filter_models) or [self.model]
        return (models + models)[:2] if len(models) < 2 else models[:2]


def save_settings(work: Path, settings: BuildSettings) -> None:
    """config.json, with any user:password or query (a key someone put in a URL) cut from the base URLs."""
    work.mkdir(parents=True, exist_ok=True)
    values = asdict(settings)
    for key in ("base_url", "embed_base_url"):
        if values.get(key):
            values[key] = ",".join(_public_url(u) for u in str(values[key]).split(",") if u.strip())
    write_json(work / "config.json", values)


def _public_url(url: str) -> str:
    """scheme://host[:port]/path of a URL: never its userinfo, query or fragment.

    >>> _public_url("http://user:sk-secret@127.0.0.1:8000/v1?api-key=sk-secret")
    'http://127.0.0.1:8000/v1'
    """
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def load_settings(work: Path) -> BuildSettings:
    path = work / "config.json"
    if not path.exists():
        raise ValueError(f"{work} is not a construction work folder (no config.json); run `python -m construct run` first")
    values = json.loads(path.read_text(encoding="utf-8"))
    if values.get("price_per_mtok"):
        values["price_per_mtok"] = tuple(values["price_per_mtok"])
    return BuildSettings(**values)


def write_json(path: Path, value: Any) -> None:
    """Write whole or not at all: a run killed mid-write leaves the old file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write whole or not at all (a sibling temp file renamed over `path`)."""
    write_atomically(path, (json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def inputs_key(*parts: Any) -> str:
    """A short hash of what a stage's output depends on (its done.json records it)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


@dataclass
class Decision:
    """One verdict of one stage on one item (a photo, a dish, a task item)."""

    item: str
    verdict: str  # kept | dropped
    reason: str  # "ok" when kept; a short snake_case reason when dropped
    task: str | None = None  # classification | nutrition | vqa, or None for the shared stages
    detail: dict[str, Any] = field(default_factory=dict)


def kept(item: str, task: str | None = None, **detail: Any) -> Decision:
    return Decision(item, KEPT, "ok", task, detail)


def dropped(item: str, reason: str, task: str | None = None, **detail: Any) -> Decision:
    return Decision(item, DROPPED, reason, task, detail)


class Stage:
    """The files of one stage in the work folder."""

    def __init__(self, work: Path, name: str) -> None:
        self.name = name
        self.dir = work / name
        self.dir.mkdir(parents=True, exist_ok=True)

    def is_done(self, inputs: str) -> bool:
        path = self.dir / "done.json"
        return path.exists() and json.loads(path.read_text(encoding="utf-8")).get("inputs") == inputs

    def finish(self, decisions: list[Decision], items: list[dict[str, Any]], inputs: str, *, complete: bool) -> None:
        """Write the verdicts and items; mark done only when no model call failed (a rerun retries those)."""
        write_jsonl(self.dir / "decisions.jsonl", (asdict(d) for d in decisions))
        write_jsonl(self.dir / "items.jsonl", items)
        done = self.dir / "done.json"
        if complete:
            write_json(done, {"inputs": inputs})
        elif done.exists():
            done.unlink()

    def decisions(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / "decisions.jsonl")

    def items(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / "items.jsonl")

    def items_hash(self) -> str:
        """What the next stage depends on: this stage's items."""
        path = self.dir / "items.jsonl"
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "none"
