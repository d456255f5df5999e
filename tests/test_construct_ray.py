"""`--engine ray` against `--engine local`: the same release byte for byte at 40 merchants on two
replicas, a killed driver that resumes without paying twice and leaves no Ray process behind, a killed
actor the engine retries. Ray comes from requirements-ray.txt (`make test` runs this file in .venv-ray,
with DININGBENCH_REQUIRE_RAY=1, on a local Ray with the machine's cores); without Ray these tests skip,
except the one that checks the one-line hint."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from construct.__main__ import main
from construct.callstore import rows as call_rows
from construct.work import Stage
from synthetic.raw_export import write_raw_export
from tests.fakes.construct_server import construct_server

REPO = Path(__file__).parents[1]
FILTERS = ("openai:judge-a", "openai:judge-b")
HAVE_RAY = importlib.util.find_spec("ray") is not None
if os.environ.get("DININGBENCH_REQUIRE_RAY") and not HAVE_RAY:
    raise RuntimeError("DININGBENCH_REQUIRE_RAY is set but Ray is not installed (pip install -r requirements-ray.txt)")
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed (requirements-ray.txt; make test runs "
                                                    "this file in .venv-ray)")
COMMON = ("--model", "openai:gen", "--filter-models", ",".join(FILTERS), "--photo-quality-model", "openai:iqa",
          "--photo-match-model", "openai:match", "--concurrency", "16")


def build(*argv: str) -> None:
    assert main(list(argv)) == 0


def parquet_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted((folder / "data").rglob("*.parquet"))}


def full_build(raw: Path, work: Path, release: Path, urls: str, *extra: str) -> None:
    argv = ("run", str(raw), "--out", str(work), "--base-url", urls, *COMMON, *extra)
    build(*argv)  # stops at the base-dish review
    build("review", str(work), "--stage", "dishes", "--approve-all")
    build(*argv)
    build("review", str(work), "--approve-all")
    build("release", str(work), "--out", str(release))


@pytest.fixture(scope="module")
def forty(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray40")
    truth = write_raw_export(root / "raw", merchants=40)
    assert len({d["merchant_id"] for d in truth["dishes"].values()}) == 40
    return root, truth


@pytest.fixture(scope="module")
def local_build(forty):
    """The reference: `--engine local` on two replicas (each its own oracle: the same prompt gets the same
    answer wherever it is asked)."""
    root, truth = forty
    env = pytest.MonkeyPatch()
    env.setenv("OPENAI_API_KEY", "test-key")
    one, _ = construct_server(truth, FILTERS)
    two, _ = construct_server(truth, FILTERS)
    try:
        with one, two:
            full_build(root / "raw", root / "local", root / "release-local", f"{one.base_url},{two.base_url}")
    finally:
        env.undo()
    return root


@needs_ray
@pytest.mark.slow
def test_ray_and_local_release_byte_identical_parquet_at_40_merchants_on_two_replicas(forty, local_build, monkeypatch):
    root, truth = forty
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    one, _ = construct_server(truth, FILTERS)
    two, _ = construct_server(truth, FILTERS)
    with one, two:
        full_build(root / "raw", root / "ray", root / "release-ray", f"{one.base_url},{two.base_url}",
                   "--engine", "ray", "--ray-min-asks", "100")
        assert one.requests and two.requests  # the actors spread their calls over both replicas
    local, ray = parquet_bytes(root / "release-local"), parquet_bytes(root / "release-ray")
    assert sorted(local) == sorted(ray) and len(local) == 3
    assert local == ray
    for stage in ("photos", "dishes", "vqa"):  # the same decisions, not only the same release
        assert Stage(root / "ray", stage).decisions() == Stage(root / "local", stage).decisions(), stage
    # The photo checks went to the actors: their own logs, none in the driver's calls.jsonl.
    logs = sorted((root / "ray" / "photos" / "calls.d").glob("*.jsonl"))
    assert logs and not (root / "ray" / "photos" / "calls.jsonl").exists()
    workers = json.loads((root / "ray" / "ray_workers.json").read_text(encoding="utf-8"))
    assert workers["calls"] > 0 and workers["prefilter"] > 0
    # The VQA mix over the 98 kept dishes: 98 x (0.662, 0.272, 0.044, 0.022) = 64.88, 26.66, 4.31, 2.16:
    # floors 64, 26, 4, 2 and the two largest remainders (technique .88, dietary .66) get one more each.
    drafted = Counter(d["item"].split(":")[1] for d in Stage(root / "ray", "vqa").decisions())
    assert drafted == {"cuisine_technique": 65, "dietary_suggestion": 27, "multi_image_analysis": 4,
                       "counterfactual_reasoning": 2}
    vqa = pq.read_table(next((root / "release-ray" / "data" / "vqa").glob("*.parquet"))).to_pylist()
    assert len({r["dish_id"] for r in vqa}) == len(vqa) > 0  # at most one item per dish


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _standin(raw: Path, latency_ms: int) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([sys.executable, "-m", "construct.standin", str(raw), "--port", "0", "--filter-models",
                               ",".join(FILTERS), "--latency-ms", str(latency_ms)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = server.stdout.readline() if server.stdout else ""
    found = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
    assert found, line
    return server, found.group(0)


def _answered(server: subprocess.Popen) -> int:
    server.terminate()
    said = server.stdout.read() if server.stdout else ""
    server.wait(timeout=30)
    return int(re.search(r"stand-in stopped after (\d+) chat completion", said).group(1))


def _photo_rows(work: Path) -> list[dict]:
    return list(call_rows(work / "photos"))


@needs_ray
@pytest.mark.slow
def test_a_killed_driver_leaves_no_ray_process_and_the_rerun_repeats_at_most_the_calls_in_flight(forty, local_build):
    root, _ = forty
    work = root / "killed"
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "PYTHONPATH": str(REPO)}
    server, url = _standin(root / "raw", latency_ms=40)
    argv = [sys.executable, "-m", "construct", "run", str(root / "raw"), "--out", str(work), "--base-url", url,
            *COMMON, "--engine", "ray", "--ray-min-asks", "100"]
    driver = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while len(_photo_rows(work)) < 150:  # the actors are answering photo checks
            assert driver.poll() is None and time.monotonic() < deadline, "the photo stage did not start"
            time.sleep(0.2)
        ray_pids = _descendants(driver.pid)
        assert ray_pids
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 60
        while _alive(ray_pids) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _alive(ray_pids), "Ray processes outlived the killed driver"
    finally:
        if driver.poll() is None:
            driver.kill()
        first = _answered(server)
    logged = len(_photo_rows(work))
    assert not (work / "photos" / "done.json").exists() and logged >= 150
    # The answered calls that no log holds were in flight at the kill: at most --concurrency of them.
    assert 0 <= first - logged <= 16
    server, url = _standin(root / "raw", latency_ms=0)
    argv[argv.index("--base-url") + 1] = url
    try:
        subprocess.run(argv, cwd=REPO, env=env, check=True, capture_output=True, timeout=600)  # to the dish review
    finally:
        second = _answered(server)
    clean = len(_photo_rows(root / "local")) + len(list(call_rows(root / "local" / "dishes")))
    # The two runs together ask what one uninterrupted build asks, plus at most the calls in flight at the kill.
    assert clean <= first + second <= clean + 16, (first, second, clean)
    assert Stage(work, "photos").decisions() == Stage(root / "local", "photos").decisions()
    keys = Counter(r["key"] for r in _photo_rows(work))
    assert sum(keys.values()) - len(keys) == 0  # no logged answer was asked again


@needs_ray
@pytest.mark.slow
def test_a_killed_actor_is_retried_by_the_engine_and_loses_nothing(forty, local_build, monkeypatch):
    root, _ = forty
    work = root / "actor-killed"
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    killed: list[int] = []

    def kill_one_actor() -> None:
        deadline = time.monotonic() + 240
        while not killed and time.monotonic() < deadline:
            if len(_photo_rows(work)) >= 100:
                for pid in _descendants(os.getpid()):  # this build's actors, never another Ray's on the machine
                    try:
                        if b"CallActor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                            os.kill(pid, signal.SIGKILL)
                            killed.append(pid)
                            return
                    except OSError:
                        continue
            time.sleep(0.1)

    killer = threading.Thread(target=kill_one_actor, daemon=True)
    server, url = _standin(root / "raw", latency_ms=50)
    try:
        killer.start()
        build("run", str(root / "raw"), "--out", str(work), "--base-url", url, *COMMON, "--engine", "ray",
              "--ray-min-asks", "100")
    finally:
        _answered(server)
    killer.join(timeout=5)
    assert killed, "no actor was found to kill"
    for stage in ("photos", "dishes"):
        assert Stage(work, stage).decisions() == Stage(root / "local", stage).decisions(), stage
    assert (work / "photos" / "done.json").exists()


def test_engine_ray_without_ray_says_how_to_install_it_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    raw = tmp_path / "raw"
    write_raw_export(raw, merchants=1)
    rc = main(["run", str(raw), "--out", str(tmp_path / "work"), "--model", "openai:x", "--engine", "ray"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "requirements-ray.txt" in err
    assert not (tmp_path / "work").exists()  # refused before the work folder was touched


def test_the_20m_projection_is_the_measured_costs_scaled_by_hand():
    from bench.construct_ray import projection

    # 1.5 photo calls and 2 images per photo; (350 - 150) / 10 = 20 calls per kept dish.
    build = {"photos": 100, "photo_calls": 150, "photo_images": 200, "calls": 350, "dishes_kept": 10}
    text = projection(build, {"prefilter_ms": 30.0, "encode_ms": 100.0}, 300.0, latency=0.2)
    # 20M x 1.5 + 15k x 20 = 30.3M calls; 20M x (30 + 2 x 100) ms = 4.6M CPU-s = 1,277.8 CPU-hours.
    assert "| model calls | 30.3M |" in text and "| CPU-hours (prefilter + encoding) | 1,278 |" in text
    # 1 worker x 16 cores: 1,277.8 / 16 = 79.9 h; 1 replica x 32 in flight: 30.3M x 0.2 s / 32 = 52.6 h.
    assert "| 1 | 1 | 79.9 | 52.6 | 79.9 |" in text
