"""Adaptive concurrency: the default `python -m eval run` (`--concurrency auto`) beside fixed
concurrencies (the best of the sweep is the reference) on servers that push back as real ones do (`kinds`).
Targets (the issue: fill the server without being told how) in bench/README.md; tight TPM's are rate-limited's.

    python -m bench.adaptive [--items 600] [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, BenchError, write_json
from bench.load_servers import PROMPT_ESTIMATE, TOKENS_PER_REQUEST, ProcessServer, ServerSpec
from bench.scaling import scaled_release

FIXED_SWEEP = (4, 8, 16, 32, 64, 128, 256)
MAX_TOKENS = 256  # each request's --max-tokens: what a server that counts requested tokens charges, with the prompt


def kinds(items: int) -> dict[str, tuple[ServerSpec, int]]:
    """Each server and the items sent to it (the rate-limited ones fewer: they are slow on purpose)."""
    return {
        "vllm": (ServerSpec("vllm", slots=48, latency=0.1, slope=0.5), items),
        "queueing": (ServerSpec("vllm", slots=48, latency=0.2, slope=0.0), items),
        "ratelimited": (ServerSpec("ratelimited", slots=None, latency=0.3, rpm=1200, burst=1.0), max(60, items // 2)),
        "ratelimited_tpm": (ServerSpec("ratelimited", slots=None, latency=0.3, rpm=600, burst=1.0, tpm=120_000,
                                       charge="requested"), max(60, items // 4)),
        "flaky": (ServerSpec("flaky", slots=64, latency=0.1, slope=0.3, error_share=0.2, seed=7), items),
    }


def ideal_rate_limited(spec: ServerSpec, n: int) -> float:
    """Seconds the limits allow for n requests: the buckets' burst at once, the rest at the rate of the
    tighter limit (requests, or tokens at what the server charges a request), plus one latency."""
    cost = PROMPT_ESTIMATE + MAX_TOKENS if spec.charge == "requested" else TOKENS_PER_REQUEST
    rate = (spec.rpm or 0) / 60.0
    if spec.tpm:
        rate = min(rate, spec.tpm / 60.0 / cost)
    burst = max(1.0, rate * spec.burst)
    return max(0.0, n - burst) / rate + spec.latency


def eval_run(base_url: str, release: Path, n: int, out: Path) -> list[str]:
    """`eval` arguments of a cell: n nutrition items, one view each, against `base_url`."""
    return ["run", "--task", "nutrition", "--model", "openai:bench-vlm", "--base-url", base_url, "--dataset", str(release),
            "--limit", str(n), "--images", "1", "--max-tokens", str(MAX_TOKENS), "--out", str(out), "--overwrite",
            "--no-progress", "--timeout", "60"]


def cell(release: Path, spec: ServerSpec, n: int, concurrency: str, work: Path, kind: str = "") -> dict[str, Any]:
    """One `python -m eval run` process against a fresh server process of `spec`: wall (the server's busy time,
    first request to last answer: start-up, the same in every cell, is left out), CPU per request (the process's
    user + system, start-up included), items lost, 429 share."""
    kind = kind or spec.kind
    out = work / f"{kind}-{concurrency}"
    with ProcessServer(spec) as server:
        env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "bench-placeholder",
               "HF_DATASETS_OFFLINE": "1"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "eval", *eval_run(server.base_url, release, n, out),
                               *(["--concurrency", concurrency] if concurrency != "default" else [])],
                              cwd=REPO, env=env, capture_output=True, text=True)
        process_s = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats = server.stats()
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").open(encoding="utf-8")] \
        if (out / "predictions.jsonl").exists() else []
    lost = n - sum(1 for p in predictions if p.get("error") is None)
    info = json.loads((out / "run.json").read_text(encoding="utf-8")) if (out / "run.json").exists() else {}
    endpoints = (info.get("concurrency") or {}).get("endpoints") or [{}]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"kind": kind, "concurrency": concurrency, "n": n, "exit": done.returncode,
            "wall_s": stats["busy_s"], "process_s": round(process_s, 3), "cpu_ms_per_request": 1000 * cpu / n,
            "lost": lost, "requests": stats["requests"], "refused": stats["refused"],
            "refused_share": stats["refused"] / max(1, stats["requests"]), "max_running": stats["max_running"],
            "settled": endpoints[0].get("settled"), "trace_points": len(endpoints[0].get("trace") or []),
            "peak_limit": max((point[1] for point in endpoints[0].get("trace") or []), default=None),
            "max_in_flight": stats["max_in_flight"]}


def run(items: int = 600, *, sweep: tuple[int, ...] = FIXED_SWEEP, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    import diningbench

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-adaptive-") as tmp:
        work = Path(tmp)
        release = scaled_release(Path(diningbench.SAMPLE_DIR), max(n for _, n in kinds(items).values()), work / "release")
        for kind, (spec, n) in kinds(items).items():
            if only and kind not in only:
                continue
            found = [cell(release, spec, n, str(c), work, kind) for c in sweep]
            auto = cell(release, spec, n, "default", work, kind)
            fixed8 = next((r for r in found if r["concurrency"] == "8"), found[0])
            clean = [r for r in found if r["lost"] == 0] or found
            best = min(clean, key=lambda r: r["wall_s"] or 1e9)
            reference = ideal_rate_limited(spec, n) if spec.kind == "ratelimited" else best["wall_s"]
            for r in (*found, auto):
                r["vs_best"] = (r["wall_s"] or 0) / best["wall_s"] if best["wall_s"] else None
                r["vs_reference"] = (r["wall_s"] or 0) / reference if reference else None
                r["vs_fixed8"] = (r["wall_s"] or 0) / fixed8["wall_s"] if fixed8["wall_s"] else None
                r["cpu_vs_fixed8"] = r["cpu_ms_per_request"] / fixed8["cpu_ms_per_request"]
            auto["best_fixed"] = best["concurrency"]
            auto["reference_s"] = round(reference, 3)
            rows += [*found, auto]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| server | concurrency | wall s | vs best fixed | vs reference | vs fixed 8 | lost | 429/503 share | "
            "settled | most in the server | CPU ms/request | CPU vs fixed 8 |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(f"| {r['kind']} | {'auto (default)' if r['concurrency'] == 'default' else r['concurrency']} | "
                     f"{r['wall_s']:.2f} | {r['vs_best']:.2f}x | {r['vs_reference']:.2f}x | {r['vs_fixed8']:.2f}x | "
                     f"{r['lost']} | {r['refused_share']:.1%} | {r['settled'] if r['settled'] is not None else '–'} | "
                     f"{r['max_in_flight']} | {r['cpu_ms_per_request']:.2f} | {r['cpu_vs_fixed8']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.adaptive", description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=600, help="requests per cell (the rate-limited server: half)")
    parser.add_argument("--quick", action="store_true", help="60 items, a short sweep (the smoke test)")
    parser.add_argument("--only", default="", help="comma-separated servers (default: all: " + ", ".join(kinds(1)) + ")")
    parser.add_argument("--sweep", default="", help="comma-separated fixed concurrencies (default: 4…256)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    sweep = (8, 32) if args.quick else tuple(int(c) for c in args.sweep.split(",") if c) or FIXED_SWEEP
    try:
        rows = run(60 if args.quick else args.items, sweep=sweep,
                   only=tuple(k for k in args.only.split(",") if k))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(rows))
    write_json(args.json, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
