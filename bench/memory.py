"""Memory and load time: load each config of a release and iterate it with images decoded row by
row, each config in a fresh subprocess (peak RSS: VmHWM, else resource.getrusage ru_maxrss).

    python -m bench.memory [--dataset /tmp/paper] [--limit N] [--run-sizes 1000,4000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    PAPER_COUNTS,
    PAPER_RELEASE,
    REPO,
    BenchError,
    build_record_path,
    child_json,
    report_on_release,
    result,
    status_mib,
)


def _rss_mib() -> float:
    """Peak RSS of this process so far. Linux keeps ru_maxrss across fork + exec, so a child of a
    big parent (run_all, after importing torch) would report the parent's peak; VmHWM belongs to
    the process's own address space, so it is read first and ru_maxrss is the fallback."""
    if "VmHWM" in (status := status_mib()):
        return status["VmHWM"]
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(config: str, release: str, limit: int | None) -> dict[str, Any]:
    """Runs inside the subprocess: load, then decode every image of every row, one row at a time."""
    import diningbench

    after_imports = _rss_mib()
    start = time.perf_counter()
    dataset = diningbench.load(config, release)
    load_s = time.perf_counter() - start
    rows = images = pixels = 0
    start = time.perf_counter()
    for row in dataset if limit is None else dataset.select(range(min(limit, len(dataset)))):
        for image in row["images"]:
            image.load()  # datasets decodes on access; make sure the pixels are really there
            pixels += image.size[0] * image.size[1]
            images += 1
        rows += 1
    iterate_s = time.perf_counter() - start
    end = status_mib()  # the heap, and the memory-mapped Arrow cache
    return {"config": config, "rows": rows, "images": images, "megapixels": round(pixels / 1e6, 1),
            "load_s": load_s, "iterate_s": iterate_s, "rss_after_imports_mib": after_imports,
            "peak_rss_mib": _rss_mib(), "end_anon_mib": end.get("RssAnon", float("nan")),
            "end_file_mib": end.get("RssFile", float("nan"))}


def measure(config: str, release: Path, cache: Path, limit: int | None) -> dict[str, Any]:
    """One fresh interpreter per measurement, so each peak RSS belongs to that config alone."""
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "bench.memory", "--child", config, "--dataset", str(release),
               *(["--limit", str(limit)] if limit is not None else [])]
    return child_json(command, env, f"loading {config} from {release}")


RUN_TARGET = 1.3


def run_rows(release: Path, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """Peak RSS of a fresh `eval run` process at each size (`--run-sizes`, default 1,000 and 4,000 nutrition
    items), split into heap (RssAnon, sampled) and mapped files (the harness's libraries, the pages of the
    release's kept image file); target: the peak heap of the largest <= 1.3x the smallest's (bench.scaling)."""
    from bench import scaling

    if len(sizes) < 2:
        return []
    found = scaling.processes(release, sizes)
    small, large = min(sizes), max(sizes)
    f, g = found[small], found[large]
    note = "; ".join(f"{size} items: peak RSS {found[size]['peak_rss_mib']:.0f} MiB = heap "
                     f"{found[size]['peak_anon_mib']:.0f} + mapped files {found[size]['peak_file_mib']:.0f} "
                     f"(the kept image file {found[size]['kept_images_mib']:.0f} MiB)" for size in sorted(sizes))
    return [result(f"run peak heap, {large} / {small} items", g["peak_anon_mib"], f["peak_anon_mib"], unit="MiB",
                   target=RUN_TARGET, note=note, runs={str(k): v for k, v in found.items()}),
            result(f"  run peak RSS with the mapped file pages, {large} / {small} items", g["peak_rss_mib"],
                   f["peak_rss_mib"], unit="MiB",
                   note="the mapped pages grow with the rows read: page cache the kernel may drop")]


def run(release: Path = PAPER_RELEASE, *, limit: int | None = None,
        configs: tuple[str, ...] = tuple(PAPER_COUNTS), run_sizes: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """`run_rows`, then every config twice with a private datasets cache: cold (the first load converts the
    Parquet files into the Arrow cache) and warm (reused, as on every later load); the release's build time from
    its build record (bench.release)."""
    release = Path(release).resolve()
    rows = run_rows(release, run_sizes)
    with tempfile.TemporaryDirectory(prefix="bench-hf-cache-") as cache:
        for config in configs:
            if not (release / "data" / config).is_dir():
                raise BenchError(f"no {config} data in {release}")
            cold = measure(config, release, Path(cache), limit)
            warm = measure(config, release, Path(cache), limit)
            size = sum(f.stat().st_size for f in (release / "data" / config).glob("*.parquet")) / 2**20
            note = (f"{warm['rows']} rows, {warm['images']} images ({warm['megapixels']} MP) decoded; "
                    f"load {cold['load_s']:.2f} s cold / {warm['load_s']:.2f} s warm; "
                    f"peak RSS {warm['peak_rss_mib']:.0f} MiB, {warm['rss_after_imports_mib']:.0f} of it imports; "
                    f"at the end {warm['end_anon_mib']:.0f} MiB heap + {warm['end_file_mib']:.0f} MiB mapped files")
            # What iterating adds on top of the imports, against the config's data size: far below
            # 1x means rows are decoded one at a time rather than the release held in memory.
            growth = warm["peak_rss_mib"] - warm["rss_after_imports_mib"]
            rows.append(result(f"RSS growth iterating {config} / its Parquet MiB", growth, size, unit="MiB",
                               note=note, cold=cold, warm=warm))
            rows.append(result(f"  iterate {config}, images decoded", warm["iterate_s"], None,
                               note=f"{1000 * warm['iterate_s'] / max(warm['images'], 1):.2f} ms per image"))
    if (record_path := build_record_path(release)).exists():
        record = json.loads(record_path.read_text(encoding="utf-8"))
        rows.append(result(f"build the {record.get('scale', '?')} release", float(record["seconds"]), None,
                           note=f"`{record['command']}` on {record.get('cpus', '?')} cpus; "
                                f"largest process {record.get('max_rss_mib', '?')} MiB"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=PAPER_RELEASE, help="release folder (default /tmp/paper)")
    parser.add_argument("--limit", type=int, help="iterate only the first N rows of each config")
    parser.add_argument("--run-sizes", default="1000,4000", help="items per whole-run measurement ('' = none)")
    parser.add_argument("--child", metavar="CONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, str(args.dataset), args.limit)))
        return 0
    sizes = tuple(int(s) for s in args.run_sizes.split(",") if s.strip())
    return report_on_release(parser, args, lambda: run(args.dataset, limit=args.limit, run_sizes=sizes))


if __name__ == "__main__":
    raise SystemExit(main())
