"""What Gradio keeps of visitors' uploads, bounded where an upload arrives, not only on a page's events.

Gradio writes every file posted to its upload route into its upload folder (a temporary file while the
body streams in, then `<sha>/<the visitor's file name>`) and keeps it until its own cache sweep. A script
can post there without ever opening the page or submitting. `UploadGuard`, a middleware in front of the
route, counts each address's bytes per hour as the body arrives (cut past the quota, refused in one line)
and sweeps the folder before and after each upload, so that every file in it, whatever its name, weighs at
most UPLOADS_MAX_BYTES in all.
"""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .limits import client_address

UPLOADS_MAX_BYTES = 512 << 20  # every file in Gradio's upload folder, in all; past it the oldest go
UPLOADS_MAX_AGE = 1800.0  # seconds an upload that was never submitted is kept
UPLOAD_MB_PER_HOUR = 100  # per client address: five submissions of the largest zip (20 MB) an hour


def upload_root() -> Path:
    """Where Gradio keeps uploads: GRADIO_TEMP_DIR, else its folder under the system's temp folder."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")


def sweep_uploads(root: Path, max_bytes: int = UPLOADS_MAX_BYTES, max_age: float = UPLOADS_MAX_AGE,
                  now: float | None = None) -> int:
    """Remove every file under `root` older than `max_age`, then the oldest until the rest weigh at most
    `max_bytes` (any name: a `.jpg` weighs as a `.zip`; links are removed, never followed); returns how
    many were removed. Folders left empty go too."""
    now = time.time() if now is None else now
    found = []
    for folder, _, names in os.walk(root) if root.is_dir() else ():
        for name in names:
            path = Path(folder) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            found.append((st.st_mtime, st.st_size if stat.S_ISREG(st.st_mode) else 0, path))
    removed = 0
    total = sum(size for _, size, _ in found)
    for mtime, size, path in sorted(found, key=lambda f: (f[0], str(f[2]))):
        if now - mtime > max_age or total > max(max_bytes, 0):
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
            try:
                path.parent.rmdir() if path.parent != root else None  # its `<sha>/` folder, once empty
            except OSError:
                pass
    return removed


class UploadQuota:
    """Bytes uploaded per client address in the last hour; the clock is injectable for tests."""

    WINDOW = 3600.0

    def __init__(self, per_hour: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_hour = per_hour  # bytes; 0 = not counted
        self.clock = clock
        self._seen: dict[str, deque[tuple[float, int]]] = {}
        self._lock = threading.Lock()

    def left(self, address: str | None) -> float:
        if not self.per_hour or not address:
            return float("inf")
        with self._lock:
            recent = self._recent(address, self.clock())
            return self.per_hour - sum(n for _, n in recent)

    def add(self, address: str | None, n: int) -> None:
        if self.per_hour and address and n:
            with self._lock:
                now = self.clock()
                self._recent(address, now).append((now, n))
                for key in [k for k in self._seen if not self._recent(k, now)]:  # addresses gone quiet
                    del self._seen[key]

    def _recent(self, address: str, now: float) -> deque[tuple[float, int]]:
        seen = self._seen.setdefault(address, deque())
        while seen and seen[0][0] <= now - self.WINDOW:
            seen.popleft()
        return seen


class _OverQuota(Exception):
    pass


class _Peer:
    """What `client_address` reads of a request, from an ASGI scope."""

    def __init__(self, scope: dict[str, Any]) -> None:
        client = scope.get("client")
        self.client = type("Client", (), {"host": client[0] if client else None})()
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}


class UploadGuard:
    """ASGI middleware on Gradio's upload route (`POST .../upload`): an address past its bytes per hour is
    refused in one line (429) before its body is read, or cut as soon as its body passes the quota; the
    upload folder is swept to make room before an upload and back to the cap after it. Installed by
    app.py's `launch_options`: `Middleware(UploadGuard, per_hour=..., proxy_hops=...)`."""

    def __init__(self, app: Any, *, per_hour: int = UPLOAD_MB_PER_HOUR << 20, proxy_hops: int = 0,
                 max_bytes: int = UPLOADS_MAX_BYTES, root: Callable[[], Path] = upload_root,
                 quota: UploadQuota | None = None) -> None:
        self.app = app
        self.quota = quota or UploadQuota(per_hour)
        self.proxy_hops = proxy_hops
        self.max_bytes = max_bytes
        self.root = root

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or not str(scope.get("path", "")).endswith("/upload"):
            await self.app(scope, receive, send)
            return
        peer = _Peer(scope)
        address = client_address(peer, self.proxy_hops)
        left = self.quota.left(address)
        try:
            declared = int(peer.headers.get("content-length", ""))
        except ValueError:
            declared = None
        if left <= 0 or declared is not None and declared > left:
            await _refuse(send, "your address has uploaded its share for this hour "
                                f"({self.quota.per_hour >> 20} MB an hour): please come back later")
            return
        root = self.root()
        await asyncio.to_thread(sweep_uploads, root, self.max_bytes - (declared or 0))  # room for this one
        counted = 0

        async def counting() -> Any:
            nonlocal counted
            message = await receive()
            if message.get("type") == "http.request":
                counted += len(message.get("body") or b"")
                if counted > left:
                    raise _OverQuota
            return message

        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            started = started or message.get("type") == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, sending)
        except _OverQuota:
            if not started:
                await _refuse(send, "this upload passes your address's share for this hour "
                                    f"({self.quota.per_hour >> 20} MB an hour): refused")
        finally:
            self.quota.add(address, counted)
            await asyncio.to_thread(sweep_uploads, root, self.max_bytes)  # a part file it left, or one too many


async def _refuse(send: Any, text: str) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
