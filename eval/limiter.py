"""How many requests go to each model endpoint at once: a fixed number (`--concurrency N`) or a limit
learnt while the run goes (`--concurrency auto`), paced by what the server says of its rate limit."""

from __future__ import annotations

import asyncio
import math
import re
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# The setting's values are declared with the settings; the limiter's users find them here too.
from eval.backends._retry import MAX_SERVER_WAIT, finite_seconds, warn_once
from eval.settings import AUTO as AUTO
from eval.settings import MAX_CONCURRENCY as MAX_CONCURRENCY
from eval.settings import concurrency_value as concurrency_value

START = 8  # the fixed default of old: auto begins where it did, so it is never slower at the start
NEAR = 1.25  # a round's median latency up to this many times the floor: no queue yet
TOLERANCE = 2.0  # a round's median latency past this many times the floor, with 503s, is overload
# The limit past the first queue: this many times what the server runs at once. Under 2, so a server that
# queues holds at most twice its slots; well over 1, so the queue in it never runs dry between answers
# and a server that slows with its batch (whose reading is low) is still filled.
GAIN = 1.8
BACKOFF = 0.7  # the limit after a refusal
OVERLOAD_SHARE = 0.5  # 503s without Retry-After cut the limit only above this share of a round (or with slow answers)
RESERVE = 1.0  # requests (or their tokens) kept unspent in a mirrored rate-limit bucket
PROBE_SPREAD = 1.5  # the first round's floor is at most this many times the first answer's latency
# The first request goes alone at most this long: a server that has not answered it by then (a model that
# thinks for a minute, a server that stalls) gets the old default's START at once, as if it showed no budget.
PROBE_WAIT_S = 5.0
COST_SAMPLES = 15  # a request's token cost is the median of this many readings of the headers
TRACE_POINTS = 400  # a limiter's trace keeps at most this many points (halved by dropping every other)

# What a finished attempt says about the endpoint's capacity.
OK, REFUSED, OVERLOADED, TIMEOUT, FAILED = "ok", "refused", "overloaded", "timeout", "failed"


def threads_for(concurrency: int | str, max_concurrency: int = MAX_CONCURRENCY) -> int:
    """Worker threads for code that calls a sync judge: N, or the cap under `auto` (the judge's own
    limiter decides how many of them have a request out)."""
    return max_concurrency if concurrency == AUTO else max(1, int(concurrency))


# ------------------------------------------------------------------ what a server says of its limit

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str | None) -> float | None:
    """OpenAI's reset times ("1s", "6m0s", "12ms", "1h2m3.5s") or plain seconds, in seconds; None
    for anything else (a negative, NaN or infinite number too).

    >>> [parse_duration(t) for t in ("12ms", "6m0s", "1.5s", "0.25", "1h2m3s", "soon", "-3", "inf")]
    [0.012, 360.0, 1.5, 0.25, 3723.0, None, None, None]
    """
    if text is None:
        return None
    text = str(text).strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            return None
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(n) * scale[u] for n, u in parts)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


@dataclass(frozen=True)
class Budget:
    """One rate limit as an answer's headers gave it: the limit, what is left, seconds until it is full again."""

    limit: float
    remaining: float
    reset_s: float | None

    @property
    def rate(self) -> float:
        """Refill per second. The limit is per minute (OpenAI's RPM and TPM); what was spent over the
        time to refill it says more when it is lower (a provider that counts a shorter window, or a day).

        >>> Budget(1200, 0, 1.0).rate, Budget(1200, 1100, 5.0).rate, Budget(1200, 1200, 0.0).rate
        (20.0, 20.0, 20.0)
        """
        per_minute = self.limit / 60.0
        spent = self.limit - self.remaining
        if self.reset_s and spent > 0:
            return min(per_minute, spent / self.reset_s)
        return per_minute


@dataclass(frozen=True)
class Pacing:
    """What one answer said about the endpoint's limits (any of it may be missing)."""

    retry_after: float | None = None
    requests: Budget | None = None
    tokens: Budget | None = None


def _number(headers: Any, name: str) -> float | None:
    """A rate-limit count: a finite number >= 0, else None (with a warning when one was sent)."""
    try:
        value = headers.get(name)
    except (TypeError, ValueError, AttributeError):
        return None
    return None if value is None else finite_seconds(value, name, unit="a count")


