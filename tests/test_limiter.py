"""Adaptive concurrency (`--concurrency auto`, the default) and back-pressure: the limit grows while the
server keeps up and comes down on refusals, a refused request waits (with jitter, at least what the
server asked) without holding a slot, rate-limit headers pace the requests, and no item is lost to
back-pressure at the default or at any fixed --concurrency N, on servers that push back the way
real ones do (`bench.load_servers`: vLLM-like, rate-limited, flaky). Assertions are on behaviour,
never on wall time (the bench measures that); whole runs against a queueing server and rate-limited
APIs go on a simulated clock, so their figures (settled limit, 429 share, simulated wall) are exact."""

from __future__ import annotations

import asyncio
import heapq
import json
import math
from pathlib import Path

import pytest

from bench.load_servers import ServerSpec, ThreadServer
from eval import api
from eval.backends import make_backend
from eval.backends import release as release_backend
from eval.limiter import (
    OK,
    OVERLOADED,
    REFUSED,
    START,
    Budget,
    Limiter,
    Limits,
    Pacing,
    pacing_from_headers,
    parse_duration,
)
from eval.runner import RetryPolicy, execute
from eval.settings import RunSettings
from eval.types import BackendError, GenerationConfig, Message, Request, Response
from tests.helpers_backends import opts
from tests.helpers_harness import make_release


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def request(i: int | str) -> Request:
    return Request(id=str(i), task="classification", messages=(Message("user", (f"question {i}",)),),
                   config=GenerationConfig(max_tokens=16), request_hash=f"h{i}")


async def fill(limiter: Limiter, n: int) -> list:
    return [await limiter.acquire() for _ in range(n)]


async def probed(limiter: Limiter, latency: float = 0.1, pacing: Pacing | None = None) -> Limiter:
    """The first request, sent alone, answered."""
    [slot] = await fill(limiter, 1)
    limiter.done(slot, OK, latency=latency, pacing=pacing)
    return limiter


def test_openai_rate_limit_headers_are_read():
    headers = {"x-ratelimit-limit-requests": "1200", "x-ratelimit-remaining-requests": "0",
               "x-ratelimit-reset-requests": "1s", "x-ratelimit-limit-tokens": "2000000",
               "x-ratelimit-remaining-tokens": "1999880", "x-ratelimit-reset-tokens": "3ms"}
    pacing = pacing_from_headers(headers, 0.048)
    assert pacing is not None and pacing.retry_after == 0.048
    assert pacing.requests == Budget(1200, 0, 1.0) and pacing.requests.rate == 20.0
    assert pacing.tokens is not None and pacing.tokens.remaining == 1999880
    assert pacing_from_headers({}) is None
    assert parse_duration("6m0s") == 360.0 and parse_duration("12ms") == 0.012


async def test_the_first_request_goes_alone_and_what_its_answer_shows_sets_the_start():
    clock = Clock()
    limiter = Limiter("h:1", clock=clock)
    assert limiter.slots == 1  # nothing is known of the server yet
    await probed(limiter)
    assert limiter.slots == 4 * START  # no budget shown: where doubling from the old default would be by now
    metered = Limiter("h:1", clock=clock)
    await probed(metered, pacing=Pacing(requests=Budget(300, 4, 0.2)))  # 5 at once, 1 taken
    assert metered.slots == START
    # 4 left, one kept spare: three go now, the fourth waits for a refill (5 a second).
    for _ in range(3):
        assert metered._delay(clock.now) == 0.0
        await metered.acquire()
    assert metered._delay(clock.now) == pytest.approx(0.2)
    assert Limiter("h:1", fixed=16, clock=clock).slots == 16  # a fixed N sends N from the start


async def test_a_first_request_that_does_not_answer_holds_the_rest_back_only_for_a_moment(monkeypatch):
    """A model that thinks for minutes, or a server that stalls: after PROBE_WAIT_S the rest go out as the
    old default sent them (START at once), and the first answer, when it comes, is read as any other."""
    import eval.limiter as limiter_module

    monkeypatch.setattr(limiter_module, "PROBE_WAIT_S", 0.05)
    clock = Clock()
    limiter = Limiter("h:1", clock=clock)
    [first] = await fill(limiter, 1)
    rest = await asyncio.wait_for(fill(limiter, START - 1), timeout=5)  # held 0.05 s, not until an answer
    assert limiter.slots == START and limiter.in_flight == START and len(rest) == START - 1
    limiter.done(first, OK, latency=0.1)
    assert limiter.slots == START  # read as an answer of the first round, not as the probe's


