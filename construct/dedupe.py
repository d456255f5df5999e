"""Near-duplicate search that grows near-linearly with the export, then a model's verdict per pair: the
questions' candidates (the VQA stage) and `resolve`, which both stages use.

The dishes' search (construct/dish_dedupe.py) and the embeddings (construct/neighbours.py) are importable
from here."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from construct.dish_dedupe import DishCandidates, candidate_pairs, dish_candidates, judge_groups
from construct.neighbours import (
    K_VECTOR,
    VECTOR_FLOOR,
    Scored,
    checked_vectors,
    embed,
    embed_texts,
    nearest_earlier,
    top_earlier,
)

__all__ = ["DishCandidates", "candidate_pairs", "dish_candidates", "embed", "embed_texts", "judge_groups",  # re-exported
           "Candidates", "alike", "band_pairs", "candidates", "char_ngrams", "minhash", "resolve"]

PERMUTATIONS = 64
BANDS, ROWS = 16, 4  # BANDS * ROWS == PERMUTATIONS
MIN_ESTIMATE = 0.4  # a candidate's signatures agree on at least this share (estimated Jaccard)
MAX_BUCKET = 32  # an LSH bucket of more questions is walked as a chain of WINDOW neighbours
WINDOW, STAR = 8, 4  # and the bucket's first STAR
K = 4  # earlier questions a question is checked against
PRIME = (1 << 31) - 1  # a * x + b stays below 2**63 for a, x < 2**31: exact in int64
CHUNK = 4096  # records hashed at a time (bounded memory: tokens x PERMUTATIONS int64 per chunk)


def char_ngrams(text: str, sizes: tuple[int, ...] = (2, 3)) -> set[str]:
    """Character n-grams of a text with case, spaces and punctuation removed.

    >>> sorted(char_ngrams("Hot Beef!", (3,)))
    ['bee', 'eef', 'hot', 'otb', 'tbe']
    >>> sorted(char_ngrams("蛋炒饭", (2,)))
    ['炒饭', '蛋炒']
    """
    t = re.sub(r"[\W_]+", "", text.lower())
    return {t[i:i + n] for n in sizes for i in range(len(t) - n + 1)}


def _token_hash(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") % PRIME


def minhash(sets: Sequence[Iterable[str]], seed: int = 0) -> np.ndarray:
    """One row of PERMUTATIONS minimum hash values per set (an empty set: every value PRIME, which
    `band_pairs` never pairs)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, PRIME, PERMUTATIONS, dtype=np.int64)
    b = rng.integers(0, PRIME, PERMUTATIONS, dtype=np.int64)
    out = np.full((len(sets), PERMUTATIONS), PRIME, dtype=np.int64)
    known: dict[str, int] = {}  # a token common to many records is hashed once
    for start in range(0, len(sets), CHUNK):
        hashed = [np.array([known[t] if t in known else known.setdefault(t, _token_hash(t)) for t in set(s)],
                           dtype=np.int64) for s in sets[start:start + CHUNK]]
        sizes = np.array([len(h) for h in hashed])
        nonempty = np.flatnonzero(sizes)
        if not len(nonempty):
            continue
        tokens = np.concatenate([hashed[i] for i in nonempty])
        values = (tokens[:, None] * a[None, :] + b[None, :]) % PRIME
        offsets = np.concatenate(([0], np.cumsum(sizes[nonempty])[:-1]))
        out[start + nonempty] = np.minimum.reduceat(values, offsets, axis=0)
    return out


