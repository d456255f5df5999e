"""Servers that push back the way real ones do, for the adaptive-concurrency bench and the tests.

OpenAI-compatible chat endpoints (raw asyncio HTTP/1.1, canned answer); `serve` describes each kind.

    python -m bench.load_servers --kind vllm --slots 32 --latency 0.1   # prints "listening http://..."
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import random
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from bench.server import (
    DEFAULT_ANSWER,
    MODELS,
    NOT_FOUND,
    ChildServer,
    completion_bytes,
    http_response,
    read_request,
    serve_until_stopped,
    stats,
)

KINDS = ("vllm", "ratelimited", "flaky", "endless", "gzip_bomb")
TOKENS_PER_REQUEST = 120  # the canned answer's usage: prompt 100 + completion 20
PROMPT_ESTIMATE = 100  # what a "requested" charge counts for the prompt, before the request's max_tokens


@dataclass
class ServerSpec:
    kind: str = "vllm"
    slots: int | None = 32  # sequences at once (None: no limit)
    latency: float = 0.1  # seconds for a sequence alone
    slope: float = 0.5  # how much slower a sequence in a full batch is: latency x (1 + slope x running / slots)
    rpm: float | None = None  # ratelimited: requests per minute
    burst: float = 1.0  # ratelimited: bucket capacity in seconds of the rate
    tpm: float | None = None  # ratelimited: tokens per minute (None: 2,000,000, held a whole minute)
    charge: str = "usage"  # ratelimited: tokens a request costs: "usage" (120) or "requested" (prompt + max_tokens)
    error_share: float = 0.0  # flaky: share of requests answered 503
    seed: int = 0
    bomb_mib: int = 1024  # gzip_bomb: MiB of zeros in the compressed body


def _duration(seconds: float) -> str:
    """OpenAI's reset format: 48ms, 1.2s, 6m0s."""
    if seconds < 1:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.1f}s".replace(".0s", "s")
    return f"{int(seconds // 60)}m{int(seconds % 60)}s"


class _Bucket:
    def __init__(self, capacity: float, rate: float) -> None:
        self.capacity, self.rate, self.level, self.at = capacity, rate, capacity, time.monotonic()

    def take(self, cost: float = 1.0) -> bool:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + self.rate * (now - self.at))
        self.at = now
        if self.level >= cost:
            self.level -= cost
            return True
        return False

    def wait(self, cost: float = 1.0) -> float:
        return max(0.0, (cost - self.level) / self.rate)

    def reset(self) -> float:
        return (self.capacity - self.level) / self.rate


_BOMBS: dict[int, bytes] = {}


def gzip_bomb(mib: int = 1024) -> bytes:
    """`mib` MiB of zeros, gzip-compressed (about 1 MB per GiB), made once per process and size."""
    if mib not in _BOMBS:
        packer, block = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(1 << 20)
        _BOMBS[mib] = b"".join([*(packer.compress(block) for _ in range(mib)), packer.flush()])
    return _BOMBS[mib]


async def send_body(writer: asyncio.StreamWriter, kind: str, bomb_mib: int = 1024) -> None:
    """A hostile 200: an endless chunked body, or a gzip bomb; the connection closes after it."""
    encoding = "Content-Encoding: gzip\r\n" if kind == "gzip_bomb" else ""
    writer.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                  f"{encoding}Connection: close\r\n\r\n").encode())
    if kind == "gzip_bomb":
        bomb = gzip_bomb(bomb_mib)
        pieces: Iterator[bytes] = (bomb[i:i + 65536] for i in range(0, len(bomb), 65536))
    else:
        pieces = itertools.chain([b'{"choices": [{"message": {"content": "'], itertools.repeat(b"A" * 65536))
    for piece in pieces:
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


class Counters:
    def __init__(self) -> None:
        self.requests = self.answered = self.refused = self.running = self.queued = 0
        self.max_running = self.max_queued = 0
        self.in_flight = self.max_in_flight = 0  # requests in the server at once, queued or running
        self.first: float | None = None
        self.last: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "answered": self.answered, "refused": self.refused,
                "max_running": self.max_running, "max_queued": self.max_queued, "max_in_flight": self.max_in_flight,
                "busy_s": None if self.first is None or self.last is None else round(self.last - self.first, 4)}


