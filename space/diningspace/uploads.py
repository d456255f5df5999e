"""What Gradio keeps of visitors' uploads, bounded where an upload arrives, not only on a page's events.

Why: Gradio keeps each file posted to its upload route (a script needs no page) until its own cache sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import os
import re
import stat
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .limits import client_address

UPLOADS_MAX_BYTES = 512 << 20  # every file in Gradio's upload folder, in all; past it the oldest go
UPLOADS_MAX_FILES = 1000  # every file in it, in all (each in a `<sha>/` folder of its own); past it the oldest go
UPLOADS_MAX_AGE = 1800.0  # seconds an upload that was never submitted is kept
UPLOAD_MB_PER_HOUR = 100  # per client address: five submissions of the largest zip (20 MB) an hour
UPLOAD_FILES_PER_HOUR = 60  # per client address: a submission is one zip; a page that re-uploads a few times
RESCAN_S = 60.0  # the folder is walked again at most this often, for files that did not come through the guard


def upload_root() -> Path:
    """Where Gradio keeps uploads: GRADIO_TEMP_DIR, else its folder under the system's temp folder."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")


class UploadFolder:
    """A ledger of what Gradio's upload folder holds (each file's mtime and size, the oldest first), so
    that a sweep costs the files it removes, not the files kept. Uploads are noted as the guard sees them
    arrive; the folder is walked again when the ledger is older than `RESCAN_S` (files written another
    way, files Gradio removed itself) or after an upload the guard could not follow."""

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = Path(root)
        self.clock = clock
        self._files: dict[str, tuple[float, int]] = {}  # path -> (mtime, size)
        self._oldest: list[tuple[float, str]] = []  # a heap; an entry whose mtime no longer matches is stale
        self._bytes = 0
        self._walked: float | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._files)

    def stale(self) -> None:
        """The next sweep walks the folder first (an upload cut short, a response not understood)."""
        self._walked = None

    def note(self, paths: Iterable[str]) -> None:
        """Files an upload just wrote (Gradio's answer names them). A path the ledger cannot place (outside
        the folder as named here, or gone) makes the next sweep walk the folder instead."""
        root = os.path.join(os.path.abspath(self.root), "")
        with self._lock:
            for path in paths:
                if not (isinstance(path, str) and os.path.abspath(path).startswith(root)
                        and self._add(os.path.abspath(path))):
                    self._walked = None

    def _add(self, path: str) -> bool:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if stat.S_ISDIR(st.st_mode):
            return False
        self._bytes -= self._files.get(path, (0.0, 0))[1]  # noted before: counted once
        size = st.st_size if stat.S_ISREG(st.st_mode) else 0  # a link or a FIFO weighs nothing, but counts
        self._files[path] = (st.st_mtime, size)
        self._bytes += size
        heapq.heappush(self._oldest, (st.st_mtime, path))
        return True

    def _walk(self) -> None:
        self._files, self._oldest, self._bytes = {}, [], 0
        for folder, _, names in os.walk(self.root) if self.root.is_dir() else ():
            for name in names:
                self._add(os.path.join(os.path.abspath(folder), name))
        self._walked = self.clock()

    def sweep(self, max_bytes: int = UPLOADS_MAX_BYTES, max_age: float = UPLOADS_MAX_AGE,
              max_files: int = UPLOADS_MAX_FILES, now: float | None = None) -> int:
        """Remove every file older than `max_age`, then the oldest until the rest weigh at most `max_bytes`
        and number at most `max_files` (any name: a `.jpg` weighs as a `.zip`; links are removed, never
        followed); returns how many were removed. Folders left empty go too."""
        now = time.time() if now is None else now
        removed = 0
        with self._lock:
            if self._walked is None or self.clock() - self._walked >= RESCAN_S:
                self._walk()
            root = os.path.abspath(self.root)
            while self._oldest:
                mtime, path = self._oldest[0]
                if self._files.get(path, (None, 0))[0] != mtime:
                    heapq.heappop(self._oldest)  # removed, or noted again since
                    continue
                if now - mtime <= max_age and self._bytes <= max(max_bytes, 0) and len(self._files) <= max(max_files, 0):
                    break
                heapq.heappop(self._oldest)
                self._bytes -= self._files.pop(path)[1]
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    continue  # gone already (read and removed by the Submit tab, or Gradio's own sweep)
                except OSError:
                    self._walked = None  # still there: the next sweep counts it again
                    continue
                removed += 1
                parent = os.path.dirname(path)
                if parent != root:
                    with contextlib.suppress(OSError):
                        os.rmdir(parent)  # its `<sha>/` folder, once empty
        return removed


