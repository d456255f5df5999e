"""What API backends share: which HTTP statuses are worth retrying, Retry-After (base URLs, keys, hosts:
`eval.endpoints`). The runner owns retries (client retries are off), so every backend maps its client's errors
to `BackendError(retryable=..., status=..., retry_after=...)` with these rules."""

from __future__ import annotations

import email.utils
import math
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_SERVER_WAIT = 60.0  # seconds: the longest single pause a server's header may ask of a run

_WARNED: set[str] = set()


def warn_once(text: str) -> None:
    """One `warning:` line on stderr per distinct text per process: a server that sends the same odd
    header on every answer is worth one line, not a thousand."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"warning: {text}", file=sys.stderr)


class ServerWait(float):
    """Seconds a server asked to wait, with the header that asked (for the message that refuses it)."""

    header: str

    def __new__(cls, seconds: float, header: str) -> ServerWait:
        wait = super().__new__(cls, seconds)
        wait.header = header
        return wait

    def __reduce__(self) -> tuple[Any, ...]:
        return ServerWait, (float(self), self.header)


def wait_header(seconds: float) -> str:
    """The header a wait came from (`Retry-After` when it is a plain number)."""
    return getattr(seconds, "header", "Retry-After")


def finite_seconds(value: Any, header: str, *, scale: float = 1.0, unit: str = "a number of seconds") -> float | None:
    """`value` (a header's text or a number) as seconds >= 0, or None with a warning when it is not a
    finite, non-negative number.

    >>> finite_seconds("2.5", "Retry-After"), finite_seconds("1500", "retry-after-ms", scale=0.001)
    (2.5, 1.5)
    """
    try:
        seconds = float(value) * scale
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        warn_once(f"ignored the server's {header} header {str(value)[:40]!r}: not {unit} >= 0")
        return None
    return seconds


def is_retryable_status(status: int | None) -> bool:
    """408/429/5xx are transient; 400/401/403/404 will fail the same way again."""
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def parse_retry_after(headers: Mapping[str, str] | Any | None) -> ServerWait | None:
    """Seconds to wait from a retry-after-ms or Retry-After (seconds or HTTP date) header; None when
    there is none or it cannot be read (with a warning). A wait over MAX_SERVER_WAIT is returned as
    asked: the runner refuses it, naming the header."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if ms is not None and (seconds := finite_seconds(ms, "retry-after-ms", scale=0.001)) is not None:
        return ServerWait(seconds, "retry-after-ms")
    if value is None:
        return None
    text = str(value).strip()
    if re.fullmatch(r"[+-]?[0-9.eE+-]+|[+-]?(inf|infinity|nan)", text, re.IGNORECASE):
        seconds = finite_seconds(text, "Retry-After")
        return None if seconds is None else ServerWait(seconds, "Retry-After")
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        parsed = None
    if parsed is None:
        warn_once(f"ignored the server's Retry-After header {text[:40]!r}: neither seconds nor an HTTP date")
        return None
    try:
        seconds = parsed.timestamp() - time.time()
    except (OverflowError, ValueError, OSError):
        seconds = math.inf
    return ServerWait(max(0.0, seconds), "Retry-After (HTTP date)")


def parse_retry_delay(text: str) -> ServerWait | None:
    """google.rpc.RetryInfo's `retryDelay` ("30s", "1.5s") found in an error body."""
    match = re.search(r"retryDelay['\"]?\s*[:=]\s*['\"]?([0-9.]+)s", text)
    if not match:
        return None
    seconds = finite_seconds(match.group(1), "RetryInfo retryDelay")
    return None if seconds is None else ServerWait(seconds, "RetryInfo retryDelay")