async def test_auto_doubles_while_every_slot_is_busy_and_latency_stays_at_its_floor():
    clock = Clock()
    limiter = await probed(Limiter("h:1", clock=clock))
    assert limiter.slots == 4 * START
    for _ in range(3):  # three rounds, each answered at the same latency with every slot taken
        slots = await fill(limiter, limiter.slots)
        limiter._waited = True  # the dispatcher found no room
        clock.now += 0.1
        for slot in slots:
            limiter.done(slot, OK, latency=0.1)
    assert limiter.slots == 4 * START * 8


async def test_a_queueing_server_stops_the_growth_before_it_refuses():
    clock = Clock()
    limiter = await probed(Limiter("h:1", clock=clock))
    slots = await fill(limiter, limiter.slots)
    limiter._waited = True
    for slot in slots:
        limiter.done(slot, OK, latency=0.1)  # the floor
    grown = limiter.slots
    slots = await fill(limiter, limiter.slots)
    limiter._waited = True
    for slot in slots:
        limiter.done(slot, OK, latency=0.5)  # five times the floor: requests wait in the server's queue
    assert limiter.slots < grown


async def test_a_429_cuts_the_limit_once_per_round_and_a_fixed_limit_never_moves():
    limiter = await probed(Limiter("h:1", clock=Clock()))
    limiter.limit = 40.0
    slots = await fill(limiter, 10)
    for slot in slots:  # a burst of refusals from one round is one signal
        limiter.done(slot, REFUSED, latency=0.01)
    assert limiter.slots == 28 and limiter.refusals == 10
    fixed = Limiter("h:1", fixed=16, clock=Clock())
    for slot in await fill(fixed, 10):
        fixed.done(slot, REFUSED)
    assert fixed.slots == 16


async def test_a_share_of_503s_from_a_flaky_server_does_not_shrink_the_limit():
    limiter = await probed(Limiter("h:1", clock=Clock()))
    limiter.limit = 32.0
    slots = await fill(limiter, 32)
    limiter._waited = True
    for n, slot in enumerate(slots):  # one in four refused, latency at the floor
        limiter.done(slot, OVERLOADED if n % 4 == 0 else OK, latency=0.1)
    assert limiter.slots >= 32


async def test_retry_after_pauses_the_endpoint_and_the_rate_limit_paces_it():
    clock = Clock()
    limiter = Limiter("h:1", clock=clock)
    [slot] = await fill(limiter, 1)
    limiter.done(slot, REFUSED, pacing=Pacing(retry_after=2.5))
    assert limiter._delay(clock.now) == pytest.approx(2.5)
    clock.now += 2.5
    [slot] = await fill(limiter, 1)
    # The server had nothing left; it refills 20 a second: the next goes when 2 are back (one kept spare).
    limiter.done(slot, OK, latency=0.0, pacing=Pacing(requests=Budget(1200, 0, 1.0)))
    assert limiter._delay(clock.now) == pytest.approx(2 / 20)
    clock.now += 1.0
    assert limiter._delay(clock.now) == 0.0


class RefuseFirst:
    """Refuses request "a" once (429, Retry-After 0.2 s), answers everything else at once; records sends."""

    spec = "test:refuse-first"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def generate(self, req: Request) -> Response:
        self.sent.append(req.id)
        if req.id == "a" and self.sent.count("a") == 1:
            raise BackendError("HTTP 429: slow down", retryable=True, status=429, retry_after=0.2)
        await asyncio.sleep(0.01)
        return Response(text="A")

    def describe(self) -> dict:
        return {"backend": "test"}


async def test_a_refused_request_gives_its_slot_back_while_it_waits():
    backend = RefuseFirst()
    outcomes = [o async for o in execute(backend, [request("a"), request("b"), request("c")], concurrency=1,
                                         policy=RetryPolicy(base_delay=0.05))]
    assert sorted(o.request.id for o in outcomes) == ["a", "b", "c"] and all(o.error is None for o in outcomes)
    # One slot: "b" and "c" could only go out while "a" waited out its Retry-After without its slot.
    assert backend.sent == ["a", "b", "c", "a"]
    assert {o.request.id: o.attempts for o in outcomes}["a"] == 2


