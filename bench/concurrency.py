"""Concurrency efficiency: N requests against a server with a fixed latency at concurrency C, versus
the ideal N x latency / C, on a server that reports its context and on one that answers 404 there (no request
may wait for another to learn what the server accepts). What each row measures: bench/README.md.

    python -m bench.concurrency [--requests 1000] [--latency 0.1] [--concurrency 64] [--images 1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import PAPER_RELEASE, BenchError, report_on_release, result, warm_imports
from bench.overhead import placeholder_key
from bench.server import DEFAULT_ANSWER, BenchServer

TARGET = 1.05


def nutrition_rows(release: Path, n: int) -> list[dict[str, Any]]:
    """The first n nutrition rows (image bytes, undecoded); a small release is cycled with fresh ids."""
    import diningbench

    dataset = diningbench.load("nutrition", str(release), decode_images=False)
    rows = dataset.select(range(min(n, len(dataset)))).to_list()
    if not rows:
        raise BenchError(f"{release} has no nutrition rows")
    return rows + [{**row, "id": f"{row['id']}~{k}"}
                   for k, row in zip(range(len(rows), n), itertools.cycle(rows))]


class SleepingBackend:
    """Answers every request after `latency` seconds, in-process: the runner with no HTTP at all."""

    spec = "bench:sleep"

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def generate(self, request: Any) -> Any:
        from eval.types import Response

        await asyncio.sleep(self.latency)
        return Response(text=DEFAULT_ANSWER, usage={"prompt_tokens": 100, "completion_tokens": 20})

    def describe(self) -> dict[str, Any]:
        return {"backend": "bench-sleep"}


class Timeline:
    """Wraps a backend and records, per request, the worker (task) that sent it and when its call began
    and ended: where a run's time over the ideal goes (`Timeline.summary`)."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.calls = backend, []  # (worker, start, end)

    async def generate(self, request: Any) -> Any:
        start = time.perf_counter()
        try:
            return await self.backend.generate(request)
        finally:
            self.calls.append((id(asyncio.current_task()), start, time.perf_counter()))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def summary(self, latency: float) -> dict[str, float]:
        """Seconds: the spread of the workers' first sends; each call's time over the latency (median,
        p90); a worker's wait between one answer and its next send (median); the slowest worker's
        start, its calls' time over the latency and its waits, summed."""
        by_worker: dict[int, list[tuple[float, float]]] = {}
        for worker, start, end in sorted(self.calls, key=lambda c: c[1]):
            by_worker.setdefault(worker, []).append((start, end))
        t0 = min(start for _, start, _ in self.calls)
        over = sorted(end - start - latency for _, start, end in self.calls)
        waits = sorted(calls[k + 1][0] - calls[k][1] for calls in by_worker.values() for k in range(len(calls) - 1))
        slowest = max(by_worker.values(), key=lambda calls: calls[-1][1])
        return {"first_sends_spread_s": max(calls[0][0] for calls in by_worker.values()) - t0,
                "over_latency_median_s": statistics.median(over), "over_latency_p90_s": over[int(0.9 * len(over))],
                "wait_median_s": statistics.median(waits) if waits else 0.0,
                "slowest_start_s": slowest[0][0] - t0,
                "slowest_over_latency_s": sum(end - start - latency for start, end in slowest),
                "slowest_waits_s": sum(slowest[k + 1][0] - slowest[k][1] for k in range(len(slowest) - 1))}


async def _generate(base_url: str, rows: list[dict[str, Any]], out: Path, concurrency: int, images: int,
                    client: str, latency: float, timeline: list[Timeline] | None = None) -> int:
    from eval import api
    from eval.backends import BackendOptions, make_backend, release
    from eval.requests import request_job
    from eval.runner import RetryPolicy, built_ahead, execute
    from eval.settings import RunSettings
    from eval.store import PredictionStore
    from eval.tasks.nutrition import TASK as nutrition

    backend: Any = (SleepingBackend(latency) if client == "sleep"
                    else make_backend("openai:bench-vlm", BackendOptions(base_url=base_url, timeout=60.0)))
    if timeline is not None:
        backend = Timeline(backend)
        timeline.append(backend)
    settings = RunSettings(task="nutrition", model="openai:bench-vlm", images=images, max_tokens=256)
    by_id = {str(r["id"]): r for r in rows}

    # As api.run builds them, a few rows ahead; any that must re-encode views in worker threads.
    requests = built_ahead(request_job(nutrition, row, settings) for row in rows)
    answered = 0
    with PredictionStore(out) as store:
        async for outcome in execute(backend, requests, concurrency=concurrency, policy=RetryPolicy(max_attempts=1)):
            prediction = api.to_prediction(outcome, await api.parse(nutrition, outcome, by_id[outcome.request.id], "zh"))
            store.append(prediction)
            answered += prediction.error is None
    await release(backend.backend if isinstance(backend, Timeline) else backend)
    return answered


