"""The rule prefilter of a photo file: decodable, within the pixel limits, its dHash. Pure CPU, no model:
the engines run it in parallel (a process per core, or Ray tasks)."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

from PIL import Image

from construct.imagehash import dhash
from eval.images import MAX_PIXELS


def prefilter(data: bytes, min_side: int) -> tuple[str | None, int | None]:
    """(why the rules reject a photo or None, its dHash). Decoding checks the whole file."""
    try:
        with warnings.catch_warnings():  # a bomb warning is our own too_many_pixels below
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
        with img:
            width, height = img.size  # from the header, before any decoding
            if width * height > MAX_PIXELS:  # the limit the model call would refuse it at
                return f"too_many_pixels:{width}x{height}", None
            if min(width, height) < min_side:
                img.load()  # still decoded: a tiny photo can also be broken, and that is the first reason
                return f"too_small:{width}x{height}", None
            # JPEG: decode in grey at a reduced DCT scale (still every byte of the file, so a cut-off
            # file fails here); the 9x8 hash needs no more, and it runs at decode speed or faster.
            img.draft("L", (64, 64))
            img.load()
            return None, dhash(img)
    except Image.DecompressionBombError:
        return "too_many_pixels:over Pillow's limit", None
    except Exception as exc:
        return f"undecodable:{type(exc).__name__}", None


def prefilter_chunk(rows: list[tuple[int, str]], min_side: int) -> list[tuple[int, str | None, int | None]]:
    """The rule prefilter of a chunk of photo files: (seq, why rejected or None, dHash or None) each."""
    out: list[tuple[int, str | None, int | None]] = []
    for seq, path in rows:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            out.append((seq, f"undecodable:unreadable ({type(exc).__name__})", None))
            continue
        why, h = prefilter(data, min_side)
        out.append((seq, why, h))
    return out
