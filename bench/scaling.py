"""How a whole `python -m eval run` grows with the number of requests: seconds, CPU and peak memory
of one fresh process per size (start-up included), against a zero-latency local server.

    python -m bench.scaling [--dataset /tmp/paper] [--sizes 1000,4000,16000] [--images 0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import PAPER_RELEASE, REPO, BenchError, child_json, report_on_release, result, status_mib
from bench.server import BenchServer

ITEMS_MAX = 4000  # items in the scaled release; larger sizes are epochs over them


def scaled_release(release: Path, n: int, out: Path) -> Path:
    """A release folder `out` whose nutrition config holds `n` rows: the release's own, cycled with
    fresh ids (`<id>~k`). Built once per size (the benches keep it in the temporary folder)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = out / "data" / "nutrition"
    if data.is_dir() and sum(pq.ParquetFile(f).metadata.num_rows for f in data.glob("*.parquet")) == n:
        return out
    files = sorted((release / "data" / "nutrition").glob("*.parquet"))
    if not files:
        raise BenchError(f"{release} has no nutrition data")
    table = pa.concat_tables(pq.read_table(f) for f in files)
    data.mkdir(parents=True, exist_ok=True)
    for stale in data.glob("*.parquet"):
        stale.unlink()
    (out / "README.md").write_text((release / "README.md").read_text(encoding="utf-8"), encoding="utf-8")
    per_shard, shards = 500, math.ceil(n / 500)
    ids = table.column("id").to_pylist()
    for shard in range(shards):
        positions = list(range(shard * per_shard, min(n, (shard + 1) * per_shard)))
        part = table.take(pa.array([k % table.num_rows for k in positions]))
        fresh = [ids[k % table.num_rows] if k < table.num_rows else f"{ids[k % table.num_rows]}~{k}" for k in positions]
        part = part.set_column(part.schema.get_field_index("id"), "id", pa.array(fresh, type=table.schema.field("id").type))
        pq.write_table(part, data / f"test-{shard:05d}-of-{shards:05d}.parquet")
    return out