_FOLDERS: dict[Path, UploadFolder] = {}
_FOLDERS_LOCK = threading.Lock()


def upload_folder(root: Path) -> UploadFolder:
    """The one ledger of `root` in this process (the guard's and the Submit tab's sweeps share it)."""
    with _FOLDERS_LOCK:
        folder = _FOLDERS.get(Path(root))
        if folder is None:
            if len(_FOLDERS) >= 8:  # one root in a Space; tests make many
                _FOLDERS.pop(next(iter(_FOLDERS)))
            folder = _FOLDERS[Path(root)] = UploadFolder(Path(root))
        return folder


def sweep_uploads(root: Path, max_bytes: int = UPLOADS_MAX_BYTES, max_age: float = UPLOADS_MAX_AGE,
                  now: float | None = None, max_files: int = UPLOADS_MAX_FILES) -> int:
    """`UploadFolder.sweep` of `root`'s ledger; returns how many files were removed."""
    return upload_folder(root).sweep(max_bytes, max_age, max_files, now)


class UploadQuota:
    """Bytes and files uploaded per client address in the last hour; the clock is injectable for tests.
    Each check and each upload costs the same however many addresses and uploads the hour holds: running
    totals per address, and one queue of the hour's uploads that expire from its front."""

    WINDOW = 3600.0

    def __init__(self, per_hour: int, files_per_hour: int = UPLOAD_FILES_PER_HOUR, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_hour = per_hour  # bytes; 0 = not counted
        self.files_per_hour = files_per_hour  # 0 = not counted
        self.clock = clock
        self._uploads: deque[tuple[float, str, int, int]] = deque()  # (when, address, bytes, files), oldest first
        self._totals: dict[str, list[int]] = {}  # address -> [bytes, files, uploads] in the window
        self._lock = threading.Lock()

    def left(self, address: str | None) -> float:
        """Bytes this address may still upload this hour."""
        return self._left(address, self.per_hour, 0)

    def files_left(self, address: str | None) -> float:
        """Files this address may still upload this hour."""
        return self._left(address, self.files_per_hour, 1)

    def _left(self, address: str | None, cap: int, which: int) -> float:
        if not cap or not address:
            return float("inf")
        with self._lock:
            self._expire(self.clock())
            return cap - self._totals.get(address, [0, 0, 0])[which]

    def add(self, address: str | None, n: int, files: int = 0) -> None:
        if address and (n or files) and (self.per_hour or self.files_per_hour):
            with self._lock:
                now = self.clock()
                self._expire(now)
                self._uploads.append((now, address, n, files))
                total = self._totals.setdefault(address, [0, 0, 0])
                total[:] = [t + d for t, d in zip(total, (n, files, 1), strict=True)]

    def _expire(self, now: float) -> None:
        while self._uploads and self._uploads[0][0] <= now - self.WINDOW:
            _, address, n, files = self._uploads.popleft()
            total = self._totals[address]
            total[:] = [t - d for t, d in zip(total, (n, files, 1), strict=True)]
            if not total[2]:  # an address gone quiet
                del self._totals[address]


def _boundary(content_type: str) -> bytes | None:
    """The delimiter that starts each part of a multipart body (`--` and the boundary), or None."""
    found = re.search(r'boundary="?([^";,\s]+)"?', content_type, flags=re.IGNORECASE)
    return b"--" + found.group(1).encode("latin-1") if found else None


class _OverQuota(Exception):
    pass


class _Peer:
    """What `client_address` reads of a request, from an ASGI scope."""

    def __init__(self, scope: dict[str, Any]) -> None:
        client = scope.get("client")
        self.client = type("Client", (), {"host": client[0] if client else None})()
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}


