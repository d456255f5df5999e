"""Which views of an item are sent, in what order, and how they are encoded for transport."""

from __future__ import annotations

import hashlib
import io
import os
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from eval.types import ImagePart, Row, UserError

if TYPE_CHECKING:  # Pillow is imported where an image is decoded: a run whose views all go as stored never needs it
    from PIL import Image

JPEG_QUALITY = 90
# The most pixels one image may have. A 875 KB PNG can declare 30000x30000 (900 MP, 2.7 GB once
# decoded); 40 MP is more than any phone photo (a 48 MP sensor saves 12 MP by default) and bounds
# one decode to ~160 MB (RGBA). diningbench.py keeps its own copy (it works without eval/).
MAX_PIXELS = 40_000_000


class ImageError(UserError):
    """An item whose image cannot be used (one-line message naming the item)."""


def embedded(image: Any) -> bytes | bytearray | None:
    """The bytes an image cell embeds (`{"bytes", "path"}` or raw bytes); None when it has none."""
    return image.get("bytes") if isinstance(image, dict) else image if isinstance(image, bytes | bytearray) else None


def stored_bytes(image: Any, *, item_id: str, index: int) -> bytes:
    """The image's own bytes as the release embeds them. A cell `{"bytes": None, "path": "/etc/passwd"}` would
    make the harness read any local file and send it to a model server (or show it in the Space): a path is
    never opened."""
    data = embedded(image)
    if not data:
        if isinstance(image, dict) and image.get("path"):
            raise ImageError(f"item {item_id}: image {index} has no embedded bytes, only a file path; "
                             "a release must embed its images")
        raise ImageError(f"item {item_id}: image {index} is empty or missing")
    return bytes(data)


def open_checked(data: bytes, *, item_id: str, index: int) -> Image.Image:
    """The image opened lazily (header only), refused before decoding when it has too many pixels."""
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError:  # Pillow's own, far higher, limit: not an OSError
        raise ImageError(f"item {item_id}: image {index} declares too many pixels "
                         f"(over {MAX_PIXELS:,}); refused without decoding") from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageError(f"item {item_id}: image {index} cannot be decoded ({exc.__class__.__name__})") from None
    width, height = img.size
    if width * height > MAX_PIXELS:
        img.close()
        raise ImageError(f"item {item_id}: image {index} is {width}x{height} pixels, over the "
                         f"{MAX_PIXELS:,} limit; refused without decoding")
    return img


def decode_bounded(data: bytes, *, item_id: str, index: int, max_side: int) -> Image.Image:
    """An RGB picture no larger than `max_side`: pixel count checked first, JPEGs decoded at
    reduced scale (draft), so memory stays near the output size, not the stored one."""
    from PIL import Image, UnidentifiedImageError

    try:
        with open_checked(data, item_id=item_id, index=index) as img:
            img.draft("RGB", (max_side, max_side))
            rgb = img.convert("RGB")
    except ImageError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageError(f"item {item_id}: image {index} cannot be decoded ({exc.__class__.__name__})") from None
    if max(rgb.size) > max_side:
        rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return rgb


def select_views(roles: Sequence[str], n: int | None, order: str, *, seed: int, item_id: str) -> list[int]:
    """Indices of the first `n` views (all of them when n is None) in the order they are shown.
    reference-first: the merchant photo(s), then user photos in stored order; user-first: the reverse
    grouping; random: a shuffle seeded by (seed, item id), so it is stable across runs and machines and
    independent of which other items are in the run.

    >>> select_views(["user", "reference", "user"], None, "reference-first", seed=0, item_id="x")
    [1, 0, 2]
    >>> select_views(["user", "reference", "user"], 2, "user-first", seed=0, item_id="x")
    [0, 2]
    """
    indices = list(range(len(roles)))
    if order == "reference-first":
        indices = [i for i in indices if roles[i] == "reference"] + [i for i in indices if roles[i] != "reference"]
    elif order == "user-first":
        indices = [i for i in indices if roles[i] != "reference"] + [i for i in indices if roles[i] == "reference"]
    elif order == "random":
        random.Random(f"{seed}:{item_id}").shuffle(indices)
    else:
        raise ValueError(f"unknown image order {order!r}")
    return indices if n is None else indices[:n]


