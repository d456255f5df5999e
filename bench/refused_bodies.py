"""What a refused body costs: the peak memory of a whole `python -m eval run` against servers whose
every answer is refused for its size (an endless chunked body; a gzip bomb) beside the same run against a
server that answers normally, in one bench run. Target: each hostile run's peak <= 1.5x the normal run's.

    python -m bench.refused_bodies [--items 200] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.adaptive import eval_run
from bench.common import REPO, BenchError, write_json
from bench.load_servers import ProcessServer, ServerSpec
from bench.scaling import scaled_release

TARGET = 1.5
KINDS = {"normal": ServerSpec("vllm", slots=None, latency=0.0), "endless": ServerSpec("endless"),
         "gzip_bomb": ServerSpec("gzip_bomb")}

# `python -m eval` in a process that prints its own peak as it exits (atexit runs after SystemExit).
_PEAK = ("import atexit, runpy, sys\n"
         "def _peak():\n"
         "    with open('/proc/self/status') as fh:\n"
         "        kib = next(int(l.split()[1]) for l in fh if l.startswith('VmHWM:'))\n"
         "    print(f'PEAK_KIB {kib}', file=sys.stderr)\n"
         "atexit.register(_peak)\n"
         "sys.argv = ['eval', *sys.argv[1:]]\n"
         "runpy.run_module('eval', run_name='__main__', alter_sys=True)\n")


def cell(release: Path, kind: str, n: int, work: Path) -> dict[str, Any]:
    """One fresh `eval run` process of n items (default `--concurrency auto`) against a fresh server process of
    `kind`: its own peak (VmHWM, read as it exits) in MiB, items failed, seconds."""
    out = work / kind
    with ProcessServer(KINDS[kind]) as server:
        env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "bench-placeholder", "HF_DATASETS_OFFLINE": "1"}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PEAK, *eval_run(server.base_url, release, n, out)], cwd=REPO,
                              env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        stats = server.stats()
    peaks = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("PEAK_KIB ")]
    if not peaks:
        raise BenchError(f"the {kind} run printed no peak (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    predictions = out / "predictions.jsonl"
    failed = sum(json.loads(line).get("error") is not None for line in predictions.open(encoding="utf-8")) \
        if predictions.exists() else n
    return {"kind": kind, "n": n, "exit": done.returncode, "peak_mib": int(peaks[-1]) / 1024, "failed": failed,
            "requests": stats["requests"], "seconds": round(seconds, 2)}


def run(items: int = 200) -> list[dict[str, Any]]:
    import diningbench

    with tempfile.TemporaryDirectory(prefix="bench-refused-") as tmp:
        work = Path(tmp)
        release = scaled_release(Path(diningbench.SAMPLE_DIR), items, work / "release")
        rows = [cell(release, kind, items, work) for kind in KINDS]
    normal = rows[0]["peak_mib"]
    for row in rows:
        row["vs_normal"] = row["peak_mib"] / normal
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| server | items | peak MiB | vs normal | items failed | requests | exit | seconds |", "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['n']} | {r['peak_mib']:.0f} | {r['vs_normal']:.2f}x "
                     f"(<= {TARGET}x) | {r['failed']} | {r['requests']} | {r['exit']} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.refused_bodies", description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200, help="requests per run")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    try:
        rows = run(args.items)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(rows))
    write_json(args.json, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
