"""Run requests against a backend: bounded concurrency, retries with backoff, local-engine batching. It
knows nothing about tasks or files."""

from __future__ import annotations

import asyncio
import math
import os
import random
import sys
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Any

from eval.backends._retry import MAX_SERVER_WAIT, wait_header
from eval.limiter import FAILED, MAX_CONCURRENCY, OK, OVERLOADED, REFUSED, TIMEOUT, Limiter, Limits, Slot
from eval.settings import RunSettings
from eval.types import Backend, BackendError, Request, Response, UserError


@dataclass
class Outcome:
    """The end of one request: a response, or the error that ended its attempts."""

    request: Request
    response: Response | None
    error: str | None
    attempts: int
    latency_s: float


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter, bounded in count and in time. `max_attempts` counts the
    attempts that failed for a reason of their own (a 500, a dropped connection, a timeout); back-pressure
    (429, 503: the server asks to come back later) while the endpoint still answers other requests does not
    burn them, it lowers the endpoint's limit instead; every retry is bounded by `max_wait_s` from the item's
    first attempt. A server's Retry-After is the least a refused request waits; a jittered share of the
    growing backoff comes on top, so refused requests never all come back at once."""

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    request_timeout: float | None = None  # a safety net above the backend's own client timeout
    max_wait_s: float = 900.0

    def delay(self, attempt: int, retry_after: float | None, base: float | None = None) -> float:
        """`base` replaces base_delay: a request refused while others are answered backs off on the
        scale of the endpoint's own latency, not of an outage."""
        ceiling = min(self.max_delay, (self.base_delay if base is None else base) * 2 ** (attempt - 1))
        if retry_after is not None and math.isfinite(retry_after):
            wait = min(max(retry_after, 0.0), MAX_SERVER_WAIT)  # a longer one never reaches here (see server_wait_refused)
            return min(wait + random.uniform(0.0, max(wait, ceiling) / 2), max(self.max_delay, wait))
        return random.uniform(ceiling / 2, ceiling)  # jitter keeps concurrent retries from syncing up


BACK_PRESSURE = frozenset({429, 503, 529})  # "come back later": lowers the limit, burns no attempt


def signal_of(error: BackendError) -> str:
    """What a failed attempt says of the endpoint's capacity, for its limiter."""
    if error.status == 429 or (error.status in BACK_PRESSURE and error.retry_after is not None):
        return REFUSED
    if error.status in BACK_PRESSURE:
        return OVERLOADED
    if error.timed_out:
        return TIMEOUT
    return FAILED


def server_wait_refused(error: BackendError) -> BackendError | None:
    """A refusal whose server asked for a wait over MAX_SERVER_WAIT, as an error of its own: that attempt
    fails saying which header asked what, and is retried as any fault (no longer than the item's time),
    never slept on. None when the wait, if any, is within the bound."""
    wait = error.retry_after
    if wait is None or wait <= MAX_SERVER_WAIT:
        return None
    return BackendError(f"{error_text(error)} (the server asked to wait {wait:.3g} s in {wait_header(wait)}, over the "
                        f"{MAX_SERVER_WAIT:g} s a run waits at once; not waited)", retryable=error.retryable)


def error_text(error: BaseException) -> str:
    """A short, single-line error for predictions.jsonl (backends keep keys out of messages)."""
    if isinstance(error, BackendError):
        text = str(error)
        if error.status is not None and str(error.status) not in text:
            text = f"HTTP {error.status}: {text}"
    else:
        text = f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:300] or type(error).__name__


if sys.version_info >= (3, 11):
    async def _within(call: Awaitable[Any], seconds: float) -> Any:
        """`call`'s result, or TimeoutError after `seconds`. Run in the calling task, not in a task of its own
        as `asyncio.wait_for` runs it before Python 3.12: no task to create, and no two trips through
        the event loop's queue (the start, then the wake-up) behind every other request's callbacks."""
        async with asyncio.timeout(seconds):
            return await call
else:  # Python 3.10: no asyncio.timeout
    _within = asyncio.wait_for


FAIL_FAST_SECONDS = 10.0  # a run whose every request so far found no server stops after this long


class ServerUnreachable(UserError):
    """No request of the run has reached a server (DNS, refused) for FAIL_FAST_SECONDS: the run stops
    in one line instead of retrying every item for minutes; what was done is kept."""