def band_pairs(signatures: np.ndarray, valid: np.ndarray | None = None, rows: int = ROWS) -> set[tuple[int, int]]:
    """Index pairs (i < j) that share all `rows` values of at least one band (PERMUTATIONS // rows
    bands); `valid` masks rows out."""
    idx = np.flatnonzero(np.ones(len(signatures), dtype=bool) if valid is None else valid)
    pairs: set[tuple[int, int]] = set()
    mix = np.random.default_rng(7).integers(1, 2**62, rows, dtype=np.int64) | 1  # odd multipliers
    for band in range(PERMUTATIONS // rows):
        block = signatures[idx, band * rows:(band + 1) * rows]
        if not len(block):
            break
        # One 64-bit key per band (wrapping arithmetic): a rare collision only adds a pair `alike` drops.
        with np.errstate(over="ignore"):
            keys = (block * mix).sum(axis=1)
        _, bucket, counts = np.unique(keys, return_inverse=True, return_counts=True)
        shared = counts[bucket] >= 2
        members_all, buckets = idx[shared], bucket[shared]
        order = np.lexsort((members_all, buckets))
        members_all, buckets = members_all[order], buckets[order]
        for members in np.split(members_all, np.flatnonzero(np.diff(buckets)) + 1):
            m = len(members)
            reach = m if m <= MAX_BUCKET else WINDOW + 1
            for k in range(m):
                pairs.update((int(members[k]), int(other)) for other in members[k + 1:k + reach])
                if m > MAX_BUCKET:  # and each against the bucket's first STAR: a chain's first record is the one kept
                    pairs.update((int(first), int(members[k])) for first in members[:min(STAR, k)])
    return pairs


def alike(signatures: np.ndarray, pairs: set[tuple[int, int]], least: float = MIN_ESTIMATE, k: int = K) -> set[tuple[int, int]]:
    """Of the pairs whose signatures agree on at least `least` of their values (the MinHash estimate of
    Jaccard similarity: one band shared by chance is not enough), each later record's `k` most alike
    earlier ones (ties: the earliest)."""
    if not pairs:
        return pairs
    ij = np.array(sorted(pairs))
    estimate = np.concatenate([(signatures[part[:, 0]] == signatures[part[:, 1]]).mean(axis=1)
                               for part in np.split(ij, range(65536, len(ij), 65536))])
    keep = estimate >= least
    best = top_earlier(Scored(ij[keep, 0], ij[keep, 1], estimate[keep]), k)
    return set(zip(best.i.tolist(), best.j.tolist(), strict=True))


@dataclass
class Candidates:
    """Candidate pairs (i < j) and, per pair, which views found it (e.g. "ingredients", "name")."""

    via: dict[tuple[int, int], list[str]] = field(default_factory=dict)

    def add(self, view: str, pairs: Iterable[tuple[int, int]]) -> None:
        for pair in pairs:
            self.via.setdefault(pair, []).append(view)

    def pairs(self) -> list[tuple[int, int]]:
        return sorted(self.via)


def candidates(views: Mapping[str, Sequence[Iterable[str]]], *, vectors: np.ndarray | None = None,
               allowed: Callable[[int, int], bool] | None = None, seed: int = 0,
               rows: dict[str, int] | None = None) -> Candidates:
    """Candidate pairs from each named view of token sets, by MinHash LSH (`band_pairs`, then `alike`), and
    from `vectors` when given (each record's K_VECTOR nearest earlier records at cosine VECTOR_FLOOR or more);
    `allowed` keeps only the pairs it accepts (e.g. two different merchants); `rows` sets a stricter band for
    a view (8 rows: found with probability 0.5 at Jaccard 0.77, 0.06 at 0.5)."""
    found = Candidates()
    for name, sets in views.items():
        sets = list(sets)
        signatures = minhash(sets, seed)
        valid = np.array([bool(set(s)) for s in sets], dtype=bool)
        found.add(name, alike(signatures, band_pairs(signatures, valid, (rows or {}).get(name, ROWS))))
    if vectors is not None and len(vectors):
        near = nearest_earlier(checked_vectors(vectors, len(next(iter(views.values()), ()))), K_VECTOR, VECTOR_FLOOR)
        found.add("embedding", [(int(i), int(j)) for i, j in near[:, :2].astype(np.int64)])
    if allowed is not None:
        found.via = {p: v for p, v in found.via.items() if allowed(*p)}
    return found


def resolve(order: Sequence[str], same: Iterable[tuple[str, str]],
            allowed: Callable[[str, str], bool] | None = None) -> dict[str, str]:
    """{dropped record: the kept record it repeats}, from the pairs a model confirmed. Records are taken
    in `order`; a record is dropped when a confirmed twin of its own was kept before it and `allowed`
    accepts the two. No chaining: a record confirmed the same as a dropped one only (never compared with
    the one kept) stays, since "a is b" and "b is c" do not make "a is c"; every drop names a pair the
    model judged, and one wrong "same" drops at most one record.

    >>> resolve(["a", "b", "c", "d"], [("b", "a"), ("c", "b"), ("d", "x")])
    {'b': 'a'}
    """
    twins: dict[str, list[str]] = {}
    for x, y in same:
        twins.setdefault(x, []).append(y)
        twins.setdefault(y, []).append(x)
    rank = {r: k for k, r in enumerate(order)}
    taken: set[str] = set()
    dropped: dict[str, str] = {}
    for record in order:
        seen = sorted({t for t in twins.get(record, ()) if t in rank and rank[t] < rank[record]},
                      key=rank.__getitem__)
        twin = next((t for t in seen if t in taken and (allowed is None or allowed(t, record))), None)
        if twin is not None:
            dropped[record] = twin
        else:
            taken.add(record)
    return dropped
