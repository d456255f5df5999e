"""Construction on Ray Data against the local engine, side by side in one run: throughput and CPU per
photo against the stand-in at a fixed latency per call with 1 and 2 replicas, the call phases against the
ideal, peak memory of the driver and of the workers as the export grows, and a projection to the paper's 20M
photos derived from the measured per-photo costs.

    python -m bench.construct_ray                          # 40 merchants, 200 ms; memory at 1x, 10x, 50x
    python -m bench.construct_ray --scales 1,10 --latency-ms 50
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, machine, result, table, write_json
from bench.construct_scale import approve_dishes, clean_env, construct_run, prepare, standins
from construct.callstore import rows as call_rows

PAPER_PHOTOS = 20_000_000
PAPER_DISHES = 15_000


class Sampler:
    """CPU seconds and peak memory (VmHWM) of a process and everything below it (the prefilter pool, or Ray's
    processes and workers), read from /proc every 0.2 s: a process's last 0.2 s may be missed."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu: dict[int, float] = {}
        self.peak_kb: dict[int, int] = {}
        self.name: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        found, todo = [self.pid], [self.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                found.append(child)
                todo.append(child)
        return found

    def _run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.is_set():
            for pid in self._tree():
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    status = Path(f"/proc/{pid}/status").read_text()
                    self.name.setdefault(pid, Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()[:60])
                except (OSError, IndexError):
                    continue
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), (int(fields[11]) + int(fields[12])) / tick)
                if hwm := re.search(r"VmHWM:\s+(\d+)", status):
                    self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), int(hwm.group(1)))
            self._stop.wait(0.2)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        workers = [kb for pid, kb in self.peak_kb.items() if pid != self.pid and self.cpu.get(pid, 0) > 0.5]
        return {"cpu": sum(self.cpu.values()), "driver_mib": self.peak_kb.get(self.pid, 0) / 1024,
                "worker_mib": max(workers, default=0) / 1024}


def _answered(server: subprocess.Popen[str]) -> int:
    server.terminate()
    said = server.stdout.read() if server.stdout else ""
    server.wait(timeout=60)
    found = re.search(r"stand-in stopped after (\d+) chat completion", said)
    return int(found.group(1)) if found else -1


def _run(argv: list[str]) -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = Sampler(proc.pid)
    out = proc.stdout.read() if proc.stdout else ""
    proc.wait()
    measured = sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"construct run exited {proc.returncode}: {out[-400:]}")
    return {**measured, "wall": time.perf_counter() - start}


def build(folder: Path, merchants: int, engine: str, replicas: int, latency: float, concurrency: int) -> dict[str, Any]:
    """One build in fresh processes, a stand-in per replica. Calls: what the stand-ins say they answered; photos/s:
    the export's photos over the photo stage's wall (WORK/stage_seconds.json); ideal: calls x latency /
    concurrency, beside the call phases (WORK/call_seconds.json)."""
    work = folder / f"work{merchants}-{engine}-{replicas}"
    raw = prepare(folder, merchants, work)
    servers = standins(raw, replicas, latency)
    try:
        argv = [*construct_run(raw, work, ",".join(url for _, url in servers), concurrency), "--engine", engine]
        first = _run(argv)
        approve_dishes(work)
        second = _run(argv)
    finally:
        calls = sum(_answered(server) for server, _ in servers)
    logged = {d.name: sum(1 for _ in call_rows(d)) for d in work.iterdir() if d.is_dir()}
    if calls != sum(logged.values()):
        raise RuntimeError(f"the stand-ins answered {calls} calls but the work folder logged {sum(logged.values())}")
    stage_s = json.loads((work / "stage_seconds.json").read_text(encoding="utf-8"))
    call_s = json.loads((work / "call_seconds.json").read_text(encoding="utf-8")) if (work / "call_seconds.json").exists() else {}
    photos = sum(1 for _ in open(raw / "photos.jsonl", encoding="utf-8"))
    # A reference-matching call sends two photos (the merchant's, the user's), a quality check one.
    images = sum(2 if row["model"] == "openai:standin-match" else 1 for row in call_rows(work / "photos"))
    dishes_kept = sum(1 for _ in open(work / "dishes" / "items.jsonl", encoding="utf-8"))
    shutil.rmtree(work)
    return {"merchants": merchants, "engine": engine, "replicas": replicas, "photos": photos, "calls": calls,
            "photo_calls": logged.get("photos", 0), "photo_images": images, "dishes_kept": dishes_kept, "wall": first["wall"] + second["wall"],
            "photos_s": stage_s.get("photos", 0.0), "calls_s": sum(call_s.values()),
            "cpu": first["cpu"] + second["cpu"], "driver_mib": max(first["driver_mib"], second["driver_mib"]),
            "worker_mib": max(first["worker_mib"], second["worker_mib"]),
            "ideal": calls * latency / concurrency}


