"""The gemini: backend through the real google-genai client against a fake Gemini API on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import api
from eval.api import RunSettings
from tests.fakes.gemini_server import FakeGeminiServer
from tests.helpers_harness import item_of, make_release, model_oracle, read_jsonl

KEY = "AIza-test-DO-NOT-LEAK-55e1"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def settings_for(release: Path, server: FakeGeminiServer, out: Path, **overrides) -> RunSettings:
    base = dict(task="nutrition", model="gemini:gemini-fake", base_url=server.url, dataset=str(release), out=out,
                concurrency=3, max_tokens=96, seed=3, timeout=10.0, max_attempts=3, retry_base_delay=0.05, n_boot=200,
                max_image_side=128)
    base.update(overrides)
    return RunSettings(**base)


def test_generate_content_carries_key_views_and_settings(release, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    with FakeGeminiServer() as server:
        s = settings_for(release, server, tmp_path / "run", images=3, image_order="user-first")
        server.oracle = model_oracle(release, s)
        out = api.run(s, progress=False)
    assert len(server.requests) == 4
    for request in server.requests:
        assert request.path.endswith("/models/gemini-fake:generateContent")
        assert request.headers["x-goog-api-key"] == KEY
        assert (request.temperature, request.max_tokens, request.seed) == (0, 96, 3)
        assert len(request.images) == 3
    # n1's large PNG view was shrunk to the 128 px bound and sent as JPEG.
    from io import BytesIO

    from PIL import Image
    sizes = [Image.open(BytesIO(img)).size for r in server.requests for img in r.images]
    assert max(max(size) for size in sizes) <= 128
    metrics = json.loads((out / "metrics.json").read_text())["nutrition"]
    assert metrics["avg_mape"] == 0.0 and metrics["parse_failures"] == 0
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace")


def test_rate_limit_is_retried_and_a_blocked_prompt_fails(release, tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with FakeGeminiServer() as server:
        s = settings_for(release, server, tmp_path / "run")
        ps = s
        server.oracle = model_oracle(release, ps)
        server.inject("429", times=1, retry_after=0.05, match=lambda r: item_of(r, release, ps) == "n1")
        server.inject("content_filter", match=lambda r: item_of(r, release, ps) == "n2")
        out = api.run(s, progress=False)
    predictions = {p["id"]: p for p in read_jsonl(out / "predictions.jsonl")}
    assert predictions["n1"]["attempts"] == 2 and predictions["n1"]["error"] is None
    assert predictions["n2"]["attempts"] == 1 and "blocked" in predictions["n2"]["error"]
    scores = {r["id"]: r for r in read_jsonl(out / "scores.jsonl")}
    # The blocked sample counts as an unparsed prediction: APE 1.0 on every component.
    assert scores["n2"]["ape"] == {"calories": 1.0, "protein": 1.0, "carbohydrates": 1.0, "fat": 1.0}
    metrics = json.loads((out / "metrics.json").read_text())["nutrition"]
    assert metrics["generation_failures"] == 1 and metrics["parse_failures"] == 1
    assert metrics["calories_mape"] == pytest.approx(1 / 4)
    assert metrics["protein_mape"] == pytest.approx(1 / 3)  # n4's protein is 0: three items count