class PeakSampler:
    """The largest heap (RssAnon) and mapped-file (RssFile) RSS seen, sampled every 20 ms in a thread:
    VmHWM only gives their sum, and the mapped Arrow pages are the kernel's to drop."""

    def __init__(self) -> None:
        import threading

        self.peak = {"RssAnon": 0.0, "RssFile": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        status = status_mib()
        self.peak = {name: max(peak, status.get(name, peak)) for name, peak in self.peak.items()}

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._sample()

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def child(release: str, base_url: str, out: str, items: int, epochs: int, images: int | None) -> dict[str, Any]:
    """Inside the fresh process: one api.run, then what it cost."""
    with PeakSampler() as sampler:
        start = time.perf_counter()
        from eval.process import cli_imports

        with cli_imports():  # as `python -m eval` does
            from eval import api

        settings = api.RunSettings(task="nutrition", model="openai:bench-vlm", base_url=base_url, dataset=release,
                                   limit=items, epochs=epochs, images=images, concurrency=64, out=Path(out),
                                   overwrite=True, max_tokens=256)
        api.run(settings, progress=False)
        seconds = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        parquet = sum(f.stat().st_size for f in (Path(release) / "data" / "nutrition").glob("*.parquet")) / 2**20
        import diningbench

        kept = sum(f.stat().st_size for f in (diningbench.datasets_cache() / "diningbench-images").glob("*.arrow"))
        status = status_mib()
        lines = sum(1 for _ in (Path(out) / "predictions.jsonl").open(encoding="utf-8"))
        found = {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": status.get("VmHWM"),
                 "end_anon_mib": status.get("RssAnon"), "end_file_mib": status.get("RssFile"),
                 "parquet_mib": parquet, "kept_images_mib": kept / 2**20, "predictions": lines}
    return {**found, "peak_anon_mib": sampler.peak["RssAnon"], "peak_file_mib": sampler.peak["RssFile"]}


def measure(release: Path, base_url: str, out: Path, *, items: int, epochs: int, images: int | None,
            cache: Path | None = None) -> dict[str, Any]:
    """One fresh `python -m bench.scaling --child` process (start-up counted, like a CLI run)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "bench-placeholder", "HF_DATASETS_OFFLINE": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measured as Python runs by default: modules' bytecode cached
    if cache is not None:
        env["HF_DATASETS_CACHE"] = str(cache)
    command = [sys.executable, "-m", "bench.scaling", "--child", str(items), "--epochs", str(epochs),
               "--dataset", str(release), "--base-url", base_url, "--out", str(out), "--images", str(images or 0)]
    found = child_json(command, env, f"the run of {items} items x {epochs} epochs")
    if found["predictions"] != items * epochs:
        raise BenchError(f"{found['predictions']} predictions for {items} items x {epochs} epochs")
    return found


def exponent(sizes: list[int], values: list[float]) -> float:
    """The least-squares slope of log(value) against log(size): 1.0 is linear.

    >>> round(exponent([1000, 4000, 16000], [1.0, 4.0, 16.0]), 3)
    1.0
    """
    xs, ys = [math.log(s) for s in sizes], [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def plan(size: int) -> tuple[int, int]:
    """(items, epochs) for a number of requests: distinct items up to ITEMS_MAX, epochs beyond (every view read
    again per epoch)."""
    epochs = max(1, math.ceil(size / ITEMS_MAX))
    return size // epochs, epochs


def processes(release: Path, sizes: tuple[int, ...], images: int | None = None,
              repeat: int = 3) -> dict[int | str, dict[str, Any]]:
    """Fresh processes per size, `repeat` rounds over the sizes, after a first run over every item of the
    largest size (it makes what a release's first run makes once: the kept Arrow file of its images,
    its views' hashes, the modules' bytecode), reported apart as "first"; what each cost, by size: the
    median of the rounds, figure by figure, with every round's CPU in `cpu_s_runs`."""
    release = Path(release).resolve()
    if not (release / "data" / "nutrition").is_dir():
        raise BenchError(f"no release at {release}: build one with `python -m bench.release --out {release}`")
    largest_items = max(plan(size)[0] for size in sizes)
    where = hashlib.sha256(str(release).encode()).hexdigest()[:8]
    scaled = scaled_release(release, largest_items,
                            Path(tempfile.gettempdir()) / f"{release.name}-{where}-nutrition-{largest_items}")
    found: dict[int | str, dict[str, Any]] = {}
    with BenchServer(latency=0.0) as server, tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        found["first"] = measure(scaled, server.base_url, Path(tmp) / "first", items=largest_items, epochs=1,
                                 images=images, cache=Path(tmp) / "cache")
        rounds: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        for _ in range(max(1, repeat)):  # interleaved: every size sees the same machine
            for size in sizes:
                items, epochs = plan(size)
                rounds[size].append(measure(scaled, server.base_url, Path(tmp) / f"run{size}", items=items,
                                            epochs=epochs, images=images, cache=Path(tmp) / "cache"))
    for size, runs in rounds.items():
        found[size] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        found[size]["cpu_s_runs"] = [run["cpu_s"] for run in runs]
    return found


def run(release: Path = PAPER_RELEASE, *, sizes: tuple[int, ...] = (1000, 4000, 16000),
        images: int | None = None, repeat: int = 3) -> list[dict[str, Any]]:
    found = processes(release, sizes, images, repeat)
    rows = []
    views = "all views" if not images else f"{images} view(s)"
    for size in sizes:
        items, epochs = plan(size)
        f = found[size]
        note = (f"{items} items x {epochs} epoch(s), {views}, concurrency 64, zero latency; "
                f"peak RSS {f['peak_rss_mib']:.0f} MiB = heap (peak {f['peak_anon_mib']:.0f} MiB) + mapped "
                f"files (peak {f['peak_file_mib']:.0f} MiB: the harness's libraries and the pages read of the "
                f"release's images, kept as an Arrow file of {f['kept_images_mib']:.0f} MiB; the Parquet files "
                f"are {f['parquet_mib']:.0f} MiB)")
        rows.append(result(f"{size} requests: wall s (CPU ms per request)", f["seconds"], None, note=note,
                           cpu_ms_per_request=1000 * f["cpu_s"] / size, **f))
        spread = ", ".join(f"{1000 * cpu / size:.3f}" for cpu in f["cpu_s_runs"])
        rows.append(result("  CPU per request, whole process", 1000 * f["cpu_s"] / size, None, unit="ms",
                           note=f"user + system CPU of the run's process, start-up included; median of "
                                f"{len(f['cpu_s_runs'])} processes ({spread} ms)"))
    first = found["first"]
    rows.append(result(f"  first run over the release ({first['predictions']} requests), CPU per request",
                       1000 * first["cpu_s"] / first["predictions"], None, unit="ms",
                       note=f"{first['seconds']:.1f} s; it also makes the kept Arrow file of the release's images and "
                            "its views' hashes, which the runs above read (every later run over a release does)"))
    if len(sizes) >= 2:
        ordered = sorted(sizes)
        for what, key, note in (
                ("wall time", "seconds", "1.0 = linear"),
                ("peak RSS", "peak_rss_mib", "0 = flat; the kept image file's pages are mapped as rows are read"),
                ("peak heap", "peak_anon_mib", "0 = flat: the RSS beyond the mapped files")):
            rows.append(result(f"  fitted exponent, {what} vs requests",
                               exponent(ordered, [found[s][key] for s in ordered]), None, unit="", note=note))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=PAPER_RELEASE, help="release folder (default /tmp/paper)")
    parser.add_argument("--sizes", default="1000,4000,16000", help="requests per run, comma-separated")
    parser.add_argument("--images", type=int, default=0, help="views per request (default 0 = all)")
    parser.add_argument("--repeat", type=int, default=3, help="processes per size; medians are reported (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(str(args.dataset), args.base_url, args.out, args.child, args.epochs,
                               args.images or None)))
        return 0
    sizes = tuple(int(s) for s in args.sizes.split(","))
    return report_on_release(parser, args, lambda: run(args.dataset, sizes=sizes, images=args.images or None,
                                                       repeat=args.repeat))


if __name__ == "__main__":
    raise SystemExit(main())
