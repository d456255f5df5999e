"""OpenAI reasoning models (o3, o4-mini, gpt-5) through the `openai:` backend, against a fake that
refuses what the real API refuses: `max_tokens` and temperature 0 (HTTP 400, OpenAI's own bodies).

A default run (16,384 tokens) answers every item with one request each; a model the name table
does not know is asked at full concurrency from the start, and each request refused for a field is
sent again once the policy has adapted (at most once per refused field, counted in run.json); a
budget smaller than the model's thinking gives truncated answers that are not asked again.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from eval import api
from eval.backends import openai_chat, release
from eval.backends.policy import ChatPolicy, is_openai_reasoning_model, parse_refusal
from eval.settings import RunSettings
from eval.types import ConfigError, GenerationConfig, Message, Request
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_backends import opts
from tests.helpers_harness import make_release, model_oracle, read_jsonl

KEY = "sk-test-reasoning-1b2c3d"
ITEMS = 6 + 4 + 3


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


@pytest.fixture(autouse=True)
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def settings(release_dir: Path, server: FakeOpenAIServer, out: Path, **overrides) -> RunSettings:
    base = dict(task="all", model="openai:o4-mini", base_url=server.base_url, dataset=str(release_dir), out=out,
                concurrency=4, seed=7, timeout=10.0, max_attempts=4, retry_base_delay=0.05, n_boot=100)
    base.update(overrides)
    return RunSettings(**base)


def run(release_dir: Path, server: FakeOpenAIServer, out: Path, **overrides) -> tuple[Path, list[dict]]:
    s = settings(release_dir, server, out, **overrides)
    server.oracle = model_oracle(release_dir, s)
    folder = api.run(s, progress=False)
    return folder, read_jsonl(folder / "predictions.jsonl")


def test_the_name_table_knows_openais_reasoning_models():
    assert all(map(is_openai_reasoning_model, ["o1", "o3", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini",
                                               "gpt-5.1", "openai/gpt-5-nano"]))
    assert not any(map(is_openai_reasoning_model, ["gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest", "Qwen/Qwen3-VL-8B",
                                                   "olmo-2", "o"]))


def test_a_known_reasoning_model_is_asked_right_the_first_time(release_dir, tmp_path):
    with FakeOpenAIServer(reasoning=True, thinking_tokens=3000) as server:
        out, predictions = run(release_dir, server, tmp_path / "run")
    assert len(server.requests) == ITEMS and not any(r.fault for r in server.requests)
    for sent in server.requests:
        assert sent.extra == {"max_completion_tokens": 16384} and "temperature" not in sent.body
        assert sent.seed == 7
    assert all(p["error"] is None and p["attempts"] == 1 and not p["truncated"] for p in predictions)
    assert all(p["usage"]["reasoning_tokens"] == 3000 and p["usage"]["completion_tokens"] == 3005
               for p in predictions)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["classification"]["accuracy"] == 1.0 and metrics["nutrition"]["avg_mape"] == 0.0
    policy = json.loads((out / "run.json").read_text())["backend"]["request_policy"]
    assert policy["token_limit_param"] == "max_completion_tokens" and policy["token_limit"] == 16384
    assert policy["temperature"].startswith("omitted") and policy["recognised_as"].startswith("reasoning")


def test_an_unknown_reasoning_model_is_adapted_once_for_the_whole_run(release_dir, tmp_path):
    """Two adaptations (max_tokens, then temperature) for the whole run; only refused requests are
    sent again, and run.json counts them."""
    with FakeOpenAIServer(reasoning=True, thinking_tokens=3000) as server:
        server.hold_first(8)  # the first 8 requests are in flight together, all built before any refusal
        out, predictions = run(release_dir, server, tmp_path / "run", model="openai:house-reasoner", concurrency=8)
    assert server.held_together
    refused = [r for r in server.requests if r.fault == "refused"]
    assert sum("max_tokens" in r.body for r in refused) == 8  # the first round, sent before anything was learnt
    assert all(p["error"] is None and p["attempts"] == 1 for p in predictions)
    answered = [r for r in server.requests if r.fault is None]
    assert len(answered) == ITEMS
    assert all("max_tokens" not in r.body and "temperature" not in r.body for r in answered)
    policy = json.loads((out / "run.json").read_text())["backend"]["request_policy"]
    assert policy["token_limit_param"] == "max_completion_tokens"
    assert len(policy["adapted"]) == 2 and policy["temperature"].startswith("omitted")
    assert policy["resent"] == len(refused) == len(server.requests) - ITEMS
    # Each item: its answer, after at most one refusal per refused field.
    per_item = {}
    for sent in server.requests:
        per_item[sent.key] = per_item.get(sent.key, 0) + 1
    assert len(per_item) == ITEMS and max(per_item.values()) <= 3


@pytest.mark.parametrize("list_models", [True, False], ids=["models-without-context", "models-404"])
def test_64_requests_in_flight_at_once_refused_max_tokens_are_each_resent_once(list_models):
    """A server that reports no context (its /v1/models lists no max_model_len, or answers 404): all
    64 requests go out at once, none waits for another. OpenAI refuses `max_tokens` for every one of
    them; the policy adapts once and only the refused requests are sent again, with
    `max_completion_tokens` (then, for the ones still sent with a temperature, without it)."""
    requests = [Request(id=f"q{k}", task="vqa", messages=(Message("user", (f"Which dish is {k}?",)),),
                        config=GenerationConfig(), request_hash=f"h{k}") for k in range(64)]

    async def ask_all(backend):
        try:
            return await asyncio.gather(*(backend.generate(r) for r in requests))
        finally:
            await release(backend)

    with FakeOpenAIServer(oracle=lambda r: r.prompt.split()[-1].rstrip("?"), reasoning=True, thinking_tokens=100,
                          list_models=list_models) as server:
        server.hold_first(64)
        backend = openai_chat.make("house-reasoner", opts(base_url=server.base_url))
        responses = asyncio.run(ask_all(backend))
    assert server.held_together  # the first 64 POSTs were all in flight together
    assert server.gets == ["/v1/models"]  # asked once for a context, which it did not give
    assert [r.text for r in responses] == [str(k) for k in range(64)]
    first_round = server.requests[:64]
    assert all(r.fault == "refused" and "max_tokens" in r.body for r in first_round)
    refused = [r for r in server.requests if r.fault == "refused"]
    later = server.requests[64:]
    assert sum("max_tokens" in r.body for r in later) == 0  # max_tokens refused once per request, never again
    assert len([r for r in later if "max_completion_tokens" in r.body]) == len(later)
    policy = backend.describe()["request_policy"]
    assert policy["resent"] == len(refused) == len(server.requests) - 64
    assert len(policy["adapted"]) == 2
    per_request = {}
    for sent in server.requests:
        per_request[sent.prompt] = per_request.get(sent.prompt, 0) + 1
    assert set(per_request.values()) <= {2, 3}  # refused for max_tokens, maybe for temperature, answered


def test_a_budget_below_the_thinking_need_gives_truncated_answers_not_retries(release_dir, tmp_path):
    with FakeOpenAIServer(reasoning=True, thinking_tokens=3000) as server:
        out, predictions = run(release_dir, server, tmp_path / "run", task="classification", max_tokens=1000)
    assert len(server.requests) == 6  # nothing asked twice: the same request would be cut again
    for p in predictions:
        assert (p["raw"], p["finish_reason"], p["truncated"], p["error"], p["attempts"]) == ("", "length", True,
                                                                                               None, 1)
        assert p["usage"]["reasoning_tokens"] == 1000
    assert json.loads((out / "metrics.json").read_text())["classification"]["accuracy"] == 0.0


def test_reasoning_effort_is_sent_to_a_reasoning_model(release_dir, tmp_path):
    with FakeOpenAIServer(reasoning=True) as server:
        out, _ = run(release_dir, server, tmp_path / "run", task="vqa", reasoning_effort="high")
    assert [r.extra.get("reasoning_effort") for r in server.requests] == ["high"] * 3
    assert json.loads((out / "run.json").read_text())["backend"]["request_policy"]["reasoning_effort"] == "high"


def test_reasoning_effort_a_model_refuses_fails_in_one_line_without_asking_every_item(release_dir, tmp_path):
    with FakeOpenAIServer(refuse_reasoning_effort=True) as server:
        _, predictions = run(release_dir, server, tmp_path / "run", model="openai:gpt-4o", task="classification",
                             reasoning_effort="low", concurrency=2)
    assert len(server.requests) <= 2 < len(predictions) == 6  # only the requests in flight when it was refused
    errors = {p["error"] for p in predictions}
    assert len(errors) == 1
    (error,) = errors
    assert "reasoning_effort" in error and "--reasoning-effort" in error and "\n" not in error


def test_a_thinking_budget_is_refused_before_any_request():
    with pytest.raises(ConfigError, match="--thinking-budget.*openai:o3.*--reasoning-effort"):
        openai_chat.make("o3", opts(thinking_budget=1024))


def test_no_limit_sends_no_limit():
    with FakeOpenAIServer(oracle=lambda r: "A") as server:
        backend = openai_chat.make("gpt-4o", opts(base_url=server.base_url, max_tokens=None))
        request = Request(id="x", task="vqa", messages=(Message("user", ("Hi",)),),
                          config=GenerationConfig(max_tokens=None), request_hash="x")

        async def ask():
            try:
                return await backend.generate(request)
            finally:
                await release(backend)

        assert asyncio.run(ask()).text == "A"
    assert not {"max_tokens", "max_completion_tokens"} & set(server.requests[0].body)
    assert server.requests[0].temperature == 0.0


def test_refusals_are_read_from_openais_error_bodies():
    body = (b'{"error": {"message": "Unsupported value: \'temperature\' does not support 0 with this model. Only the '
            b'default (1) value is supported.", "type": "invalid_request_error", "param": "temperature", '
            b'"code": "unsupported_value"}}')
    assert parse_refusal(body).param == "temperature"
    assert parse_refusal(b'{"error": {"message": "injected 400", "code": 400}}') is None
    assert parse_refusal(b"not json") is None
    policy = ChatPolicy("gpt-4o")
    _, version = policy.body("gpt-4o", [], GenerationConfig(), 10)
    assert policy.adapt(body, version, 10, 16384) == ("retry", None)
    assert policy.adapt(body, version, 10, 16384) == ("retry", None)  # a second in-flight refusal: no new adaptation
    assert len(policy.adaptations) == 1 and not policy.send_temperature
