"""The `openai:` backend's own HTTP client against fake servers on 127.0.0.1: what it sends, how it
reads errors, event loops, proxies. (Whole runs through it are in test_harness_openai.py and the
reliability tests.)"""

from __future__ import annotations

import asyncio
import io
import threading
from typing import Any

import pytest
from PIL import Image

import eval.backends as backends
from eval import judge as judge_module
from eval.backends import openai_chat, release
from eval.judge import BackendJudge
from eval.types import BackendError, ConfigError, GenerationConfig, ImagePart, Message, Request
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_backends import opts

KEY = "sk-test-backend-3c9e1f70"


def tiny_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 40, 40)).save(out, "JPEG")
    return out.getvalue()


IMAGE = tiny_jpeg()
REQUEST = Request(id="c1", task="classification",
                  messages=(Message("user", (ImagePart(IMAGE, "image/jpeg", "reference"), "Which dish? A or B")),),
                  config=GenerationConfig(temperature=0.0, max_tokens=32, seed=7), request_hash="h")


async def ask(backend: Any, request: Request = REQUEST, *, close: bool = True) -> Any:
    try:
        return await backend.generate(request)
    finally:
        if close:
            await release(backend)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


def test_body_auth_and_the_answer_read_back(monkeypatch):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-dining")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-bench")
    with FakeOpenAIServer(oracle=lambda r: "B") as server:
        response = asyncio.run(ask(openai_chat.make("fake-vlm", opts(base_url=server.base_url))))
    assert (response.text, response.finish_reason) == ("B", "stop")
    assert response.usage == {"prompt_tokens": 110, "completion_tokens": 5}
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions" and sent.body["model"] == "fake-vlm"
    assert sent.images == [IMAGE] and sent.prompt == "Which dish? A or B"
    assert (sent.temperature, sent.max_tokens, sent.seed) == (0.0, 32, 7)
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert (sent.headers["openai-organization"], sent.headers["openai-project"]) == ("org-dining", "proj-bench")


def test_no_organisation_headers_unless_set():
    with FakeOpenAIServer(oracle=lambda r: "A") as server:
        asyncio.run(ask(openai_chat.make("fake-vlm", opts(base_url=server.base_url))))
    assert not {"openai-organization", "openai-project"} & set(server.requests[0].headers)


def test_openai_base_url_is_the_default_server_and_still_needs_a_key(monkeypatch):
    with FakeOpenAIServer(oracle=lambda r: "A") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        backend = openai_chat.make("fake-vlm", opts())
        assert asyncio.run(ask(backend)).text == "A" and len(server.requests) == 1
        assert backend.describe()["base_url_host"] == f"127.0.0.1:{server.port}"
        monkeypatch.delenv("OPENAI_API_KEY")
        with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
            openai_chat.make("fake-vlm", opts())
        assert openai_chat.make("fake-vlm", opts(base_url=server.base_url)).describe()["backend"] == "openai"


def test_the_servers_own_error_is_shown_without_the_key():
    class Chatty(FakeOpenAIServer):
        def error_body(self, status: int, message: str) -> dict[str, Any]:
            return {"error": {"message": f"At most 1 image(s) may be provided; key {KEY} was used"}}

    with Chatty() as server:
        server.inject("400")
        with pytest.raises(BackendError) as caught:
            asyncio.run(ask(openai_chat.make("fake-vlm", opts(base_url=server.base_url))))
    error = caught.value
    assert str(error).startswith("HTTP 400 from the model server: At most 1 image(s) may be provided")
    assert KEY not in str(error) and "***" in str(error)
    assert "--limit-mm-per-prompt" in str(error) and error.status == 400 and not error.retryable


def test_a_key_cut_by_the_message_length_limit_leaves_no_part_behind():
    class Padded(FakeOpenAIServer):
        def error_body(self, status: int, message: str) -> dict[str, Any]:
            return {"error": {"message": "x" * 190 + f" {KEY} was rejected"}}

    with Padded() as server:
        server.inject("401")
        with pytest.raises(BackendError) as caught:
            asyncio.run(ask(openai_chat.make("fake-vlm", opts(base_url=server.base_url))))
    assert KEY[:8] not in str(caught.value) and not caught.value.retryable


def test_rate_limits_carry_retry_after_and_bad_bodies_are_retryable():
    with FakeOpenAIServer(oracle=lambda r: "A") as server:
        backend = openai_chat.make("fake-vlm", opts(base_url=server.base_url))
        server.inject("429", retry_after=7)
        with pytest.raises(BackendError) as limited:
            asyncio.run(ask(backend))
        server.inject("malformed")
        with pytest.raises(BackendError, match="malformed response") as malformed:
            asyncio.run(ask(backend))
        server.inject("content_filter")
        with pytest.raises(BackendError, match="content blocked") as blocked:
            asyncio.run(ask(backend))
    assert (limited.value.status, limited.value.retry_after, limited.value.retryable) == (429, 7.0, True)
    assert malformed.value.retryable and not blocked.value.retryable


def test_a_refused_connection_is_retryable_and_names_no_key():
    with FakeOpenAIServer() as server:
        closed = server.base_url
    with pytest.raises(BackendError, match="cannot reach the model server") as caught:
        asyncio.run(ask(openai_chat.make("fake-vlm", opts(base_url=closed))))
    assert caught.value.retryable and KEY not in str(caught.value)


