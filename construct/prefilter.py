"""The rule prefilter of a photo file: decodable, within the pixel limits, its dHash. Pure CPU, no model:
the engines run it in parallel (a process per core, or Ray tasks)."""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

from PIL import Image

from construct.imagehash import dhash
from dataset.schema import MAX_PHOTO_BYTES
from eval.images import MAX_PIXELS

# MAX_PHOTO_BYTES (the data contract's one bound on a photo file) is the largest photo file read, in the
# build (the prefilter, the photo checks, the model calls, the release), in the Space's Review tab and in
# the authors' release: a file past it is dropped from its size alone, never read, so a 400 MB file (a
# valid 1x1 JPEG followed by zeros) costs a worker nothing. A phone's photo is a few MB.


def read_photo(path: Path | str) -> bytes:
    """A photo file's bytes, read only when it is at most MAX_PHOTO_BYTES; else a ValueError of one line
    (OSError for a file that cannot be read). Read through one handle at most MAX_PHOTO_BYTES + 1 bytes,
    so a file that grows after its size was looked at is refused the same way."""
    with Path(path).open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(MAX_PHOTO_BYTES + 1) if size <= MAX_PHOTO_BYTES else b""
    if size > MAX_PHOTO_BYTES or len(data) > MAX_PHOTO_BYTES:
        raise ValueError(f"{max(size, len(data)):,} bytes, over the {MAX_PHOTO_BYTES >> 20} MB a photo file may have")
    return data


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
            data = read_photo(path)
        except OSError as exc:
            out.append((seq, f"undecodable:unreadable ({type(exc).__name__})", None))
            continue
        except ValueError:  # its size alone: never read
            out.append((seq, f"too_large:{os.stat(path).st_size}", None))
            continue
        out.append((seq, *prefilter(data, min_side)))
    return out
