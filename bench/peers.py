"""DiningBench beside inspect_ai on the same workload: the same nutrition items and views, the same
local OpenAI-compatible server (fixed latency), the same concurrency, repetitions interleaved.
inspect_ai is installed into its own virtual environment, never the project's (`--install`).

    python -m bench.peers [--install] [--venv /tmp/diningbench-peers] [--requests 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import PAPER_RELEASE, REPO, BenchError, failure, report_on_release, result
from bench.server import BenchServer

VENV = Path(tempfile.gettempdir()) / "diningbench-peers"
PEER_PACKAGES = ("inspect-ai", "openai")

# Runs inside the peer environment: one inspect_ai eval over the exported samples.
INSPECT_SCRIPT = r"""
import json, sys
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageUser, ContentImage, ContentText
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
samples = [Sample(id=s["id"], target=s["target"],
                  input=[ChatMessageUser(content=[*(ContentImage(image=p) for p in s["images"]),
                                                  ContentText(text=s["prompt"])])])
           for s in spec["samples"]]
task = Task(dataset=samples, solver=generate(), scorer=includes())
minimal = spec["logging"] == "minimal"
# Chat completions, as DiningBench sends (inspect's openai provider otherwise speaks the Responses API).
logs = inspect_eval(task, model="openai/bench-vlm", model_base_url=spec["base_url"], model_args={"responses_api": False},
                    max_connections=spec["concurrency"],
                    max_tokens=spec["max_tokens"], log_dir=spec["log_dir"], display="none", log_level="warning",
                    log_samples=not minimal, log_images=not minimal, max_retries=1)
done = logs[0].results.completed_samples if logs[0].results else 0
print(json.dumps({"status": logs[0].status, "samples": done}))
"""


def ensure_venv(venv: Path, install: bool) -> Path:
    """The peer environment's python; created (`python -m venv`, `pip install inspect-ai openai`) only when
    asked."""
    python = venv / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", "import inspect_ai"], capture_output=True).returncode:
        if not install:
            raise BenchError(f"no inspect_ai environment at {venv}: run with --install (or `make bench-peers`)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise BenchError(f"pip install {' '.join(PEER_PACKAGES)} into {venv} failed: {failure(done)}")
    return python


def export(release: Path, n: int, folder: Path) -> list[dict[str, Any]]:
    """The first n nutrition items as DiningBench asks them (prompt, views in its order, all views),
    with each view written as the JPEG file inspect_ai will read."""
    from eval import api, tasks
    from eval.images import select_views

    settings = api.RunSettings(task="nutrition", model="openai:bench-vlm", dataset=str(release), limit=n)
    (data,) = api.load_task_data(settings)
    samples = []
    for row in data.iter_rows():
        chosen = select_views(row["image_roles"], settings.images, settings.image_order, seed=settings.seed,
                              item_id=str(row["id"]))
        paths = [folder / f"{row['id']}-{k}.jpg" for k in chosen]
        for k, path in zip(chosen, paths, strict=True):
            path.write_bytes(row["images"][k]["bytes"])
        samples.append({"id": str(row["id"]), "prompt": tasks.prompt_text("nutrition", row, settings),
                        "images": [str(p) for p in paths], "target": str(round(row["calories"]))})
    if len(samples) != n:
        raise BenchError(f"{release} has {len(samples)} nutrition items, fewer than {n}")
    return samples


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise BenchError(f"{' '.join(command[:3])} failed: {failure(done)}")
    return seconds, done.stdout


def run(release: Path = PAPER_RELEASE, *, venv: Path = VENV, install: bool = False, requests: int = 1000,
        latency: float = 0.1, concurrency: int = 64, repeat: int = 3) -> list[dict[str, Any]]:
    """After one untimed run of each side (what a first run over a release makes once: DiningBench's kept image
    file and view hashes, bytecode; the views in the page cache for both), each repetition times, back to back,
    as fresh processes: `python -m eval run` (predictions.jsonl, scoring with bootstrap intervals, report.md),
    inspect_ai with minimal logging (`log_samples=False`, `log_images=False`) and with its default logging
    (every sample and its images in the .eval log); the ratios inspect / DiningBench per repetition, then their
    medians."""
    release = Path(release).resolve()
    python = ensure_venv(venv, install)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "bench-placeholder", "HF_DATASETS_OFFLINE": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # both sides as Python runs by default (pip compiled inspect_ai's)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp_name, BenchServer(latency=latency) as server:
        tmp = Path(tmp_name)
        (tmp / "views").mkdir()
        samples = export(release, requests, tmp / "views")
        views = sum(len(s["images"]) for s in samples)
        script = tmp / "inspect_run.py"
        script.write_text(INSPECT_SCRIPT, encoding="utf-8")
        specs = {}
        for logging in ("minimal", "default"):
            specs[logging] = tmp / f"{logging}.json"
            specs[logging].write_text(json.dumps({"samples": samples, "base_url": server.base_url,
                                                  "concurrency": concurrency, "max_tokens": 256, "logging": logging,
                                                  "log_dir": str(tmp / f"logs-{logging}")}), encoding="utf-8")
        ours_command = [sys.executable, "-m", "eval", "run", "--task", "nutrition", "--dataset", str(release),
                        "--limit", str(requests), "--model", "openai:bench-vlm", "--base-url", server.base_url,
                        "--concurrency", str(concurrency), "--max-tokens", "256", "--overwrite"]
        # One untimed run of each side first (why: the docstring).
        _timed([*ours_command, "--out", str(tmp / "ours-first")], env)
        _timed([str(python), str(script), str(specs["minimal"])], env)
        times: dict[str, list[float]] = {"ours": [], "minimal": [], "default": []}
        for k in range(repeat):
            times["ours"].append(_timed([*ours_command, "--out", str(tmp / f"ours{k}")], env)[0])
            for logging in ("minimal", "default"):
                seconds, out = _timed([str(python), str(script), str(specs[logging])], env)
                found = json.loads(out.strip().splitlines()[-1])
                if found["status"] != "success" or found["samples"] != requests:
                    raise BenchError(f"inspect_ai ({logging} logging) finished {found}")
                times[logging].append(seconds)
    size = f"{requests} nutrition items, {views} views, {latency * 1000:g} ms latency, concurrency {concurrency}"
    for logging in ("minimal", "default"):
        ratios = [peer / ours for peer, ours in zip(times[logging], times["ours"], strict=True)]
        paired = ", ".join(f"{r:.2f}x" for r in ratios)
        rows.append(result(f"inspect_ai ({logging} logging) / DiningBench", statistics.median(times[logging]),
                           statistics.median(times["ours"]), note=f"{size}; per repetition: {paired}",
                           ratios=ratios, peer_s=times[logging], ours_s=times["ours"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=PAPER_RELEASE, help="release folder (default /tmp/paper)")
    parser.add_argument("--venv", type=Path, default=VENV, help=f"inspect_ai's environment (default {VENV})")
    parser.add_argument("--install", action="store_true", help="create the environment and pip install inspect-ai")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    return report_on_release(parser, args, lambda: run(args.dataset, venv=args.venv, install=args.install,
                                                       requests=args.requests, latency=args.latency,
                                                       concurrency=args.concurrency, repeat=args.repeat))


if __name__ == "__main__":
    raise SystemExit(main())
