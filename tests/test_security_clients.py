"""The API clients against hostile servers on 127.0.0.1: no redirect followed (no request, no key
sent elsewhere), no unbounded body read, no part of a key kept from an echoing error."""

from __future__ import annotations

import asyncio
import json

import pytest

from eval.backends import make_backend, release
from eval.redact import redact
from eval.types import BackendError, GenerationConfig, Message, Request
from tests.fakes.hostile_openai import HostileServer
from tests.helpers_backends import opts
from tests.helpers_memory import peak_growth_mb

KEY = "sk-hostile-0123456789abcdefghijKLMN"


def request() -> Request:
    return Request(id="x", task="classification", messages=(Message("user", ("Which dish? A or B",)),),
                   config=GenerationConfig(max_tokens=16), request_hash="h")


async def ask(spec: str, base_url: str, **options) -> BackendError:
    backend = make_backend(spec, opts(base_url=base_url, timeout=10.0, api_key=KEY, **options))
    try:
        with pytest.raises(BackendError) as info:
            await backend.generate(request())
        return info.value
    finally:
        await release(backend)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_openai_client_follows_no_redirect(status, monkeypatch):
    with HostileServer("target") as target, HostileServer("redirect", status=status,
                                                          location=target.url + "/chat/completions") as server:
        error = await ask("openai:fake-vlm", server.url)
    assert target.received == target.gets == 0 and not target.authorizations
    assert not error.retryable and f"HTTP {status}" in str(error) and "not followed" in str(error)


@pytest.mark.parametrize("status", [302, 307])
async def test_gemini_client_follows_no_redirect_and_keeps_its_key_home(status):
    with HostileServer("target") as target, HostileServer("redirect", status=status, location=target.url) as server:
        error = await ask("gemini:gemini-2.5-flash", server.url.removesuffix("/v1"))
    assert target.received == target.gets == 0, "the request (and its x-goog-api-key) reached another origin"
    assert not error.retryable and "not followed" in str(error)


async def test_an_endless_body_is_cut_at_the_limit_in_bounded_memory(monkeypatch):
    monkeypatch.setattr("eval.backends.openai_chat.MAX_RESPONSE_BYTES", 2 * 1024 * 1024)
    with HostileServer("endless") as server:
        error = await asyncio.wait_for(ask("openai:fake-vlm", server.url), 20)
        sent = server.sent_bytes
    assert not error.retryable and "limit" in str(error)
    assert sent < 64 * 1024 * 1024  # the client hung up soon after the limit


def test_an_endless_body_costs_bounded_memory_in_a_fresh_process():
    """The same client in a fresh interpreter, at the real limit: its peak memory grows by far less than
    what the server sends (this process's peak, raised by earlier tests, would hide any growth)."""
    grown_mb = peak_growth_mb(
        """
        import asyncio
        from eval.backends import make_backend, release
        from eval.types import BackendError
        from tests.fakes.hostile_openai import HostileServer
        from tests.test_security_clients import KEY, opts, request
        """,
        """
        async def main():
            with HostileServer("endless") as server:
                backend = make_backend("openai:fake-vlm", opts(base_url=server.url, timeout=10.0, api_key=KEY))
                try:
                    await backend.generate(request())
                except BackendError as exc:
                    assert "limit" in str(exc), exc
                else:
                    raise SystemExit("an endless body was accepted")
                finally:
                    await release(backend)
                return server.sent_bytes
        sent = asyncio.run(asyncio.wait_for(main(), 60))
        print("sent MB", sent / 2**20)
        """)
    assert grown_mb < 200, grown_mb


async def test_a_declared_huge_body_is_refused_unread(monkeypatch):
    monkeypatch.setattr("eval.backends.openai_chat.MAX_RESPONSE_BYTES", 100_000)
    with HostileServer("huge", size=1_000_000) as server:
        error = await ask("openai:fake-vlm", server.url)
    assert "limit" in str(error) and "not read" in str(error)


@pytest.mark.parametrize("echo", [KEY[:28], KEY[3:31], KEY[-10:], "sk-hos****************KLMN", KEY[:6] + "..." + KEY[-4:]])
async def test_a_partly_echoed_key_never_survives_in_the_error(echo):
    with HostileServer("echo_key", echo=echo) as server:
        error = await ask("openai:fake-vlm", server.url)
    text = str(error)
    assert error.status == 401 and "Incorrect API key" in text
    windows = {KEY[i:i + 8] for i in range(len(KEY) - 7)}
    assert not any(w in text for w in windows), text
    assert "KLMN" not in text and "sk-hos" not in text, text


def test_redact_keeps_ordinary_text():
    assert redact("HTTP 400: max_tokens is too large: 20000 > 16384", KEY) == \
        "HTTP 400: max_tokens is too large: 20000 > 16384"
    assert json.loads(redact(json.dumps({"k": KEY}), KEY)) == {"k": "***"}


@pytest.mark.parametrize("status", [302, 307])
def test_the_judge_follows_no_redirect_and_keeps_its_key_home(status, monkeypatch):
    from eval.judge import JudgeError, make_judge

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with HostileServer("target") as target, HostileServer("redirect", status=status,
                                                          location=target.url + "/chat/completions") as server:
        judge = make_judge("openai:judge", server.url, max_attempts=1)
        try:
            with pytest.raises(JudgeError, match="not followed"):
                judge("Grade this answer.")
        finally:
            judge.close()
    assert target.received == target.gets == 0 and not target.authorizations


@pytest.mark.parametrize("status", [302, 307])
def test_construction_model_calls_follow_no_redirect(status, monkeypatch, tmp_path):
    from construct.models import Ask, Models
    from construct.work import BuildSettings

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with HostileServer("target") as target, HostileServer("redirect", status=status,
                                                          location=target.url + "/chat/completions") as server:
        models = Models(BuildSettings(model="openai:gen", base_url=server.url, timeout=10.0), tmp_path)
        answers = models.ask("dishes", "openai:gen", "v1", [Ask("a|b", "Task: same dish check.")])
    assert target.received == target.gets == 0 and not target.authorizations
    assert answers["a|b"].text is None and "not followed" in (answers["a|b"].error or "")
    assert KEY not in json.dumps(answers["a|b"].error)