async def ask_all(server: ThreadServer, n: int, concurrency: int | str = "auto") -> tuple[list, Limits]:
    backend = make_backend("openai:bench-vlm", opts(base_url=server.base_url, timeout=10.0))
    limits = Limits(concurrency)
    try:
        outcomes = [o async for o in execute(backend, [request(i) for i in range(n)], limits=limits,
                                             policy=RetryPolicy(max_attempts=3, base_delay=0.05))]
    finally:
        await release_backend(backend)
    return outcomes, limits


@pytest.mark.parametrize("concurrency", ["auto", 64])
async def test_nothing_is_lost_to_a_rate_limit_at_the_default_or_a_high_fixed_concurrency(concurrency):
    spec = ServerSpec("ratelimited", slots=None, latency=0.02, rpm=2400, burst=0.25)  # 40/s, 10 at once
    with ThreadServer(spec) as server:
        outcomes, limits = await ask_all(server, 60, concurrency)
        stats = server.stats()
    assert len(outcomes) == 60 and all(o.error is None for o in outcomes)
    assert stats["answered"] == 60
    [endpoint] = limits.describe()["endpoints"]
    assert endpoint["refusals"] == stats["refused"]  # the limiter saw every 429 the server sent


async def test_nothing_is_lost_on_a_flaky_server_and_the_503s_are_retried():
    spec = ServerSpec("flaky", slots=16, latency=0.01, error_share=0.3, seed=3)
    with ThreadServer(spec) as server:
        outcomes, limits = await ask_all(server, 80)
        stats = server.stats()
    assert all(o.error is None for o in outcomes) and len(outcomes) == 80
    assert stats["refused"] > 0 and stats["answered"] == 80


async def test_auto_fills_a_vllm_like_server_past_the_old_default():
    spec = ServerSpec("vllm", slots=32, latency=0.05, slope=0.2)
    with ThreadServer(spec) as server:
        outcomes, limits = await ask_all(server, 200)
        stats = server.stats()
    assert all(o.error is None for o in outcomes)
    assert stats["max_running"] > START  # more than the fixed 8 of old were in the server at once
    assert limits.describe()["endpoints"][0]["trace"]