async def serve(spec: ServerSpec, port: int = 0, on_ready: Any = None) -> None:
    """Serve `spec`. `vllm`: at most `slots` sequences at once (`max_num_seqs`), the rest queued first come, first
    served, none refused; a sequence takes latency x (1 + slope x running / slots), as each decode step of a
    larger batch is slower. `ratelimited`: a request bucket (`rpm`, at most `burst` seconds of it) and a token
    bucket (`tpm`, the same burst), tokens counted as the answer's usage or (`charge="requested"`), as OpenAI and
    Cerebras count them on arrival, as the prompt's estimate plus `max_tokens`. Every answer carries OpenAI's
    x-ratelimit-* headers (reset: the time until the bucket is full again); a request over either limit gets
    OpenAI's 429 (its JSON error, code rate_limit_exceeded; Retry-After in whole seconds, rounded up;
    retry-after-ms) and takes nothing from either bucket. `flaky`: as `vllm`, but a seeded share is answered 503
    at once (no Retry-After). `endless` and `gzip_bomb` (`bench.refused_bodies`): `send_body`."""
    ok_body = completion_bytes(DEFAULT_ANSWER)
    counters = Counters()
    rng = random.Random(spec.seed)
    slots = asyncio.Semaphore(spec.slots) if spec.slots else None
    rate = (spec.rpm or 0) / 60.0
    bucket = _Bucket(max(1.0, rate * spec.burst), rate) if spec.rpm else None
    tpm = spec.tpm or 2_000_000.0
    tokens = _Bucket(max(1.0, tpm / 60.0 * spec.burst) if spec.tpm else tpm, tpm / 60.0)

    def limit_headers() -> dict[str, str]:
        if bucket is None:
            return {}
        return {"x-ratelimit-limit-requests": str(int(spec.rpm or 0)),
                "x-ratelimit-remaining-requests": str(int(bucket.level)),
                "x-ratelimit-reset-requests": _duration(bucket.reset()),
                "x-ratelimit-limit-tokens": str(int(tpm)),
                "x-ratelimit-remaining-tokens": str(int(tokens.level)),
                "x-ratelimit-reset-tokens": _duration(tokens.reset())}

    def refuse(kind: str, limit: float, used: float, cost: float, wait: float) -> bytes:
        counters.refused += 1
        unit = "requests per min (RPM)" if kind == "requests" else "tokens per min (TPM)"
        body = json.dumps({"error": {
            "message": f"Rate limit reached for bench-vlm in organization org-bench on {unit}: Limit {int(limit)}, "
                       f"Used {int(used)}, Requested {int(cost)}. Please try again in {_duration(wait)}. "
                       f"Visit https://platform.openai.com/account/rate-limits to learn more.",
            "type": kind, "param": None, "code": "rate_limit_exceeded"}}).encode()
        headers = {**limit_headers(), "retry-after": str(max(1, math.ceil(wait))),
                   "retry-after-ms": str(max(1, math.ceil(wait * 1000)))}
        counters.last = time.monotonic()
        return http_response("429 Too Many Requests", body, headers)

    async def complete(body: bytes) -> bytes:
        now = time.monotonic()
        counters.first = counters.first or now
        if spec.error_share and rng.random() < spec.error_share:
            counters.refused += 1
            counters.last = time.monotonic()
            return http_response("503 Service Unavailable", b'{"error": {"message": "Service Unavailable", "code": 503}}')
        cost = float(TOKENS_PER_REQUEST)
        if spec.charge == "requested":
            try:
                asked = json.loads(body)
                cost = PROMPT_ESTIMATE + float(asked.get("max_completion_tokens") or asked.get("max_tokens") or 0)
            except (ValueError, AttributeError):
                pass
        if bucket is not None:
            bucket.take(0.0)  # refilled to now, nothing taken: both limits are checked before either is spent
            tokens.take(0.0)
            if bucket.level < 1.0:
                return refuse("requests", spec.rpm or 0, (spec.rpm or 0) - bucket.level, 1, bucket.wait())
            if tokens.level < cost:
                return refuse("tokens", tpm, tpm - tokens.level, cost, tokens.wait(cost))
            bucket.take()
        tokens.take(cost)
        headers = limit_headers()
        waits = slots is not None and slots.locked()
        if waits:  # every slot taken: queued first come, first served, as vLLM's scheduler does
            counters.queued += 1
            counters.max_queued = max(counters.max_queued, counters.queued)
        counters.in_flight += 1
        counters.max_in_flight = max(counters.max_in_flight, counters.in_flight)
        if slots is not None:
            await slots.acquire()
        if waits:
            counters.queued -= 1
        counters.running += 1
        counters.max_running = max(counters.max_running, counters.running)
        try:
            batch = counters.running / spec.slots if spec.slots else 0.0
            await asyncio.sleep(spec.latency * (1 + spec.slope * batch))
        finally:
            counters.running -= 1
            counters.in_flight -= 1
            if slots is not None:
                slots.release()
        counters.answered += 1
        counters.last = time.monotonic()
        return http_response("200 OK", ok_body, headers)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line, payload, _ = await read_request(reader)
                if request_line.startswith(b"GET /stats"):
                    writer.write(http_response("200 OK", json.dumps(counters.to_json()).encode()))
                elif request_line.startswith(b"GET /v1/models"):
                    writer.write(MODELS)
                elif request_line.startswith(b"POST ") and spec.kind in ("endless", "gzip_bomb"):
                    counters.requests += 1
                    counters.first = counters.first or time.monotonic()
                    counters.refused += 1
                    await send_body(writer, spec.kind, spec.bomb_mib)
                    counters.last = time.monotonic()
                    break
                elif request_line.startswith(b"POST "):
                    counters.requests += 1
                    writer.write(await complete(payload))
                else:
                    writer.write(NOT_FOUND)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=2048, limit=1 << 22)
    bound = server.sockets[0].getsockname()[1]
    if on_ready is not None:
        on_ready(bound)
    else:
        print(f"listening http://127.0.0.1:{bound}/v1", flush=True)
    async with server:
        await server.serve_forever()


