"""kill -9 at random moments of `python -m eval run`, then the same command again: every item ends
answered exactly once, no line of predictions.jsonl is duplicated or torn, and no item that was
already saved is asked of the model again (the fake server records every request).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from eval import api
from eval.api import RunSettings
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import model_oracle
from tests.helpers_reliability import (
    Key,
    answers,
    cli_env,
    item_keys,
    run_cli,
    slow,
    start_cli,
    write_long_release,
)

KILLS = 5
COPIES = 4  # 24 classification items
LATENCY_S = 0.2  # per request: with concurrency 2 a kill finds requests in flight
SEED = 2024


def saved_items(predictions: Path) -> set[Key]:
    """Items with a complete line; every complete line must be whole JSON and appear once.

    A last line without its newline (the process died while writing it) is allowed here: the
    store cuts it when the run is resumed.
    """
    if not predictions.exists():
        return set()
    *complete, _tail = predictions.read_bytes().split(b"\n")
    keys = []
    for line in complete:
        row = json.loads(line)  # a torn line in the middle of the file would raise here
        keys.append((row["task"], row["id"]))
    assert len(keys) == len(set(keys)), f"duplicate lines: {sorted(keys)}"
    return set(keys)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_long_release(tmp_path_factory.mktemp("release"), COPIES)


def test_kill_9_at_random_moments_then_resume(release, tmp_path):
    rng = random.Random(SEED)
    out = tmp_path / "run"
    with FakeOpenAIServer() as server:
        settings = RunSettings(task="classification", model="openai:fake-vlm", base_url=server.base_url, dataset=str(release),
                               out=out, concurrency=2, max_tokens=64, timeout=30.0)
        prompt = settings
        keys = {k: item for k, item in item_keys(release, prompt).items() if item[0] == "classification"}
        server.oracle = slow(model_oracle(release, prompt, wrong={"c2-1", "c5-3"}), LATENCY_S)
        args = ["run", "--task", "classification", "--model", "openai:fake-vlm", "--base-url", server.base_url,
                "--dataset", str(release), "--out", str(out), "--concurrency", "2", "--max-tokens", "64",
                "--timeout", "30"]
        env = cli_env(OPENAI_API_KEY="sk-kill-test")

        saved: set[Key] = set()
        for _ in range(KILLS):
            before = len(server.requests)
            proc = start_cli(args, env=env, log=tmp_path / "runs.log")
            # A random moment: after this run's 1st, 2nd or 3rd request, plus up to one latency.
            wanted, deadline = before + rng.randint(1, 3), time.monotonic() + 120
            while len(server.requests) < wanted and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, LATENCY_S))
            assert proc.poll() is None, (tmp_path / "runs.log").read_text()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            asked = {keys[r.key] for r in server.requests[before:]}
            assert not asked & saved, f"saved items asked again: {sorted(asked & saved)}"
            saved |= saved_items(out / "predictions.jsonl")
        assert 0 < len(saved) < len(keys), "the kills should land mid-run"

        before = len(server.requests)
        final = run_cli(args, env=env)
        asked = {keys[r.key] for r in server.requests[before:]}
        requests_total = len(server.requests)

        clean = RunSettings(**{**settings.__dict__, "out": tmp_path / "clean", "concurrency": 8})
        api.run(clean, progress=False)

    assert final.returncode == 0, final.stderr
    assert not asked & saved and asked | saved == set(keys.values())
    lines = (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(keys) and saved_items(out / "predictions.jsonl") == set(keys.values())
    # Same answers as an uninterrupted run; the only extra requests are the ones killed in flight.
    assert answers(out) == answers(tmp_path / "clean")
    assert json.loads((out / "metrics.json").read_text()) == json.loads((tmp_path / "clean" / "metrics.json").read_text())
    assert requests_total - len(keys) <= len(keys) + 2 * KILLS
    print(f"\n{KILLS} kill -9 survived; {len(saved)} items saved before the last rerun, {len(asked)} asked by it")
