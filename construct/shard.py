"""Shards of one build: `run --shard K/N` works on the merchants whose stable hash falls in shard K;
`merge WORK1 WORK2 ... --out WORK` unions their cached model answers and runs every stage once on the
whole export, so the decisions, items and release are those of one unsharded run.

Why merchants, not dishes: a classification item's distractors come from the same merchant's same menu
category and the translation glossary is one per merchant, so a shard must hold whole merchants for its
prompts to be the ones an unsharded run sends. Two rules do look across merchants: a near-duplicate
dish at another merchant, and the cuisine caps. A shard therefore applies no cap and sees only its own
merchants' twins: it keeps a superset of the dishes. The merge re-applies both rules on the union and
reuses every cached answer whose prompt is unchanged: all photo checks (most of the calls), the
classification and nutrition calls. What it asks anew are the prompts that depend on the whole export:
the VQA category each dish is drawn (quotas over all kept dishes) with its audits and translation,
and the glossary of a merchant that lost a dish to a cap or a twin (`merge` prints how many; on the
synthetic export 20 of 178 calls).
"""

from __future__ import annotations

import hashlib
from argparse import Namespace
from dataclasses import asdict
from pathlib import Path
from typing import Any

from construct.errors import BuildError
from construct.raw import RawExport
from construct.work import STAGES, BuildSettings, load_settings, read_jsonl, save_settings, settings_from_args
from eval.store import JsonlLog


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'2/4' -> (2, 4): shard 2 of 4, numbered from 1; None for no shard.

    >>> parse_shard("1/2")
    (1, 2)
    >>> parse_shard(None) is None
    True
    """
    if not text:
        return None
    k, sep, n = text.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit() or not 1 <= int(k) <= int(n):
        raise BuildError(f"--shard wants K/N with 1 <= K <= N (e.g. 1/4), got {text!r}")
    return int(k), int(n)


def shard_of(merchant_id: str, n: int) -> int:
    """The shard (1..n) of a merchant: a stable hash of its id, the same on every machine and run."""
    return int(hashlib.sha256(merchant_id.encode("utf-8")).hexdigest()[:16], 16) % n + 1


def restrict(raw: RawExport, k: int, n: int) -> RawExport:
    """The part of an export in shard k of n: its merchants, their dishes, those dishes' photos."""
    part = RawExport(raw.root)
    part.merchants = {m: v for m, v in raw.merchants.items() if shard_of(m, n) == k}
    part.dishes = {d: v for d, v in raw.dishes.items() if v.merchant_id in part.merchants}
    part.photos = {p: v for p, v in raw.photos.items() if v.dish_id in part.dishes}
    return part


def _identity(settings: BuildSettings) -> dict:
    """The settings every shard of one build shares (not the shard, not where the replicas are)."""
    values = asdict(settings)
    for key in ("shard", "base_url", "embed_base_url", "photo_quality_base_url", "photo_match_base_url", "concurrency",
                "timeout", "connect_wait"):
        values.pop(key, None)
    return values


# The BuildSettings fields `merge` takes as flags (declared once, in BuildSettings); every other
# setting is the shards' own, which must agree.
MERGE_FLAGS = ("base_url",)


def merge_flags(args: Namespace) -> dict[str, Any]:
    """`merge_calls`'s keyword arguments from merge's parsed flags, read as `run`'s are."""
    given = settings_from_args(args, "")
    return {name: getattr(given, name) for name in MERGE_FLAGS}


def _answered_row(row: dict) -> bool:
    """A call worth carrying over: answered, or cut at its limit (asked again only under a higher one)."""
    return row.get("text") is not None or bool(row.get("truncated"))


def merge_calls(works: list[Path], out: Path, base_url: str | None = None) -> BuildSettings:
    """Check that `works` are the shards 1..N of one build; write `out`'s settings (no shard) and the union
    of their answered calls per stage (answers already in `out` are kept). Returns the merged settings.
    Review comes after the merge: a shard's review log is not carried over."""
    if not works:
        raise BuildError("merge needs the work folders of the shards")
    settings = [load_settings(w) for w in works]
    first = settings[0]
    for work, s in zip(works, settings, strict=True):
        if _identity(s) != _identity(first):
            raise BuildError(f"{work} is not a shard of the same build as {works[0]} (raw export, models or settings differ)")
    found = [parse_shard(s.shard) for s in settings]
    if any(s is not None for s in found):
        shards = [s for s in found if s is not None]
        if len(shards) < len(found) or len({n for _, n in shards}) != 1:
            raise BuildError("merge wants the shards K/N of one N, each run with --shard")
        n = shards[0][1]
        missing = sorted(set(range(1, n + 1)) - {k for k, _ in shards})
        if missing:
            raise BuildError(f"merge: shard(s) {', '.join(f'{k}/{n}' for k in missing)} missing")
    merged = BuildSettings(**{**asdict(first), "shard": None, "base_url": base_url or first.base_url})
    if merged.price_per_mtok:
        merged.price_per_mtok = (float(merged.price_per_mtok[0]), float(merged.price_per_mtok[1]))
    save_settings(out, merged)
    for stage in STAGES:
        target = out / stage / "calls.jsonl"
        seen = {row["key"] for row in read_jsonl(target) if _answered_row(row)}
        rows = []
        for work in works:
            for row in read_jsonl(work / stage / "calls.jsonl"):
                if _answered_row(row) and row.get("key") and row["key"] not in seen:
                    seen.add(row["key"])
                    rows.append(row)
        if rows:
            target.parent.mkdir(parents=True, exist_ok=True)
            with JsonlLog(target) as log:  # appended: what `out` already had stays
                for row in rows:
                    log.append(row)
    return merged
