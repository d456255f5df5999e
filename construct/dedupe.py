"""Near-duplicate search that grows near-linearly with the export, then a model's verdict per pair.

Blocking: each record gives token sets (a dish: its ingredient names and its name's character
n-grams; a question: its character n-grams); each set becomes a MinHash signature of `PERMUTATIONS`
values, cut into `BANDS` bands of `ROWS` rows; two records sharing one band's values in one set
become a candidate pair when their whole signatures agree on at least MIN_ESTIMATE of their values
(the MinHash estimate of Jaccard similarity, which drops pairs that met in one band by chance). A pair whose sets have Jaccard similarity s is found with probability
1 - (1 - s**ROWS)**BANDS (about 0.5 at s = 0.5, 0.99 at s = 0.8, 0.05 at s = 0.25), so the work is
one signature per record plus the pairs that really are alike, not every pair. A bucket of more than
`MAX_BUCKET` records (a chain's one dish on many menus) is checked as a chain: each record against its
next `WINDOW` neighbours, so one popular dish cannot make the work quadratic; the verdicts join it again.

Optionally a vector per record (from an OpenAI-compatible `/v1/embeddings` endpoint, `--embed-model`)
adds pairs by random-hyperplane LSH on cosine similarity, the same banding on sign bits: names that
share no characters but mean the same ("Spicy Beef Noodle Soup" / "Hot Beef Noodles") meet there or
through their ingredients.

Nothing here decides: `judge_pairs` asks the model "the same dish (question) under another wording?"
for every candidate pair, and `first_of_each` drops every record a confirmed twin precedes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from construct.errors import BuildError

PERMUTATIONS = 64
BANDS, ROWS = 16, 4  # BANDS * ROWS == PERMUTATIONS
MIN_ESTIMATE = 0.4  # a candidate's signatures agree on at least this share (estimated Jaccard)
MAX_BUCKET = 32
WINDOW = 8
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


def simhash_bits(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """Sign bits of PERMUTATIONS random hyperplanes per vector (0/1 int64): cosine-similar vectors share bits."""
    rng = np.random.default_rng(seed)
    planes = rng.standard_normal((vectors.shape[1], PERMUTATIONS))
    return (vectors @ planes > 0).astype(np.int64)


def band_pairs(signatures: np.ndarray, valid: np.ndarray | None = None, rows: int = ROWS) -> set[tuple[int, int]]:
    """Index pairs (i < j) that share all `rows` values of at least one band (PERMUTATIONS // rows
    bands); `valid` masks rows out."""
    n = len(signatures)
    valid = np.ones(n, dtype=bool) if valid is None else valid
    idx = np.flatnonzero(valid)
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
        if not shared.any():
            continue
        members_all, buckets = idx[shared], bucket[shared]
        order = np.lexsort((members_all, buckets))
        members_all, buckets = members_all[order], buckets[order]
        for members in np.split(members_all, np.flatnonzero(np.diff(buckets)) + 1):
            m = len(members)
            reach = m if m <= MAX_BUCKET else WINDOW + 1
            for k in range(m):
                for other in members[k + 1:k + reach]:
                    pairs.add((int(members[k]), int(other)))
    return pairs


def alike(signatures: np.ndarray, pairs: set[tuple[int, int]], least: float = MIN_ESTIMATE) -> set[tuple[int, int]]:
    """The pairs whose signatures agree on at least `least` of their values (the MinHash estimate of
    Jaccard similarity): one band shared by chance is not enough."""
    if not pairs:
        return pairs
    ij = np.array(sorted(pairs))
    estimate = np.empty(len(ij))
    for start in range(0, len(ij), 65536):
        i, j = ij[start:start + 65536, 0], ij[start:start + 65536, 1]
        estimate[start:start + 65536] = (signatures[i] == signatures[j]).mean(axis=1)
    return {(int(i), int(j)) for (i, j), e in zip(ij, estimate, strict=True) if e >= least}


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
    """Candidate pairs from each named view of token sets (and from `vectors` when given); `allowed`
    keeps only the pairs it accepts (e.g. two different merchants); `rows` sets a stricter band for a
    view (8 rows: found with probability 0.5 at Jaccard 0.77, 0.06 at 0.5)."""
    found = Candidates()
    for name, sets in views.items():
        sets = list(sets)
        signatures = minhash(sets, seed)
        valid = np.array([bool(set(s)) for s in sets], dtype=bool)
        found.add(name, alike(signatures, band_pairs(signatures, valid, (rows or {}).get(name, ROWS))))
    if vectors is not None and len(vectors):
        found.add("embedding", band_pairs(simhash_bits(np.asarray(vectors, dtype=np.float64), seed)))
    if allowed is not None:
        found.via = {p: v for p, v in found.via.items() if allowed(*p)}
    return found


def first_of_each(order: Sequence[str], same: Iterable[tuple[str, str]],
                  allowed: Callable[[str, str], bool] | None = None) -> dict[str, str]:
    """{dropped record: the record it repeats}. Records are taken in `order`; a record is dropped when a
    confirmed twin of its own was taken before it and `allowed` accepts the two. No chaining: a record
    confirmed the same as a dropped one only (never compared with the one kept) stays, since "a is b"
    and "b is c" do not make "a is c", and every drop names a pair the model judged.

    >>> first_of_each(["a", "b", "c", "d"], [("b", "a"), ("c", "b"), ("d", "x")])
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


def embed_texts(settings: Any, texts: list[str]) -> np.ndarray | None:
    """Vectors for `texts` from the build's `--embed-model` at `--embed-base-url` (default: the first
    `--base-url`); None without an embed model or texts."""
    if not settings.embed_model or not texts:
        return None
    urls = [u.strip() for u in (settings.embed_base_url or settings.base_url or "").split(",") if u.strip()]
    return embed(settings.embed_model, texts, base_url=urls[0] if urls else None, timeout=settings.timeout)


def embed(spec: str, texts: list[str], *, base_url: str | None, timeout: float, batch: int = 256) -> np.ndarray:
    """Vectors for `texts` from an OpenAI-compatible `/v1/embeddings` endpoint (`openai:MODEL`; `vllm serve`
    provides one). The key, when the endpoint wants one, comes from OPENAI_API_KEY; none is ever recorded."""
    import os
    import urllib.request

    backend, _, model = spec.partition(":")
    if backend != "openai" or not model:
        raise BuildError(f"--embed-model wants openai:MODEL (an OpenAI-compatible /v1/embeddings), got {spec!r}")
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/") + "/embeddings"
    headers = {"content-type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["authorization"] = f"Bearer {os.environ['OPENAI_API_KEY']}"
    rows: list[list[float]] = []
    for start in range(0, len(texts), batch):
        body = json.dumps({"model": model, "input": texts[start:start + batch]}).encode()
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http(s) URL from the user)
                payload = json.loads(response.read(64 << 20))
            data = sorted(payload["data"], key=lambda d: d["index"])
            rows += [d["embedding"] for d in data]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BuildError(f"--embed-model {spec}: the embeddings endpoint failed ({type(exc).__name__})") from None
    vectors = np.asarray(rows, dtype=np.float64)
    if vectors.shape != (len(texts), vectors.shape[1] if vectors.ndim == 2 else -1):
        raise BuildError(f"--embed-model {spec}: got {len(rows)} vectors for {len(texts)} texts")
    return vectors