def photo_costs(n: int = 6) -> dict[str, float]:
    """CPU ms per photo at 12 MP: the rule prefilter, and the encoding for transport (shrunk to 1024 px); the
    synthetic export's photos are small, so their CPU is not the paper's."""
    import numpy as np
    from PIL import Image

    from construct.models import photo_part
    from construct.photos import prefilter

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k in range(n):
            base = rng.integers(0, 255, (300, 400, 3), dtype="uint8")
            path = Path(tmp) / f"p{k}.jpg"
            Image.fromarray(base).resize((4000, 3000), Image.BICUBIC).save(path, format="JPEG", quality=90)
            paths.append(path)
        start = time.process_time()
        for path in paths:
            prefilter(path.read_bytes(), 128)
        pre = (time.process_time() - start) / n * 1000
        start = time.process_time()
        for path in paths:
            photo_part(path, "user", path.name)
        enc = (time.process_time() - start) / n * 1000
    return {"prefilter_ms": pre, "encode_ms": enc}


def projection(b: dict[str, Any], costs: dict[str, float], worker_mib: float, latency: float) -> str:
    """Calls and images per photo from build `b`, memory per worker the peak measured; wall on N workers x R
    replicas: the larger of CPU-hours / (N x 16 cores) and calls x latency / (R x 32 in flight), both assumed."""
    calls_per_photo = b["photo_calls"] / b["photos"]
    images_per_photo = b["photo_images"] / b["photos"]
    dish_calls = (b["calls"] - b["photo_calls"]) / max(1, b["dishes_kept"])
    calls = PAPER_PHOTOS * calls_per_photo + PAPER_DISHES * dish_calls
    cpu_h = PAPER_PHOTOS * (costs["prefilter_ms"] + images_per_photo * costs["encode_ms"]) / 1000 / 3600
    lines = ["| 20M photos, 15k base dishes | value | from |", "|---|---:|---|",
             f"| model calls | {calls / 1e6:.1f}M | {calls_per_photo:.2f} photo calls per photo, {dish_calls:.1f} "
             f"calls per kept dish (40-merchant build) |",
             f"| CPU-hours (prefilter + encoding) | {cpu_h:,.0f} | {costs['prefilter_ms']:.0f} ms prefilter + "
             f"{images_per_photo:.2f} images x {costs['encode_ms']:.0f} ms encoding per 12 MP photo |",
             f"| memory per worker | {worker_mib:.0f} MiB | the largest worker peak measured (flat in photos) |"]
    lines += ["", "| workers x 16 cores | replicas x 32 in flight | CPU-bound h | call-bound h | wall h |",
              "|---:|---:|---:|---:|---:|"]
    for n, r in ((1, 1), (8, 8), (32, 32), (64, 128)):
        cpu_bound = cpu_h / (16 * n)
        call_bound = calls * latency / (32 * r) / 3600
        lines.append(f"| {n} | {r} | {cpu_bound:,.1f} | {call_bound:,.1f} | {max(cpu_bound, call_bound):,.1f} |")
    return "\n".join(lines)


