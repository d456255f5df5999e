"""Dish near-duplicate candidates for the dishes stage, grown near-linearly with the export; the model
judges each pair and construct/dedupe.py:`resolve` drops a dish only as the twin of one kept before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from construct.composition import Grams, partners
from construct.neighbours import (
    K_VECTOR,
    VECTOR_FLOOR,
    Scored,
    checked_vectors,
    nearest_earlier,
    place_in_run,
)

FLOOR = 0.5  # weighted Jaccard at which two dishes become a candidate pair
K = 4  # earlier partners a dish is checked against, from its concepts and keys
BUCKET, STAR, WINDOW = 64, 4, 8  # a prefix concept shared by more dishes: each against its first STAR and WINDOW neighbours
KEY_ALL, KEY_STAR = 12, 2  # a key (normalised name, protein + base) shared by more dishes is blocked within them
CORE_FLOOR = 0.3  # a partner of one protein + base set at least this alike (weighted Jaccard) is a candidate
K_GRAMS, GRAMS_FLOOR = 2, 0.5  # and its most alike there by the grams they state (composition.composition_alike)
ROUTES = ("concepts", "name", "protein_base")  # how a pair was found: the prefix filter, each key
GROUP_WIDE, GROUP_SIZE = 3, 12  # a dish met by this many later dishes is judged with them, this many a question
KIND_WEIGHT = {"i": 1.0, "w": 1.0, "h": 0.7, "d": 0.6, "c": 0.5, "s": 0.25}  # construct/lexicon.py's kinds
Key = tuple[str, ...] | None  # a dish's normalised name or protein + base set (`_read_dishes`)
BASES = frozenset({"rice"})  # a staple that is also what a dish is served on: 牛肉饭, beef over rice
# Spaces and punctuation between Chinese characters, gone from a name (鱼香 牛肉·盖饭: 鱼香牛肉盖饭) so the
# lexicon reads its words whole.
_BETWEEN_CJK = re.compile(r"(?<=[\u3400-\u9fff])[\s\W_]+(?=[\u3400-\u9fff])")


@dataclass
class Reading:
    """What dedupe reads of each dish: its concepts with their kinds' weights, its two keys and its grams
    per food concept (`_read_dishes`)."""

    concepts: list[dict[str, float]]
    names: list[Key]
    cores: list[Key]
    grams: list[dict[str, float]]


def _read_dishes(dishes: Sequence[Any], glossary: Mapping[str, str] | None = None) -> Reading:
    """Each dish's concepts; its normalised name (its name's concepts, sorted: marketing and filler words,
    spacing, punctuation and word order gone, synonyms and the other language folded by
    construct/lexicon.py) and its protein + base set (the proteins of its name and ingredients with its
    name's dish words; a dish without a protein has none), both None where a dish has nothing to key on;
    {food concept: the grams its ingredient entries state of it} (an entry counts for its last food
    concept: 鸡蛋面 is noodles).

    >>> from construct.raw import Dish
    >>> read = _read_dishes([Dish("a", "m1", "招牌鱼香牛肉青豆盖饭", "", "", ("牛肉 100克", "米饭 200克"), ""),
    ...                      Dish("b", "m2", "Beef and Peas Rice Bowl, Fish-Fragrant", "", "", ("beef 100 g",), "")])
    >>> read.names[0] == read.names[1], read.cores[0]
    (True, ('beef', 'bowl'))
    """
    from construct.fdc import entry_grams
    from construct.lexicon import PROTEINS, terms

    read: dict[str, list[tuple[str, str]]] = {}  # menus repeat their entries ("salt 3 g"): read each once
    weighed: dict[str, tuple[str, float] | None] = {}
    out = Reading([], [], [], [])
    for d in dishes:
        found: dict[str, float] = {}
        protein: set[str] = set()
        grams: dict[str, float] = {}
        for text in (d.name, *d.ingredients):
            if text not in read:
                read[text] = terms(text, glossary)
            for concept, kind in read[text]:
                found[concept] = max(found.get(concept, 0.0), KIND_WEIGHT.get(kind, 1.0))
                if concept in PROTEINS:
                    protein.add(concept)
        for entry in d.ingredients:
            if entry not in weighed:
                g = entry_grams(entry)
                food = [c for c, kind in read[entry] if kind not in ("c", "m", "x")]
                weighed[entry] = (food[-1], g) if g and food else None
            if (hit := weighed[entry]) is not None:
                grams[hit[0]] = grams.get(hit[0], 0.0) + hit[1]
        squeezed = _BETWEEN_CJK.sub("", d.name)
        if squeezed not in read:
            read[squeezed] = terms(squeezed, glossary)
        named = read[d.name] if glossary and d.name in glossary else read[squeezed]
        out.concepts.append(found)
        out.names.append(tuple(sorted({c for c, _ in named})) or None)
        base = {c for c, kind in named if kind == "d" or c in BASES}
        out.cores.append(tuple(sorted(protein | base)) if protein else None)
        out.grams.append(grams)
    return out


@dataclass
class Weighted:
    """Records' concepts: record r's are rows ptr[r]:ptr[r + 1] of `tok` (ids, ascending) and `kind` (their
    kinds' weights); each concept's rarity (idf: ln(1 + records / records with it)) and each record's
    total. `key` (record * concepts + concept) is ascending, so a pair's shared concepts are found by
    binary search."""

    ptr: np.ndarray
    tok: np.ndarray
    kind: np.ndarray
    idf: np.ndarray
    totals: np.ndarray
    key: np.ndarray

    @classmethod
    def of(cls, concepts: Sequence[Mapping[str, float]]) -> Weighted:
        n = len(concepts)
        vocab: dict[str, int] = {}
        tok = np.array([vocab.setdefault(c, len(vocab)) for cs in concepts for c in cs], dtype=np.int64)
        kw = np.array([v for cs in concepts for v in cs.values()], dtype=np.float64)
        lengths = np.array([len(cs) for cs in concepts], dtype=np.int64)
        rec = np.repeat(np.arange(n, dtype=np.int64), lengths)
        order = np.lexsort((tok, rec))
        tok, kw = tok[order], kw[order]
        idf = np.log1p(n / np.maximum(np.bincount(tok, minlength=len(vocab)), 1))
        return cls(np.r_[0, np.cumsum(lengths)], tok, kw, idf, np.bincount(rec, weights=idf[tok] * kw, minlength=n),
                   rec * np.int64(max(1, len(vocab))) + tok)

    def jaccard(self, ij: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
        """Weighted Jaccard of each pair: the shared concepts' weight (each at the lighter of its two kinds)
        over the two totals less the shared weight."""
        out = np.zeros(len(ij))
        span = np.int64(max(1, len(self.idf)))
        lengths = np.diff(self.ptr)
        for start in range(0, len(ij), chunk):
            a, b = ij[start:start + chunk, 0], ij[start:start + chunk, 1]
            n_a = lengths[a]
            pair = np.repeat(np.arange(len(a), dtype=np.int64), n_a)
            at = np.repeat(self.ptr[a] - (np.cumsum(n_a) - n_a), n_a) + np.arange(int(n_a.sum()), dtype=np.int64)
            wanted = b[pair] * span + self.tok[at]
            pos = np.minimum(np.searchsorted(self.key, wanted), max(0, len(self.key) - 1))
            hit = self.key[pos] == wanted if len(self.key) else np.zeros(len(wanted), bool)
            shared = self.idf[self.tok[at[hit]]] * np.minimum(self.kind[at[hit]], self.kind[pos[hit]])
            overlap = np.bincount(pair[hit], weights=shared, minlength=len(a))
            denominator = self.totals[a] + self.totals[b] - overlap
            out[start:start + len(a)] = np.divide(overlap, denominator, out=np.zeros(len(a)), where=denominator > 0)
        return out


def prefix_pairs(w: Weighted, groups: np.ndarray | None = None, floor: float = FLOOR) -> Scored:
    """Every pair at weighted Jaccard `floor` or more (of two groups when given) that prefix filtering
    meets: a record's prefix is its heaviest concepts until what is left weighs less than `floor` of the
    whole, and two records at `floor` share a prefix concept, so only records sharing a rare concept are
    compared. All of them but where a prefix concept is shared by more than BUCKET records (there each meets
    the concept's first STAR and its WINDOW neighbours in concept order, so one popular dish cannot make
    the work quadratic)."""
    n = len(w.ptr) - 1
    if not len(w.idf):
        return Scored.empty()
    tok, kw = w.tok, w.kind
    rec = np.repeat(np.arange(n, dtype=np.int64), np.diff(w.ptr))
    idf, totals = w.idf, w.totals
    weight = idf[tok] * kw  # a concept weighs its rarity times its kind
    rank = np.empty(len(idf), dtype=np.int64)
    rank[np.argsort(-idf, kind="stable")] = np.arange(len(idf))  # the global order: the rarest first
    order = np.lexsort((rank[tok], rec))  # each record's concepts, the rarest first
    tok_o, rec_o, w_o = tok[order], rec[order], weight[order]
    start = np.r_[0, np.flatnonzero(np.diff(rec_o)) + 1]
    run = np.diff(np.r_[start, len(rec_o)])
    cum = np.cumsum(w_o)
    before = cum - w_o - np.repeat(cum[start] - w_o[start], run)  # weight of the record's earlier concepts
    prefix = before <= (1 - floor) * totals[rec_o] + 1e-9  # what is left after them still reaches `floor`
    place = np.arange(len(rec_o)) - np.repeat(start, run)
    lead = np.full((n, 4), len(idf), dtype=np.int64)  # the first concepts in global order: a sort key
    first = place < 4
    lead[rec_o[first], place[first]] = rank[tok_o[first]]
    p_tok, p_rec = tok_o[prefix], rec_o[prefix]
    by = np.lexsort((p_rec, p_tok))
    p_tok, p_rec = p_tok[by], p_rec[by]
    bounds = np.r_[0, np.flatnonzero(np.diff(p_tok)) + 1, len(p_tok)]
    pairs: list[np.ndarray] = []
    for a, c in zip(bounds[:-1], bounds[1:], strict=True):
        m = int(c - a)
        if m < 2:
            continue
        b = p_rec[a:c]
        if m <= BUCKET:
            x, y = np.triu_indices(m, 1)
            pairs.append(np.stack([b[x], b[y]], 1))
            continue
        star = np.stack(np.meshgrid(b[:STAR], b[STAR:], indexing="ij"), -1).reshape(-1, 2)
        by_lead = b[np.lexsort(lead[b].T[::-1])]
        pairs += [star, *(np.stack([by_lead[:-w], by_lead[w:]], 1) for w in range(1, min(WINDOW, m - 1) + 1))]
    ij = _distinct(pairs, n, groups)
    score = w.jaccard(ij)
    keep = score >= floor - 1e-9
    return Scored(ij[keep, 0], ij[keep, 1], score[keep])


def _distinct(pairs: list[np.ndarray], n: int, groups: np.ndarray | None) -> np.ndarray:
    """The pairs as (earlier, later) rows, each once, of two groups when `groups` is given."""
    if not pairs:
        return np.zeros((0, 2), np.int64)
    ij = np.sort(np.concatenate(pairs).astype(np.int64), axis=1)
    key = np.unique(ij[:, 0] * np.int64(n) + ij[:, 1])
    ij = np.stack([key // n, key % n], 1)
    ij = ij[ij[:, 0] != ij[:, 1]]
    return ij[groups[ij[:, 0]] != groups[ij[:, 1]]] if groups is not None else ij


def key_pairs(keys: Sequence[Key], grams: Grams, groups: np.ndarray | None = None) -> np.ndarray:
    """(earlier, later) rows of records with one key (of two groups when given): every pair of a key
    shared by at most KEY_ALL records; of a key shared by more (one standard dish on hundreds of menus),
    each record with the key's first KEY_STAR records and with its K_GRAMS most alike by the grams they
    state (construct/composition.py: copies of one dish that name the same things differ in their grams).
    Grouping by a key is linear, and so is each search within a key's records."""
    members: dict[tuple[str, ...], list[int]] = {}
    for x, key in enumerate(keys):
        if key is not None:
            members.setdefault(key, []).append(x)
    pairs: list[np.ndarray] = []
    for found in members.values():
        if len(found) < 2:
            continue
        m = np.array(found, dtype=np.int64)
        if len(m) <= KEY_ALL:
            a, b = np.triu_indices(len(m), 1)
            pairs.append(np.stack([m[a], m[b]], 1))
            continue
        pairs.append(np.stack(np.meshgrid(m[:KEY_STAR], m, indexing="ij"), -1).reshape(-1, 2))
        pairs.append(partners(grams, m, K_GRAMS, GRAMS_FLOOR, groups))
    return _distinct(pairs, len(keys), groups)


def bounded(found: Scored, second: np.ndarray, same_name: np.ndarray, same_core: np.ndarray, k: int = K) -> np.ndarray:
    """Which pairs each later record keeps, at most `k`, in this order: of the partners of its normalised
    name, the most alike by concepts, the most alike by composition (`second`) and the earliest (a dish
    on many menus: each copy meets the first, the one kept); of the partners of its protein + base set,
    the most alike by composition and by concepts; then the most alike of the rest by concepts. Alike by
    concepts: the score to 3 decimals, then `second`, then the earliest partner (by composition: `second`
    to 3 decimals first). A near miss (another protein) can fill a free place; it never takes a place
    from a partner that shares a key (`resolve` drops a dish only as the twin of one before it, so a dish
    needs no other partners)."""
    if not len(found.i):
        return np.zeros(0, bool)
    score, near = np.round(found.score, 3), np.round(second, 3)
    by_concepts = np.lexsort((found.i, -second, -score, found.j))
    by_composition = np.lexsort((found.i, -score, -near, found.j))
    earliest = np.lexsort((found.i, found.j))
    slot = np.full(len(found.i), 9)
    for rank, (order, mask) in enumerate(((by_concepts, same_name), (by_composition, same_name), (earliest, same_name),
                                          (by_composition, same_core), (by_concepts, same_core))):
        rows = order[mask[order] & (slot[order] == 9)]  # each later record's untaken partners of the key, best first
        if len(rows):
            slot[rows[np.r_[True, found.j[rows][1:] != found.j[rows][:-1]]]] = rank
    place = np.empty(len(found.i), np.int64)
    place[by_concepts] = np.arange(len(found.i))
    final = np.lexsort((place, slot, found.j))
    keep = np.zeros(len(found.i), bool)
    keep[final[place_in_run(found.j[final]) < k]] = True
    return keep


def _codes(keys: Sequence[Key]) -> np.ndarray:
    """Each record's key as a number (-1: none), so that keys compare as arrays."""
    known: dict[tuple[str, ...], int] = {}
    return np.array([-1 if k is None else known.setdefault(k, len(known)) for k in keys], np.int64)


@dataclass
class DishCandidates:
    """The dish pairs to ask about: (earlier, later) indices, how each was found and its similarity."""

    via: dict[tuple[int, int], list[str]]
    score: dict[tuple[int, int], dict[str, float]]

    def pairs(self) -> list[tuple[int, int]]:
        return sorted(self.via)


def dish_candidates(dishes: Sequence[Any], vectors: Any = None, *, glossary: Mapping[str, str] | None = None,
                    groups: Sequence[str] | None = None) -> DishCandidates:
    """Candidate pairs of `dishes` (in their order: a pair's later dish is the one a confirmed verdict drops):
    each dish's K earlier partners from its concepts and keys (`bounded`: those of its normalised name and of
    its protein + base set first) and, with `vectors`, its K_VECTOR nearest earlier neighbours (where names
    that share no concept meet); pairs of one merchant (`groups`, default each dish's merchant_id) never."""
    labels = list(groups) if groups is not None else [d.merchant_id for d in dishes]
    codes = np.unique(np.array(labels, dtype=object).astype(str), return_inverse=True)[1] if labels else np.zeros(0, np.int64)
    via: dict[tuple[int, int], list[str]] = {}
    score: dict[tuple[int, int], dict[str, float]] = {}
    reading = _read_dishes(dishes, glossary)
    w, grams = Weighted.of(reading.concepts), Grams.of(reading.grams)
    names, cores = _codes(reading.names), _codes(reading.cores)
    by_concepts = prefix_pairs(w, codes)
    routes = (np.stack([by_concepts.i, by_concepts.j], 1), key_pairs(reading.names, grams, codes),
              key_pairs(reading.cores, grams, codes))
    n = np.int64(max(1, len(dishes)))
    pair_key = np.concatenate([r[:, 0] * n + r[:, 1] for r in routes])
    route_bit = np.concatenate([np.full(len(r), 1 << k, np.int64) for k, r in enumerate(routes)])
    if len(pair_key):
        order = np.argsort(pair_key, kind="stable")
        pair_key, route_bit = pair_key[order], route_bit[order]
        starts = np.r_[0, np.flatnonzero(np.diff(pair_key)) + 1]
        bits, pair_key = np.bitwise_or.reduceat(route_bit, starts), pair_key[starts]
        ij = np.stack([pair_key // n, pair_key % n], 1)
        similarity = np.full(len(ij), np.nan)  # the prefix filter's pairs come scored: score the others once
        known = np.searchsorted(pair_key, by_concepts.i * n + by_concepts.j)
        similarity[known] = by_concepts.score
        unscored = np.isnan(similarity)
        similarity[unscored] = w.jaccard(ij[unscored])
        found = Scored(ij[:, 0], ij[:, 1], similarity)
        second = grams.alike(ij)
        same_name = (names[ij[:, 0]] >= 0) & (names[ij[:, 0]] == names[ij[:, 1]])
        same_core = (cores[ij[:, 0]] >= 0) & (cores[ij[:, 0]] == cores[ij[:, 1]])
        # A partner of the same name always; of the same protein + base set when the two are at all alike;
        # any other only at FLOOR (the prefix filter's floor, which the name and key routes do not apply).
        worth = same_name | (found.score >= FLOOR - 1e-9) | (same_core & (found.score >= CORE_FLOOR))
        found, second, same_name, same_core, bits = (Scored(found.i[worth], found.j[worth], found.score[worth]),
                                                     second[worth], same_name[worth], same_core[worth], bits[worth])
        keep = bounded(found, second, same_name, same_core)
        labels = [[route for k, route in enumerate(ROUTES) if b >> k & 1] for b in range(1 << len(ROUTES))]
        for i, j, s, b in zip(found.i[keep].tolist(), found.j[keep].tolist(), found.score[keep].tolist(),
                              bits[keep].tolist(), strict=True):
            via[(i, j)] = list(labels[b])
            score[(i, j)] = {"concepts": round(s, 3)}
    if vectors is not None:
        near = nearest_earlier(checked_vectors(vectors, len(dishes)), K_VECTOR, VECTOR_FLOOR, codes)
        for i, j, s in near.tolist():
            via.setdefault((int(i), int(j)), []).append("embedding")
            score.setdefault((int(i), int(j)), {})["embedding"] = round(s, 3)
    return DishCandidates(via, score)


def candidate_pairs(dishes: Sequence[Any], vectors: Any = None, *,
                    glossary: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """`dish_candidates` as (earlier dish id, later dish id): the pairs a model should judge; `glossary`:
    English for names in another language.

    >>> from construct.raw import Dish
    >>> menu = [Dish("a1", "a", "Spicy Beef Noodle Soup", "", "", ("beef 150 g", "noodles 200 g", "bok choy 40 g"), ""),
    ...         Dish("b1", "b", "招牌香辣牛肉面", "", "", ("牛肉 150克", "面条 200克", "青菜 40克"), ""),
    ...         Dish("b2", "b", "Egg Fried Rice", "", "", ("rice 250 g", "egg 2", "scallion 5 g"), "")]
    >>> candidate_pairs(menu)
    [('a1', 'b1')]
    """
    found = dish_candidates(dishes, vectors, glossary=glossary)
    return [(dishes[i].dish_id, dishes[j].dish_id) for i, j in found.pairs()]


def judge_groups(pairs: Iterable[tuple[int, int]], wide: int = GROUP_WIDE,
                 size: int = GROUP_SIZE) -> list[tuple[int, tuple[int, ...]]]:
    """The judge's questions for candidate `pairs` (earlier, later): (a dish, the dishes it is compared
    with), every pair in exactly one. A dish that `wide` or more later dishes meet (one dish on many
    menus: its copies each meet it) is asked about with them, `size` at a time; each other later dish
    with its remaining earlier partners, in one question. So the questions grow with the dishes, not with
    their pairs; each verdict is still one pair's, and `resolve` takes them as pairs (no chaining).

    >>> judge_groups([(0, 1), (0, 2), (0, 3), (1, 3), (2, 3), (1, 4)])
    [(0, (1, 2, 3)), (3, (1, 2)), (1, (4,))]
    """
    pairs = sorted(set(pairs))
    later: dict[int, list[int]] = {}
    for i, j in pairs:
        later.setdefault(i, []).append(j)
    out: list[tuple[int, tuple[int, ...]]] = []
    rest: dict[int, list[int]] = {}
    for i, members in later.items():
        if len(members) >= wide:
            out += [(i, tuple(members[k:k + size])) for k in range(0, len(members), size)]
        else:
            for j in members:
                rest.setdefault(j, []).append(i)
    for j, earlier in sorted(rest.items()):
        if len(earlier) == 1:
            out.append((earlier[0], (j,)))
        else:
            out += [(j, tuple(earlier[k:k + size])) for k in range(0, len(earlier), size)]
    return out
