"""The one key scrubber: every text that may echo a key (backend errors, model output, metrics the
Space shows) goes through `redact` before it is shown, logged or written. It imports nothing of ours,
so the backends, the Space and construction all use it."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

MARK = "***"
ECHO_RUN = 8  # this many consecutive key characters in a text are a leak, wherever they stand
MIN_SECRET = 4  # shorter strings are not keys, and replacing them would mangle ordinary text
NOT_A_KEY = frozenset({"EMPTY"})  # what a keyless self-hosted server is sent
_MASK_RE = re.compile(r"\*{2,}|…|\.{3}|x{4,}")
_TOKEN_RE = re.compile(r"[^\s\"'<>]+")  # a masked key stands between spaces, quotes or angle brackets


def _forms(secret: str) -> list[str]:
    """The key as written and as it appears URL-encoded in a query string, longest first."""
    forms = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}
    return sorted(forms, key=len, reverse=True)


def _cut_echoes(text: str, form: str, mark: str) -> str:
    """Replace every run of ECHO_RUN or more consecutive characters of `form` (a server that echoes 28 of 30).
    The windows are found by one regex scan and each run is grown at most len(form) characters, so a long text
    (a model's answer) costs time linear in its length."""
    if len(form) < ECHO_RUN:
        return text
    windows = sorted({form[i:i + ECHO_RUN] for i in range(len(form) - ECHO_RUN + 1)})
    finder = re.compile("|".join(map(re.escape, windows)))
    out, pos = [], 0
    while (match := finder.search(text, pos)) is not None:
        start, end = match.start(), match.end()
        while end < len(text) and text[start:end + 1] in form:
            end += 1
        out += [text[pos:start], mark]
        pos = end
    return "".join(out) + text[pos:] if out else text


def _cut_masked(text: str, secret: str, mark: str) -> str:
    """Replace masked forms that keep the key's prefix or suffix (`sk-abc1****wxyz`, `AIza...Q4`).
    One pass over the text's tokens: linear in its length."""

    def masked(match: re.Match[str]) -> str:
        whole = match.group(0)
        if not _MASK_RE.search(whole):
            return whole
        token = whole.rstrip(".,;:)")
        tail = whole[len(token):]
        pieces = _MASK_RE.split(token)
        head, foot = pieces[0], pieces[-1]
        if (len(head) >= 3 and secret.startswith(head)) or (len(foot) >= 4 and secret.endswith(foot)):
            return mark + tail
        return whole

    return _TOKEN_RE.sub(masked, text)


def redact(text: str, secrets: str | Iterable[str | None] | None, *, mark: str = MARK) -> str:
    """`text` with every secret removed: whole, URL-encoded (as in a query string), any run of
    ECHO_RUN or more of its characters, and masked forms that keep its prefix or suffix.

    >>> redact("bad key sk-test-0123456789abcdefXYZ!", "sk-test-0123456789abcdefXYZW")
    'bad key ***!'
    >>> redact("Incorrect API key provided: sk-tes********************XYZW.", "sk-test-0123456789abcdefXYZW")
    'Incorrect API key provided: ***.'
    >>> redact("401 (url ?key=sk-test%2Bkey%2F123)", ["sk-test+key/123"], mark="[redacted]")
    '401 (url ?key=[redacted])'
    """
    if not text or not secrets:
        return text
    for secret in [secrets] if isinstance(secrets, str) else secrets:
        if not secret or len(secret) < MIN_SECRET or secret in NOT_A_KEY:
            continue
        for form in _forms(secret):
            text = text.replace(form, mark)
        text = _cut_masked(text, secret, mark)  # before the echoes, so a mask's visible part goes with it
        for form in _forms(secret):
            text = _cut_echoes(text, form, mark)
    return text