@dataclass
class Reachability:
    """What a run's requests have seen so far: an answer from a server, or only failures to connect."""

    reached: bool = False
    first_failure: float | None = None
    failures: int = 0

    def failed(self, error: BackendError, host: str | None) -> None:
        """Note a failure; raise ServerUnreachable when nothing has connected for FAIL_FAST_SECONDS."""
        if self.reached or not getattr(error, "unreachable", False):
            return
        now = time.monotonic()
        self.first_failure = self.first_failure or now
        self.failures += 1
        if now - self.first_failure >= FAIL_FAST_SECONDS:
            raise ServerUnreachable(f"cannot reach the model server{f' at {host}' if host else ''}: {error} "
                                    f"({self.failures} attempts in {now - self.first_failure:.0f} s, none connected); "
                                    f"stopped. Check the address and the network, then run the same command again "
                                    f"(answers already saved are kept)")


async def call_with_retries(backend: Backend, request: Request, policy: RetryPolicy,
                            on_retry: Callable[[], None] | None = None, reach: Reachability | None = None, *,
                            limiter: Limiter | None = None, slot: Slot | None = None,
                            send: Callable[[Request], Awaitable[Response]] | None = None) -> Outcome:
    """One request to completion: retry retryable errors, fail at once on the others. With `reach`
    (one per run), a run whose requests have all failed to connect for FAIL_FAST_SECONDS stops
    (ServerUnreachable) instead of retrying every item. With `limiter`, each attempt holds one of
    the endpoint's slots (`slot`: the first one, already taken) and gives it back, with what the
    attempt said, before any wait: a request waiting to retry holds no slot."""
    send = send or backend.generate
    start = time.monotonic()
    attempt = faults = 0
    seen_answered = limiter.answered if limiter is not None else 0
    while True:
        if limiter is not None and slot is None:
            slot = await limiter.acquire()
        attempt += 1
        sent = time.monotonic()
        try:
            call = send(request)
            response = await (_within(call, policy.request_timeout) if policy.request_timeout else call)
            if not isinstance(response, Response):
                raise BackendError(f"backend returned {type(response).__name__}, not a Response", retryable=False)
            if reach is not None:
                reach.reached = True
            now = time.monotonic()
            if limiter is not None and slot is not None:
                usage = response.usage or {}
                limiter.done(slot, OK, latency=now - sent, pacing=response.pacing,
                             tokens=usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
            return Outcome(request, response, None, attempt, now - start)
        except TimeoutError:
            error: BackendError = BackendError(f"timed out after {policy.request_timeout:g} s", retryable=True,
                                               timed_out=True)
        except BackendError as exc:
            error = exc
        except Exception as exc:  # an unexpected backend bug fails this sample, not the whole run
            error = BackendError(error_text(exc), retryable=False)
        except BaseException:  # cancelled: the slot goes back, saying nothing of the endpoint
            if limiter is not None and slot is not None:
                limiter.cancel(slot)
            raise
        # The error's traceback holds the frames it came through (a refused body in the backend's, and
        # this frame, whose `error` holds it back: a cycle only the collector would free). It is read
        # for its fields alone, so the frames go now and the body with them.
        error.__traceback__ = error.__context__ = error.__cause__ = None
        if limiter is not None and slot is not None:
            limiter.done(slot, signal_of(error), latency=time.monotonic() - sent, pacing=error.pacing)
            slot = None
        if reach is not None:
            if error.status is not None:  # an HTTP answer: a server is there
                reach.reached = True
            reach.failed(error, _host_of(backend))
        # Back-pressure while the endpoint answers others is contention: the limit comes down and this
        # request waits its turn without spending an attempt. Refused while nobody is answered, it spends one.
        answered = limiter.answered if limiter is not None else 0
        refused_wait = server_wait_refused(error)
        if refused_wait is not None:
            error = refused_wait  # spends an attempt: a server that asks for hours is no contention
        contention = error.status in BACK_PRESSURE and answered > seen_answered
        faults += not contention
        seen_answered = answered
        if not error.retryable or faults >= policy.max_attempts:
            return Outcome(request, None, error_text(error), attempt, time.monotonic() - start)
        scale = limiter.floor if contention and limiter is not None and limiter.floor else None
        delay = policy.delay(attempt, error.retry_after, None if scale is None else min(scale, policy.base_delay))
        waited = time.monotonic() - start
        if waited + delay > policy.max_wait_s:
            return Outcome(request, None, f"{error_text(error)} (still refused after {waited:.0f} s and "
                                          f"{attempt} attempts)"[:300], attempt, waited)
        if on_retry is not None:
            on_retry()
        await asyncio.sleep(delay)


BUILD_THREADS = max(2, min(8, os.cpu_count() or 2))


async def built_ahead(jobs: Iterable[Request | Callable[[], Request]], *,
                      threads: int = BUILD_THREADS) -> AsyncIterator[Request]:
    """Requests in order, the ones given as builders built in worker threads, `threads` ahead of need.
    Building a request can mean decoding, shrinking and re-encoding each view (photos above the size bound):
    tens of milliseconds that would stall every request in flight if done on the event loop. Pillow releases
    the GIL while it works, so such builds also run in parallel. Requests that were cheap to build (views sent
    as stored) come ready-made, with no thread hop. At most `threads` requests (and their image bytes) wait
    ahead of the workers. A builder's exception is raised here, in order, and the builds after it are
    dropped."""
    loop = asyncio.get_running_loop()
    source = iter(jobs)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="diningbench-build")

    def start(job: Request | Callable[[], Request]) -> Request | asyncio.Future[Request]:
        return job if isinstance(job, Request) else loop.run_in_executor(pool, job)

    ahead: deque[Request | asyncio.Future[Request]] = deque(map(start, islice(source, threads)))
    try:
        while ahead:
            item = ahead.popleft()
            request = item if isinstance(item, Request) else await item
            ahead.extend(map(start, islice(source, 1)))
            yield request
    finally:
        for future in ahead:
            if isinstance(future, asyncio.Future) and not future.cancel() and not future.cancelled():
                future.exception()  # done already: retrieve it, or a later failure is logged as well
        pool.shutdown(wait=False, cancel_futures=True)


