"""The one adapter from a judge spec (`openai:gpt-4o`) to the callable `judge(prompt) -> str` that
the judge_accuracy metric takes. Requests go through the runner's retries, like any model request.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from typing import Any

from eval.backends import SpecError, make_backend, release
from eval.endpoints import host_of
from eval.limiter import MAX_CONCURRENCY, Limits
from eval.runner import RetryPolicy, call_with_retries
from eval.settings import DEFAULTS, RunSettings
from eval.types import BackendOptions, ConfigError, GenerationConfig, Message, Request, UserError


class JudgeError(UserError):
    """The judge cannot be built (bad spec, missing key) or a call failed after its retries."""


class BackendJudge:
    """A sync, thread-safe `judge(prompt) -> text` over any backend, at temperature 0. The backend lives on
    its own event-loop thread, so this works from plain code and from code that already runs a loop (the
    Space). Built lazily: cached verdicts never need the backend. The generation limit is the run's (thinking
    judges need room too); the backend's request policy adapts it as for any model."""

    def __init__(self, spec: str, base_url: str | None = None, *, timeout: float = DEFAULTS.timeout,
                 max_attempts: int = DEFAULTS.max_attempts, max_tokens: int = DEFAULTS.max_tokens,
                 retry_base_delay: float = DEFAULTS.retry_base_delay, seed: int | None = 0,
                 concurrency: int | str = DEFAULTS.concurrency,
                 max_concurrency: int = MAX_CONCURRENCY, limits: Limits | None = None) -> None:
        self.spec, self.base_url = spec, base_url
        # Calls from any number of threads share the judge endpoint's limiter (auto, or a fixed N).
        self.limits = limits or Limits(concurrency, max_concurrency)
        self.config = GenerationConfig(temperature=0.0, max_tokens=max_tokens, seed=seed)
        self.policy = RetryPolicy(max_attempts=max_attempts, base_delay=retry_base_delay, request_timeout=timeout)
        self.timeout = timeout
        self._backend: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()  # judge_items calls from several threads at once

    @classmethod
    def from_settings(cls, spec: str, base_url: str | None, settings: RunSettings, **options: Any) -> BackendJudge:
        """The judge of a run: its timeout, token limit and limiters from the run's settings (one road);
        `options` are what the protocol's judge step asks beside them (`Protocol.judge_options`)."""
        return cls(spec, base_url, **{"timeout": settings.timeout, "max_tokens": settings.max_tokens,
                                      "limits": Limits.of(settings), **options})

    def check(self) -> None:
        """Build the backend now, so a missing key fails before any generation, not after."""
        self._start()

    def describe(self) -> dict[str, Any] | None:
        """The judge backend's settings and request policy, for run.json (None until built)."""
        if self._backend is None:
            return None
        return {**self._backend.describe(), "concurrency": self.limits.describe()}

    def _start(self) -> None:
        with self._starting:
            if self._backend is not None:  # another thread got here first
                return
            try:
                backend = make_backend(self.spec, BackendOptions(base_url=self.base_url, timeout=self.timeout,
                                                                 generation=self.config))
            except (SpecError, ConfigError) as exc:
                raise JudgeError(f"--judge: {exc}") from None
            except ImportError as exc:
                raise JudgeError(f"--judge {self.spec}: a package is missing ({exc.name or exc})") from None
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="judge-loop")
            self._thread.start()
            self._backend = backend  # last: other threads take a set backend to mean a running loop

    def __call__(self, prompt: str) -> str:
        if self._backend is None:
            self._start()
        digest = hashlib.sha256(prompt.encode()).hexdigest()[:32]
        request = Request(id=f"judge-{digest[:12]}", task="vqa", messages=(Message("user", (prompt,)),),
                          config=self.config, request_hash=digest)
        assert self._loop is not None
        limiter = self.limits.endpoint(host_of(self.base_url))
        outcome = asyncio.run_coroutine_threadsafe(call_with_retries(self._backend, request, self.policy, limiter=limiter),
                                                   self._loop).result()
        if outcome.response is None:
            raise JudgeError(f"judge {self.spec} failed: {outcome.error}")
        if outcome.response.truncated and not outcome.response.text.strip():
            raise JudgeError(f"judge {self.spec} was cut off by its token limit before answering")
        return outcome.response.text

    def close(self) -> None:
        if self._loop is not None and self._thread is not None:
            asyncio.run_coroutine_threadsafe(release(self._backend), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()
            self._loop = self._backend = self._thread = None  # a later call starts afresh


def make_judge(spec: str, base_url: str | None = None, **options: Any) -> BackendJudge:
    """A judge callable for judge_accuracy: `metric.compute(..., judge=make_judge("openai:gpt-4o"))`. Close it
    (`judge.close()`) when done; its connections live on its own loop thread."""
    return BackendJudge(spec, base_url, **options)
