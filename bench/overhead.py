"""Harness overhead: a nutrition run through the real harness against a zero-latency local server,
versus a bare loop that only decodes, resizes and base64-encodes the same images. Target <= 1.5x.

    python -m bench.overhead [--dataset /tmp/paper] [--limit N] [--images 4] [--profile FILE]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import cProfile
import io
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import PAPER_RELEASE, BenchError, report_on_release, result, warm_imports
from bench.server import BenchServer

TARGET = 1.5
CPU_TARGET_MS = 1.0


def reference_first(roles: list[str]) -> list[int]:
    """The harness's default view order (merchant photo first), so both sides send the same views."""
    return sorted(range(len(roles)), key=lambda i: roles[i] != "reference")  # stable: each group in its order


def bare_loop(release: Path, *, limit: int | None, images: int, max_side: int = 1024) -> dict[str, Any]:
    """Load the rows, then decode, resize (when larger than max_side) and base64 every view sent: the least any
    client must do, so the ratio is the price of everything the harness adds on top of handling the images."""
    from PIL import Image

    import diningbench

    start = time.perf_counter()
    dataset = diningbench.load("nutrition", str(release), decode_images=False)
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    items = views = encoded = 0
    for row in dataset:
        for i in reference_first(row["image_roles"])[:images]:
            data = row["images"][i]["bytes"]
            with Image.open(io.BytesIO(data)) as img:
                rgb = img.convert("RGB")  # a full decode of the pixels
            if max(rgb.size) > max_side:
                rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
                out = io.BytesIO()
                rgb.save(out, format="JPEG", quality=90)
                data = out.getvalue()
            encoded += len(base64.b64encode(data))
            views += 1
        items += 1
    return {"seconds": time.perf_counter() - start, "items": items, "views": views, "base64_bytes": encoded}


@contextlib.contextmanager
def placeholder_key() -> Iterator[None]:
    """The local server needs no key: make sure a real one from the environment is never sent to it."""
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "bench-placeholder"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved


def harness_run(release: Path, base_url: str, out: Path, *, limit: int | None, images: int, concurrency: int,
                max_side: int = 1024, profile: Path | None = None) -> dict[str, Any]:
    """`eval.api.run` for the nutrition task, timed from settings to metrics.json."""
    from eval import api

    settings = api.RunSettings(task="nutrition", model="openai:bench-vlm", base_url=base_url, dataset=str(release),
                               limit=limit, images=images, concurrency=concurrency, out=out, overwrite=True,
                               max_image_side=max_side, max_tokens=256)
    profiler = cProfile.Profile()
    with placeholder_key():
        start = time.perf_counter()
        with profiler if profile is not None else contextlib.nullcontext():
            api.run(settings, progress=False)
        seconds = time.perf_counter() - start
    if profile is not None:
        profiler.dump_stats(str(profile))
    lines = [json.loads(line) for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["nutrition"]
    return {"seconds": seconds, "predictions": len(lines), "failed": sum(1 for p in lines if p["error"]),
            "avg_mape": metrics.get("avg_mape")}


def run(release: Path = PAPER_RELEASE, *, limit: int | None = None, images: int = 4, concurrency: int = 8,
        max_side: int = 1024, profile: Path | None = None,
        process_sizes: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """Both sides on the same rows; returns the result rows (harness/bare ratio first)."""
    import diningbench

    release = Path(release).resolve()  # datasets mis-resolves relative release folders
    if not (release / "data" / "nutrition").is_dir():
        raise BenchError(f"no release at {release}: build one with `python -m bench.release --out {release}`")
    diningbench.load("nutrition", str(release), decode_images=False)  # warm the Arrow cache, untimed
    warm_imports()  # start-up is reported on its own row (bench.run_all)
    bare = bare_loop(release, limit=limit, images=images, max_side=max_side)
    with BenchServer(latency=0.0) as server, tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        harness = harness_run(release, server.base_url, Path(tmp) / "run", limit=limit, images=images,
                              concurrency=concurrency, max_side=max_side, profile=profile)
        seen = server.stats()
    if harness["failed"] or harness["predictions"] != bare["items"]:
        raise BenchError(f"harness run incomplete: {harness['predictions']} predictions "
                         f"({harness['failed']} failed) for {bare['items']} items")
    if seen["images"] != bare["views"]:
        raise BenchError(f"the server received {seen['images']} images, the bare loop encoded {bare['views']}")
    size = f"{bare['items']} nutrition items x {images} views = {bare['views']} images, concurrency {concurrency}"
    return [
        result("harness overhead (api.run / bare image loop)", harness["seconds"], bare["seconds"], target=TARGET,
               note=size, harness=harness, bare=bare, server=seen),
        result("  per item: harness", harness["seconds"] / bare["items"] * 1000, bare["seconds"] / bare["items"] * 1000,
               unit="ms", note="reference = bare loop per item"),
        *cpu_rows(release, process_sizes),
    ]


def cpu_rows(release: Path, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """Whole-process CPU per request, one fresh process per size (bench.scaling), start-up included, every view
    of each item sent. Target <= 1.0 ms per request."""
    from bench import scaling

    if not sizes:
        return []
    found = scaling.processes(release, sizes)
    rows = []
    for size in sizes:
        f = found[size]
        per_request = 1000 * f["cpu_s"] / size
        rows.append(result(f"whole-process CPU per request, {size} items", per_request, CPU_TARGET_MS, unit="ms",
                           target=1.0, note=f"reference = the {CPU_TARGET_MS:g} ms target; {f['cpu_s']:.2f} s CPU, "
                                            f"{f['seconds']:.2f} s wall, all views, concurrency 64, start-up included",
                           **f))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=PAPER_RELEASE, help="release folder (default /tmp/paper)")
    parser.add_argument("--limit", type=int, help="first N nutrition items (default: all 1,650)")
    parser.add_argument("--images", type=int, default=4, help="views per item (default 4)")
    parser.add_argument("--concurrency", type=int, default=8, help="harness --concurrency (default 8, its default)")
    parser.add_argument("--max-image-side", type=int, default=1024, help="resize bound (default 1024, the harness's)")
    parser.add_argument("--process-sizes", default="1000,4000",
                        help="items per whole-process CPU run, comma-separated ('' = none)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the harness side to this file")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.process_sizes.split(",") if s.strip())
    return report_on_release(parser, args, lambda: run(args.dataset, limit=args.limit, images=args.images,
                                                       concurrency=args.concurrency, max_side=args.max_image_side,
                                                       profile=args.profile, process_sizes=sizes))


if __name__ == "__main__":
    raise SystemExit(main())
