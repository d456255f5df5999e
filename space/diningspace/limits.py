"""Caps that keep one visitor from taking the whole Space: evaluations per visitor, requests overall."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from .guard import GuardError

EVALUATION_SECONDS = 600.0  # one evaluation's wall-clock limit: each attempt is bounded (60 s), the whole too

T = TypeVar("T")


async def within_wall_clock(updates: AsyncIterator[T], seconds: float) -> AsyncIterator[T]:
    """`updates` until `seconds` have passed since the first was asked for, then GuardError. The
    pending update is cancelled, which stops the evaluation's requests in flight as Stop does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        try:
            update = await asyncio.wait_for(anext(updates), max(0.0, deadline - loop.time()))
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11
            raise GuardError(f"the evaluation reached its limit of {seconds:g} s and was stopped, with its "
                             "requests: the model server is too slow for this many items; try fewer") from None
        yield update


class VisitorJobs:
    """How many evaluations each browser session and each client address is running now."""

    def __init__(self, per_session: int, per_address: int, noun: str = "evaluation") -> None:
        self.per_session, self.per_address, self.noun = per_session, per_address, noun
        self._sessions: Counter[str] = Counter()
        self._addresses: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, session: str | None, address: str | None) -> Iterator[None]:
        """Count one evaluation for the visitor while the block runs; GuardError when over a cap."""
        with self._lock:
            if session and self._sessions[session] >= self.per_session:
                raise GuardError(f"you already have {self._sessions[session]} {self.noun}(s) running "
                                 f"(at most {self.per_session} per visitor): wait for it"
                                 + (" or press Stop" if self.noun == "evaluation" else ""))
            if address and self.per_address and self._addresses[address] >= self.per_address:
                raise GuardError(f"{self._addresses[address]} {self.noun}(s) are already running from your "
                                 f"address (at most {self.per_address}): wait for one to finish")
            if session:
                self._sessions[session] += 1
            if address and self.per_address:
                self._addresses[address] += 1
        try:
            yield
        finally:
            with self._lock:
                for counter, key in ((self._sessions, session), (self._addresses, address)):
                    if key and counter[key] > 0:
                        counter[key] -= 1
                        if not counter[key]:
                            del counter[key]

    def running(self) -> int:
        with self._lock:
            return sum(self._sessions.values())


def client_address(request: Any, proxy_hops: int = 0) -> str | None:
    """The visitor's address: the connection's peer, or with `proxy_hops` trusted proxies in front,
    the address the outermost of them saw (counted from the right of X-Forwarded-For: entries to
    its left are whatever the client sent, so they are never trusted)."""
    host = getattr(getattr(request, "client", None), "host", None)
    if proxy_hops and request is not None:
        forwarded = [a.strip() for a in (request.headers.get("x-forwarded-for") or "").split(",") if a.strip()]
        if len(forwarded) >= proxy_hops:
            return forwarded[-proxy_hops]
    return host


class RequestSlots:
    """At most `limit` model requests in flight across every evaluation of the process. One semaphore per
    event loop (asyncio primitives belong to one loop): the Space runs every evaluation on Gradio's loop, so
    in the Space this is one Space-wide cap."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = self.peak = 0
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary())

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._semaphores.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(self.limit)):
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1


class SlotBackend:
    """A backend whose every `generate` first takes a Space-wide request slot, and that can be
    stopped: `stop()` cancels the calls in flight and refuses new ones, so a stopped evaluation
    sends nothing more whatever its retries or not-yet-collected generators would do."""

    def __init__(self, inner: Any, slots: RequestSlots) -> None:
        self.inner, self.slots = inner, slots
        self.stopped = False
        self._calls: set[asyncio.Task[Any]] = set()

    async def generate(self, request: Any) -> Any:
        from eval.types import BackendError

        if self.stopped:
            raise BackendError("the evaluation was stopped", retryable=False)
        task = asyncio.current_task()
        if task is not None:
            self._calls.add(task)
        try:
            async with self.slots.slot():
                return await self.inner.generate(request)
        finally:
            self._calls.discard(task)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.stopped = True
        for task in list(self._calls):
            task.cancel()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    async def aclose(self) -> None:
        from eval.backends import release

        await release(self.inner)


class HourlyQuota:
    """How many test sittings each browser session, each client address and the whole Space began
    in the last hour; `take` refuses one over a cap (0 = that cap is not counted). The clock is
    injectable so a test can play an hour without waiting for it."""

    WINDOW = 3600.0

    def __init__(self, per_session: int, per_address: int, per_space: int, *,
                 clock: Callable[[], float] = time.monotonic, noun: str = "test") -> None:
        self.per_session, self.per_address, self.per_space = per_session, per_address, per_space
        self.noun = noun  # what is counted, for the message: test sittings, submissions
        self.clock = clock
        self._times: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._times.setdefault(key, deque())
        while times and times[0] <= now - self.WINDOW:
            times.popleft()
        return times

    def take(self, session: str | None, address: str | None) -> None:
        """Count one sitting; GuardError (one line saying which cap) when it would exceed one."""
        with self._lock:
            now = self.clock()
            checks = [("space", "", self.per_space, "this Space")]
            if session:
                checks.append(("session", session, self.per_session, "you"))
            if address:
                checks.append(("address", address, self.per_address, "your address"))
            for kind, key, cap, who in checks:
                if cap and len(self._recent(f"{kind}:{key}", now)) >= cap:
                    raise GuardError(f"{who} already started {cap} {self.noun}(s) in the last hour (at most {cap}): "
                                     "please come back later")
            for kind, key, cap, _ in checks:
                if cap:
                    self._recent(f"{kind}:{key}", now).append(now)
            for key in [k for k in self._times if not self._recent(k, now)]:  # forget visitors gone quiet
                del self._times[key]
