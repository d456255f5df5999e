"""Perceptual hashes for near-duplicate photos (PIL + numpy): dHash and pHash, 64 bits each.

Two uploads of one photo (re-encoded, resized, lightly cropped) differ in a few bits; two photos of
one dish from different angles differ in many. Compare with `hamming`.
"""

from __future__ import annotations

import numpy as np
from PIL import Image


def dhash(img: Image.Image, size: int = 8) -> int:
    """Difference hash: is each pixel brighter than its right neighbour, on a (size+1) x size grey thumbnail."""
    grey = np.asarray(img.convert("L").resize((size + 1, size), Image.Resampling.LANCZOS), dtype=np.int16)
    bits = (grey[:, 1:] > grey[:, :-1]).flatten()
    return int("".join("1" if b else "0" for b in bits), 2)


def _dct_matrix(n: int) -> np.ndarray:
    k = np.arange(n)[:, None]
    x = np.arange(n)[None, :]
    m = np.cos(np.pi * (2 * x + 1) * k / (2 * n)) * np.sqrt(2 / n)
    m[0] /= np.sqrt(2)
    return m


_DCT32 = _dct_matrix(32)


def phash(img: Image.Image) -> int:
    """Perceptual hash: the 8x8 lowest frequencies of a 32x32 DCT, each above or below their median."""
    grey = np.asarray(img.convert("L").resize((32, 32), Image.Resampling.LANCZOS), dtype=np.float64)
    low = (_DCT32 @ grey @ _DCT32.T)[:8, :8].flatten()
    bits = low > np.median(low[1:])  # the DC term would dominate the median
    return int("".join("1" if b else "0" for b in bits), 2)


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()
