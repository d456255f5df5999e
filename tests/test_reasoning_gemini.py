"""Gemini thinking models through the real google-genai client against a fake Gemini API whose
thoughts count against maxOutputTokens, as the real ones do: a limit used up by thinking is a
truncated answer (asked once), not an "empty answer" retried six times.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import api
from eval.backends import gemini, make_backend
from eval.settings import RunSettings
from eval.types import ConfigError
from tests.fakes.gemini_server import FakeGeminiServer
from tests.helpers_backends import opts
from tests.helpers_harness import make_release, model_oracle, read_jsonl

KEY = "AIza-test-thinking-0c1d"


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


@pytest.fixture(autouse=True)
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)


def run(release_dir: Path, server: FakeGeminiServer, out: Path, **overrides) -> tuple[Path, list[dict]]:
    base = dict(task="nutrition", model="gemini:gemini-2.5-pro", base_url=server.url, dataset=str(release_dir),
                out=out, concurrency=3, seed=3, timeout=10.0, max_attempts=3, retry_base_delay=0.05, n_boot=100,
                max_image_side=128)
    s = RunSettings(**{**base, **overrides})
    server.oracle = model_oracle(release_dir, s)
    folder = api.run(s, progress=False)
    return folder, read_jsonl(folder / "predictions.jsonl")


def test_a_default_run_leaves_room_to_think_and_counts_the_thoughts(release_dir, tmp_path):
    with FakeGeminiServer(thinking_tokens=6000) as server:
        out, predictions = run(release_dir, server, tmp_path / "run")
    assert len(server.requests) == 4 and all(r.max_tokens == 16384 for r in server.requests)
    assert all(r.extra["thinking_budget"] is None for r in server.requests)  # the model's own default
    for p in predictions:
        assert p["error"] is None and p["finish_reason"] == "stop" and not p["truncated"]
        assert p["usage"]["reasoning_tokens"] == 6000 and p["usage"]["completion_tokens"] == 6005
    assert json.loads((out / "metrics.json").read_text())["nutrition"]["avg_mape"] == 0.0
    policy = json.loads((out / "run.json").read_text())["backend"]["request_policy"]
    assert policy["token_limit"] == 16384 and policy["thinking"] == "the model's default"


def test_thinking_that_uses_the_limit_is_truncated_and_not_asked_again(release_dir, tmp_path):
    with FakeGeminiServer(thinking_tokens=6000) as server:
        out, predictions = run(release_dir, server, tmp_path / "run", max_tokens=1000)
    assert len(server.requests) == 4
    for p in predictions:
        assert (p["raw"], p["finish_reason"], p["truncated"], p["error"], p["attempts"]) == ("", "length", True,
                                                                                               None, 1)
        assert p["usage"]["reasoning_tokens"] == 1000
    assert json.loads((out / "run.json").read_text())["backend"]["request_policy"]["truncated_by_limit"] == 4


def test_a_thinking_budget_is_sent_and_bounds_the_thoughts(release_dir, tmp_path):
    with FakeGeminiServer(thinking_tokens=6000) as server:
        out, predictions = run(release_dir, server, tmp_path / "run", thinking_budget=2048)
    assert [r.extra["thinking_budget"] for r in server.requests] == [2048] * 4
    assert all(p["usage"]["reasoning_tokens"] == 2048 and p["error"] is None for p in predictions)
    assert json.loads((out / "run.json").read_text())["backend"]["request_policy"]["thinking_budget"] == 2048


def test_gemini_3_takes_the_reasoning_effort_as_its_thinking_level(release_dir, tmp_path):
    with FakeGeminiServer(thinking_tokens=500) as server:
        _, predictions = run(release_dir, server, tmp_path / "run", model="gemini:gemini-3-pro-preview",
                             reasoning_effort="low")
    assert [r.extra["thinking_level"] for r in server.requests] == ["LOW"] * 4
    assert all(p["error"] is None for p in predictions)


@pytest.mark.parametrize("model, options, message", [
    ("gemini-2.5-pro", {"reasoning_effort": "high"}, "no thinking levels.*--thinking-budget"),
    ("gemini-3-pro-preview", {"reasoning_effort": "high", "thinking_budget": 1024}, "not both"),
    ("gemini-2.5-pro", {"thinking_budget": 16000}, "--thinking-budget 16000 leaves no room.*at least 17024"),
])
def test_thinking_settings_the_api_would_refuse_are_refused_at_start(model, options, message):
    with pytest.raises(ConfigError, match=message):
        gemini.make(model, opts(base_url="http://127.0.0.1:9", **options))


@pytest.mark.parametrize("spec, options, flag", [
    ("baseline:zero", {"dataset_items": {}, "reasoning_effort": "high"}, "--reasoning-effort"),
    ("baseline:zero", {"dataset_items": {}, "thinking_budget": 512}, "--thinking-budget"),
    ("vllm:Qwen/Qwen3-VL-8B-Thinking", {"reasoning_effort": "low"}, "--reasoning-effort"),
    ("vllm:Qwen/Qwen3-VL-8B-Thinking", {"thinking_budget": 512}, "--thinking-budget"),
    ("hf:./no-such-model", {"reasoning_effort": "low"}, "--reasoning-effort"),
    ("hf:./no-such-model", {"thinking_budget": 512}, "--thinking-budget"),
])
def test_backends_that_cannot_use_a_thinking_option_refuse_it_in_one_line(spec, options, flag):
    with pytest.raises(ConfigError, match=flag) as caught:
        make_backend(spec, opts(**options))
    assert "\n" not in str(caught.value) and spec in str(caught.value)