_DONE = object()
_SENT = object()


async def _from_iterable(requests: Iterable[Request]) -> AsyncIterator[Request]:
    for request in requests:
        yield request


class _Source:
    """One request at a time from a sync or async iterable, for many workers (an async generator
    must not be entered twice at once)."""

    def __init__(self, requests: Iterable[Request] | AsyncIterable[Request]) -> None:
        self._it = aiter(requests) if isinstance(requests, AsyncIterable) else _from_iterable(requests)
        self._lock = asyncio.Lock()

    async def next(self) -> Request | None:
        async with self._lock:
            return await anext(self._it, None)

    async def aclose(self) -> None:
        close = getattr(self._it, "aclose", None)
        if close is not None:
            await close()


def _host_of(backend: Any) -> str | None:
    """host[:port] a backend sends to, for a message (never a path, query or key)."""
    try:
        described = backend.describe() if hasattr(backend, "describe") else {}
    except Exception:  # noqa: BLE001 - a message detail, never worth failing for
        return None
    return (described.get("base_url_host") or described.get("host")) if isinstance(described, dict) else None


def _routes(backend: Any, limits: Limits) -> list[tuple[Limiter, Callable[[Request], Awaitable[Response]]]]:
    """Each endpoint's limiter and how to send to it. Replicas (a backend with `endpoints()` and
    `generate_at`) each get their own limiter under `auto`; a fixed N is shared, as it always was."""
    hosts = backend.endpoints() if hasattr(backend, "endpoints") and hasattr(backend, "generate_at") else None
    if hosts and limits.adaptive:
        return [(limits.endpoint(host or f"replica {i}"), partial(backend.generate_at, i))
                for i, host in enumerate(hosts)]
    name = ",".join(h or "default" for h in hosts) if hosts else _host_of(backend)
    return [(limits.endpoint(name), backend.generate)]


