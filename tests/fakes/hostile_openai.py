"""A hostile or abusive OpenAI-compatible server: a real ThreadingHTTPServer on 127.0.0.1.

Modes:
  "slow"      answer "Answer: A" after `delay` seconds (the first `fast` requests at once); counts
              requests in flight (one whose client hung up stops counting at once) and the most
              ever in flight at one time
  "redirect"  answer every POST with `status` (302 or 307) and Location: `location` (another server)
  "huge"      answer 200 with a message of `size` characters
  "target"    a plain server that records who reached it, by any method (the far end of a redirect)
  "endless"   answer 200 without a length and send body bytes until the client hangs up
  "echo_key"  answer 401 with an error message echoing `echo` (a part of the caller's key)
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.base import FakeHTTPServer


class HostileServer:
    def __init__(self, mode: str, *, delay: float = 1.0, fast: int = 0, status: int = 307, location: str = "",
                 size: int = 2_000_000, echo: str = "") -> None:
        self.mode, self.delay, self.fast, self.status, self.location, self.size = mode, delay, fast, status, location, size
        self.echo = echo
        self.sent_bytes = 0  # how much of an endless body went out before the client hung up
        self.received = 0  # POSTs (model requests) that reached the server
        self.gets = 0  # GETs: a model listing, or a POST a 302 turned into a GET
        self.in_flight = 0
        self.peak = 0
        self.hung_up = 0  # requests whose client went away before the answer
        self.authorizations: list[str] = []
        self.log: list[str] = []  # what happened to each slow request, in order (for failure messages)
        self._lock = threading.Lock()
        self._server = FakeHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.02)
        return predicate(self)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with fake._lock:
                    fake.received += 1
                    fake.authorizations.append(self.headers.get("Authorization", ""))
                    quick = fake.received <= fake.fast
                if fake.mode == "redirect":
                    self._send(fake.status, b"", {"Location": fake.location})
                elif fake.mode == "slow" and not quick:
                    with fake._lock:
                        fake.in_flight += 1
                        fake.peak = max(fake.peak, fake.in_flight)
                    outcome = "error"
                    try:
                        if self._client_left_within(fake.delay):
                            outcome = "hung up"
                            with fake._lock:
                                fake.hung_up += 1
                            return
                        outcome = "answered"
                    finally:
                        # Counted out before the answer is written: once written, the client may read
                        # it, free its slot and send the next request before this thread runs again,
                        # and a count taken after the write would then see one request too many.
                        with fake._lock:
                            fake.in_flight -= 1
                            fake.log.append(f"{time.monotonic():.2f} {self.client_address[1]} {outcome}")
                    self._answer("Answer: A")
                elif fake.mode == "huge":
                    self._answer("A" * fake.size)
                elif fake.mode == "endless":
                    self._endless()
                elif fake.mode == "echo_key":
                    body = json.dumps({"error": {"message": f"Incorrect API key provided: {fake.echo}. You can "
                                                            "find your API key at https://example.invalid.",
                                                 "type": "invalid_request_error", "code": "invalid_api_key"}})
                    self._send(401, body.encode(), {"Content-Type": "application/json"})
                else:
                    self._answer("Answer: A")

            def do_GET(self) -> None:  # noqa: N802 - a 302/303 turns the client's POST into a GET
                with fake._lock:
                    fake.gets += 1
                    fake.authorizations.append(self.headers.get("Authorization", ""))
                if self.path.rstrip("/").endswith("/models"):
                    body = json.dumps({"object": "list", "data": [{"id": "fake-vlm", "object": "model"}]}).encode()
                    self._send(200, body, {"Content-Type": "application/json"})
                else:
                    self._answer("Answer: A")

            def _endless(self) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(b'{"choices": [{"message": {"content": "')
                    chunk = b"A" * 65536
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline:
                        self.wfile.write(chunk)
                        with fake._lock:
                            fake.sent_bytes += len(chunk)
                except OSError:
                    pass  # the client hung up: what a bounded reader does

            def _client_left_within(self, seconds: float) -> bool:
                """Wait `seconds`, or less when the client closes the connection meanwhile."""
                deadline = time.monotonic() + seconds
                while (left := deadline - time.monotonic()) > 0:
                    readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
                    if readable:
                        try:
                            if not self.connection.recv(1, socket.MSG_PEEK):
                                return True
                        except OSError:
                            return True
                return False

            def _answer(self, text: str) -> None:
                body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
                self._send(200, body, {"Content-Type": "application/json"})

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client went away

        return Handler