class UploadGuard:
    """ASGI middleware on Gradio's upload route (`POST .../upload`): an address past its bytes or files per
    hour is refused in one line (429) before its body is read, or cut as soon as its body passes the quota
    (files are counted as their parts arrive); the upload folder is swept to make room before an upload
    and back to the caps after it, through its ledger, which notes the files Gradio's answer names.
    Installed by app.py's `launch_options`: `Middleware(UploadGuard, per_hour=..., proxy_hops=...)`."""

    def __init__(self, app: Any, *, per_hour: int = UPLOAD_MB_PER_HOUR << 20,
                 files_per_hour: int = UPLOAD_FILES_PER_HOUR, proxy_hops: int = 0,
                 max_bytes: int = UPLOADS_MAX_BYTES, max_files: int = UPLOADS_MAX_FILES,
                 root: Callable[[], Path] = upload_root, quota: UploadQuota | None = None) -> None:
        self.app = app
        self.quota = quota or UploadQuota(per_hour, files_per_hour)
        self.proxy_hops = proxy_hops
        self.max_bytes, self.max_files = max_bytes, max_files
        self.root = root

    def _share(self) -> str:
        caps = [f"{self.quota.per_hour >> 20} MB an hour"] if self.quota.per_hour else []
        caps += [f"{self.quota.files_per_hour} files an hour"] if self.quota.files_per_hour else []
        return ", ".join(caps)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or not str(scope.get("path", "")).endswith("/upload"):
            await self.app(scope, receive, send)
            return
        peer = _Peer(scope)
        address = client_address(peer, self.proxy_hops)
        left, files_left = self.quota.left(address), self.quota.files_left(address)
        try:
            declared = int(peer.headers.get("content-length", ""))
        except ValueError:
            declared = None
        if left <= 0 or files_left <= 0 or declared is not None and declared > left:
            await _refuse(send, f"your address has uploaded its share for this hour ({self._share()}): please "
                                "come back later")
            return
        folder = upload_folder(self.root())
        await asyncio.to_thread(folder.sweep, self.max_bytes - (declared or 0), UPLOADS_MAX_AGE,
                                self.max_files - 1)  # room for this one
        boundary = _boundary(peer.headers.get("content-type", ""))
        counted, parts, tail = 0, 0, b""

        async def counting() -> Any:
            nonlocal counted, parts, tail
            message = await receive()
            if message.get("type") == "http.request":
                body = message.get("body") or b""
                counted += len(body)
                if boundary is not None:  # one delimiter starts each part, one more ends the body
                    seen = tail + body
                    parts += seen.count(boundary)
                    tail = seen[-(len(boundary) - 1):]
                if counted > left or parts - 1 > files_left:
                    raise _OverQuota
            return message

        status, answer = None, bytearray()

        async def sending(message: Any) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = message.get("status")
            elif message.get("type") == "http.response.body" and len(answer) < ANSWER_READ:
                answer.extend((message.get("body") or b"")[:ANSWER_READ - len(answer)])
            await send(message)

        try:
            await self.app(scope, counting, sending)
        except _OverQuota:
            if status is None:
                await _refuse(send, f"this upload passes your address's share for this hour ({self._share()}): "
                                    "refused")
        finally:
            self.quota.add(address, counted, max(parts - 1, 1))  # a request is at least one file's slot
            written = _paths(bytes(answer)) if status == 200 else None
            if written is None:  # cut short, refused or not understood: a part file may be left; walk the folder
                folder.stale()
            else:
                folder.note(written)
            await asyncio.to_thread(folder.sweep, self.max_bytes, UPLOADS_MAX_AGE, self.max_files)


ANSWER_READ = 1 << 20  # Gradio's answer to an upload: the JSON list of the paths it wrote (1,000 files at most)


def _paths(answer: bytes) -> list[str] | None:
    """The paths Gradio's upload route says it wrote (a JSON list of text), or None."""
    try:
        found = json.loads(answer)
    except ValueError:
        return None
    return found if isinstance(found, list) and all(isinstance(p, str) for p in found) else None


async def _refuse(send: Any, text: str) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