def run(merchants: int = 40, latency: float = 0.2, concurrency: int = 16, scales: tuple[int, ...] = (1, 10, 50)
        ) -> tuple[list[dict[str, Any]], str]:
    rows, builds = [], {}
    with tempfile.TemporaryDirectory(prefix="construct-ray-") as tmp:
        folder = Path(tmp)
        for replicas in (1, 2):
            for engine in ("local", "ray"):
                builds[(engine, replicas)] = build(folder, merchants, engine, replicas, latency, concurrency)
                print(json.dumps(builds[(engine, replicas)]), flush=True)
        for replicas in (1, 2):
            local, ray = builds[("local", replicas)], builds[("ray", replicas)]
            note = (f"{merchants} merchants, {local['photos']} photos, {ray['calls']} calls at {latency * 1000:g} ms, "
                    f"concurrency {concurrency}, {replicas} replica(s)")
            rows.append(result(f"photos/s, ray vs local ({replicas} replica(s))", ray["photos"] / ray["photos_s"],
                               local["photos"] / local["photos_s"], unit="/s", note=note))
            rows.append(result(f"  CPU ms per photo, ray vs local ({replicas} replica(s))",
                               1000 * ray["cpu"] / ray["photos"], 1000 * local["cpu"] / local["photos"], unit="ms",
                               note="the build's processes, Ray's own included; the stand-ins apart"))
            for engine in ("ray", "local"):
                b = builds[(engine, replicas)]
                rows.append(result(f"  {engine}: call phases vs ideal ({replicas} replica(s))", b["calls_s"], b["ideal"],
                                   target=1.15 if engine == "ray" else None,
                                   note=f"whole build {b['wall']:.1f} s (start-up, Ray's included)"))
        sized = {}
        for scale in scales:
            for engine in ("local", "ray"):
                sized[(engine, scale)] = build(folder, merchants * scale, engine, 1, 0.0, concurrency)
                print(json.dumps(sized[(engine, scale)]), flush=True)
        for engine in ("local", "ray"):
            base = sized[(engine, scales[0])]
            for scale in scales[1:]:
                b = sized[(engine, scale)]
                rows.append(result(f"{engine}: driver peak memory, {scale}x vs {scales[0]}x", b["driver_mib"],
                                   base["driver_mib"], unit="MiB", target=1.25,
                                   note=f"{b['photos']} vs {base['photos']} photos"))
                rows.append(result(f"{engine}: largest worker peak, {scale}x vs {scales[0]}x", b["worker_mib"],
                                   base["worker_mib"], unit="MiB", target=1.25,
                                   note="prefilter processes" if engine == "local" else "Ray tasks and actors"))
    text = projection(builds[("ray", 2)], photo_costs(), max(b["worker_mib"] for b in sized.values()), latency)
    return rows, text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.construct_ray", description=__doc__.splitlines()[0])
    ap.add_argument("--merchants", type=int, default=40, help="the export of the throughput builds (default 40)")
    ap.add_argument("--latency-ms", type=float, default=200.0, help="the stand-in's latency per call (default 200)")
    ap.add_argument("--concurrency", type=int, default=16, help="construct run --concurrency (default 16)")
    ap.add_argument("--scales", default="1,10,50", help="memory at these multiples of --merchants (default 1,10,50)")
    ap.add_argument("--json", type=Path, help="also write the machine and results as JSON")
    args = ap.parse_args(argv)
    info = machine()
    print(f"machine: {info['cpus']} cpus, load {info['load_1min']}", flush=True)
    rows, text = run(args.merchants, args.latency_ms / 1000, args.concurrency,
                     tuple(int(x) for x in args.scales.split(",") if x.strip()))
    print(table(rows), "", text, sep="\n")
    write_json(args.json, {"machine": info, "results": rows, "projection": text})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