def test_a_default_run_records_the_trace_and_the_report_says_where_it_settled(release, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    spec = ServerSpec("ratelimited", slots=None, latency=0.01, rpm=3000, burst=0.2)
    with ThreadServer(spec) as server:
        settings = RunSettings(task="classification", model="openai:bench-vlm", base_url=server.base_url,
                               dataset=str(release), out=tmp_path / "run", max_tokens=64, n_boot=50)
        assert settings.concurrency == "auto"
        out = api.run(settings, progress=False)
    info = json.loads((out / "run.json").read_text())
    [endpoint] = info["concurrency"]["endpoints"]
    assert info["concurrency"]["mode"] == "auto" and endpoint["trace_fields"][1] == "limit"
    assert "settled at" in (out / "report.md").read_text()
    assert "concurrency" not in info["identity"]  # a run resumed at another concurrency is the same run


# ------------------------------------------------------------------ whole runs on a simulated clock


async def simulate(limiter: Limiter, clock: Clock, n: int, arrive) -> dict:
    """Send n requests through `limiter` as the runner does (a refused one is sent again), against a server
    whose `arrive(now)` gives (finish time, status, pacing) for a request arriving now; time is simulated."""
    answers: list = []  # heap of (finish, order, slot, status, pacing)
    left, order, requests, refused, finished = n, 0, 0, 0, 0.0
    while left or answers:
        if left and limiter.in_flight < limiter.slots and limiter._delay(clock.now) <= 0:
            slot = await limiter.acquire()
            finish, status, pacing = arrive(clock.now)
            heapq.heappush(answers, (finish, order, slot, status, pacing))
            order, left, requests = order + 1, left - 1, requests + 1
            continue
        if left and limiter.in_flight >= limiter.slots:
            limiter._waited = True  # the dispatcher found no room
        wake = answers[0][0] if answers else math.inf
        if left and limiter.in_flight < limiter.slots:
            wake = min(wake, clock.now + max(limiter._delay(clock.now), 1e-6))  # past float rounding
        clock.now = max(clock.now, wake)
        if answers and answers[0][0] <= clock.now:
            finish, _, slot, status, pacing = heapq.heappop(answers)
            limiter.done(slot, status, latency=finish - slot.started, pacing=pacing, tokens=120)
            if status == REFUSED:
                refused, left = refused + 1, left + 1
            finished = finish
    return {"requests": requests, "refused": refused, "wall": finished - 100.0}


def queueing_server(clock: Clock, slots: int, service: float):
    """Runs `slots` requests at once, each `service` seconds, the rest queued first come, first served."""
    free = [clock.now] * slots

    def arrive(now: float):
        start = max(now, heapq.heappop(free))
        heapq.heappush(free, start + service)
        return start + service, OK, None
    return arrive


@pytest.mark.parametrize(("slots", "n"), [(48, 10_000), (20, 3000), (8, 2000)])
async def test_on_a_queueing_server_auto_settles_within_twice_its_slots_and_keeps_it_full(slots, n):
    clock = Clock()
    limiter = Limiter("h:1", clock=clock)
    result = await simulate(limiter, clock, n, queueing_server(clock, slots, 0.2))
    settled = limiter.describe()["settled"]
    # A floor that crept up 1% a round read the server's queue as capacity: 104 here, 256 on longer runs.
    assert slots < settled <= 2 * slots
    best = n / slots * 0.2  # the server's slots always busy
    assert result["wall"] <= 1.1 * best and result["refused"] == 0


def rate_limited_api(clock: Clock, rpm: float, tpm: float, burst: float, charge: float):
    """OpenAI's way: a requests and a tokens bucket (`burst` seconds of each), a request charged `charge`
    tokens when it arrives (prompt and max_tokens, more than the usage it reports), 0.3 s answers, the
    headers on every answer and a 429 with Retry-After when either bucket is short."""
    limits = {"requests": rpm, "tokens": tpm}
    caps = {kind: limit / 60 * burst for kind, limit in limits.items()}
    buckets = {kind: [cap, limits[kind] / 60] for kind, cap in caps.items()}  # [level, refill a second]
    at = [clock.now]

    def headers() -> Pacing:
        budgets = {kind: Budget(limits[kind], math.floor(level), (caps[kind] - level) / rate)
                   for kind, (level, rate) in buckets.items()}
        return Pacing(requests=budgets["requests"], tokens=budgets["tokens"])

    def arrive(now: float):
        for kind, (level, rate) in buckets.items():
            buckets[kind][0] = min(caps[kind], level + rate * (now - at[0]))
        at[0] = now
        if buckets["requests"][0] < 1 or buckets["tokens"][0] < charge:
            wait = max((1 - buckets["requests"][0]) / buckets["requests"][1],
                       (charge - buckets["tokens"][0]) / buckets["tokens"][1], 0.001)
            pacing = headers()
            return now + 0.01, REFUSED, Pacing(wait, pacing.requests, pacing.tokens)
        buckets["requests"][0] -= 1
        buckets["tokens"][0] -= charge
        return now + 0.3, OK, headers()
    return arrive


@pytest.mark.parametrize(("rpm", "tpm", "burst", "charge"), [
    (300, 2_000_000, 1.0, 120),  # 5 requests at once, fewer than the old first burst of 8
    (1200, 120_000, 1.0, 356),  # tokens bind, each counted as 356 where its usage says 120
    (600, 60_000, 60.0, 356),  # a whole minute's budget at once, as OpenAI holds it
])
async def test_on_a_rate_limited_api_at_most_2_percent_are_refused_and_the_limit_is_used(rpm, tpm, burst, charge):
    clock = Clock()
    limiter = Limiter("h:1", clock=clock)
    n = 300
    result = await simulate(limiter, clock, n, rate_limited_api(clock, rpm, tpm, burst, charge))
    assert result["refused"] <= 0.02 * result["requests"]
    rate = min(rpm / 60, tpm / 60 / charge)  # requests a second the limits allow
    ideal = max(0.0, n - rate * burst) / rate + 0.3
    assert result["wall"] <= 1.15 * ideal
