"""A live progress line on stderr: done/total, rate, ETA, failures, retries. Redrawn in place on a terminal;
otherwise (CI logs, pipes) a plain line every `log_every_s` seconds and at the end, so logs stay readable."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class Progress:
    """Counts samples as they finish; `skipped` ones were answered by an earlier run (resume)."""

    def __init__(self, total: int, *, label: str = "", stream: TextIO | None = None,
                 enabled: bool = True, log_every_s: float = 10.0, limits: Any = None) -> None:
        self.total = total
        self.limits = limits  # eval.limiter.Limits: requests in flight and the current limit
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.log_every_s = log_every_s
        self.done = self.failures = self.retries = self.skipped = 0
        self._start = time.monotonic()
        self._last_log = self._start
        self._last_draw = 0.0

    def skip(self, n: int = 1) -> None:
        self.skipped += n
        self.done += n

    def retry(self) -> None:
        self.retries += 1
        self._maybe_draw()

    def advance(self, *, failed: bool = False) -> None:
        self.done += 1
        self.failures += int(failed)
        self._maybe_draw()

    def line(self) -> str:
        elapsed = time.monotonic() - self._start
        fresh = self.done - self.skipped
        rate = fresh / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        label = f"{self.label} " if self.label else ""
        extra = f" ({self.skipped} resumed)" if self.skipped else ""
        served = self.limits is not None and self.limits.served  # a server was asked (not a baseline's answers)
        flight = f" in flight {self.limits.in_flight}/{self.limits.limit}" if served else ""
        return (f"{label}[{bar}] {self.done}/{self.total}{extra} {rate:.1f}/s "
                f"ETA {_duration(eta)}{flight} failures {self.failures} retries {self.retries}")

    def _maybe_draw(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if now - self._last_draw >= 0.1 or self.done == self.total:
                self.stream.write("\r" + self.line())
                self.stream.flush()
                self._last_draw = now
        elif now - self._last_log >= self.log_every_s:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last_log = now

    def close(self) -> None:
        if not self.enabled:
            return
        self.stream.write(("\r" if self.tty else "") + self.line() + "\n")
        self.stream.flush()