class ThreadServer:
    """A server on a thread of this process (tests): `with ThreadServer(spec) as s: s.base_url`."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.base_url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)

        def ready(port: int) -> None:
            self.base_url = f"http://127.0.0.1:{port}/v1"
            self._ready.set()

        self._task = self._loop.create_task(serve(self.spec, on_ready=ready))
        try:
            self._loop.run_until_complete(self._task)
        except (asyncio.CancelledError, RuntimeError):
            pass
        finally:  # the connections' handlers end here, on their own loop, before it closes
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.wait(pending))
            self._loop.close()

    def __enter__(self) -> ThreadServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("load server did not start")
        return self

    def stats(self) -> dict[str, Any]:
        return stats(self.base_url)

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=10)


class ProcessServer(ChildServer):
    """A server in a child process (the bench: it must not share the client's interpreter)."""

    module = "bench.load_servers"

    def __init__(self, spec: ServerSpec) -> None:
        super().__init__()
        self.spec = spec

    def args(self) -> list[str]:
        return [f"--{k.replace('_', '-')}={v}" for k, v in asdict(self.spec).items() if v is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load_servers", description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=KINDS, default="vllm")
    parser.add_argument("--slots", type=int, default=None)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--slope", type=float, default=0.5)
    parser.add_argument("--rpm", type=float, default=None)
    parser.add_argument("--burst", type=float, default=1.0)
    parser.add_argument("--tpm", type=float, default=None)
    parser.add_argument("--charge", choices=("usage", "requested"), default="usage")
    parser.add_argument("--error-share", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bomb-mib", type=int, default=1024)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    spec = ServerSpec(**{name: value for name, value in vars(args).items() if name != "port"})
    return serve_until_stopped(serve(spec, args.port))


if __name__ == "__main__":
    raise SystemExit(main())
