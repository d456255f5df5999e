"""What API backends share: which HTTP statuses are worth retrying, Retry-After, keys, hosts.

The runner owns retries (client retries are switched off), so every backend maps its client's
errors to `BackendError(retryable=..., status=..., retry_after=...)` with these rules.
"""

from __future__ import annotations

import email.utils
import os
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from eval.types import ConfigError

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


def host_of(base_url: str | None) -> str | None:
    """Only the host (and port) of a base URL goes into run.json: never paths, queries or userinfo."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    if not parts.hostname:
        return None
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def require_http_url(base_url: str | None) -> None:
    """A --base-url must be an http(s) URL naming a host (the format only; the Space also allow-lists hosts)."""
    if base_url is not None and (urlsplit(base_url).scheme not in ("http", "https") or not host_of(base_url)):
        raise ConfigError(f"--base-url {base_url!r} is not an http(s) URL, e.g. http://localhost:8000/v1")


def resolve_api_key(names: tuple[str, ...], *, base_url: str | None, what: str, explicit: str | None = None) -> str:
    """The key for one backend instance.

    `explicit` is a key handed over in code for this instance only (the Space's "use your own key");
    otherwise the environment; a custom server (--base-url) may run without one.
    """
    if explicit and explicit.strip():
        return explicit.strip()
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if base_url:
        return "EMPTY"  # what `vllm serve` and most self-hosted servers accept
    raise ConfigError(f"{what} needs an API key: set {' or '.join(names)} in the environment "
                      "(or point --base-url at a server that needs none)")
