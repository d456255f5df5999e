"""Every wait a server asks for is bounded by the run's own clock, and a refused body costs only its
bound. Each test builds its hostile server (real HTTP on 127.0.0.1) or header and asserts what a user
relies on: no header makes a run sleep longer than MAX_SERVER_WAIT, an odd value is ignored with one
warning line, a tight budget still lets requests go, and nothing keeps a refused body alive."""

from __future__ import annotations

import asyncio
import gc
import types

import pytest

from bench.load_servers import ServerSpec, ThreadServer
from eval.backends import make_backend, release
from eval.backends._retry import MAX_SERVER_WAIT, parse_retry_after, parse_retry_delay, wait_header
from eval.limiter import Budget, Limiter, Pacing, _Bucket, pacing_from_headers
from eval.runner import RetryPolicy, execute
from eval.types import GenerationConfig, Message, Request
from tests.fakes.hostile_openai import HostileServer
from tests.fakes.hostile_waits import WaitingServer
from tests.helpers_backends import opts

QUICK = RetryPolicy(base_delay=0.01, max_delay=0.05, max_attempts=3)
FOREVER_DATE = "Fri, 31 Dec 9999 23:59:59 GMT"


def request(i: int) -> Request:
    return Request(id=str(i), task="classification", messages=(Message("user", (f"question {i}",)),),
                   config=GenerationConfig(max_tokens=16), request_hash=f"h{i}")


async def run(url: str, n: int = 1, policy: RetryPolicy = QUICK, concurrency: int | str = "auto") -> list:
    backend = make_backend("openai:fake-vlm", opts(base_url=url, timeout=10.0, api_key="sk-test-waits"))
    try:
        # The bound is the code's: a hang here (a sleep of days) fails the test instead of the suite.
        return await asyncio.wait_for(_collect(backend, n, policy, concurrency), 60)
    finally:
        await release(backend)


async def _collect(backend, n: int, policy: RetryPolicy, concurrency: int | str) -> list:
    return [o async for o in execute(backend, [request(i) for i in range(n)], concurrency=concurrency, policy=policy)]


@pytest.mark.parametrize(("headers", "named"), [
    ({"Retry-After": "999999999"}, "Retry-After"),
    ({"retry-after-ms": "1e15"}, "retry-after-ms"),
    ({"Retry-After": FOREVER_DATE}, "Retry-After (HTTP date)"),
])
def test_a_wait_of_years_is_read_as_asked_and_names_its_header(headers, named):
    wait = parse_retry_after({k.lower(): v for k, v in headers.items()})
    assert wait is not None and wait > MAX_SERVER_WAIT and wait_header(wait) == named


@pytest.mark.parametrize("headers", [
    {"Retry-After": "999999999"}, {"retry-after-ms": "1e15"}, {"Retry-After": FOREVER_DATE}])
async def test_a_wait_of_years_fails_that_attempt_and_the_retry_is_answered(headers):
    with WaitingServer(headers, refusals=1) as server:
        [outcome] = await run(server.url)
    assert outcome.error is None and outcome.response.text == "Answer: A"
    assert outcome.attempts == 2 and server.received == 2


async def test_a_server_that_always_asks_for_years_fails_the_item_saying_which_header():
    with WaitingServer({"Retry-After": "999999999"}, refusals=None) as server:
        [outcome] = await run(server.url)
    assert outcome.response is None and server.received == QUICK.max_attempts
    assert "asked to wait 1e+09 s in Retry-After" in outcome.error and "not waited" in outcome.error
    assert "HTTP 429" in outcome.error


@pytest.mark.parametrize("value", ["soon", "inf", "-5", "NaN", "1e400"])
async def test_an_unreadable_retry_after_is_ignored_with_one_warning(value, capsys):
    with WaitingServer({"Retry-After": value}, refusals=2) as server:
        [outcome] = await run(server.url)
    assert outcome.error is None and outcome.attempts == 3
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "Retry-After" in warnings[0] and value in warnings[0], warnings


async def test_absurd_rate_limit_headers_are_ignored_and_the_run_goes_on(capsys):
    odd = {"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "-5",
           "x-ratelimit-reset-requests": "99999h", "x-ratelimit-limit-tokens": "-1",
           "x-ratelimit-remaining-tokens": "100", "x-ratelimit-reset-tokens": "1s"}
    with WaitingServer(odd, refusals=1, answered=odd) as server:
        outcomes = await run(server.url, n=6)
    assert all(o.error is None for o in outcomes) and len(outcomes) == 6
    err = capsys.readouterr().err
    assert "x-ratelimit-remaining-requests" in err and "x-ratelimit-reset-requests" in err
    assert pacing_from_headers(odd) is None  # nothing of it paces the endpoint


def test_a_reset_longer_than_the_bound_refills_at_the_per_minute_rate():
    pacing = pacing_from_headers({"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59",
                                  "x-ratelimit-reset-requests": "99999h"})
    assert pacing is not None and pacing.requests == Budget(60, 59, None) and pacing.requests.rate == 1.0