async def _concurrent(backend: Backend, requests: _Source, limits: Limits, policy: RetryPolicy,
                      on_retry: Callable[[], None] | None) -> AsyncGenerator[Outcome, None]:
    """One dispatcher per endpoint takes a slot, then the next request (so only requests with a slot,
    and those built ahead, hold image bytes), and sends it in a task of its own."""
    results: asyncio.Queue[Any] = asyncio.Queue()
    reach = Reachability()
    routes = _routes(backend, limits)
    tasks: set[asyncio.Task[None]] = set()

    async def one(limiter: Limiter, send: Callable[[Request], Awaitable[Response]], request: Request,
                  slot: Slot) -> None:
        try:
            results.put_nowait(await call_with_retries(backend, request, policy, on_retry, reach,
                                                       limiter=limiter, slot=slot, send=send))
        except Exception as exc:  # ServerUnreachable: the run stops
            results.put_nowait(exc)

    async def dispatch(limiter: Limiter, send: Callable[[Request], Awaitable[Response]]) -> None:
        try:
            while True:
                slot = await limiter.acquire()
                request = await requests.next()
                if request is None:
                    limiter.cancel(slot)
                    return
                task = asyncio.create_task(one(limiter, send, request, slot))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                results.put_nowait(_SENT)
                await asyncio.sleep(0)  # the request goes out now, before the next is taken
        except Exception as exc:  # e.g. an undecodable image while building a request
            results.put_nowait(exc)
        finally:
            results.put_nowait(_DONE)

    dispatchers = [asyncio.create_task(dispatch(limiter, send)) for limiter, send in routes]
    try:
        finished = outstanding = 0
        while finished < len(dispatchers) or outstanding:
            item = await results.get()
            if item is _DONE:
                finished += 1
            elif item is _SENT:
                outstanding += 1
            elif isinstance(item, Exception):
                raise item
            else:
                outstanding -= 1
                yield item
    finally:
        for task in (*dispatchers, *tasks):
            task.cancel()
        await asyncio.gather(*dispatchers, *tasks, return_exceptions=True)


async def _chunk(requests: _Source, size: int) -> list[Request]:
    chunk: list[Request] = []
    while len(chunk) < size and (request := await requests.next()) is not None:
        chunk.append(request)
    return chunk


async def _batched(backend: Any, requests: _Source, batch_size: int, policy: RetryPolicy,
                   on_retry: Callable[[], None] | None) -> AsyncGenerator[Outcome, None]:
    """Local engines: `generate_batch` in a worker thread so the event loop (and progress) stays live."""
    while chunk := await _chunk(requests, batch_size):
        pending = chunk
        start = time.monotonic()
        for attempt in range(1, policy.max_attempts + 1):
            try:
                results: list[Any] = await asyncio.to_thread(backend.generate_batch, pending)
                if len(results) != len(pending):
                    raise BackendError(f"generate_batch returned {len(results)} results for "
                                       f"{len(pending)} requests", retryable=False)
            except Exception as exc:  # the whole batch failed: each of its samples records why
                results = [exc] * len(pending)
            retry = []
            latency = (time.monotonic() - start) / len(chunk)
            for request, result in zip(pending, results, strict=True):
                if isinstance(result, Response):
                    yield Outcome(request, result, None, attempt, latency)
                elif (isinstance(result, BackendError) and result.retryable
                      and attempt < policy.max_attempts):
                    retry.append(request)
                    if on_retry is not None:
                        on_retry()
                else:
                    yield Outcome(request, None, error_text(result) if isinstance(result, BaseException)
                                  else f"backend returned {type(result).__name__}", attempt, latency)
            if not retry:
                break
            pending = retry
            await asyncio.sleep(policy.delay(attempt, None))


async def execute(backend: Backend, requests: Iterable[Request] | AsyncIterable[Request], *,
                  concurrency: int | str = RunSettings.concurrency, max_concurrency: int = MAX_CONCURRENCY,
                  batch_size: int = 8, policy: RetryPolicy | None = None,
                  on_retry: Callable[[], None] | None = None, limits: Limits | None = None
                  ) -> AsyncGenerator[Outcome, None]:
    """Yield one Outcome per request, in completion order; requests are pulled lazily (only those in flight,
    and any built ahead, hold image bytes), and one that still fails after its retries is an Outcome with
    an `error`, never dropped.

    Backends with `generate_batch` (local engines) get chunks of `batch_size`; the others get
    `generate` calls, as many in flight per endpoint as `limits` allows (made from `concurrency`,
    N or `auto`, and `max_concurrency` when not given; pass one to read its trace afterwards)."""
    policy = policy or RetryPolicy()
    source = _Source(requests)
    if hasattr(backend, "generate_batch"):
        stream = _batched(backend, source, max(1, batch_size), policy, on_retry)
    else:
        stream = _concurrent(backend, source, limits or Limits(concurrency, max_concurrency), policy, on_retry)
    try:
        async for outcome in stream:
            yield outcome
    finally:
        await stream.aclose()  # workers first, then the source they pull from
        await source.aclose()