_SOF_PLAIN = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended and progressive Huffman frames
_STANDALONE = frozenset({0x01, 0xD8, *range(0xD0, 0xD8)})  # markers without a length field


def jpeg_frame(data: bytes) -> tuple[int, int, int] | None:
    """(width, height, components) from an 8-bit Huffman JPEG's frame header; None for anything else. Walks
    the marker segments up to the frame header without decoding, about a tenth of what opening the image with
    Pillow costs; None (other formats, arithmetic or lossless JPEG, a header it cannot read) sends the caller
    down the Pillow path.

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


def _ends_whole(data: bytes) -> bool:
    """A JPEG that ends with its end-of-image marker (padding aside): a cut-off file does not."""
    return data.rstrip(b"\x00\r\n ")[-2:] == b"\xff\xd9"


def _sendable(data: bytes, max_side: int) -> bool:
    frame = jpeg_frame(data)
    return frame is not None and frame[2] == 3 and max(frame[:2]) <= max_side and _ends_whole(data)


def sent_as_stored(image: Any, max_side: int) -> bool:
    """True when `encode_for_transport` sends these stored bytes unchanged (a colour JPEG within
    the bound): a header read, cheap enough for the event loop. False for anything that needs
    Pillow, or a file read (an image stored by path)."""
    data = embedded(image)
    return data is not None and bool(data) and _sendable(bytes(data), max_side)


def encode_for_transport(image: Any, *, max_side: int, role: str, item_id: str, index: int) -> ImagePart:
    """One stored image (its bytes: the dataset is loaded with decode_images=False) -> an ImagePart no larger
    than `max_side` on its long side (JPEG), decoded and encoded at most once."""
    data = stored_bytes(image, item_id=item_id, index=index)
    if not _sendable(data, max_side):  # a colour JPEG within bounds goes as stored
        with open_checked(data, item_id=item_id, index=index) as img:  # header only: no pixel decoding yet
            as_stored = (img.format == "JPEG" and img.mode == "RGB" and max(img.size) <= max_side
                         and _ends_whole(data))
        if not as_stored:
            out = io.BytesIO()
            decode_bounded(data, item_id=item_id, index=index, max_side=max_side).save(out, format="JPEG",
                                                                                       quality=JPEG_QUALITY)
            data = out.getvalue()
    return ImagePart(data=data, mime_type="image/jpeg", role=role)


def stored_views(row: Row, *, n: int | None, order: str, seed: int, max_side: int) -> list[ImagePart] | None:
    """The item's views to send when every one goes out as stored (header reads, no Pillow: cheap
    enough for the event loop), else None: `views_for_request` then decodes what it must, and
    names any problem. Each view is checked once, here, not again when it is sent."""
    images = row.get("images") or []
    roles = list(row.get("image_roles") or [])
    if not images or len(roles) != len(images):
        return None
    views = []
    for i in select_views(roles, n, order, seed=seed, item_id=str(row["id"])):
        data = embedded(images[i])
        if not data or not _sendable(bytes(data), max_side):
            return None
        views.append(ImagePart(data=bytes(data), mime_type="image/jpeg", role=roles[i]))
    return views


def views_for_request(row: Row, *, n: int | None, order: str, seed: int, max_side: int) -> list[ImagePart]:
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


class ViewHashes:
    """sha256 of each view as sent, computed once for a (dataset, item, view, size bound) and reused by
    every epoch, option rotation and sweep cell that sends it again.

    `scope` names the dataset's content (its fingerprint and task), so two releases that share item
    ids never share a hash; the byte length is checked too. At most `max_entries` hashes are kept in
    memory (least recently used first out): about 200 bytes each. With a `folder`, the hashes of views
    sent as stored (the release's own bytes, which its fingerprint covers) are also kept on disk, one
    file per scope, so the next run over the same release reads them instead of hashing every view
    again (`save` writes what this process added; the KEPT_SCOPES most recently used files stay). The
    kept files of the KEPT_IN_MEMORY scopes most recently read are held as read and consulted entry by
    entry as views are asked: a run over 1,000 items of a 4,000-item release converts 1,000 items' worth.
    Re-encoded views are hashed by every process: their bytes depend on the Pillow that made them."""

    KEPT_SCOPES = 32
    KEPT_IN_MEMORY = 4  # kept files held in memory at once (a long-lived Space may run over many releases)

    def __init__(self, max_entries: int = 65_536, folder: Callable[[], Path] | None = None) -> None:
        self.max_entries = max_entries
        self._hashes: OrderedDict[tuple[str, str, int, int, int], str] = OrderedDict()
        self._lock = threading.Lock()  # rows that re-encode are built in worker threads
        self.computed = 0
        self._folder = folder
        # The kept files read, per scope (the KEPT_IN_MEMORY most recently read): looked up entry by entry
        # as views are asked, so a run over a few items of a large release never converts all of them.
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._added: dict[str, dict[str, str]] = {}  # per scope, what this process hashed, to keep

    def digest(self, scope: str, item_id: str, index: int, max_side: int, data: bytes, *,
               stored: bool = False) -> str:
        key = (scope, item_id, index, max_side, len(data))
        with self._lock:
            found = self._hashes.get(key)
            if found is not None:
                self._hashes.move_to_end(key)
                return found
            if stored and self._folder is not None:
                kept = self._kept_file(scope).get(_kept_key(key))
                if isinstance(kept, str) and len(kept) == 64:
                    self._remember(key, kept)
                    return kept
        found = hashlib.sha256(data).hexdigest()
        with self._lock:
            self.computed += 1
            self._remember(key, found)
            if stored and self._folder is not None:
                self._added.setdefault(scope, {})[_kept_key(key)] = found
        return found

    def _remember(self, key: tuple[str, str, int, int, int], digest: str) -> None:
        self._hashes[key] = digest
        while len(self._hashes) > self.max_entries:
            self._hashes.popitem(last=False)

    def _path(self, scope: str) -> Path:
        assert self._folder is not None
        return self._folder() / f"{hashlib.sha256(scope.encode()).hexdigest()[:32]}.json"

    def _read(self, scope: str) -> dict[str, Any]:
        """The scope's kept file as read (its values are checked where they are used), {} when it is
        missing, unreadable or another scope's."""
        try:
            found = orjson.loads(self._path(scope).read_bytes())
        except (OSError, ValueError):
            return {}
        if not (isinstance(found, dict) and found.get("scope") == scope and isinstance(found.get("hashes"), dict)):
            return {}
        return found["hashes"]

    def _kept_file(self, scope: str) -> dict[str, Any]:
        if scope not in self._kept:
            self._kept[scope] = self._read(scope)
            while len(self._kept) > self.KEPT_IN_MEMORY:
                self._kept.popitem(last=False)
        self._kept.move_to_end(scope)
        return self._kept[scope]

    def save(self) -> None:
        """Keep what this process hashed of views sent as stored (best effort: a read-only cache folder
        only costs the next run the hashing)."""
        with self._lock:
            added, self._added = self._added, {}
        for scope, hashes in added.items():
            try:
                path = self._path(scope)
                path.parent.mkdir(parents=True, exist_ok=True)
                merged = {k: v for k, v in self._read(scope).items() if isinstance(v, str) and len(v) == 64}
                merged.update(hashes)
                partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer thread too
                partial.write_bytes(orjson.dumps({"scope": scope, "hashes": merged}))
                os.replace(partial, path)
                for stale in sorted(path.parent.glob("*.json"), key=_used, reverse=True)[self.KEPT_SCOPES:]:
                    stale.unlink(missing_ok=True)
            except OSError:
                continue


def _kept_key(key: tuple[str, str, int, int, int]) -> str:
    _, item_id, index, max_side, size = key
    return f"{item_id}\t{index}\t{max_side}\t{size}"


def _used(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
