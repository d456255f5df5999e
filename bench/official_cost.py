"""What `--protocol official` costs beside ours: the same 1,000 nutrition requests of one release in the
authors' layout, each protocol a whole `python -m eval run` process at its defaults against a zero-latency
local server, side by side in one run; and ours on the same rows converted to our Parquet layout.

    python -m bench.official_cost [--rows 1000] [--repeat 3] [--profile FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, BenchError, child_json, result, table, write_json
from bench.server import BenchServer

TARGET = 1.1
PROTOCOLS = ("ours", "official")
# What is measured: (protocol, layout). Ours is run on the release in the authors' layout and on the same
# rows converted to our Parquet layout (`diningbench convert`), where its own runs read them.
RUNS = (("ours", "official"), ("official", "official"), ("ours", "parquet"))


def authors_release(out: Path, rows: int) -> Path:
    """A folder in the authors' layout holding `rows` nutrition rows (zh and en files): the sample's,
    cycled with fresh ids, each row's photos copied under their own names. Built once per size."""
    from dataset.convert import write_sample_official
    from dataset.official import OFFICIAL_FILES, write_official
    from dataset.official_rows import published_images

    names = [OFFICIAL_FILES[("nutrition", lang)] for lang in ("zh", "en")]
    if all((out / name).is_file() and sum(1 for _ in (out / name).open(encoding="utf-8")) == rows for name in names):
        return out
    with tempfile.TemporaryDirectory(prefix="bench-official-sample-") as tmp:
        sample = write_sample_official(Path(tmp) / "sample", tarball=False)
        files: dict[str, list[tuple[dict[str, Any], dict[str, bytes]]]] = {}
        for name in names:
            lines = [json.loads(line) for line in (sample / name).read_text(encoding="utf-8").splitlines() if line]
            if not lines:
                raise BenchError(f"the sample's {name} has no rows")
            cycled = []
            for k in range(rows):
                published = dict(lines[k % len(lines)])
                paths = [p for _, p in published_images("nutrition", published)[0]]
                fresh = [f"images/bench-{k:05d}_{j}{Path(p).suffix}" for j, p in enumerate(paths)]
                standard = bool(published.get("standard_image"))
                published.update(id=k + 1, standard_image=fresh[0] if standard else "",
                                 user_images=fresh[1:] if standard else fresh)
                cycled.append((published, {new: (sample / old).read_bytes()
                                           for new, old in zip(fresh, paths, strict=True)}))
            files[name] = cycled
    return write_official(out, files, tarball=False)


def child(release: str, base_url: str, out: str, protocol: str, count_resolves: bool,
          profile: str | None) -> dict[str, Any]:
    """Inside the fresh process: one api.run of `protocol` at its defaults, then what it cost."""
    start = time.perf_counter()
    from eval.process import cli_imports

    with cli_imports():  # as `python -m eval` does
        from eval import api

    resolves = 0
    if count_resolves:
        original = Path.resolve

        def counted(self: Path, strict: bool = False) -> Path:
            nonlocal resolves
            resolves += 1
            return original(self, strict)

        Path.resolve = counted  # type: ignore[method-assign,assignment]
    settings = api.RunSettings(task="nutrition", model="openai:bench-vlm", base_url=base_url, dataset=release,
                               protocol=protocol, out=Path(out), overwrite=True)
    if profile:
        import cProfile

        cProfile.runctx("api.run(settings, progress=False)", globals(), {"api": api, "settings": settings}, profile)
    else:
        api.run(settings, progress=False)
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    lines = [json.loads(line) for line in (Path(out) / "predictions.jsonl").open(encoding="utf-8")]
    return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "predictions": len(lines),
            "failed": sum(1 for p in lines if p.get("error")), "resolves": resolves}


