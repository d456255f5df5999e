"""Which views of an item are sent, in what order, and how they are encoded for transport.

Images arrive as the stored bytes (the dataset is loaded with decode_images=False) and are decoded
at most once: a JPEG already within the size bound is sent byte for byte, anything else is decoded,
shrunk to the bounded long side and encoded to JPEG once.
"""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from typing import Any

from PIL import Image, UnidentifiedImageError

from eval.types import ImagePart

JPEG_QUALITY = 90


class ImageError(ValueError):
    """An item whose image cannot be used (one-line message naming the item)."""


def order_views(roles: Sequence[str], order: str, *, seed: int, item_id: str) -> list[int]:
    """Indices of the views in the order they are shown.

    reference-first: the merchant photo(s), then user photos in stored order; user-first: the
    reverse grouping; random: a shuffle seeded by (seed, item id), so it is stable across runs and
    machines and independent of which other items are in the run.

    >>> order_views(["user", "reference", "user"], "reference-first", seed=0, item_id="x")
    [1, 0, 2]
    >>> order_views(["user", "reference", "user"], "user-first", seed=0, item_id="x")
    [0, 2, 1]
    """
    indices = list(range(len(roles)))
    if order == "reference-first":
        return [i for i in indices if roles[i] == "reference"] + [i for i in indices if roles[i] != "reference"]
    if order == "user-first":
        return [i for i in indices if roles[i] != "reference"] + [i for i in indices if roles[i] == "reference"]
    if order == "random":
        random.Random(f"{seed}:{item_id}").shuffle(indices)
        return indices
    raise ValueError(f"unknown image order {order!r}")


def select_views(roles: Sequence[str], n: int | None, order: str, *, seed: int, item_id: str) -> list[int]:
    """The first `n` views after ordering (all of them when n is None)."""
    ordered = order_views(roles, order, seed=seed, item_id=item_id)
    return ordered if n is None else ordered[:n]


def _stored_bytes(image: Any) -> bytes | None:
    if isinstance(image, dict):
        data = image.get("bytes")
        if data is None and image.get("path"):
            with open(image["path"], "rb") as fh:
                return fh.read()
        return data
    if isinstance(image, bytes | bytearray):
        return bytes(image)
    return None


_SOF_PLAIN = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended and progressive Huffman frames
_STANDALONE = frozenset({0x01, 0xD8, *range(0xD0, 0xD8)})  # markers without a length field


def jpeg_frame(data: bytes) -> tuple[int, int, int] | None:
    """(width, height, components) from an 8-bit Huffman JPEG's frame header; None for anything else.

    Walks the marker segments up to the frame header without decoding, about a tenth of what
    opening the image with Pillow costs; None (other formats, arithmetic or lossless JPEG, a
    header it cannot read) sends the caller down the Pillow path.

    >>> jpeg_frame(bytes.fromhex("ffd8 ffc0 0011 08 01c0 0280 03" + "00" * 9))
    (640, 448, 3)
    >>> jpeg_frame(b"GIF89a") is None
    True
    """
    if data[:2] != b"\xff\xd8":
        return None
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _STANDALONE:
            i += 2
            continue
        if marker in _SOF_PLAIN:
            if i + 10 > n or data[i + 4] != 8:
                return None
            height, width = int.from_bytes(data[i + 5:i + 7], "big"), int.from_bytes(data[i + 7:i + 9], "big")
            return (width, height, data[i + 9]) if width and height else None
        if 0xC3 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC) or marker in (0xD9, 0xDA):
            return None  # another frame type, or image data before any frame header
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    return None


def _sendable(data: bytes, max_side: int) -> bool:
    frame = jpeg_frame(data)
    return frame is not None and frame[2] == 3 and max(frame[:2]) <= max_side


def sent_as_stored(image: Any, max_side: int) -> bool:
    """True when `encode_for_transport` sends these stored bytes unchanged (a colour JPEG within
    the bound): a header read, cheap enough for the event loop. False for anything that needs
    Pillow, or a file read (an image stored by path)."""
    data = image.get("bytes") if isinstance(image, dict) else image if isinstance(image, bytes | bytearray) else None
    return bool(data) and _sendable(data, max_side)


def encode_for_transport(image: Any, *, max_side: int, role: str, item_id: str, index: int) -> ImagePart:
    """One stored image -> an ImagePart no larger than `max_side` on its long side (JPEG)."""
    data = _stored_bytes(image)
    if not data:
        raise ImageError(f"item {item_id}: image {index} is empty or missing")
    if _sendable(data, max_side):
        return ImagePart(data=data, mime_type="image/jpeg", role=role)  # a colour JPEG within bounds, as stored
    try:
        with Image.open(io.BytesIO(data)) as img:  # header only: no pixel decoding yet
            if img.format == "JPEG" and img.mode == "RGB" and max(img.size) <= max_side:
                return ImagePart(data=data, mime_type="image/jpeg", role=role)
            img.draft("RGB", (max_side, max_side))  # lets JPEG decode at reduced scale when shrinking
            rgb = img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageError(f"item {item_id}: image {index} cannot be decoded ({exc.__class__.__name__})") from None
    if max(rgb.size) > max_side:
        rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    rgb.save(out, format="JPEG", quality=JPEG_QUALITY)
    return ImagePart(data=out.getvalue(), mime_type="image/jpeg", role=role)


def views_for_request(row: dict[str, Any], *, n: int | None, order: str, seed: int,
                      max_side: int) -> list[ImagePart]:
    """The item's views to send, selected, ordered and encoded."""
    item_id = str(row["id"])
    images = row.get("images") or []
    roles = list(row.get("image_roles") or [])
    if not images:
        raise ImageError(f"item {item_id}: has no images")
    if len(roles) != len(images):
        raise ImageError(f"item {item_id}: {len(images)} images but {len(roles)} image_roles")
    return [encode_for_transport(images[i], max_side=max_side, role=roles[i], item_id=item_id, index=i)
            for i in select_views(roles, n, order, seed=seed, item_id=item_id)]
