"""What API backends share: which HTTP statuses are worth retrying, Retry-After. (Base URLs, keys and
hosts: `eval.endpoints`.)

The runner owns retries (client retries are switched off), so every backend maps its client's
errors to `BackendError(retryable=..., status=..., retry_after=...)` with these rules.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def is_retryable_status(status: int | None) -> bool:
    """408/429/5xx are transient; 400/401/403/404 will fail the same way again."""
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def parse_retry_after(headers: Mapping[str, str] | Any | None) -> float | None:
    """Seconds to wait from a Retry-After (seconds or HTTP date) or retry-after-ms header."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except (AttributeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def parse_retry_delay(text: str) -> float | None:
    """google.rpc.RetryInfo's `retryDelay` ("30s", "1.5s") found in an error body."""
    match = re.search(r"retryDelay['\"]?\s*[:=]\s*['\"]?([0-9.]+)s", text)
    return float(match.group(1)) if match else None