def request_bodies(rows: list[dict[str, Any]], images: int) -> list[bytes]:
    """The JSON bodies the `openai:` backend would send for `rows` (its own message and body code)."""
    import orjson

    from eval.backends import BackendOptions, make_backend
    from eval.backends.openai_chat import rough_prompt_tokens, to_openai_messages
    from eval.requests import build_request
    from eval.settings import RunSettings
    from eval.tasks.nutrition import TASK as nutrition

    settings = RunSettings(task="nutrition", model="openai:bench-vlm", images=images, max_tokens=256)
    backend = make_backend("openai:bench-vlm", BackendOptions(base_url="http://127.0.0.1:1/v1", timeout=60.0))
    bodies = []
    for row in rows:
        request = build_request(nutrition, row, settings)
        body, _ = backend.policy.body(backend.model, to_openai_messages(request.messages), request.config,
                                      rough_prompt_tokens(request.messages), None)
        bodies.append(orjson.dumps(body))
    return bodies


async def _bare(base_url: str, bodies: list[bytes], concurrency: int) -> int:
    from urllib.parse import urlsplit

    url = urlsplit(base_url)
    path = f"{url.path.rstrip('/')}/chat/completions"
    pending = iter(bodies)
    answered = 0

    async def worker() -> None:
        nonlocal answered
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        try:
            for body in pending:
                writer.write(f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                answered += head.startswith(b"HTTP/1.1 200")
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(bodies)))))
    return answered


def bare_loop(base_url: str, bodies: list[bytes], *, concurrency: int) -> float:
    """Seconds for the bare client to send `bodies` (pre-built) at `concurrency` and read every reply."""
    start = time.perf_counter()
    answered = asyncio.run(_bare(base_url, bodies, concurrency))
    seconds = time.perf_counter() - start
    if answered != len(bodies):
        raise BenchError(f"the bare client got {answered} answers for {len(bodies)} requests")
    return seconds


def runner_loop(base_url: str, rows: list[dict[str, Any]], out: Path, *, concurrency: int, images: int,
                client: str = "openai", latency: float = 0.0, timeline: list[Timeline] | None = None) -> float:
    """Seconds for the harness's generation loop over `rows` (client: the openai backend, or sleep);
    with `timeline`, the backend is wrapped in a `Timeline`, appended there."""
    start = time.perf_counter()
    answered = asyncio.run(_generate(base_url, rows, out, concurrency, images, client, latency, timeline))
    seconds = time.perf_counter() - start
    if answered != len(rows):
        raise BenchError(f"only {answered} of {len(rows)} requests were answered")
    return seconds


def end_to_end(release: Path, base_url: str, out: Path, *, n: int, concurrency: int, images: int) -> float:
    from eval import api

    settings = api.RunSettings(task="nutrition", model="openai:bench-vlm", base_url=base_url, dataset=str(release),
                               limit=n, images=images, concurrency=concurrency, out=out, overwrite=True,
                               max_tokens=256)
    start = time.perf_counter()
    api.run(settings, progress=False)
    return time.perf_counter() - start


