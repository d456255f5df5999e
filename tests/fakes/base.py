"""A fake model server: a real ThreadingHTTPServer on 127.0.0.1 that records every request and
answers from an oracle, with faults that tests switch on (`server.inject("429", times=2)`).

Faults (kind, options):
  "429"            rate limited; `retry_after` seconds sent as Retry-After when given
  "500", "503"     server errors; "401", "400", "403" client errors (not worth retrying)
  "hang"           sleep `seconds` (default 5) before answering: past the client's timeout
  "drop"           close the connection without any response
  "malformed"      200 with a body that is not JSON
  "empty"          200 with no choices (OpenAI) / no candidates (Gemini)
  "content_filter" 200 with a content-filter finish (OpenAI) / a blocked prompt (Gemini)
A fault applies to the next `times` requests that `match` (a predicate on the RecordedRequest;
default: every request). Rules are consumed in the order they were injected.

Besides faults, a subclass may `refuse` a request the way the real service refuses a field it does
not take (a 400 with the service's own body); refused requests are recorded with fault "refused"
and consume no fault rule. GET requests (model listings) are answered by `get` and recorded in `gets`.

`server.hold_first(n)` holds the answers to the first n POSTs until all n have arrived: proof that a
client had n requests in flight at once (`server.held_together` says whether they all came within
`seconds`; the answers go out anyway after that).
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS = ("429", "500", "503", "400", "401", "403", "hang", "drop", "malformed", "empty", "content_filter")


@dataclass
class RecordedRequest:
    """What a client sent, in the terms tests assert on."""

    path: str
    headers: dict[str, str]
    body: Any
    prompt: str = ""
    images: list[bytes] = field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other fields a test asserts on (thinking config...)
    fault: str | None = None
    received_at: float = field(default_factory=time.monotonic)

    @property
    def key(self) -> str:
        return answer_key(self.prompt, self.images)


def answer_key(prompt: str, images: list[bytes]) -> str:
    """How the oracle recognises an item: its prompt text and the exact image bytes sent."""
    digest = hashlib.sha256(prompt.encode())
    for image in images:
        digest.update(hashlib.sha256(image).digest())
    return digest.hexdigest()


def decode_data_uri(url: str) -> bytes:
    _, _, data = url.partition(",")
    return decode_base64(data)


def decode_base64(data: str) -> bytes:
    """Standard or URL-safe base64, padded or not (SDKs differ)."""
    data = data.replace("-", "+").replace("_", "/")
    return base64.b64decode(data + "=" * (-len(data) % 4))


@dataclass
class FaultRule:
    kind: str
    times: int
    match: Callable[[RecordedRequest], bool] | None
    options: dict[str, Any]


class FakeHTTPServer(ThreadingHTTPServer):
    request_queue_size = 256  # a real server's backlog: many connections opened at once are all accepted

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (a run that stops cancels its requests) is routine for a
        # server. socketserver's default prints a traceback to this process's stderr, which is the
        # stderr the tests read as the CLI's own; any other error still prints.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeServer:
    """Base of the OpenAI-compatible and Gemini fakes. Subclasses parse and format bodies."""

    def __init__(self, oracle: Callable[[RecordedRequest], str] | None = None) -> None:
        self.oracle = oracle or (lambda request: "")
        self.requests: list[RecordedRequest] = []
        self.gets: list[str] = []
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()
        self._held = threading.Condition()
        self._hold_count, self._hold_seconds, self._arrived = 0, 0.0, 0
        self.held_together: bool | None = None
        self._httpd = FakeHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # -- lifecycle
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults
    def inject(self, kind: str, *, times: int = 1, match: Callable[[RecordedRequest], bool] | None = None,
               **options: Any) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; choose one of {', '.join(FAULT_KINDS)}")
        with self._lock:
            self._rules.append(FaultRule(kind, times, match, options))

    def hold_first(self, n: int, *, seconds: float = 30.0) -> None:
        with self._held:
            self._hold_count, self._hold_seconds, self._arrived, self.held_together = n, seconds, 0, None

    def _hold(self) -> None:
        with self._held:
            if self._arrived >= self._hold_count:
                return
            self._arrived += 1
            if self._arrived == self._hold_count:
                self.held_together = True
                self._held.notify_all()
                return
            if not self._held.wait_for(lambda: self._arrived >= self._hold_count, timeout=self._hold_seconds):
                self.held_together = False

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()

    def _take_fault(self, request: RecordedRequest) -> FaultRule | None:
        with self._lock:
            for rule in self._rules:
                if rule.times > 0 and (rule.match is None or rule.match(request)):
                    rule.times -= 1
                    return rule
        return None

    # -- subclass hooks
    def parse(self, path: str, body: Any, request: RecordedRequest) -> None:
        raise NotImplementedError

    def success(self, request: RecordedRequest, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def fault_body(self, kind: str, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "code": status}}

    def refuse(self, request: RecordedRequest) -> tuple[int, dict[str, Any]] | None:
        """(status, body) when the service would refuse this request as sent; None to answer it."""
        return None

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        return 404, self.error_body(404, f"no route {path}")

    # -- HTTP
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = None
                request = RecordedRequest(path=self.path, headers={k.lower(): v for k, v in self.headers.items()},
                                          body=body)
                if body is not None:
                    try:
                        server.parse(self.path, body, request)
                    except (ValueError, KeyError, TypeError, AttributeError):
                        body = None  # answered below as a 400, like a real server would
                refusal = server.refuse(request) if body is not None else None
                rule = server._take_fault(request) if refusal is None else None
                request.fault = "refused" if refusal is not None else rule.kind if rule else None
                with server._lock:
                    server.requests.append(request)
                server._hold()
                if body is None:
                    return self._send(400, server.error_body(400, "body is not JSON"))
                if refusal is not None:
                    return self._send(*refusal)
                if rule is None:
                    return self._send(200, server.success(request, server.oracle(request)))
                kind = rule.kind
                if kind == "hang":
                    time.sleep(float(rule.options.get("seconds", 5.0)))
                    return self._send(200, server.success(request, server.oracle(request)))
                if kind == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return None
                if kind == "malformed":
                    return self._send_raw(200, b'{"choices": [ this is not json', "application/json")
                if kind in ("empty", "content_filter"):
                    return self._send(*server.fault_body(kind, request))
                status = int(kind)
                headers = {}
                if rule.options.get("retry_after") is not None:
                    headers["Retry-After"] = str(rule.options["retry_after"])
                return self._send(status, server.error_body(status, f"injected {kind}"), headers)

            def do_GET(self) -> None:
                with server._lock:
                    server.gets.append(self.path)
                return self._send(*server.get(self.path))

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_raw(self, status: int, data: bytes, content_type: str,
                          headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a "hang" fault)
                    self.close_connection = True

        return Handler
