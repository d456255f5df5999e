"""Fault injection: the `openai:` backend and the real google-genai client, driven by the harness, against fake
servers that fail a seeded half of the first attempts. Transient faults must leave no trace in the
results; fatal ones must end their sample at once, be reported, and be scored as failures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval import api, cli
from eval.api import RunSettings
from tests.fakes.gemini_server import FakeGeminiServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import make_release, model_oracle
from tests.helpers_reliability import (
    TRANSIENT_FAULTS,
    answers,
    inject_fault_plan,
    item_keys,
    predictions_by_item,
    requests_per_item,
)

FAULT_RATE = 0.5  # share of items whose first attempt fails (a third of those fail twice)
SEEDS = {"openai": 11, "gemini": 12}
ITEMS = 6 + 4 + 3  # the tiny release: classification, nutrition, vqa
SERVERS = {"openai": FakeOpenAIServer, "gemini": FakeGeminiServer}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def settings_for(backend: str, server: FakeOpenAIServer | FakeGeminiServer, release: Path, out: Path,
                 **overrides) -> RunSettings:
    base_url = server.base_url if isinstance(server, FakeOpenAIServer) else server.url
    values = dict(task="all", model=f"{backend}:fake-vlm", base_url=base_url, dataset=str(release), out=out,
                  concurrency=8, max_tokens=64, timeout=2.5, max_attempts=4)
    values.update(overrides)
    return RunSettings(**values)


@pytest.mark.parametrize("backend", ["openai", "gemini"])
def test_half_the_first_attempts_failing_changes_nothing(backend, release, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fault-test")
    monkeypatch.setenv("GEMINI_API_KEY", "gk-fault-test")
    with SERVERS[backend]() as server:
        clean = settings_for(backend, server, release, tmp_path / "clean")
        prompt = clean
        server.oracle = model_oracle(release, prompt, wrong={"c2", "n3"})
        api.run(clean, progress=False)
        server.requests.clear()

        keys = item_keys(release, prompt)
        plan = inject_fault_plan(server, keys, rate=FAULT_RATE, seed=SEEDS[backend])
        faulty = api.run(settings_for(backend, server, release, tmp_path / "faulty"), progress=False)
        recorded = list(server.requests)

    # Every transient kind was exercised, and every injected fault reached the client.
    assert set(TRANSIENT_FAULTS) <= {k for kinds in plan.per_item.values() for k in kinds}
    assert sum(r.fault is not None for r in recorded) == plan.injected >= 0.5 * ITEMS
    # The run ends with exactly the answers of the clean run: same raw text, same parse, no errors.
    assert answers(faulty) == answers(tmp_path / "clean")
    assert all(error is None for _, _, error in answers(faulty).values()) and len(answers(faulty)) == ITEMS
    assert json.loads((faulty / "metrics.json").read_text()) == json.loads((tmp_path / "clean" / "metrics.json").read_text())
    # Each faulted item took one attempt per fault plus the one that succeeded; the others one.
    attempts = {k: p["attempts"] for k, p in predictions_by_item(faulty).items()}
    assert attempts == {k: 1 + len(plan.per_item.get(k, [])) for k in attempts}
    assert requests_per_item(server, keys) == attempts
    print(f"\n{backend}: {plan.injected} faults injected into {len(plan.per_item)}/{ITEMS} items, all survived")


@pytest.mark.parametrize("backend, fatal", [
    ("openai", {"c1": "401", "c3": "content_filter", "n1": "400", "v1": "403"}),
    ("gemini", {"c1": "401", "c3": "content_filter", "n1": "400", "v1": "403"}),
])
def test_fatal_errors_fail_their_sample_at_once_and_the_run_reports_them(backend, fatal, release, tmp_path,
                                                                          monkeypatch, capsys):
    with SERVERS[backend]() as server:
        s = settings_for(backend, server, release, tmp_path / "run")
        prompt = s
        server.oracle = model_oracle(release, prompt)
        keys = item_keys(release, prompt)
        by_id = {item_id: key for key, (_, item_id) in keys.items()}
        for item_id, kind in fatal.items():
            server.inject(kind, match=lambda r, k=by_id[item_id]: r.key == k)
        server.inject("503", match=lambda r, k=by_id["c2"]: r.key == k)  # a transient one among them
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fatal-test")
        monkeypatch.setenv("GEMINI_API_KEY", "gk-fatal-test")
        status = cli.main(["run", "--task", "all", "--model", f"{backend}:fake-vlm", "--base-url", s.base_url,
                           "--dataset", str(release), "--out", str(s.out), "--timeout", "2.5", "--max-attempts", "4",
                           "--max-tokens", "64"])
        printed = capsys.readouterr()
        per_item = requests_per_item(server, keys)

    # Items failed: the run says so in its last line, why (each error with its count), and exits 3.
    assert status == cli.EXIT_INCOMPLETE, printed.err
    last = printed.out.strip().splitlines()[-1]
    assert last.startswith(f"incomplete: {len(fatal)} of ") and "run the same command again" in last, last
    assert "why items failed:" in printed.out
    predictions = {k[1]: p for k, p in predictions_by_item(s.out).items()}
    assert len(predictions) == ITEMS  # nothing dropped
    for item_id, kind in fatal.items():
        p = predictions[item_id]
        assert p["attempts"] == 1 and p["raw"] is None and p["parsed"] is None, p
        assert (kind if kind != "content_filter" else "content blocked") in p["error"]
        assert per_item[next(k for k in per_item if k[1] == item_id)] == 1  # asked once, never retried
    assert predictions["c2"]["attempts"] == 2 and predictions["c2"]["error"] is None

    metrics = json.loads((s.out / "metrics.json").read_text())
    assert (metrics["classification"]["n"], metrics["classification"]["generation_failures"]) == (6, 2)
    assert metrics["classification"]["accuracy"] == pytest.approx(4 / 6)  # failures count as wrong
    assert (metrics["nutrition"]["n"], metrics["nutrition"]["generation_failures"]) == (4, 1)
    # n1 failed: 100% error on every component; the rest exact; n4's protein (0 g) is left out.
    assert metrics["nutrition"]["avg_mape"] == pytest.approx((1 / 4 + 1 / 3 + 1 / 4 + 1 / 4) / 4)
    assert (metrics["vqa"]["n"], metrics["vqa"]["generation_failures"]) == (3, 1)
    scores = {r["id"]: r for r in map(json.loads, (s.out / "scores.jsonl").read_text().splitlines())}
    assert scores["c1"]["correct"] is False and scores["c1"]["error"]
    # The printed table says how many samples failed per task.
    # columns: task | n | headline | value | unparsed | truncated | failed | tokens
    assert re.search(r"^\|\s*classification\s*\|\s*6\s*\|[^|]*\|[^|]*\|[^|]*\|\s*0\s*\|\s*2\s*\|", printed.out, re.M), printed.out
    assert re.search(r"^\|\s*nutrition\s*\|\s*4\s*\|[^|]*\|[^|]*\|[^|]*\|\s*0\s*\|\s*1\s*\|", printed.out, re.M), printed.out


def test_a_server_that_never_recovers_ends_each_sample_with_its_error(release, tmp_path):
    """Retries are bounded: 503 on every attempt gives max_attempts tries, then a recorded failure."""
    with FakeOpenAIServer() as server:
        s = settings_for("openai", server, release, tmp_path / "run", task="classification", limit=2,
                         max_attempts=3)
        server.oracle = model_oracle(release, s)
        server.inject("429", times=1000, retry_after=0.01)
        out = api.run(s, progress=False)
    predictions = predictions_by_item(out)
    assert len(predictions) == 2 and len(server.requests) == 2 * 3
    assert all(p["attempts"] == 3 and "429" in p["error"] for p in predictions.values())
    metrics = json.loads((out / "metrics.json").read_text())["classification"]
    # No item was answered: no headline (null), not 0% accuracy scored from the server's refusals.
    assert (metrics["n"], metrics["generation_failures"], metrics["accuracy"]) == (2, 2, None)