def run(release: Path = PAPER_RELEASE, *, requests: int = 1000, latency: float = 0.1, concurrency: int = 64,
        images: int = 1, repeat: int = 3, end_to_end_too: bool = True) -> list[dict[str, Any]]:
    """The loop `repeat` times against the same server; the median is reported (the reference is the
    analytic ideal, so repeating only tames a shared machine's noise), all runs in `runs_s`."""
    release = Path(release).resolve()  # datasets mis-resolves relative release folders
    if not (release / "data" / "nutrition").is_dir():
        raise BenchError(f"no release at {release}: build one with `python -m bench.release --out {release}`")
    rows = nutrition_rows(release, requests)
    warm_imports()
    with placeholder_key():
        bodies = request_bodies(rows, images)
    ideal = requests * latency / concurrency
    size = f"{requests} requests, {latency * 1000:g} ms latency, concurrency {concurrency}, {images} view(s) each"
    out_rows = []
    with placeholder_key(), tempfile.TemporaryDirectory(prefix="bench-concurrency-") as tmp:
        for listed, label in ((True, "reports its context"), (False, "/v1/models 404, no context")):
            with BenchServer(latency=latency, models_listed=listed) as server:
                # Untimed warm-up: first use of the client, the parsers and the store.
                runner_loop(server.base_url, rows[:concurrency], Path(tmp) / "warm", concurrency=concurrency,
                            images=images)
                warm = server.stats()
                runs, bare = [], []
                for k in range(max(1, repeat)):  # interleaved, so both sides see the same machine
                    runs.append(runner_loop(server.base_url, rows, Path(tmp) / f"runner{k}", concurrency=concurrency,
                                            images=images))
                    bare.append(bare_loop(server.base_url, bodies, concurrency=concurrency))
                seen = server.stats()
            seen = {**seen, **{k: (seen[k] - warm[k]) // (2 * len(runs)) for k in ("requests", "images", "bytes")}}
            if seen["requests"] != requests:
                raise BenchError(f"the server saw {seen['requests']} requests per run, expected {requests}")
            spread = f"; median of {len(runs)} runs, {min(runs):.3f}-{max(runs):.3f} s" if len(runs) > 1 else ""
            out_rows.append(result(f"concurrency, server {label} (runner / ideal N*latency/C)",
                                   statistics.median(runs), ideal, target=TARGET, note=size + spread, server=seen,
                                   runs_s=runs))
            out_rows.append(result("  bare client, same server and bodies (pre-built; raw asyncio HTTP/1.1)",
                                   statistics.median(bare), ideal, note="what the machine and server allow any "
                                   f"client; runs {min(bare):.3f}-{max(bare):.3f} s", runs_s=bare))
            out_rows.append(result("  runner / bare client (the harness's own share)", statistics.median(runs),
                                   statistics.median(bare), note="medians of the interleaved runs above"))
            with BenchServer(latency=latency, models_listed=listed) as server:
                recorded: list[Timeline] = []  # one more run, each call's start and end recorded
                seconds = runner_loop(server.base_url, rows, Path(tmp) / "timeline", concurrency=concurrency,
                                      images=images, timeline=recorded)
            t = recorded[0].summary(latency)
            out_rows.append(result("  where the time over the 16 whole rounds goes (one more run)", seconds,
                                   ideal, note=(
                                       f"the {concurrency} first sends spread over {t['first_sends_spread_s'] * 1e3:.1f} ms "
                                       f"(each opens a connection); a call takes the latency + "
                                       f"{t['over_latency_median_s'] * 1e3:.2f} ms (median; p90 "
                                       f"{t['over_latency_p90_s'] * 1e3:.2f} ms); a worker waits "
                                       f"{t['wait_median_s'] * 1e3:.2f} ms between an answer and its next send; the "
                                       f"slowest worker started at {t['slowest_start_s'] * 1e3:.1f} ms, its calls took "
                                       f"{t['slowest_over_latency_s'] * 1e3:.1f} ms over the latency and its waits "
                                       f"{t['slowest_waits_s'] * 1e3:.1f} ms"), timeline=t))
        floor = runner_loop("", rows, Path(tmp) / "sleep", concurrency=concurrency, images=images, client="sleep",
                            latency=latency)
        whole_rounds = -(-requests // concurrency) * latency
        out_rows.append(result("  same loop, in-process backend (no HTTP)", floor, ideal,
                               note=f"the runner's floor; whole rounds alone take {whole_rounds:g} s"))
        distinct = sum(1 for row in rows if "~" not in str(row["id"]))
        if end_to_end_too and distinct == requests:  # api.run needs that many distinct items
            with BenchServer(latency=latency) as server:
                seconds = end_to_end(release, server.base_url, Path(tmp) / "e2e", n=requests,
                                     concurrency=concurrency, images=images)
            out_rows.append(result("  same through api.run (load + scoring too)", seconds, ideal,
                                   note="reference = the same ideal; no target"))
    return out_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=PAPER_RELEASE, help="release folder (default /tmp/paper)")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1, help="server latency in seconds (default 0.1)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--images", type=int, default=1, help="views per request (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the median is reported (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    return report_on_release(parser, args, lambda: run(args.dataset, requests=args.requests, latency=args.latency,
                                                       concurrency=args.concurrency, images=args.images,
                                                       repeat=args.repeat))


if __name__ == "__main__":
    raise SystemExit(main())
