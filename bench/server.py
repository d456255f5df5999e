"""A minimal OpenAI-compatible chat server for benchmarks: raw asyncio HTTP/1.1, canned answer.

It must cost next to nothing so that what is measured is the client (bench/README.md says how).

    python -m bench.server --latency 0.1     # prints "listening http://127.0.0.1:PORT/v1"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, TypeVar

# A plausible nutrition answer: parses with the real parser, so scoring does real work.
DEFAULT_ANSWER = '{"calories": 450, "protein": 20, "carbohydrates": 50, "fat": 18}'
REPO = Path(__file__).resolve().parent.parent


def completion_bytes(answer: str) -> bytes:
    """The one response body every request gets (built once)."""
    body = {"id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()), "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
    return json.dumps(body).encode()


def http_response(status: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: keep-alive\r\n\r\n").encode() + body


# GET /v1/models as `vllm serve` answers it: the model and its context.
MODELS = http_response("200 OK", json.dumps({"object": "list", "data": [
    {"id": "bench-vlm", "object": "model", "max_model_len": 32768}]}).encode())
NOT_FOUND = http_response("404 Not Found", b'{"error": {"message": "not found"}}')


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes, bool]:
    """One request off a kept-alive connection: (request line, body, whether the client asked to close)."""
    head = await reader.readuntil(b"\r\n\r\n")
    request_line, *header_lines = head.split(b"\r\n")
    length, close = 0, False
    for line in header_lines:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            close = True
    return request_line, await reader.readexactly(length) if length else b"", close


class Counters:
    """What the server saw: the benches check it against what the client meant to send."""

    def __init__(self) -> None:
        self.requests = self.images = self.bytes = self.max_in_flight = self.in_flight = 0

    def to_json(self) -> dict[str, int]:
        return {"requests": self.requests, "images": self.images, "bytes": self.bytes,
                "max_in_flight": self.max_in_flight}


async def serve(port: int, latency: float, answer: str, *, models_listed: bool = True) -> None:
    """Answer every request from pre-built bytes after `latency` (asyncio.sleep, so concurrent requests overlap
    as on a real server), never parsing the JSON body: it only counts the data-URI images in it."""
    ok = http_response("200 OK", completion_bytes(answer))
    counters = Counters()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line, body, close = await read_request(reader)
                if request_line.startswith(b"GET /stats"):
                    writer.write(http_response("200 OK", json.dumps(counters.to_json()).encode()))
                elif request_line.startswith(b"GET /v1/models") and models_listed:
                    writer.write(MODELS)
                elif request_line.startswith(b"POST "):
                    counters.requests += 1
                    counters.images += body.count(b"data:image/")
                    counters.bytes += len(body)
                    counters.in_flight += 1
                    counters.max_in_flight = max(counters.max_in_flight, counters.in_flight)
                    if latency > 0:
                        await asyncio.sleep(latency)
                    counters.in_flight -= 1
                    writer.write(ok)
                else:
                    writer.write(NOT_FOUND)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass  # a client that connected only to check the port, or hung up
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024, limit=1 << 20)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening http://127.0.0.1:{bound}/v1", flush=True)
    async with server:
        await server.serve_forever()


def stats(base_url: str) -> dict[str, Any]:
    """What a bench server saw (its GET /stats)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as reply:
        return json.loads(reply.read())


Server = TypeVar("Server", bound="ChildServer")


class ChildServer:
    """A server module run in a child process (the benches: it must not share the client's interpreter);
    it prints `listening URL` once bound; `stats()` for checks. Subclasses name the module and its arguments."""

    module = "bench.server"

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def args(self) -> list[str]:
        return []

    def __enter__(self: Server) -> Server:
        self._proc = subprocess.Popen([sys.executable, "-m", self.module, *self.args()], stdout=subprocess.PIPE,
                                      text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith("listening "):
            self.__exit__()
            raise RuntimeError(f"{self.module} did not start (said {line!r})")
        self.base_url = line.split()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None

    def stats(self) -> dict[str, Any]:
        return stats(self.base_url)


class BenchServer(ChildServer):
    """Runs `python -m bench.server` in a child process."""

    def __init__(self, latency: float = 0.0, answer: str = DEFAULT_ANSWER, *, models_listed: bool = True) -> None:
        """`models_listed=False`: GET /v1/models is a 404, so the client learns no context (as from a
        gateway that only routes completions; OpenAI's own listing reports none either)."""
        super().__init__()
        self.latency, self.answer, self.models_listed = latency, answer, models_listed

    def args(self) -> list[str]:
        return ["--latency", str(self.latency), "--answer", self.answer, *([] if self.models_listed else ["--no-models"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 = any free port (printed)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    parser.add_argument("--answer", default=DEFAULT_ANSWER, help="the text every completion returns")
    parser.add_argument("--no-models", action="store_true", help="answer GET /v1/models with a 404 (no context)")
    args = parser.parse_args(argv)
    return serve_until_stopped(serve(args.port, args.latency, args.answer, models_listed=not args.no_models))


def serve_until_stopped(server: Any) -> int:
    """Run a server coroutine on uvloop's event loop (when installed: its timers and socket handling cost less
    than asyncio's, about 1 ms less per request at 100 ms latency here) until the process is stopped."""
    try:
        import uvloop

        loop_factory: Any = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(server)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
