"""Construction at scale, against the stand-in with a simulated model latency: the model-call phases of
`python -m construct run` beside the ideal (every call's latency spread over `--concurrency`), the rest of the
stages' time reported apart, and the build's peak memory at two export sizes (flat: photos are read just ahead
of the calls that send them).

    python -m bench.construct_scale                         # 20 and 80 merchants, 200 ms, concurrency 16
    python -m bench.construct_scale --merchants 8,16 --latency-ms 50 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import REPO, machine, result, table, write_json
from construct.callstore import rows as call_rows

FILTERS = "openai:standin-judge-a,openai:standin-judge-b"


def clean_env() -> dict[str, str]:
    return ({k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
            | {"PYTHONPATH": str(REPO)})


def prepare(folder: Path, merchants: int, work: Path) -> Path:
    """The raw export of `merchants` merchants (written once per folder and size); `work` emptied."""
    raw = folder / f"raw{merchants}"
    if not raw.exists():
        subprocess.run([sys.executable, "diningbench.py", "sample", "--raw", "--merchants", str(merchants), "--out",
                        str(raw)], cwd=REPO, env=clean_env(), check=True, capture_output=True)
    if work.exists():
        shutil.rmtree(work)
    return raw


def standins(raw: Path, n: int, latency: float) -> list[tuple[subprocess.Popen[str], str]]:
    """`n` stand-in processes serving `raw`, each on a free port, with its base URL."""
    out = []
    for _ in range(n):
        server = subprocess.Popen([sys.executable, "-m", "construct.standin", str(raw), "--port", "0",
                                   "--filter-models", FILTERS, "--latency-ms", str(latency * 1000)],
                                  cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = server.stdout.readline() if server.stdout else ""
        found = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
        if not found:
            raise RuntimeError(f"the stand-in did not start: {line.strip()}")
        out.append((server, found.group(0)))
    return out


def construct_run(raw: Path, work: Path, base_url: str, concurrency: int) -> list[str]:
    """The `construct run` command of the construction benches (photo checks on two other model names)."""
    return [sys.executable, "-m", "construct", "run", str(raw), "--out", str(work), "--base-url", base_url,
            "--model", "openai:standin", "--filter-models", FILTERS, "--photo-quality-model", "openai:standin-iqa",
            "--photo-match-model", "openai:standin-match", "--concurrency", str(concurrency)]


def approve_dishes(work: Path) -> None:
    """The base-dish review, approved in bulk (`construct run` stops there; the same command continues)."""
    subprocess.run([sys.executable, "-m", "construct", "review", str(work), "--stage", "dishes", "--approve-all"],
                   cwd=REPO, env=clean_env(), check=True, capture_output=True)


def _timed(argv: list[str]) -> tuple[float, float, Any]:
    """(wall seconds, the run's "stages done in" seconds, its own rusage from the kernel) of one
    `construct run` process."""
    start = time.perf_counter()
    build = subprocess.Popen(argv, cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = build.stdout.read() if build.stdout else ""
    _, status, usage = os.wait4(build.pid, 0)
    wall = time.perf_counter() - start
    build.returncode = os.waitstatus_to_exitcode(status)
    if build.returncode != 0:
        raise RuntimeError(f"construct run exited {build.returncode}: {out[-300:]}")
    return wall, float(re.search(r"^stages done in ([0-9.]+) s$", out, flags=re.M).group(1)), usage


def _call_seconds(work: Path) -> float:
    """The seconds one `construct run` process spent in model-call phases; the record is then removed so
    that the next process's phases are added, not confused with these."""
    path = work / "call_seconds.json"
    seconds = sum(json.loads(path.read_text(encoding="utf-8")).values()) if path.exists() else 0.0
    path.unlink(missing_ok=True)
    return seconds


def build_once(folder: Path, merchants: int, latency: float, concurrency: int) -> dict[str, Any]:
    """One size built by fresh processes against one stand-in: calls (checked against the work folder's call logs),
    call phases, stages, peak RSS from the kernel (`os.wait4`), the ideal (calls x latency / concurrency) and
    the phase-bound reference: each stage's asks wait for its previous phase (quality before matching,
    generation before the audits), so a phase's last wave runs below full concurrency: ceil(calls per phase /
    concurrency) x latency, summed over phases."""
    work = folder / f"work{merchants}"
    raw = prepare(folder, merchants, work)
    ((server, url),) = standins(raw, 1, latency)
    try:
        argv = construct_run(raw, work, url, concurrency)
        first = _timed(argv)  # stops at the base-dish review
        call_phases = _call_seconds(work)
        approve_dishes(work)
        second = _timed(argv)  # the same command continues: tasks and translation
        call_phases += _call_seconds(work)
        wall, stages = first[0] + second[0], first[1] + second[1]
        usage = max(first[2], second[2], key=lambda u: u.ru_maxrss)
        cpu = sum(u.ru_utime + u.ru_stime for _, _, u in (first, second))
    finally:
        server.terminate()
        said = server.stdout.read() if server.stdout else ""
        _, _, served = os.wait4(server.pid, 0)
        server.returncode = 0
    answered = re.search(r"stand-in stopped after (\d+) chat completion", said)
    phases: Counter[tuple[str, str, str]] = Counter()
    for stage_dir in sorted(p for p in work.iterdir() if p.is_dir()):
        for row in call_rows(stage_dir):  # calls.jsonl, and each Ray actor's log under calls.d/
            phases[(row["stage"], row["model"], row["prompt_version"])] += 1
    calls = int(answered.group(1)) if answered else -1
    if calls != sum(phases.values()):
        raise RuntimeError(f"the stand-in answered {calls} calls but the work folder logged {sum(phases.values())}")
    return {"merchants": merchants, "calls": calls, "wall": wall, "stages": stages, "calls_s": call_phases,
            "ideal": calls * latency / concurrency,
            "phase_bound": sum(math.ceil(n / concurrency) for n in phases.values()) * latency,
            "peak_mib": usage.ru_maxrss / 1024, "build_cpu": cpu,
            "server_cpu": served.ru_utime + served.ru_stime, "load": os.getloadavg()[0],
            "photos": sum(1 for _ in (raw / "images").iterdir())}


def run(sizes: tuple[int, ...] = (20, 80), latency: float = 0.2, concurrency: int = 16,
        repeat: int = 1) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="construct-scale-") as tmp:
        runs = [[build_once(Path(tmp), n, latency, concurrency) for n in sizes] for _ in range(repeat)]
    # Each figure's median over the repeated builds of a size (calls and photos are the same in each).
    builds = [{k: statistics.median(b[k] for b in size) for k in size[0]} for size in zip(*runs, strict=True)]
    for i, b in enumerate(builds):
        spread = ", ".join(f"{r[i]['calls_s'] / r[i]['ideal']:.2f}x" for r in runs)
        note = (f"{b['merchants']:g} merchants, {b['photos']:g} photos, {b['calls']:g} calls at {latency * 1000:g} ms, "
                f"concurrency {concurrency}" + (f"; median of {repeat}: {spread}" if repeat > 1 else ""))
        rows.append(result(f"construct run call phases ({b['merchants']:g} merchants) vs ideal", b["calls_s"],
                           b["ideal"], target=1.15, note=note))
        rows.append(result("  same, vs phase-bound ideal", b["calls_s"], b["phase_bound"], target=1.15,
                           note="each phase's last wave below full concurrency"))
        rows.append(result("  stages (call phases + the stages' other work)", b["stages"], b["ideal"],
                           note=f"{b['stages'] - b['calls_s']:.2f} s outside the call phases: dedupe blocking, "
                                "items and decisions written"))
        rows.append(result("  whole process (start-up, funnel plot)", b["wall"], b["ideal"],
                           note=f"python start-up, imports, funnel.png; CPU s: build {b['build_cpu']:.1f}, "
                                f"stand-in {b['server_cpu']:.1f} (its truth rendered at start); "
                                f"load {b['load']:.1f} on {os.cpu_count()} cpus"))
    first, last = builds[0], builds[-1]
    rows.append(result(f"construct run: peak memory, {last['merchants']:g} vs {first['merchants']:g} merchants",
                       last["peak_mib"], first["peak_mib"], unit="MiB", target=1.25,
                       note=f"{last['photos']:g} vs {first['photos']:g} photos (flat: read just ahead of the calls)"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.construct_scale", description=__doc__.splitlines()[0])
    ap.add_argument("--merchants", default="20,80", help="export sizes, comma-separated (default 20,80)")
    ap.add_argument("--latency-ms", type=float, default=200.0, help="the stand-in's latency per call (default 200)")
    ap.add_argument("--concurrency", type=int, default=16, help="construct run --concurrency (default 16)")
    ap.add_argument("--repeat", type=int, default=1, help="builds per size, interleaved; medians reported (default 1)")
    ap.add_argument("--json", type=Path, help="also write the machine and results as JSON")
    args = ap.parse_args(argv)
    sizes = tuple(int(x) for x in args.merchants.split(",") if x.strip())
    info = machine()
    print(f"machine: {info['cpus']} cpus, load {info['load_1min']}", flush=True)
    rows = run(sizes, args.latency_ms / 1000, args.concurrency, max(1, args.repeat))
    print(table(rows))
    write_json(args.json, {"machine": info, "results": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