def test_a_budget_smaller_than_twice_a_request_still_lets_it_go_when_full():
    """30k tokens a minute, 29k left, answers of 16k: on a simulated clock the bucket lets each request
    through within a minute, where it used to ask for 32k of a bucket that holds 29k."""
    now = 0.0
    bucket = _Bucket(Budget(30_000, 29_000, None), 29_000, now)
    sent = 0
    for _ in range(5):
        wait = bucket.wait_for(16_000, now)
        assert wait <= MAX_SERVER_WAIT
        now += wait
        assert bucket.wait_for(16_000, now) == 0.0
        bucket.level -= 16_000
        sent += 1
    assert sent == 5 and now < 5 * MAX_SERVER_WAIT


def test_a_spent_budget_waits_for_its_refill_not_for_ever():
    """60 requests a minute, 0 left: the next goes when two are back (one kept spare), not never."""
    bucket = _Bucket(Budget(60, 0, 1.0), 0, 0.0)
    assert bucket.wait_for(1, 0.0) == pytest.approx(2.0)


async def test_a_tight_budget_is_said_once(capsys):
    clock = types.SimpleNamespace(now=100.0)
    limiter = Limiter("h:1", clock=lambda: clock.now)
    slot = await limiter.acquire()
    limiter.done(slot, "ok", latency=0.1, tokens=16_000,
                 pacing=Pacing(None, None, Budget(30_000, 29_000, None)))
    for _ in range(3):
        clock.now += 60  # the bucket is full again: the request goes at once
        assert limiter._delay(clock.now) == 0.0
        limiter.cancel(await limiter.acquire())
    warnings = [line for line in capsys.readouterr().err.splitlines() if "tight" in line]
    assert len(warnings) == 1 and "tokens budget" in warnings[0]


async def test_a_retry_after_over_the_bound_never_pauses_the_endpoint():
    clock = types.SimpleNamespace(now=100.0)
    limiter = Limiter("h:1", clock=lambda: clock.now)
    slot = await limiter.acquire()
    limiter.done(slot, "refused", pacing=Pacing(parse_retry_after({"retry-after": "999999999"})))
    assert limiter._delay(clock.now) <= 0.0
    slot = await limiter.acquire()
    limiter.done(slot, "refused", pacing=Pacing(parse_retry_after({"retry-after": "2"})))
    assert limiter._delay(clock.now) == pytest.approx(2.0)


def test_gemini_retry_info_is_bounded_too():
    wait = parse_retry_delay('"retryDelay": "86400s"')
    assert wait is not None and wait > MAX_SERVER_WAIT and wait_header(wait) == "RetryInfo retryDelay"
    assert RetryPolicy().delay(1, wait) <= 1.5 * MAX_SERVER_WAIT  # even a caller that skips the check


def _bodies_alive() -> int:
    """Lists of body chunks over 1 MiB, and frames of the bounded reader, that something still holds."""
    lists = sum(1 for o in gc.get_objects() if isinstance(o, list) and len(o) > 8
                and all(isinstance(x, bytes) for x in o) and sum(map(len, o)) > 1 << 20)
    frames = sum(1 for o in gc.get_objects() if isinstance(o, types.FrameType) and o.f_code.co_name == "read_bounded")
    return lists + frames


@pytest.mark.parametrize("kind", ["endless", "gzip_bomb"])
async def test_a_refused_body_is_released_as_soon_as_it_is_refused(kind, monkeypatch):
    """Without the collector (a CLI run raises its threshold), nothing keeps a refused body alive:
    not the error, not its traceback, not a cycle through the runner's frame."""
    monkeypatch.setattr("eval.backends.openai_chat.MAX_RESPONSE_BYTES", 2 * 1024 * 1024)
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        if kind == "endless":
            with HostileServer("endless") as server:
                outcomes = await run(server.url, n=4, concurrency=2)
        else:
            with ThreadServer(ServerSpec("gzip_bomb", bomb_mib=64)) as bomb:
                outcomes = await run(bomb.base_url, n=4, concurrency=2)
        alive = _bodies_alive()
    finally:
        if enabled:
            gc.enable()
    assert all(o.response is None and "limit" in o.error for o in outcomes), [o.error for o in outcomes]
    assert alive == 0


async def test_the_space_stops_an_evaluation_at_its_wall_clock_limit_and_frees_its_requests():
    """A server that holds every answer (an allow-listed one that stalls, or asks to wait) cannot hold
    an evaluation's place: at its limit the evaluation ends in one line and its requests are cancelled."""
    from space.diningspace.evaluation import OWN_KEY, EvalRequest, stream_evaluation
    from space.diningspace.guard import GuardError
    from space.diningspace.limits import RequestSlots, within_wall_clock
    from space.diningspace.settings import SpaceSettings

    settings = SpaceSettings(allowed_hosts=("127.0.0.1",), max_items=20, request_concurrency=4)
    with HostileServer("slow", delay=30, fast=1) as server:  # one quick answer, then answers that never come in time
        asked = EvalRequest(task="classification", model=OWN_KEY, n_items=8, own_model="fake-vlm",
                            api_key="sk-visitor-0123456789abcdef", base_url=server.url)
        updates = stream_evaluation(asked, settings, RequestSlots(8))
        seen = []
        with pytest.raises(GuardError, match="limit of 3 s and was stopped"):
            async for update in within_wall_clock(updates, 3.0):
                seen.append(len(update.results))
        await updates.aclose()
        assert await asyncio.to_thread(server.wait_for, lambda s: s.in_flight == 0, 5)
    assert seen[:2] == [0, 1]
