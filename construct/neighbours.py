"""Each record's nearest earlier records, what the dish and question searches share: the pairs a search
found with their scores (`Scored`), each later record's best `k` of them (`top_earlier`), and embeddings
from an OpenAI-compatible `/v1/embeddings` endpoint (`embed`) searched exactly (`nearest_earlier`)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np

from construct.errors import BuildError

K_VECTOR = 2  # a record's nearest neighbours by its vector
VECTOR_FLOOR = 0.85  # cosine similarity
MAX_DIM = 8192  # embedding dimensions accepted (the largest common models use 3,072 to 4,096)

@dataclass
class Scored:
    """Candidate pairs (i < j, j the later record) with the similarity that found them."""

    i: np.ndarray
    j: np.ndarray
    score: np.ndarray

    @classmethod
    def empty(cls) -> Scored:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))


def top_earlier(found: Scored, k: int, second: np.ndarray | None = None) -> Scored:
    """Of each later record's pairs, its `k` best (highest score to 3 decimals, then the highest `second`
    score when given, then the earliest partner)."""
    if not len(found.i):
        return found
    tie = np.zeros(len(found.i)) if second is None else -np.asarray(second, dtype=np.float64)
    order = np.lexsort((found.i, tie, -np.round(found.score, 3), found.j))
    i, j, score = found.i[order], found.j[order], found.score[order]
    keep = place_in_run(j) < k
    return Scored(i[keep], j[keep], score[keep])


def place_in_run(j: np.ndarray) -> np.ndarray:
    """Each row's place among the rows of its run of equal `j` (sorted by j): 0, 1, 2, ..."""
    if not len(j):
        return np.zeros(0, np.int64)
    first = np.r_[0, np.flatnonzero(np.diff(j)) + 1]
    return np.arange(len(j)) - np.repeat(first, np.diff(np.r_[first, len(j)]))


def checked_vectors(vectors: Any, n: int) -> np.ndarray:
    """`vectors` as unit rows (float32), or a one-line BuildError naming what is wrong with them."""
    try:
        v = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):
        raise BuildError("embeddings: the vectors are not a table of numbers of one length") from None
    if v.ndim != 2 or v.shape[0] != n:
        raise BuildError(f"embeddings: {v.shape[0] if v.ndim else 0} vectors of shape {v.shape[1:]} for {n} texts")
    if not 0 < v.shape[1] <= MAX_DIM:
        raise BuildError(f"embeddings: {v.shape[1]} dimensions (at most {MAX_DIM} are accepted)")
    if not np.isfinite(v).all():
        raise BuildError(f"embeddings: vector {int(np.flatnonzero(~np.isfinite(v).all(axis=1))[0])} has NaN or infinite values")
    norms = np.linalg.norm(v, axis=1)
    if (norms == 0).any():
        raise BuildError(f"embeddings: vector {int(np.flatnonzero(norms == 0)[0])} is all zeros")
    return (v / norms[:, None]).astype(np.float32)


def nearest_earlier(unit: np.ndarray, k: int, floor: float, groups: np.ndarray | None = None,
                    block: int = 1024) -> np.ndarray:
    """Rows (i, j, cosine) of each record j's `k` nearest earlier records i at cosine >= `floor` (another
    group when `groups` is given): exact search, one block of rows against the records before it."""
    out: list[np.ndarray] = []
    for start in range(1, len(unit), block):
        stop = min(start + block, len(unit))
        sims = unit[start:stop] @ unit[:stop - 1].T  # (rows, earlier)
        rows = np.arange(start, stop)
        sims[np.arange(stop - 1)[None, :] >= rows[:, None]] = -np.inf  # only earlier records
        if groups is not None:
            sims[groups[rows][:, None] == groups[None, :stop - 1]] = -np.inf
        top = min(k, sims.shape[1])
        best = np.argpartition(-sims, top - 1, axis=1)[:, :top]
        value = np.take_along_axis(sims, best, axis=1)
        hit = value >= floor
        jj = np.repeat(rows[:, None], top, axis=1)[hit]
        out.append(np.stack([best[hit].astype(np.float64), jj.astype(np.float64), value[hit].astype(np.float64)], 1))
    return np.concatenate(out) if out else np.zeros((0, 3))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: urllib would follow it with the Authorization header."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


MAX_RESPONSE = 64 << 20  # bytes of one embeddings reply (256 texts x 8,192 dimensions as JSON take ~45 MB)


def embed_texts(settings: Any, texts: list[str]) -> np.ndarray | None:
    """Vectors for `texts` from the build's `--embed-model` at `--embed-base-url` (default: the first
    `--base-url`); None without an embed model or texts."""
    if not settings.embed_model or not texts:
        return None
    from construct.models import base_urls

    return embed(settings.embed_model, texts, base_url=base_urls(settings.embed_base_url or settings.base_url)[0],
                 timeout=settings.timeout)


def embed(spec: str, texts: list[str], *, base_url: str | None, timeout: float, batch: int = 256) -> np.ndarray:
    """Vectors for `texts` from an OpenAI-compatible `/v1/embeddings` endpoint (`openai:MODEL`; `vllm serve`
    provides one). The key, when the endpoint wants one, comes from OPENAI_API_KEY; none is ever recorded."""
    import os

    backend, _, model = spec.partition(":")
    if backend != "openai" or not model:
        raise BuildError(f"--embed-model wants openai:MODEL (an OpenAI-compatible /v1/embeddings), got {spec!r}")
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/") + "/embeddings"
    headers = {"content-type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["authorization"] = f"Bearer {os.environ['OPENAI_API_KEY']}"
    opener = urllib.request.build_opener(_NoRedirect)
    rows: list[Any] = []
    for start in range(0, len(texts), batch):
        chunk = texts[start:start + batch]
        request = urllib.request.Request(url, data=json.dumps({"model": model, "input": chunk}).encode(),
                                         headers=headers, method="POST")
        try:
            with opener.open(request, timeout=timeout) as response:
                raw = response.read(MAX_RESPONSE + 1)
            if len(raw) > MAX_RESPONSE:
                raise BuildError(f"--embed-model {spec}: the embeddings endpoint sent more than {MAX_RESPONSE >> 20} MB "
                                 f"for {len(chunk)} texts")
            data = sorted(json.loads(raw)["data"], key=lambda d: d["index"])
            if [d["index"] for d in data] != list(range(len(chunk))):
                raise ValueError("indices")
            rows += [d["embedding"] for d in data]
        except BuildError:  # too large: a ValueError, not to be taken for a malformed reply below
            raise
        except urllib.error.HTTPError as exc:
            why = f"answered HTTP {exc.code}" + (" (a redirect: not followed, the key would go with it)"
                                                 if 300 <= exc.code < 400 else "")
            raise BuildError(f"--embed-model {spec}: the embeddings endpoint {why}") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BuildError(f"--embed-model {spec}: the embeddings endpoint failed ({type(exc).__name__})") from None
    try:
        return checked_vectors(rows, len(texts))
    except BuildError as exc:
        raise BuildError(f"--embed-model {spec}: {exc}") from None