def _reset(headers: Any, name: str) -> float | None:
    """A reset time; None (the bucket then refills at its per-minute rate) when unreadable or longer than
    MAX_SERVER_WAIT, which no per-minute limit needs, with a warning."""
    try:
        value = headers.get(name)
    except (TypeError, ValueError, AttributeError):
        return None
    if value is None:
        return None
    seconds = parse_duration(value)
    if seconds is None or seconds > MAX_SERVER_WAIT:
        warn_once(f"ignored the server's {name} header {str(value)[:40]!r}: "
                  + ("not a duration" if seconds is None else f"longer than {MAX_SERVER_WAIT:g} s"))
        return None
    return seconds


def pacing_from_headers(headers: Mapping[str, str] | Any | None, retry_after: float | None = None) -> Pacing | None:
    """The `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` headers OpenAI-compatible providers
    send with every answer, and a Retry-After already read; None when there is none of it. A budget
    whose limit is not a positive number is ignored."""
    if headers is None and retry_after is None:
        return None
    budgets: dict[str, Budget | None] = {}
    for kind in ("requests", "tokens"):
        limit = _number(headers, f"x-ratelimit-limit-{kind}") if headers is not None else None
        remaining = _number(headers, f"x-ratelimit-remaining-{kind}") if headers is not None else None
        reset = _reset(headers, f"x-ratelimit-reset-{kind}") if headers is not None else None
        budgets[kind] = Budget(limit, remaining, reset) if limit and remaining is not None else None
    if retry_after is None and budgets["requests"] is None and budgets["tokens"] is None:
        return None
    return Pacing(retry_after, budgets["requests"], budgets["tokens"])


class _Bucket:
    """A client-side mirror of one of the server's token buckets. Its capacity is what the server has
    shown it holds (a provider may allow a second's worth at once, or less, not the minute's limit):
    a mirror that assumed more would send bursts the server refuses."""

    __slots__ = ("at", "capacity", "level", "peak", "rate")

    def __init__(self, budget: Budget, level: float, now: float) -> None:
        self.peak = budget.remaining
        self.update(budget, level, now)

    def update(self, budget: Budget, level: float, now: float) -> None:
        self.rate, self.at, self.peak = max(budget.rate, 1e-6), now, max(self.peak, budget.remaining)
        self.capacity = min(budget.limit, max(self.peak + 1, 1 + RESERVE))
        self.level = min(level, self.capacity)

    def refill(self, now: float) -> float:
        self.level = min(self.capacity, self.level + self.rate * (now - self.at))
        self.at = now
        return self.level

    def wait_for(self, cost: float, now: float) -> float:
        """Seconds until `cost` can be spent and RESERVE x cost kept. A cost the bucket cannot hold
        with its reserve (a tight budget: 16k tokens an answer under a 30k limit) waits for a full
        bucket instead, so it is still sent."""
        need = min(cost + RESERVE * cost, self.capacity)
        level = self.refill(now)
        return 0.0 if level >= need else (need - level) / self.rate

    def tight(self, cost: float) -> bool:
        return cost + RESERVE * cost > self.capacity


@dataclass
class Slot:
    """One request's hold on an endpoint, from acquire to `Limiter.done`."""

    started: float
    seq: int  # how many requests this endpoint had sent before it
    crowd: int = 1  # requests in flight to the endpoint once it was sent, itself included
    probe: bool = False  # the first request, sent alone


# ------------------------------------------------------------------ one endpoint


