"""An OpenAI-compatible server that asks for waits (a real ThreadingHTTPServer on 127.0.0.1).

The first `refusals` POSTs are answered 429 with OpenAI's rate-limit error body and the headers given
in `refused` (Retry-After, retry-after-ms, an HTTP date, x-ratelimit-*, as the test builds them); every
other POST is a completion carrying the headers in `answered`. `refusals=None` refuses every POST.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.base import FakeHTTPServer

RATE_LIMITED = {"error": {"message": "Rate limit reached for fake-vlm in organization org-test on requests per min "
                                     "(RPM): Limit 60, Used 60, Requested 1.", "type": "requests", "param": None,
                          "code": "rate_limit_exceeded"}}


class WaitingServer:
    def __init__(self, refused: dict[str, str], *, refusals: int | None = 1,
                 answered: dict[str, str] | None = None) -> None:
        self.refused, self.refusals, self.answered = refused, refusals, answered or {}
        self.received = 0
        self._lock = threading.Lock()
        self._server = FakeHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> WaitingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

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
                    refuse = fake.refusals is None or fake.received <= fake.refusals
                if refuse:
                    self._send(429, RATE_LIMITED, fake.refused)
                else:
                    self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "fake-vlm",
                                     "choices": [{"index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": "Answer: A"}}],
                                     "usage": {"prompt_tokens": 10, "completion_tokens": 2}}, fake.answered)

            def do_GET(self) -> None:  # noqa: N802 - the model listing
                self._send(200, {"object": "list", "data": [{"id": "fake-vlm", "object": "model"}]}, {})

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                body = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

        return Handler
