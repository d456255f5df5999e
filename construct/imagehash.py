"""A perceptual hash for near-duplicate photos (PIL + numpy): dHash, 64 bits, compared with `hamming`: two
uploads of one photo (re-encoded, resized, lightly cropped) differ in a few bits, two photos of one dish
from different angles in many."""

from __future__ import annotations

import numpy as np
from PIL import Image


def dhash(img: Image.Image, size: int = 8) -> int:
    """Difference hash: is each pixel brighter than its right neighbour, on a (size+1) x size grey thumbnail."""
    grey = np.asarray(img.convert("L").resize((size + 1, size), Image.Resampling.LANCZOS), dtype=np.int16)
    bits = (grey[:, 1:] > grey[:, :-1]).flatten()
    return int("".join("1" if b else "0" for b in bits), 2)


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()
