"""What every bench shares: where the paper-size release lives (and building it once), the machine
description, and printing results as one table."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PAPER_RELEASE = Path("/tmp/paper")
PAPER_COUNTS = {"classification": 2884, "nutrition": 1650, "vqa": 804}


class BenchError(RuntimeError):
    """A bench that cannot run (missing release, server did not start): one-line message."""


def failure(done: subprocess.CompletedProcess[str]) -> str:
    """The last line a failed process printed, for a one-line error."""
    return ((done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"])[0]


def child_json(command: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
    """Run a bench's own `--child` process; the JSON it printed last (a BenchError "`what` failed: ...")."""
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{what} failed: {failure(done)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_record_path(release: Path) -> Path:
    """Where the time it took to build a release is kept: beside it, not inside it."""
    return release.with_name(release.name + ".build.json")


def ensure_release(release: Path, scale: str = "paper", *, rebuild: bool = False) -> dict[str, Any] | None:
    """Make sure `release` holds a generated release, built (timed; many minutes at paper scale) when missing
    or asked to; its build record when one is known (from this call or an earlier one), else None."""
    record_path = build_record_path(release)
    if rebuild or not (release / "data").is_dir():
        command = [sys.executable, "diningbench.py", "sample", "--scale", scale, "--out", str(release)]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise BenchError(f"building the {scale} release into {release} failed: {failure(done)}")
        import resource

        # ru_maxrss of children: the largest process of the build (the writer or a render worker).
        children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        record = {"seconds": round(seconds, 1), "scale": scale, "max_rss_mib": round(children_kib / 1024, 1),
                  "command": f"python diningbench.py sample --scale {scale} --out {release}",
                  "cpus": os.cpu_count()}
        record_path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        return record
    if record_path.exists():
        return json.loads(record_path.read_text(encoding="utf-8"))
    return None


def release_counts(release: Path) -> dict[str, int]:
    """Rows per config, from the Parquet footers (no data read)."""
    import pyarrow.parquet as pq

    data = release / "data"
    return {config: sum(pq.ParquetFile(f).metadata.num_rows for f in (data / config).glob("*.parquet"))
            for config in PAPER_COUNTS}


def warm_imports() -> None:
    """Import what a harness run imports (the HTTP client; the metric parsers), so timed sections
    measure work, not start-up (`import_seconds`)."""
    import aiohttp  # noqa: F401  (the openai: backend imports it when built)
    import orjson  # noqa: F401

    from eval import api, scoring, tasks  # noqa: F401  (api imports the report and the judge)
    from eval.backends import openai_chat  # noqa: F401
    for task in tasks.all_tasks():
        task.read_answer("A", {"options": ["a", "b"]}, "zh")


def import_seconds() -> float:
    """Cold start-up of the harness in a fresh interpreter (`warm_imports`), minus a bare interpreter."""
    times = []
    for snippet in ("pass", "from bench.common import warm_imports; warm_imports()"):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", snippet], cwd=REPO, check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
        times.append(time.perf_counter() - start)
    return times[1] - times[0]


def status_mib() -> dict[str, float]:
    """MiB from /proc/self/status ({} where there is none): the peak RSS (VmHWM), and the RSS now split
    into heap (RssAnon) and mapped files (RssFile: page cache the kernel can drop at any time)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    return {name: int(value.split()[0]) / 1024 for name, _, value in (line.partition(":") for line in lines)
            if name in ("VmHWM", "RssAnon", "RssFile")}


def machine() -> dict[str, Any]:
    """CPU model and count, memory, load, Python: the context every figure needs."""
    model = platform.processor() or "unknown"
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), model)
    except OSError:
        pass
    try:
        memory_gib = next((round(int(line.split()[1]) / 1024 / 1024, 1)
                           for line in Path("/proc/meminfo").read_text().splitlines()
                           if line.startswith("MemTotal:")), None)
    except OSError:
        memory_gib = None
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cpu": model, "cpus": os.cpu_count(), "memory_gib": memory_gib, "python": platform.python_version(),
            "load_1min": round(load[0], 2)}


def result(name: str, measured: float, reference: float | None, *, unit: str = "s", target: float | None = None,
           note: str = "", **extra: Any) -> dict[str, Any]:
    """One row of the results table, a flat dict: `measured` and `reference` in seconds or MiB, `ratio` = measured /
    reference when there is a reference, `target` None when the figure has none, `note` the size used."""
    ratio = measured / reference if reference else None
    return {"name": name, "measured": measured, "reference": reference, "ratio": ratio, "target": target,
            "unit": unit, "note": note, **extra}


def verdict(row: dict[str, Any]) -> str:
    if row.get("target") is None or row.get("ratio") is None:
        return ""
    return "ok" if row["ratio"] <= row["target"] else "MISSED"


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} {unit}" if unit == "MiB" else f"{value:.3f} {unit}" if value < 10 else f"{value:.1f} {unit}"


def table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table: what was measured, against what, the ratio and the target."""
    header = ("bench", "measured", "reference", "ratio", "target", "", "size / note")
    lines = [header]
    for row in rows:
        ratio = f"{row['ratio']:.2f}x" if row.get("ratio") is not None else "-"
        target = f"<= {row['target']:.2f}x" if row.get("target") is not None else "-"
        lines.append((row["name"], _num(row["measured"], row["unit"]), _num(row.get("reference"), row["unit"]),
                      ratio, target, verdict(row), row.get("note", "")))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def report_on_release(parser: argparse.ArgumentParser, args: argparse.Namespace,
                      measure: Callable[[], list[dict[str, Any]]]) -> int:
    """A bench's command line: make sure `args.dataset` holds a release, measure, print the table
    (and the JSON with --json); a BenchError is one `error:` line and exit 2."""
    try:
        ensure_release(args.dataset)
        rows = measure()
    except BenchError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(table(rows))
    write_json(args.json, {"results": rows})
    return 0


def write_json(path: Path | None, payload: dict[str, Any]) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