class Limiter:
    """The slots and pace of one endpoint. `fixed` N keeps N; None learns the limit (up to `cap`). Learning:
    one request goes alone first (its answer says whether the server meters a budget, before a burst could
    overdraw it; PROBE_WAIT_S at most), then START (four times that when no budget was shown). Each round
    (about `limit` answers) it doubles while every slot is busy and the median latency stays within NEAR x the
    lowest round median seen; past that it steers to GAIN x what the server runs at once (`_capacity`). It
    comes down by BACKOFF on a 429, a 503 that comes with load or Retry-After, or a timeout, once per round.
    Whatever the mode, a Retry-After pauses the endpoint (up to MAX_SERVER_WAIT) and the `x-ratelimit-*`
    headers are mirrored in a token bucket, so requests are spaced to what is left."""

    def __init__(self, endpoint: str, *, fixed: int | None = None, cap: int = MAX_CONCURRENCY,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint = endpoint
        self.adaptive = fixed is None
        self.cap = max(1, fixed if fixed is not None else cap)
        self.limit = float(self.cap if fixed is not None else min(START, self.cap))
        self.clock = clock
        self.in_flight = self.sent = self.answered = 0
        self.refusals = self.timeouts = 0  # refusals: 429s and 503s
        self.floor: float | None = None  # the lowest round median latency seen
        self._floor_crowd = 0.0  # the median in flight of the round that measured the floor
        self._probing = self.adaptive  # the first request goes alone (PROBE_WAIT_S at most)
        self._probe_sent = 0.0
        self._probe_latency: float | None = None
        self._gate = asyncio.Lock()  # FIFO: one acquirer at a time waits for room and pace
        self._room: asyncio.Future[None] | None = None
        self._not_before = 0.0
        self._buckets: dict[str, _Bucket] = {}
        self._tokens_per_request: float | None = None  # the answers' usage
        self._token_costs: deque[float] = deque(maxlen=COST_SAMPLES)  # what the headers show a request took
        self._last_tokens: tuple[int, float, float] | None = None  # (seq, sent, remaining) of the latest answer
        self._refused_seqs: set[int] = set()  # refused requests: the server took nothing for them
        self._tight: set[str] = set()  # the budgets already said to be tight
        self._slow_start = True
        self._round: list[tuple[float, int]] = []  # (latency, in flight once sent) of the round's answers
        self._round_size = self._round_overloaded = 0
        self._round_cut = self._waited = False
        self._start = clock()
        self.trace: list[tuple[float, int, int, float | None, int]] = []  # (t, limit, in flight, latency, refusals)

    @property
    def slots(self) -> int:
        return 1 if self._probing else max(1, int(self.limit))

    async def acquire(self) -> Slot:
        """Wait for a free slot and for the endpoint's pace (Retry-After, mirrored rate limits); take the slot."""
        async with self._gate:
            paced = 0.0  # seconds this acquire has waited for pace: never more than MAX_SERVER_WAIT
            while True:
                if self.in_flight >= self.slots:
                    self._waited = True
                    self._room = asyncio.get_running_loop().create_future()
                    if not self._probing:
                        await self._room
                        continue
                    left = PROBE_WAIT_S - (self.clock() - self._probe_sent)
                    try:
                        await asyncio.wait_for(self._room, timeout=max(0.0, left))
                    except TimeoutError:
                        self._stop_probing()
                    continue
                delay = min(self._delay(self.clock()), MAX_SERVER_WAIT - paced)
                if delay > 0:
                    await asyncio.sleep(delay)
                    paced += delay
                    continue
                break
            now = self.clock()
            self.in_flight += 1
            for kind, bucket in self._buckets.items():
                bucket.refill(now)
                bucket.level -= self._cost(kind)
            self.sent += 1
            if self._probing:
                self._probe_sent = now
            return Slot(now, self.sent - 1, self.in_flight, self._probing)

    def _stop_probing(self) -> None:
        """The first request took longer than PROBE_WAIT_S: the rest go out as the old default did (START,
        then slow start); its answer, when it comes, is read as any other."""
        if self._probing:
            self._probing = False
            self._new_round()

    def _cost(self, kind: str) -> float:
        if kind == "requests":
            return 1.0
        if self._token_costs:
            return statistics.median(self._token_costs)
        return self._tokens_per_request or 0.0

    def _delay(self, now: float) -> float:
        delay = self._not_before - now
        for kind, bucket in self._buckets.items():
            cost = self._cost(kind)
            if cost > 0:
                if kind not in self._tight and bucket.tight(cost):
                    self._tight.add(kind)
                    warn_once(f"{self.endpoint}: the server's {kind} budget ({bucket.capacity:.0f} at once) is tight "
                              f"for a request of about {cost:.0f}: each waits for a full budget")
                delay = max(delay, bucket.wait_for(cost, now))
        return delay

    def done(self, slot: Slot, kind: str, *, latency: float | None = None, pacing: Pacing | None = None,
             tokens: int | None = None) -> None:
        """Give the slot back, with what the attempt said: OK, REFUSED (429, or a 503 with Retry-After),
        OVERLOADED (a 503 without), TIMEOUT or FAILED (says nothing of capacity)."""
        now = self.clock()
        self.in_flight -= 1
        if kind == REFUSED:
            self._refused_seqs.add(slot.seq)
        if pacing is not None:
            self._learn(pacing, slot, now, counted=kind == OK)
        if tokens and kind == OK:
            self._tokens_per_request = tokens if self._tokens_per_request is None else \
                0.9 * self._tokens_per_request + 0.1 * tokens
        self.answered += kind == OK
        self.refusals += kind in (REFUSED, OVERLOADED)
        self.timeouts += kind == TIMEOUT
        if slot.probe and self._probing:
            self._end_probe(kind, latency, now)
        else:
            self._observe(kind, latency, slot.crowd, now)
        if self._room is not None and not self._room.done() and self.in_flight < self.slots:
            self._room.set_result(None)

    def cancel(self, slot: Slot) -> None:
        """Give back a slot that sent nothing (no request was left, or the run stopped)."""
        self.in_flight -= 1
        self.sent -= 1
        if self._room is not None and not self._room.done() and self.in_flight < self.slots:
            self._room.set_result(None)

    def _end_probe(self, kind: str, latency: float | None, now: float) -> None:
        """The first answer: a budget the server meters (headers) is then paced from the start; a server
        that shows none gets four times the old default at once, where slow start would have been had it
        sent eight at first and doubled twice (the probe's round trip is made up by the next one). The
        first round's floor is read from its first START answers (see _close_round), so a burst larger
        than the server runs at once does not pass its queue off as the floor."""
        self._probing = False
        # Its latency, the only one with nothing else in flight, bounds the floor: the first round may
        # already queue in a small server. One answer is one draw of the server's spread, so with room
        # (PROBE_SPREAD): a lucky one taken as the floor would read every later round as queued.
        if kind == OK and latency is not None:
            self._probe_latency = latency
        if kind == OK and not self._buckets:
            self.limit = float(min(self.cap, 4 * START))
        self._record(now, latency)
        self._new_round()

    def _learn(self, pacing: Pacing, slot: Slot, now: float, *, counted: bool = True) -> None:
        # A longer wait pauses nothing: the runner fails the attempt that carried it, naming the header.
        if pacing.retry_after is not None and pacing.retry_after <= MAX_SERVER_WAIT:
            self._not_before = max(self._not_before, now + pacing.retry_after)
        for kind in ("requests", "tokens"):
            budget: Budget | None = getattr(pacing, kind)
            if budget is None:
                continue
            # What was left when the server counted this request, less what was sent since, plus what
            # refilled since: the same estimate whether the server counts at arrival or at answer.
            sent_since = (self.sent - slot.seq - 1) * self._cost(kind)
            level = budget.remaining - sent_since + budget.rate * (now - slot.started)
            bucket = self._buckets.get(kind)
            if kind == "tokens" and counted:
                self._learn_token_cost(budget, slot, bucket)
            if bucket is None:
                self._buckets[kind] = _Bucket(budget, level, now)
            else:
                bucket.update(budget, level, now)

    def _learn_token_cost(self, budget: Budget, slot: Slot, bucket: _Bucket | None) -> None:
        """What one request takes from the tokens budget, from what the server says is left: the first
        request, sent alone, took what the bucket misses (the time to refill it at its rate); later, what
        went between two answers, plus what refilled, over the requests counted in between."""
        last = self._last_tokens
        if slot.probe and budget.reset_s is not None:
            self._token_costs.append(budget.reset_s * budget.rate)
        elif last is not None and last[0] < slot.seq and bucket is not None:
            seq, sent, remaining = last
            counted = slot.seq - seq - sum(1 for s in self._refused_seqs if seq < s <= slot.seq)
            refilled = remaining + budget.rate * max(0.0, slot.started - sent)
            if counted > 0 and refilled < bucket.capacity:  # a full bucket refills nothing: no reading
                self._token_costs.append(max(0.0, refilled - budget.remaining) / counted)
        if last is None or slot.seq > last[0]:
            self._last_tokens = (slot.seq, slot.started, budget.remaining)
            self._refused_seqs = {s for s in self._refused_seqs if s > slot.seq}

    def _observe(self, kind: str, latency: float | None, crowd: int, now: float) -> None:
        """Rounds of about `limit` answers: the latency floor and the trace always; the limit under auto."""
        self._round_size += 1
        if kind == OK and latency is not None:
            self._round.append((latency, crowd))
        elif kind == OVERLOADED:
            self._round_overloaded += 1
        if kind in (REFUSED, TIMEOUT) and not self._round_cut:
            self._cut(now, latency)
            return
        if self._round_size >= max(START, self.slots):
            self._close_round(now)

    def _cut(self, now: float, latency: float | None) -> None:
        if self.adaptive:
            self.limit = max(1.0, self.limit * BACKOFF)
        self._slow_start = False
        self._record(now, latency)
        self._new_round(cut=True)  # the rest of this burst, answered under the old limit, is the same signal

    def _close_round(self, now: float) -> None:
        median = statistics.median(lat for lat, _ in self._round) if self._round else None
        crowd = statistics.median(n for _, n in self._round) if self._round else 0.0
        floor = median
        if floor is not None and self.floor is None:
            # The first round went out at once: its first START (sent with at most START in flight) queued
            # in no server that runs START or more at once, whatever the rest of the burst met; the probe's
            # answer bounds the floor too.
            alone = [latency for latency, n in self._round if n <= START]
            if alone and statistics.median(alone) < floor:
                floor, crowd = statistics.median(alone), min(crowd, START)
            if self._probe_latency is not None and PROBE_SPREAD * self._probe_latency < floor:
                floor, crowd = PROBE_SPREAD * self._probe_latency, 1.0
        if floor is not None and (self.floor is None or floor < self.floor or crowd <= self._floor_crowd):
            # With no more in flight than when the floor was measured, a slower answer is the server's own
            # pace, not a queue of ours: the floor follows it (it never creeps up otherwise: a floor that
            # rose while the server queued would read the queue as capacity, and the limit would climb).
            self.floor, self._floor_crowd = floor, crowd
        ratio = median / self.floor if median is not None and self.floor else 1.0
        slow = ratio > TOLERANCE
        # A few 503s in a small round are chance on a flaky server; a majority of a round of 16 or more is load.
        share = OVERLOAD_SHARE if self._round_size >= 2 * START else 0.75
        overloaded = self._round_overloaded > share * self._round_size or (slow and self._round_overloaded > 0)
        if not self.adaptive:
            pass
        elif overloaded:
            self.limit = max(1.0, self.limit * BACKOFF)
            self._slow_start = False
        elif ratio > NEAR:
            # A queue has begun: slow start ends here, and the limit goes to GAIN x what the server runs
            # at once (each answer's crowd x floor / latency), by at most half down or a quarter up a round.
            self._slow_start = False
            target = GAIN * self._capacity()
            if target < self.limit:
                self.limit = max(1.0, self.limit * 0.5, target)
            elif self._waited:
                self.limit = min(float(self.cap), self.limit * 1.25, target)
        elif self._waited:  # every slot was busy and latency is at its floor: more may help
            self.limit = min(float(self.cap), self.limit * (2 if self._slow_start else 1.25))
        self._record(now, median)
        self._new_round()

    def _capacity(self) -> float:
        """How many requests the server runs at once, by Little's law over the round's answers (in flight x
        floor / latency): a server that runs S at once and queues the rest answers n requests in n/S floors,
        so this reads S however long the queue; a server that only slows with load reads n.

        >>> limiter = Limiter("h:1"); limiter.floor = 0.2
        >>> limiter._round = [(0.2 * 96 / 48, 96), (0.2 * 100 / 48, 100), (0.2 * 90 / 48, 90)]
        >>> round(limiter._capacity(), 6)
        48.0
        """
        floor = self.floor or 0.0
        return statistics.median(crowd * floor / latency if latency > 0 else float(crowd)
                                 for latency, crowd in self._round)

    def _new_round(self, *, cut: bool = False) -> None:
        self._round = []
        self._round_size = self._round_overloaded = 0
        self._round_cut, self._waited = cut, False

    def _record(self, now: float, latency: float | None) -> None:
        self.trace.append((round(now - self._start, 3), self.slots, self.in_flight,
                           None if latency is None else round(latency, 4), self.refusals))
        if len(self.trace) > TRACE_POINTS:
            self.trace = self.trace[::2]

    def settled(self) -> int:
        """The limit it settled on: the median of its last half (the fixed N, or where it started)."""
        if not self.adaptive or not self.trace:
            return self.slots
        end = self.trace[-1][0]
        return int(statistics.median(point[1] for point in self.trace if point[0] >= end / 2))

    def describe(self) -> dict[str, Any]:
        sent = max(self.sent, 1)
        return {"endpoint": self.endpoint, "mode": AUTO if self.adaptive else "fixed", "cap": self.cap,
                "settled": self.settled(), "limit": self.slots, "sent": self.sent, "refusals": self.refusals,
                "refused_share": round(self.refusals / sent, 4), "timeouts": self.timeouts,
                "latency_floor_s": None if self.floor is None else round(self.floor, 4),
                "trace_fields": ["t_s", "limit", "in_flight", "latency_s", "refusals"],
                "trace": [list(point) for point in self.trace]}


# ------------------------------------------------------------------ a run's endpoints


class Limits:
    """The limiters of one run (or judge, or construction phase), one per endpoint (base URL; replicas each
    their own), made as endpoints are first used."""

    def __init__(self, concurrency: int | str = AUTO, max_concurrency: int = MAX_CONCURRENCY, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        value = concurrency_value(concurrency)
        self.adaptive = value == AUTO
        self.fixed = None if self.adaptive else max(1, int(value))
        self.max_concurrency = max(1, max_concurrency)
        self.clock = clock
        self.limiters: dict[str, Limiter] = {}
        self.served: set[str] = set()  # endpoints that are a server (a name): what a run reports

    @classmethod
    def of(cls, settings: Any) -> Limits:
        """The limiters a run's settings ask for: the one place `--concurrency` and `--max-concurrency` are
        read (a run's RunSettings, a construction phase, a judge's settings)."""
        return cls(settings.concurrency, settings.max_concurrency)

    def endpoint(self, name: str | None) -> Limiter:
        key = name or "default"
        if name:
            self.served.add(key)
        if key not in self.limiters:
            self.limiters[key] = Limiter(key, fixed=self.fixed, cap=self.max_concurrency, clock=self.clock)
        return self.limiters[key]

    @property
    def in_flight(self) -> int:
        return sum(limiter.in_flight for limiter in self.limiters.values())

    @property
    def limit(self) -> int:
        return sum(limiter.slots for limiter in self.limiters.values())

    def describe(self) -> dict[str, Any] | None:
        """run.json's `concurrency`: the mode, the cap, and per server endpoint what it settled on and its
        trace; None when no request went to a server (a no-skill baseline, a local engine)."""
        if not self.served:
            return None
        return {"mode": AUTO if self.adaptive else "fixed",
                "max_concurrency": self.max_concurrency if self.adaptive else self.fixed,
                "endpoints": [limiter.describe() for key, limiter in self.limiters.items() if key in self.served]}


def settled_line(endpoint: Mapping[str, Any]) -> str:
    """One endpoint's line for a report: `settled at 44 in flight; 3 refusals, 0.3%`.

    >>> settled_line({"endpoint": "h:1", "mode": "auto", "settled": 44, "refusals": 3, "sent": 1000, "refused_share": 0.003})
    'h:1: settled at 44 in flight; 3 refusals, 0.3% (auto)'
    """
    share = float(endpoint.get("refused_share") or 0.0)
    how = "settled at" if endpoint.get("mode") == AUTO else "fixed at"
    return (f"{endpoint.get('endpoint')}: {how} {endpoint.get('settled')} in flight; {endpoint.get('refusals', 0)} "
            f"refusals, {share:.1%} ({endpoint.get('mode')})")
