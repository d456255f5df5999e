"""Endpoints and keys: what any client that talks to a model server checks, for the harness and for
construction alike. A base URL must be http(s), name a host and carry no credential; only its host goes
into files; a key comes from the caller or the environment; `check_reachable` fails fast in one line."""

from __future__ import annotations

import os
import re
import socket
from urllib.parse import parse_qsl, urlsplit

from eval.settings import UsageError
from eval.types import ConfigError


def host_of(base_url: str | None) -> str | None:
    """Only the host (and port) of a base URL goes into run.json: never paths, queries or userinfo."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    if not parts.hostname:
        return None
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


# Query parameters that carry a credential (api-key, api_key, key, token, access_token, sig, password...).
_SECRET_PARAM = re.compile(r"(^|[-_])(key|apikey|token|secret|sig|signature|password|passwd|pwd|auth|credential)s?($|[-_])",
                           re.I)


def require_http_url(base_url: str | None, flag: str = "--base-url") -> None:
    """A --base-url must be an http(s) URL naming a host (the Space also allow-lists hosts) and carry no
    credential: a key in its user:password part or query would be sent in the path and land in logs,
    caches and error messages. Refused in one line that never repeats the URL (it holds the secret).

    >>> require_http_url("http://127.0.0.1:8000/v1?api-version=2024-06-01")
    >>> require_http_url("http://127.0.0.1:8000/v1?api-key=sk-1")
    Traceback (most recent call last):
    ...
    eval.types.ConfigError: --base-url carries a credential in its query (api-key); put the key in the environment (e.g. OPENAI_API_KEY) and give the URL without it
    """
    if base_url is None:
        return
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"{flag}: not a valid URL") from None
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"{flag} carries a user name or password; put the key in the environment "
                          "(e.g. OPENAI_API_KEY) and give the URL without it")
    secret = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if _SECRET_PARAM.search(name)]
    if secret:
        raise ConfigError(f"{flag} carries a credential in its query ({', '.join(secret)}); put the key in the "
                          "environment (e.g. OPENAI_API_KEY) and give the URL without it")
    if parts.scheme not in ("http", "https") or not host_of(base_url):
        raise ConfigError(f"{flag} {base_url!r} is not an http(s) URL, e.g. http://localhost:8000/v1")


def resolve_api_key(names: tuple[str, ...], *, base_url: str | None, what: str, explicit: str | None = None) -> str:
    """The key for one backend instance: `explicit`, a key handed over in code for this instance only (the
    Space's "use your own key"), else the environment; a custom server (--base-url) may run without one."""
    if explicit and explicit.strip():
        return explicit.strip()
    for name in names:
        if value := os.environ.get(name, "").strip():
            return value
    if base_url:
        return "EMPTY"  # what `vllm serve` and most self-hosted servers accept
    raise ConfigError(f"{what} needs an API key: set {' or '.join(names)} in the environment "
                      "(or point --base-url at a server that needs none)")


def check_reachable(url: str | None, flag: str) -> None:
    """Fail fast, in one line, when --base-url points at nothing (instead of N failed samples), carries a
    credential or is not http(s): `eval run`'s and `construct run`'s check before the first request."""
    if not url:
        return
    try:
        require_http_url(url, flag)  # http(s), a host, and no credential in it
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=5).close()
    except OSError:
        raise UsageError(f"cannot reach {parts.hostname}:{port} ({flag}): is the server running?") from None
