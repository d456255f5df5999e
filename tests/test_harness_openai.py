"""End to end through the `openai:` backend against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import api
from eval.api import RunSettings, UsageError
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import CLASSIFICATION_ANSWERS, item_of, make_release, model_oracle, read_jsonl

KEY = "sk-test-DO-NOT-LEAK-7f3a9c"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def settings_for(release: Path, server: FakeOpenAIServer, out: Path, **overrides) -> RunSettings:
    base = dict(task="all", model="openai:fake-vlm", base_url=server.base_url, dataset=str(release), out=out,
                concurrency=4, max_tokens=64, seed=7, timeout=10.0, max_attempts=4, retry_base_delay=0.05, n_boot=200)
    base.update(overrides)
    return RunSettings(**base)


def prompt_settings(s: RunSettings) -> RunSettings:
    return s


def test_every_item_answered_once_with_every_view_at_temperature_zero(release, tmp_path, keyed):
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, tmp_path / "run")
        server.oracle = model_oracle(release, prompt_settings(s), wrong={"c2", "n2", "v3"})
        out = api.run(s, progress=False)

    predictions = read_jsonl(out / "predictions.jsonl")
    keys = [(p["task"], p["id"]) for p in predictions]
    assert len(keys) == len(set(keys)) == 6 + 4 + 3
    assert all(p["error"] is None and p["attempts"] == 1 for p in predictions)
    assert len(server.requests) == 13
    for request in server.requests:
        assert request.temperature == 0 and request.max_tokens == 64 and request.seed == 7
        assert request.headers["authorization"] == f"Bearer {KEY}"
    # Every view was sent: 3 per classification item, 4 per nutrition item, 2 per VQA item.
    assert sorted(len(r.images) for r in server.requests) == [2] * 3 + [3] * 6 + [4] * 4

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["classification"]["accuracy"] == pytest.approx(5 / 6)  # c2 answered H
    assert metrics["classification"]["parse_failures"] == 0
    low, high = metrics["classification"]["accuracy_ci95"]
    assert 0 <= low <= 5 / 6 <= high <= 1
    # n2 answered 1.0 for every nutrient: APE per component (599/600, 29/30, 69/70, 19/20); others exact.
    cal = 599 / 600 / 4
    prot = 29 / 30 / 3  # n4 has protein 0: three items in the protein MAPE
    carb = 69 / 70 / 4
    fat = 19 / 20 / 4
    assert metrics["nutrition"]["avg_mape"] == pytest.approx((cal + prot + carb + fat) / 4)
    assert metrics["vqa"]["scored"] is False and "--judge" in metrics["vqa"]["note"]


def test_scores_jsonl_contract(release, tmp_path, keyed):
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, tmp_path / "run", images=2)
        server.oracle = model_oracle(release, prompt_settings(s), overrides={"c3": "I think it's B... no, A or D"})
        out = api.run(s, progress=False)
    scores = {(r["task"], r["id"]): r for r in read_jsonl(out / "scores.jsonl")}
    fields = {"id", "task", "epoch", "merchant_id", "cuisine", "category", "vqa_category", "nutrition_source",
              "n_images", "n_options", "parsed", "error", "truncated", "finish_reason", "usage", "reference", "correct", "ape",
              "abs_error", "verdict", "decided_by"}
    assert all(set(r) == fields for r in scores.values())
    assert all(r["epoch"] == 0 and r["truncated"] is False for r in scores.values())
    c1, c3 = scores[("classification", "c1")], scores[("classification", "c3")]
    assert (c1["parsed"], c1["reference"], c1["correct"], c1["n_images"]) == ("A", "A", True, 2)
    assert c3["parsed"] is None and c3["correct"] is False  # ambiguous answer: unparsed, counted wrong
    n4 = scores[("nutrition", "n4")]
    assert n4["ape"] == {"calories": 0.0, "protein": None, "carbohydrates": 0.0, "fat": 0.0}
    assert n4["nutrition_source"] == "computed" and n4["vqa_category"] is None
    v1 = scores[("vqa", "v1")]
    assert v1["verdict"] is None and v1["correct"] is None and v1["vqa_category"] == "cuisine_technique"
    assert [r["reference"] for k, r in scores.items() if k[0] == "classification"] == CLASSIFICATION_ANSWERS


def test_key_never_written_or_printed(release, tmp_path, keyed, capsys):
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, tmp_path / "run", task="classification")
        server.oracle = model_oracle(release, prompt_settings(s))
        server.inject("401", times=1)
        out = api.run(s, progress=True)
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace"), path
    captured = capsys.readouterr()
    assert KEY not in captured.out + captured.err
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["base_url_host"] == f"127.0.0.1:{server.port}"


def test_resume_skips_answered_and_retries_failed(release, tmp_path, keyed):
    out = tmp_path / "run"
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, out, task="classification")
        server.oracle = model_oracle(release, prompt_settings(s))
        server.inject("400", times=1, match=lambda r: item_of(r, release, prompt_settings(s)) == "c4")
        api.run(s, progress=False)
        first = read_jsonl(out / "predictions.jsonl")
        failed = [p for p in first if p["error"]]
        assert [p["id"] for p in failed] == ["c4"] and "400" in failed[0]["error"]
        assert failed[0]["attempts"] == 1  # a 400 is not retried
        assert json.loads((out / "metrics.json").read_text())["classification"]["accuracy"] == pytest.approx(5 / 6)

        server.requests.clear()
        api.run(s, progress=False)  # same command again: only the failed sample is asked
        assert [item_of(r, release, prompt_settings(s)) for r in server.requests] == ["c4"]
        lines = read_jsonl(out / "predictions.jsonl")
        assert len(lines) == 6 and all(p["error"] is None for p in lines)
        assert json.loads((out / "metrics.json").read_text())["classification"]["accuracy"] == 1.0

        server.requests.clear()
        api.run(s, progress=False)
        assert server.requests == []


def test_torn_last_line_is_repaired_and_resumed(release, tmp_path, keyed):
    out = tmp_path / "run"
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, out, task="classification")
        server.oracle = model_oracle(release, prompt_settings(s))
        api.run(s, progress=False)
        lines = (out / "predictions.jsonl").read_text().splitlines(keepends=True)
        # As if killed mid-write: three complete lines and half of the fourth.
        (out / "predictions.jsonl").write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
        server.requests.clear()
        api.run(s, progress=False)
    assert len(server.requests) == 3
    final = read_jsonl(out / "predictions.jsonl")
    assert sorted(p["id"] for p in final) == ["c1", "c2", "c3", "c4", "c5", "c6"]


def test_folder_of_another_run_is_refused_unless_overwrite(release, tmp_path, keyed):
    out = tmp_path / "run"
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, out, task="classification", limit=2)
        server.oracle = model_oracle(release, prompt_settings(s))
        api.run(s, progress=False)
        other = settings_for(release, server, out, task="classification", limit=2, lang="en")
        with pytest.raises(UsageError, match="different run.*lang.*--overwrite"):
            api.run(other, progress=False)
        other.overwrite = True
        api.run(other, progress=False)
    assert len(read_jsonl(out / "predictions.jsonl")) == 2


@pytest.mark.parametrize("fault, options", [
    ("429", {"retry_after": 0.05}), ("429", {}), ("500", {}), ("503", {}), ("drop", {}), ("malformed", {}),
    ("empty", {}), ("hang", {"seconds": 4.0}),
])
def test_transient_faults_end_like_a_clean_run(release, tmp_path, keyed, fault, options):
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, tmp_path / "run", task="classification",
                         timeout=1.5 if fault == "hang" else 10.0)
        server.oracle = model_oracle(release, prompt_settings(s), wrong={"c5"})
        server.inject(fault, times=2, **options)
        out = api.run(s, progress=False)
        attempts = len(server.requests)
        assert sum(r.fault is not None for r in server.requests) == 2
    predictions = read_jsonl(out / "predictions.jsonl")
    assert all(p["error"] is None for p in predictions)
    assert sum(p["attempts"] for p in predictions) == attempts
    if fault != "hang":  # a hang's timing can add a retry on a very busy machine; the others cannot
        assert attempts == 6 + 2
    assert json.loads((out / "metrics.json").read_text())["classification"]["accuracy"] == pytest.approx(5 / 6)


def test_content_filter_fails_the_sample_at_once(release, tmp_path, keyed):
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, tmp_path / "run", task="classification")
        server.oracle = model_oracle(release, prompt_settings(s))
        server.inject("content_filter", match=lambda r: item_of(r, release, prompt_settings(s)) == "c1")
        out = api.run(s, progress=False)
    c1 = next(p for p in read_jsonl(out / "predictions.jsonl") if p["id"] == "c1")
    assert c1["attempts"] == 1 and "content blocked" in c1["error"] and c1["raw"] is None
    score = next(r for r in read_jsonl(out / "scores.jsonl") if r["id"] == "c1")
    assert score["correct"] is False and score["parsed"] is None


def test_judge_scores_vqa_and_rescoring_uses_the_cache(release, tmp_path, keyed):
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, tmp_path / "run", task="vqa", judge="openai:fake-judge",
                         judge_base_url=None)
        s.judge_base_url = server.base_url
        server.oracle = model_oracle(release, prompt_settings(s), wrong={"v2"})
        out = api.run(s, progress=False)
        metrics = json.loads((out / "metrics.json").read_text())["vqa"]
        assert metrics["scored"] is True and metrics["accuracy"] == pytest.approx(2 / 3)
        judge_requests = [r for r in server.requests if not r.images]
        assert len(judge_requests) == 3 and all(r.temperature == 0 for r in judge_requests)
        scores = {r["id"]: r for r in read_jsonl(out / "scores.jsonl")}
        assert scores["v2"]["verdict"] == "I" and scores["v2"]["correct"] is False
        assert scores["v1"]["decided_by"] == "judge" and scores["v1"]["correct"] is True

        server.requests.clear()
        again = api.score(out, judge="openai:fake-judge", judge_base_url=server.base_url)
        assert server.requests == [] and again["vqa"]["accuracy"] == pytest.approx(2 / 3)