def measure(release: Path, base_url: str, out: Path, protocol: str, cache: Path, *, count_resolves: bool = False,
            profile: Path | None = None) -> dict[str, Any]:
    """One fresh `python -m bench.official_cost --child` process (start-up counted, like a CLI run)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "bench-placeholder", "HF_DATASETS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measured as Python runs by default: modules' bytecode cached
    command = [sys.executable, "-m", "bench.official_cost", "--child", protocol, "--dataset", str(release),
               "--base-url", base_url, "--out", str(out), *(["--count-resolves"] if count_resolves else []),
               *(["--profile", str(profile)] if profile else [])]
    return child_json(command, env, f"the {protocol} run")


def converted(release: Path) -> Path:
    """The same rows in our Parquet layout (`diningbench convert`), beside the release; made once."""
    from dataset.convert import convert

    out = release.with_name(release.name + "-parquet")
    if not (out / "data" / "nutrition").is_dir() or out.stat().st_mtime < release.stat().st_mtime:
        convert(release, out)
    return out


def run(rows: int = 1000, *, repeat: int = 3, profile: Path | None = None,
        release: Path | None = None) -> list[dict[str, Any]]:
    """Both protocols on the same release, and ours on the same rows in our layout, interleaved, each figure the
    median of `repeat` rounds after one untimed round (what a release's first run makes once: its fingerprint,
    its views' hashes); then, untimed, a process per protocol counts its `Path.resolve` calls (the release's
    path checks). Returns the result rows (official / ours on the same release first)."""
    release = authors_release(release or Path(tempfile.gettempdir()) / f"bench-official-{rows}", rows)
    sources = {"official": release, "parquet": converted(release)}
    found: dict[tuple[str, str], list[dict[str, Any]]] = {r: [] for r in RUNS}
    counted: dict[tuple[str, str], dict[str, Any]] = {}
    with BenchServer(latency=0.0) as server, tempfile.TemporaryDirectory(prefix="bench-official-cost-") as tmp:
        cache = Path(tmp) / "cache"

        def one(protocol: str, layout: str, **options: Any) -> dict[str, Any]:
            return measure(sources[layout], server.base_url, Path(tmp) / f"{protocol}-{layout}", protocol, cache,
                           **options)

        for protocol, layout in RUNS:  # the untimed first round
            one(protocol, layout)
        for _ in range(max(1, repeat)):
            for protocol, layout in RUNS:
                found[(protocol, layout)].append(one(protocol, layout))
        for protocol, layout in RUNS:
            counted[(protocol, layout)] = one(protocol, layout, count_resolves=True,
                                              profile=profile if protocol == "official" else None)
    for (protocol, layout), runs in found.items():
        if bad := [r for r in runs if r["predictions"] != rows or r["failed"]]:
            raise BenchError(f"the {protocol} run on the {layout} layout gave {bad[0]['predictions']} predictions "
                             f"({bad[0]['failed']} failed) for {rows} rows")
    median = {r: {key: statistics.median(run[key] for run in runs) for key in ("seconds", "cpu_s")}
              for r, runs in found.items()}
    cpus = {r: ", ".join(f"{run['cpu_s']:.2f}" for run in runs) for r, runs in found.items()}
    official, ours, ours_parquet = RUNS[1], RUNS[0], RUNS[2]
    size = f"{rows} nutrition requests, each protocol's defaults, zero latency; median of {max(1, repeat)} processes"
    return [
        result("official / ours, same release: CPU", median[official]["cpu_s"], median[ours]["cpu_s"],
               target=TARGET, note=f"{size}; whole process; CPU s official {cpus[official]}, ours {cpus[ours]}",
               runs={f"{p} on {layout}": found[(p, layout)] for p, layout in RUNS}),
        result("official / ours, same release: wall", median[official]["seconds"], median[ours]["seconds"],
               note=size),
        result("official / ours on our layout: CPU", median[official]["cpu_s"], median[ours_parquet]["cpu_s"],
               target=TARGET, note=f"ours on the same rows converted to Parquet; CPU s {cpus[ours_parquet]}"),
        result("official / ours on our layout: wall", median[official]["seconds"], median[ours_parquet]["seconds"],
               note="ours on the same rows converted to Parquet"),
        result("  Path.resolve calls, official", counted[official]["resolves"], None, unit="",
               note=f"ours on the same release {counted[ours]['resolves']}, on our layout "
                    f"{counted[ours_parquet]['resolves']}; one process each, untimed"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.official_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000, help="nutrition rows in the release (default 1,000)")
    parser.add_argument("--repeat", type=int, default=3, help="processes per protocol; medians (default 3)")
    parser.add_argument("--dataset", type=Path, help="where the release in the authors' layout is built "
                                                     "(default: a folder in the temporary directory)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one official run to this file")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--child", choices=PROTOCOLS, help=argparse.SUPPRESS)
    parser.add_argument("--count-resolves", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(str(args.dataset), args.base_url, args.out, args.child, args.count_resolves,
                               str(args.profile) if args.profile else None)))
        return 0
    try:
        rows = run(args.rows, repeat=args.repeat, profile=args.profile, release=args.dataset)
    except BenchError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(table(rows))
    write_json(args.json, {"results": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
