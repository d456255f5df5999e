"""Kill -9 in the middle of a run, rerun the same command: nothing lost, nothing duplicated,
finished samples not asked again. Also the live iterator the Space uses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval import api, tasks
from eval.api import RunSettings
from eval.scoring import score_prediction
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import item_of, make_release, model_oracle, read_jsonl

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def test_kill_9_then_rerun_loses_and_duplicates_nothing(release, tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer() as server:
        s = RunSettings(task="classification", model="openai:slow", base_url=server.base_url, dataset=str(release),
                        out=out, concurrency=1, n_boot=100)
        ps = s
        server.oracle = model_oracle(release, ps)
        server.inject("hang", times=1000, seconds=0.4)  # every answer takes 0.4 s
        argv = [sys.executable, "-m", "eval", "run", "--task", "classification", "--model", "openai:slow",
                "--base-url", server.base_url, "--dataset", str(release), "--out", str(out),
                "--concurrency", "1", "--no-progress"]
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        predictions = out / "predictions.jsonl"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if predictions.exists() and predictions.read_text().count("\n") >= 2:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        finished_before = {p["id"] for p in read_jsonl(predictions) if p["error"] is None}
        assert 2 <= len(finished_before) < 6

        server.clear_faults()
        server.requests.clear()
        api.run(s, progress=False)
        asked_again = {item_of(r, release, ps) for r in server.requests}

    assert asked_again.isdisjoint(finished_before)
    assert asked_again | finished_before == {f"c{i}" for i in range(1, 7)}
    lines = read_jsonl(out / "predictions.jsonl")
    assert sorted(p["id"] for p in lines) == [f"c{i}" for i in range(1, 7)]


async def test_iter_predictions_streams_each_sample_with_its_row(release):
    settings = RunSettings(task="classification", model="baseline:first", dataset=str(release), limit=4)
    seen = []
    async for prediction, row in api.iter_predictions(settings):
        seen.append((prediction.id, prediction.parsed, score_prediction(tasks.get(prediction.task), prediction, row)["correct"]))
        assert "images" not in row and row["id"] == prediction.id
    assert sorted(seen) == [("c1", "A", True), ("c2", "A", False), ("c3", "A", True), ("c4", "A", False)]
