"""Run requests against a backend: bounded concurrency, retries with backoff, local-engine batching.

The runner knows nothing about tasks or files: it pulls `Request`s lazily from an iterable or an
async iterable (so only the requests in flight, and any built ahead, hold image bytes) and yields
one `Outcome` per request as it completes.
A request that still fails after its retries is an Outcome with an `error`, never dropped.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any

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
    """Bounded exponential backoff with jitter; a server's Retry-After wins (capped at max_delay)."""

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    request_timeout: float | None = None  # a safety net above the backend's own client timeout

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)  # jitter keeps concurrent retries from syncing up


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
                            on_retry: Callable[[], None] | None = None,
                            reach: Reachability | None = None) -> Outcome:
    """One request to completion: retry retryable errors, fail at once on the others. With `reach`
    (one per run), a run whose requests have all failed to connect for FAIL_FAST_SECONDS stops
    (ServerUnreachable) instead of retrying every item."""
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            call = backend.generate(request)
            response = await (_within(call, policy.request_timeout) if policy.request_timeout else call)
            if not isinstance(response, Response):
                raise BackendError(f"backend returned {type(response).__name__}, not a Response", retryable=False)
            if reach is not None:
                reach.reached = True
            return Outcome(request, response, None, attempt, time.monotonic() - start)
        except TimeoutError:
            error: BackendError = BackendError(f"timed out after {policy.request_timeout:g} s", retryable=True)
        except BackendError as exc:
            error = exc
        except Exception as exc:  # an unexpected backend bug fails this sample, not the whole run
            error = BackendError(error_text(exc), retryable=False)
        if reach is not None:
            if error.status is not None:  # an HTTP answer: a server is there
                reach.reached = True
            reach.failed(error, _host_of(backend))
        if not error.retryable or attempt >= policy.max_attempts:
            return Outcome(request, None, error_text(error), attempt, time.monotonic() - start)
        if on_retry is not None:
            on_retry()
        await asyncio.sleep(policy.delay(attempt, error.retry_after))


BUILD_THREADS = max(2, min(8, os.cpu_count() or 2))


async def built_ahead(jobs: Iterable[Request | Callable[[], Request]], *,
                      threads: int = BUILD_THREADS) -> AsyncIterator[Request]:
    """Requests in order, the ones given as builders built in worker threads, `threads` ahead of need.

    Building a request can mean decoding, shrinking and re-encoding each view (photos above the
    size bound): tens of milliseconds that would stall every request in flight if done on the
    event loop. Pillow releases the GIL while it works, so such builds also run in parallel.
    Requests that were cheap to build (views sent as stored) come ready-made and skip the thread
    hop. At most `threads` requests (and their image bytes) wait ahead of the workers. A
    builder's exception is raised here, in order, and the builds after it are dropped.
    """
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
    if not isinstance(described, dict):
        return None
    return described.get("base_url_host") or described.get("host")


async def _concurrent(backend: Backend, requests: _Source, concurrency: int, policy: RetryPolicy,
                      on_retry: Callable[[], None] | None) -> AsyncGenerator[Outcome, None]:
    results: asyncio.Queue[Any] = asyncio.Queue()
    reach = Reachability()

    async def worker() -> None:
        try:
            # Requests are built as workers pull them, so at most `concurrency` hold image bytes.
            while (request := await requests.next()) is not None:
                results.put_nowait(await call_with_retries(backend, request, policy, on_retry, reach))
        except Exception as exc:  # e.g. an undecodable image while building a request
            results.put_nowait(exc)
        finally:
            results.put_nowait(_DONE)

    async def launch() -> None:
        # One worker per loop iteration: each request goes out as soon as it is built, instead of
        # every worker building its first request before any is sent (a first round 64 builds
        # late, whose answers then all arrive, and queue, at once).
        for _ in range(concurrency):
            workers.append(asyncio.create_task(worker()))
            await asyncio.sleep(0)

    workers: list[asyncio.Task[None]] = []
    launcher = asyncio.create_task(launch())
    try:
        finished = 0
        while finished < concurrency:
            item = await results.get()
            if item is _DONE:
                finished += 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield item
    finally:
        launcher.cancel()
        for task in workers:
            task.cancel()
        await asyncio.gather(launcher, *workers, return_exceptions=True)


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


async def execute(backend: Backend, requests: Iterable[Request] | AsyncIterable[Request], *, concurrency: int = RunSettings.concurrency,
                  batch_size: int = 8, policy: RetryPolicy | None = None,
                  on_retry: Callable[[], None] | None = None) -> AsyncGenerator[Outcome, None]:
    """Yield one Outcome per request, in completion order.

    Backends with `generate_batch` (local engines) get chunks of `batch_size`; the others get
    up to `concurrency` concurrent `generate` calls.
    """
    policy = policy or RetryPolicy()
    source = _Source(requests)
    if hasattr(backend, "generate_batch"):
        stream = _batched(backend, source, max(1, batch_size), policy, on_retry)
    else:
        stream = _concurrent(backend, source, max(1, concurrency), policy, on_retry)
    try:
        async for outcome in stream:
            yield outcome
    finally:
        await stream.aclose()  # workers first, then the source they pull from
        await source.aclose()
