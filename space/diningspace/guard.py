"""Keeping visitors' keys secret and the Space from being used to reach arbitrary hosts."""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from collections.abc import Iterable

REDACTED = "[redacted]"
# A model name typed by a visitor goes into an API path; keep it to the characters names use.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$")


class GuardError(ValueError):
    """Input the Space refuses (one line, safe to show: it never contains a key)."""


def name_problem(name: str) -> str | None:
    """Why a model name cannot be shown as a row of its own (None when it can): spaces before or after
    it, or a character that draws as nothing or as another (invisible and bidirectional formatting
    characters, control characters, spaces other than the ASCII one), with which one name imitates
    another on the board. Names typed in the Evaluate tab pass it by construction (`_MODEL_NAME`).

    >>> name_problem("gpt-4o\u00a0")
    'it ends with a space'
    >>> name_problem("gpt\u202e-4o")
    'it holds U+202E, a character that is invisible or draws as another'
    >>> name_problem("Qwen2.5-VL 7B") is None
    True
    """
    if not name:
        return "it is empty"
    if name[0].isspace() or name[-1].isspace():
        return f"it {'starts' if name[0].isspace() else 'ends'} with a space"
    for char in name:
        kind = unicodedata.category(char)
        if kind[0] == "C" or kind in ("Zl", "Zp") or kind == "Zs" and char != " ":
            return f"it holds U+{ord(char):04X}, a character that is invisible or draws as another"
    return None


def check_model_name(name: str) -> str:
    """A visitor's model name, stripped, or GuardError."""
    name = (name or "").strip()
    if not _MODEL_NAME.match(name) or name_problem(name):
        raise GuardError("model name: use letters, digits and . _ : / @ + - only (e.g. gpt-4o-mini)")
    return name


def allowed_base_url(url: str | None, allowed_hosts: Iterable[str]) -> str | None:
    """The base URL if its host is allow-listed by the operator; None when empty; GuardError otherwise. An
    allow-list entry is a host name (`api.example.com`, any port) or `host:port`. With no allow-list, no base
    URL is accepted at all: the Space must not fetch URLs chosen by visitors.

    >>> allowed_base_url("http://127.0.0.1:8000/v1", ["127.0.0.1:8000"])
    'http://127.0.0.1:8000/v1'
    """
    url = (url or "").strip()
    if not url:
        return None
    allowed = {h.strip().lower() for h in allowed_hosts if h.strip()}
    if not allowed:
        raise GuardError("base URL: this Space does not accept custom base URLs")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise GuardError("base URL: not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GuardError("base URL: must start with http:// or https:// and name a host")
    if parts.username or parts.password:
        raise GuardError("base URL: must not contain a user name or password")
    host = parts.hostname.lower()
    if host not in allowed and (port is None or f"{host}:{port}" not in allowed):
        raise GuardError(f"base URL: host {host!r} is not allowed here (allowed: {', '.join(sorted(allowed))})")
    return url
