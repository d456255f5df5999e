"""Construction costs, side by side in one run: the photo rule prefilters against a bare decode loop on
the same files, and a model call through `construct` against the harness runner on the same requests.

    python -m bench.construct_prefilter --photos 10000     # a 10k-photo synthetic export
"""

from __future__ import annotations

import argparse
import io
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image, ImageEnhance

from bench.common import machine, result, table, write_json
from bench.server import BenchServer


def make_photos(folder: Path, n: int, seed: int = 0) -> list[Path]:
    """`n` distinct JPEGs made from the synthetic export's photos (deterministic)."""
    from synthetic.raw_export import write_raw_export

    raw = folder / "raw"
    write_raw_export(raw, seed=seed)
    sources = []
    for path in sorted((raw / "images").rglob("*.jpg")):
        try:
            with Image.open(path) as img:
                if min(img.size) >= 128:
                    sources.append(img.convert("RGB"))
        except OSError:
            continue  # the export's planted cut-off file
    rng = random.Random(seed)
    out = folder / "photos"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        img = sources[i % len(sources)]
        w, h = img.size
        dx, dy = rng.randint(0, w // 12), rng.randint(0, h // 12)
        copy = ImageEnhance.Brightness(img.crop((dx, dy, w - dx, h - dy))).enhance(rng.uniform(0.85, 1.15))
        path = out / f"p{i:06d}.jpg"
        copy.save(path, format="JPEG", quality=85)
        paths.append(path)
    return paths


def prefilter_rows(paths: list[Path], min_side: int = 64) -> list[dict[str, Any]]:
    from construct.photos import prefilter

    blobs = [p.read_bytes() for p in paths]  # both sides read from memory: the disk is not what is compared

    def bare() -> None:
        for data in blobs:
            with Image.open(io.BytesIO(data)) as img:
                img.load()

    bare()  # warm the decoder and the page cache once
    start = time.perf_counter()
    bare()
    bare_s = time.perf_counter() - start
    start = time.perf_counter()
    verdicts = [prefilter(data, min_side) for data in blobs]
    rules_s = time.perf_counter() - start
    rejected = sum(reason is not None for reason, _ in verdicts)
    note = (f"{len(blobs)} photos: {len(blobs) / rules_s:,.0f} photos/s through the rules, "
            f"{len(blobs) / bare_s:,.0f} photos/s bare decode; {rejected} rejected")
    return [result("construct prefilter vs bare decode", rules_s, bare_s, target=1.5, note=note)]


def call_rows(n_calls: int, concurrency: int = 16) -> list[dict[str, Any]]:
    import asyncio

    from construct.models import Ask, Models
    from construct.work import BuildSettings
    from eval.backends import BackendOptions, make_backend, release
    from eval.runner import RetryPolicy, execute
    from eval.types import GenerationConfig, Message, Request

    asks = [Ask(f"item-{i}", f"Is photo {i} a good photo of food? Reply with JSON.") for i in range(n_calls)]
    with BenchServer(answer='{"quality": "good", "reason": "clear"}') as server, \
            tempfile.TemporaryDirectory() as tmp:

        async def harness() -> int:
            backend = make_backend("openai:bench", BackendOptions(base_url=server.base_url, timeout=30.0))
            config = GenerationConfig(max_tokens=64)
            requests = [Request(id=a.item, task="vqa", config=config, request_hash=a.item,
                                messages=(Message("user", (a.prompt,)),)) for a in asks]
            answered = 0
            try:
                async for outcome in execute(backend, requests, concurrency=concurrency, policy=RetryPolicy(max_attempts=1)):
                    answered += outcome.response is not None
            finally:
                await release(backend)
            return answered

        asyncio.run(harness())  # warm-up: imports, the server's first connections
        start = time.perf_counter()
        answered = asyncio.run(harness())
        harness_s = time.perf_counter() - start
        settings = BuildSettings(model="openai:bench", base_url=server.base_url, concurrency=concurrency)
        models = Models(settings, Path(tmp) / "work")
        start = time.perf_counter()
        answers = models.ask("bench", "openai:bench", "v1", asks)
        construct_s = time.perf_counter() - start
    if answered != n_calls or sum(a.text is not None for a in answers.values()) != n_calls:
        raise RuntimeError("not every bench call was answered")
    per_call_ms = 1000 * (construct_s - harness_s) / n_calls
    note = (f"{n_calls} calls at concurrency {concurrency}, zero-latency server: construct adds "
            f"{per_call_ms:+.3f} ms per call (cache keys, calls.jsonl lines) to the runner's own cost")
    return [result("construct model calls vs harness runner", construct_s, harness_s, target=1.5, note=note)]


def run(n_photos: int = 10_000, n_calls: int = 2_000, folder: Path | None = None) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        return prefilter_rows(make_photos(folder or Path(tmp), n_photos)) + call_rows(n_calls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.construct_prefilter", description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=10_000, help="photos in the synthetic export (default 10,000)")
    parser.add_argument("--calls", type=int, default=2_000, help="model calls to time (default 2,000)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    rows = run(args.photos, args.calls)
    print(table(rows))
    write_json(args.json, {"machine": machine(), "results": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