def test_one_backend_serves_successive_event_loops():
    """Connections belong to the loop that opened them: each asyncio.run gets its own."""
    with FakeOpenAIServer(oracle=lambda r: "A") as server:
        backend = openai_chat.make("fake-vlm", opts(base_url=server.base_url))
        assert asyncio.run(ask(backend)).text == "A"
        assert backend._session is None  # released with its loop
        assert asyncio.run(ask(backend, close=False)).text == "A"  # a loop that ends without release...
        assert asyncio.run(ask(backend)).text == "A"  # ...does not break the next one
    assert len(server.requests) == 3


def test_proxies_come_from_the_environment_unless_no_proxy_exempts_the_host(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                 "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    url = "http://models.internal:8000/v1/chat/completions"
    assert openai_chat._proxy_for(url) is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    assert openai_chat._proxy_for(url) == "http://proxy.internal:3128"
    assert openai_chat._proxy_for("https://api.openai.com/v1/chat/completions") is None  # no HTTPS_PROXY
    monkeypatch.setenv("NO_PROXY", "models.internal")
    assert openai_chat._proxy_for(url) is None


def test_a_judge_asked_from_many_threads_builds_one_backend(monkeypatch):
    built = []
    make = backends.make_backend

    def counting(spec: str, options: Any) -> Any:
        built.append(spec)
        return make(spec, options)

    monkeypatch.setattr(judge_module, "make_backend", counting)
    with FakeOpenAIServer(oracle=lambda r: "C") as server:
        judge = BackendJudge("openai:fake-judge", server.base_url, timeout=10)
        answers: list[str] = []
        threads = [threading.Thread(target=lambda i=i: answers.append(judge(f"verdict for item {i}?")))
                   for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        backend = judge._backend
        judge.close()
        assert judge("one more, after close?") == "C"  # starts afresh
        judge.close()
    assert answers == ["C"] * 8 and built == ["openai:fake-judge"] * 2 and len(server.requests) == 9
    assert backend._session is None  # close() released its connections on the judge's loop


@pytest.mark.parametrize("size", [0, 1, 2, 3, 57, 4096, 60_001])
def test_views_travel_as_the_standard_base64_data_uri(size):
    import base64
    import os

    data = os.urandom(size)
    message = Message(role="user", content=(ImagePart(data=data, mime_type="image/jpeg"), "what is this?"))
    (converted,) = openai_chat.to_openai_messages((message,))
    url = converted["content"][0]["image_url"]["url"]
    assert url == "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
    assert base64.b64decode(url.split(",", 1)[1], validate=True) == data


_TEXTS = ["what is this?", "热量是多少？\u2028 \"quoted\" \\ back\tslash \x00 \x1f", "", "🍜 emoji and \ud7ff"]


@pytest.mark.parametrize("layout", [(0,), (1,), (3,), (2, 0, 1), (5, 2)])
def test_a_body_with_deferred_views_is_byte_for_byte_the_body_with_their_uris(layout):
    import os

    import orjson

    messages = tuple(Message(role=("system", "user", "assistant")[k % 3],
                             content=(*(ImagePart(data=os.urandom(1000 * (j + 1) + k), mime_type=mime)
                                        for j, mime in enumerate((["image/jpeg", "image/png", 'image/x"odd'] * 3)[:n])),
                                      _TEXTS[k % len(_TEXTS)]))
                     for k, n in enumerate(layout))
    views: list[ImagePart] = []
    deferred = openai_chat.to_openai_messages(messages, deferred=views)
    body = {"model": "m", "messages": deferred, "temperature": 0.0, "max_tokens": 7}
    expected = orjson.dumps({**body, "messages": openai_chat.to_openai_messages(messages)})
    assert len(views) == sum(layout)
    assert openai_chat.body_bytes(body, views) == expected


def test_a_text_that_holds_a_view_mark_cannot_move_an_image():
    import orjson

    forged = openai_chat._view_mark(0)  # a text cannot know the mark; if one did, the slow path is taken
    view = ImagePart(data=b"\xff\xd8 not really a jpeg", mime_type="image/jpeg")
    messages = (Message(role="user", content=(forged, view, forged + " and again")),)
    views: list[ImagePart] = []
    body = {"model": "m", "messages": openai_chat.to_openai_messages(messages, deferred=views)}
    sent = openai_chat.body_bytes(body, views)
    assert sent == orjson.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": forged}, {"type": "image_url", "image_url": {"url": openai_chat._data_uri(view)}},
        {"type": "text", "text": forged + " and again"}]}]})


def test_a_plain_http_server_builds_no_tls_context_and_an_https_one_does(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    assert not openai_chat.OpenAIChatBackend("m", opts(base_url="http://127.0.0.1:8000/v1"))._tls
    assert openai_chat.OpenAIChatBackend("m", opts(base_url="https://example.org/v1"))._tls
    assert openai_chat.OpenAIChatBackend("m", opts())._tls  # OpenAI itself
    monkeypatch.setenv("HTTP_PROXY", "https://proxy.example.org:3128")
    assert openai_chat.OpenAIChatBackend("m", opts(base_url="http://10.0.0.5:8000/v1"))._tls  # TLS to the proxy
