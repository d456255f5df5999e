"""The Space's evaluation under abuse, through its logic layer and real servers on 127.0.0.1: cancel
stops the requests, caps hold across visitors, a visitor's key never meets the operator's base URL,
redirects are not followed, and huge answers are cut."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

import pytest

from space.diningspace.evaluation import (
    OWN_KEY,
    REDIRECTED,
    EvalRequest,
    make_backend_for,
    resolve,
    stream_evaluation,
    supports_own_keys,
)
from space.diningspace.guard import GuardError
from space.diningspace.limits import RequestSlots, VisitorJobs, client_address
from space.diningspace.settings import SpaceSettings
from tests.fakes.hostile_openai import HostileServer

KEY = "sk-visitor-0123456789abcdef"


def test_every_key_provider_backend_takes_a_per_call_key() -> None:
    """The tests below rely on it: if a backend's make() stopped taking api_key, they must fail, not skip."""
    from space.diningspace.settings import KEY_PROVIDERS

    assert KEY_PROVIDERS and all(supports_own_keys(provider) for provider in KEY_PROVIDERS)


def _settings(**changes: object) -> SpaceSettings:
    return SpaceSettings(**{"allowed_hosts": ("127.0.0.1",), "max_items": 20, "request_concurrency": 4, **changes})


def _own(server: HostileServer, n: int = 12) -> EvalRequest:
    return EvalRequest(task="classification", model=OWN_KEY, n_items=n, own_model="fake-vlm", api_key=KEY,
                       base_url=server.url)


async def _wait(server: HostileServer, predicate, timeout: float = 10.0) -> bool:
    return await asyncio.to_thread(server.wait_for, predicate, timeout)


@pytest.mark.parametrize("how", ["cancel the task", "close the generator"])
async def test_stopping_an_evaluation_cancels_its_requests_and_sends_no_more(how: str) -> None:
    with HostileServer("slow", delay=30, fast=1) as server:  # one quick answer, then requests that hang
        updates = stream_evaluation(_own(server), _settings(), RequestSlots(8))
        assert (await anext(updates)).results == []
        assert len((await anext(updates)).results) == 1
        assert await _wait(server, lambda s: s.in_flight == 4)
        if how == "cancel the task":  # what Gradio's Stop and gradio_client's job.cancel() do
            waiting = asyncio.create_task(anext(updates))
            await asyncio.sleep(0.1)
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        else:  # what Gradio does when the visitor's page goes away between two updates
            await updates.aclose()
        assert await _wait(server, lambda s: s.in_flight == 0, timeout=5)
        sent = server.received
        await asyncio.sleep(1.0)
        assert server.received == sent == 5 and server.hung_up == 4


async def test_requests_in_flight_never_exceed_the_space_wide_cap() -> None:
    slots = RequestSlots(5)
    with HostileServer("slow", delay=0.3) as server:
        async def one() -> int:
            final = [u async for u in stream_evaluation(_own(server, 6), _settings(), slots)][-1]
            return final.metrics["n"]

        assert await asyncio.gather(one(), one(), one()) == [6, 6, 6]  # 3 x 4 concurrent would be 12
    assert server.peak == 5 and slots.peak == 5 and slots.in_flight == 0


def test_a_visitor_runs_at_most_the_operators_number_of_evaluations() -> None:
    jobs = VisitorJobs(per_session=1, per_address=2)
    with jobs.hold("session-a", "10.0.0.1"):
        with pytest.raises(GuardError, match="at most 1 per visitor"):
            with jobs.hold("session-a", "10.0.0.1"):
                pass
        with jobs.hold("session-b", "10.0.0.1"):  # a second tab from the same address
            with pytest.raises(GuardError, match="from your address \\(at most 2\\)"):
                with jobs.hold("session-c", "10.0.0.1"):
                    pass
            with jobs.hold("session-d", "10.0.0.2"):
                assert jobs.running() == 3
    assert jobs.running() == 0
    with jobs.hold("session-a", "10.0.0.1"):  # a finished (or stopped) run frees its place
        pass


def test_the_address_behind_trusted_proxies_is_the_one_they_saw() -> None:
    request = SimpleNamespace(client=SimpleNamespace(host="10.1.1.1"),
                              headers={"x-forwarded-for": "6.6.6.6, 203.0.113.7"})
    assert client_address(request) == "10.1.1.1"  # no trusted proxy: the peer
    assert client_address(request, proxy_hops=1) == "203.0.113.7"  # never the client-written 6.6.6.6
    assert client_address(None) is None


def test_caps_are_the_operators_choice(tmp_path) -> None:
    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_EVAL_CONCURRENCY": "3",
                                       "DININGBENCH_SPACE_REQUEST_CONCURRENCY": "5"}, repo_root=tmp_path)
    assert (settings.max_requests, settings.jobs_per_visitor, settings.jobs_per_address) == (15, 1, 2)
    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_MAX_REQUESTS": "6", "DININGBENCH_SPACE_JOBS_PER_VISITOR": "2",
                                       "DININGBENCH_SPACE_JOBS_PER_ADDRESS": "0", "DININGBENCH_SPACE_PROXY_HOPS": "1",
                                       "DININGBENCH_SPACE_MAX_ANSWER_CHARS": "500"}, repo_root=tmp_path)
    assert (settings.max_requests, settings.jobs_per_visitor, settings.jobs_per_address, settings.proxy_hops,
            settings.max_answer_chars) == (6, 2, 0, 1, 500)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_visitors_key_goes_to_the_public_endpoint_not_the_operators_server(
        provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert supports_own_keys(provider), f"the {provider} backend takes no per-call key"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.5:8000/v1")  # the operator's private vLLM
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://10.0.0.5:8001/")
    request = EvalRequest(task="classification", model=OWN_KEY, n_items=1, provider=provider, own_model="m",
                          api_key=KEY)
    spec, options = resolve(request, _settings())
    public = {"openai": "https://api.openai.com/v1", "gemini": "https://generativelanguage.googleapis.com/"}[provider]
    assert options["base_url"] == public
    backend = make_backend_for(spec, options, RequestSlots(1))
    assert backend.describe()["base_url_host"] == public.split("/")[2]


def test_the_public_openai_endpoint_is_the_backends_own() -> None:
    from eval.backends import provider_module, traits

    assert traits("openai").public_endpoint == provider_module("openai").OPENAI_URL
    assert not traits("vllm").takes_key and traits("vllm").open_weights and not traits("baseline").takes_key


@pytest.mark.parametrize("status", [302, 307])
async def test_a_redirect_from_an_allow_listed_host_is_not_followed(status: int) -> None:
    with HostileServer("target") as target, HostileServer("redirect", status=status,
                                                          location=target.url + "/chat/completions") as server:
        updates = [u async for u in stream_evaluation(_own(server, 2), _settings(), RequestSlots(8))]
    assert target.received == target.gets == 0, f"a {status} was followed to another origin: {target.authorizations}"
    errors = [r.error for r in updates[-1].results]
    assert len(errors) == 2 and all(e and e.startswith(REDIRECTED) for e in errors), errors
    assert all(KEY not in (e or "") for e in errors)


async def test_a_huge_answer_is_kept_and_shown_only_up_to_the_operators_bound() -> None:
    with HostileServer("huge", size=1_000_000) as server:
        updates = [u async for u in stream_evaluation(_own(server, 1), _settings(max_answer_chars=1000),
                                                      RequestSlots(8))]
    (result,) = updates[-1].results
    shown = result.error or result.raw
    assert shown is not None and len(shown) < 1100, len(shown or "")
    assert updates[-1].metrics["n"] == 1
