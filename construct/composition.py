"""The grams dishes state, as dish dedupe compares them: a merchant's copy of another's dish keeps its amounts,
so within one key's dishes (a standard dish on hundreds of menus) the copy is the one whose grams agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from construct.neighbours import place_in_run

REACH = 256  # of a key's dishes, those this far back are searched exactly
SORT_PASSES, SORT_WINDOW = 4, 4  # orders of a key's dishes by their grams, and the neighbours met in each
SORT_ENTRIES, CELL, TOTAL_CELL = 8, 0.5, 0.15  # common entries ordered on; cells of log grams, of log total grams
BLOCK = 128  # rows of the exact search at a time


def composition_alike(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """How alike two dishes' stated grams are, 0 to 1: the share of their entries they have in common
    times exp(-the mean squared log ratio of the grams of those). One merchant's copy of another's dish,
    a gram or two off and an entry swapped, stays near 0.9; two cooks' kung pao chicken seldom pass 0.7.

    >>> round(composition_alike({"beef": 150, "rice": 250}, {"beef": 140, "rice": 250}), 3)
    0.998
    >>> composition_alike({"beef": 150}, {"pork": 150})
    0.0
    """
    shared = [c for c in a if c in b]
    if not shared:
        return 0.0
    spread = sum(math.log(a[c] / b[c]) ** 2 for c in shared) / len(shared)
    return len(shared) / max(len(a), len(b)) * math.exp(-spread)


@dataclass
class Grams:
    """Each dish's stated grams, as one sparse table read once: dish d's entries are rows ptr[d]:ptr[d + 1]
    of `concept` (ids, ascending) and `log_grams`; `key` (dish * concepts + concept) is ascending, so a
    pair's shared entries are found by binary search."""

    ptr: np.ndarray
    concept: np.ndarray
    log_grams: np.ndarray
    key: np.ndarray
    size: np.ndarray  # entries per dish
    total: np.ndarray  # log of the dish's grams in all

    @classmethod
    def of(cls, grams: Sequence[Mapping[str, float]]) -> Grams:
        vocab: dict[str, int] = {}
        rows = [sorted((vocab.setdefault(c, len(vocab)), math.log(g)) for c, g in d.items() if g > 0) for d in grams]
        size = np.array([len(r) for r in rows], np.int64)
        flat = [e for r in rows for e in r]
        concept = np.array([c for c, _ in flat], np.int64)
        log_grams = np.array([g for _, g in flat], np.float64)
        dish = np.repeat(np.arange(len(rows), dtype=np.int64), size)
        total = np.log(np.maximum(np.bincount(dish, weights=np.exp(log_grams), minlength=len(rows)), 1.0))
        return cls(np.r_[0, np.cumsum(size)], concept, log_grams, dish * max(1, len(vocab)) + concept, size, total)

    def alike(self, ij: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
        """`composition_alike` of each pair (rows of dish indices), vectorised."""
        out = np.zeros(len(ij))
        span = np.int64(max(1, int(self.concept.max(initial=0)) + 1))
        for start in range(0, len(ij), chunk):
            a, b = ij[start:start + chunk, 0], ij[start:start + chunk, 1]
            n_a = self.size[a]
            pair = np.repeat(np.arange(len(a), dtype=np.int64), n_a)
            at = np.repeat(self.ptr[a] - (np.cumsum(n_a) - n_a), n_a) + np.arange(int(n_a.sum()), dtype=np.int64)
            wanted = b[pair] * span + self.concept[at]
            pos = np.minimum(np.searchsorted(self.key, wanted), max(0, len(self.key) - 1))
            hit = self.key[pos] == wanted if len(self.key) else np.zeros(len(wanted), bool)
            shared = np.bincount(pair[hit], minlength=len(a)).astype(np.float64)
            squares = (self.log_grams[at[hit]] - self.log_grams[pos[hit]]) ** 2
            spread = np.bincount(pair[hit], weights=squares, minlength=len(a)) / np.maximum(shared, 1)
            out[start:start + len(a)] = shared / np.maximum(np.maximum(n_a, self.size[b]), 1) * np.exp(-spread)
        return out

    def table(self, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log grams, presence) of `members` over the entries at least two of them have (an entry only one
        has is never shared: it counts in `size` alone), the most common entry first."""
        n_m = self.size[members]
        row = np.repeat(np.arange(len(members), dtype=np.int64), n_m)
        at = np.repeat(self.ptr[members] - (np.cumsum(n_m) - n_m), n_m) + np.arange(int(n_m.sum()), dtype=np.int64)
        ids, column, counts = np.unique(self.concept[at], return_inverse=True, return_counts=True)
        common = np.argsort(-counts, kind="stable")
        common = common[counts[common] >= 2]
        place = np.full(len(ids), -1, np.int64)
        place[common] = np.arange(len(common))
        col = place[column]
        x = np.zeros((len(members), max(1, len(common))), np.float32)
        present = np.zeros_like(x)
        x[row[col >= 0], col[col >= 0]] = self.log_grams[at[col >= 0]]
        present[row[col >= 0], col[col >= 0]] = 1.0
        return x, present


def partners(grams: Grams, members: np.ndarray, k: int, floor: float, groups: np.ndarray | None = None) -> np.ndarray:
    """(earlier, later) rows: each of one key's `members` (dish indices, ascending) with its `k` earlier
    members most alike by `composition_alike` at `floor` or more (another group when given), among those
    the exact search (`within_reach`: the REACH before it) and the sorted orders of the whole key
    (`sorted_neighbours`) meet: a copy is met however far apart the two stand, at a fixed cost per dish."""
    x, present = grams.table(members)
    local = None if groups is None else groups[members]
    near = np.concatenate([within_reach(x, present, grams.size[members], local, k, floor),
                           sorted_neighbours(x, present, grams.total[members], local)])
    if not len(near):
        return np.zeros((0, 2), np.int64)
    span = np.int64(len(members))
    pair = np.unique(near[:, 0] * span + near[:, 1])
    ij = members[np.stack([pair // span, pair % span], 1)]
    score = grams.alike(ij)
    keep = score >= floor
    ij, score = ij[keep], score[keep]
    ij = ij[np.lexsort((ij[:, 0], -np.round(score, 6), ij[:, 1]))]
    return ij[place_in_run(ij[:, 1]) < k]


def within_reach(x: np.ndarray, present: np.ndarray, size: np.ndarray, groups: np.ndarray | None,
                 k: int = 2, floor: float = 0.5, reach: int = REACH) -> np.ndarray:
    """Local rows (i, j) of each record j's `k` most alike of the `reach` records before it: an exact
    search, two products per BLOCK of rows over the entries two records share."""
    out: list[np.ndarray] = []
    n = len(x)
    for start in range(1, n, BLOCK):
        stop, first = min(start + BLOCK, n), max(0, start - reach)
        a, ma, b, mb = x[start:stop], present[start:stop], x[first:stop - 1], present[first:stop - 1]
        # einsum, not matmul: BLAS threads spinning for products this small cost many times their work in
        # CPU time on a busy machine (measured: 7 s instead of 0.4 s at 32,000 dishes on 2 shared cores).
        shared = np.einsum("ik,jk->ij", ma, mb)
        squares = np.einsum("ik,jk->ij", np.hstack([a * a, ma, a]), np.hstack([mb, b * b, -2 * b]))
        spread = np.maximum(squares / np.maximum(shared, 1), 0)
        alike = shared / np.maximum(np.maximum.outer(size[start:stop], size[first:stop - 1]), 1) * np.exp(-spread)
        rows, cols = np.arange(start, stop), np.arange(first, stop - 1)
        alike[(cols[None, :] >= rows[:, None]) | (cols[None, :] < rows[:, None] - reach)] = -1  # earlier, in reach
        if groups is not None:
            alike[groups[rows][:, None] == groups[None, cols]] = -1
        top = min(k, alike.shape[1])
        best = np.argpartition(-alike, top - 1, axis=1)[:, :top]
        hit = np.take_along_axis(alike, best, axis=1) >= floor
        out.append(np.stack([cols[best[hit]], np.repeat(rows[:, None], top, axis=1)[hit]], 1))
    return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 2), np.int64)


def sorted_neighbours(x: np.ndarray, present: np.ndarray, total: np.ndarray, groups: np.ndarray | None,
                      passes: int = SORT_PASSES, window: int = SORT_WINDOW, seed: int = 0) -> np.ndarray:
    """Local rows (i < j) of records next to each other, `window` apart at most, in each of `passes` orders:
    by the cell of their log total grams, then by the cells of the log grams of the SORT_ENTRIES most
    common entries (an entry a record lacks reads as the median of those that have it, so one dropped
    entry moves a copy one cell, not to the end), each pass with other cell offsets and the entries
    taken from another one on. O(n log n) per pass."""
    n = len(x)
    if n < 2:
        return np.zeros((0, 2), np.int64)
    entries = x[:, :SORT_ENTRIES]
    has = present[:, :SORT_ENTRIES] > 0
    median = np.array([np.median(entries[has[:, c], c]) if has[:, c].any() else 0.0 for c in range(entries.shape[1])])
    filled = np.where(has, entries, median[None, :])
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    for p in range(passes):
        turn = np.roll(np.arange(filled.shape[1]), -p)
        cells = np.floor(filled[:, turn] / CELL + rng.random(len(turn)))
        first = np.floor(total / TOTAL_CELL + rng.random())
        order = np.lexsort([*cells.T[::-1], first])
        out += [np.stack([order[:-w], order[w:]], 1) for w in range(1, min(window, n - 1) + 1)]
    ij = np.sort(np.concatenate(out), axis=1)
    return ij[groups[ij[:, 0]] != groups[ij[:, 1]]] if groups is not None else ij
