"""Run every bench and print one table: `python -m bench.run_all [--quick] [--json FILE]`.

Sizes are the paper's; bench/README.md says what `--quick` and a missing release do."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench import (
    concurrency,
    construct_dedupe,
    construct_scale,
    memory,
    metric_cost,
    official_cost,
    overhead,
    scaling,
)
from bench.common import (
    PAPER_RELEASE,
    BenchError,
    ensure_release,
    import_seconds,
    machine,
    result,
    table,
    write_json,
)

BENCHES = ("overhead", "concurrency", "memory", "metrics", "startup", "dedupe", "scaling", "construct", "official")
# The paper-size synthetic views (448 px) go out as stored (within the default 1,024 px bound); real
# photos are larger: a bound below 448 px sends every view through decode, shrink, re-encode: both shown.
REENCODE_SIDE = 384


def sizes(quick: bool) -> dict[str, Any]:
    """The size of every bench: the paper's, or a small one for --quick."""
    if quick:
        return {"overhead_limit": 100, "requests": 256, "memory_limit": 100, "nutrition": 200, "classification": 300,
                "dishes": (500, 1000, 2000), "scaling": (100, 400), "merchants": (4, 8), "official_rows": 200}
    return {"overhead_limit": None, "requests": 1000, "memory_limit": None, "nutrition": 1650, "classification": 2884,
            "dishes": (2000, 8000, 32000), "scaling": (1000, 4000, 16000), "merchants": (20, 80), "official_rows": 1000}


def run(release: Path, *, quick: bool = False, only: tuple[str, ...] = BENCHES, latency: float = 0.1,
        concurrency_level: int = 64) -> list[dict[str, Any]]:
    size = sizes(quick)
    rows: list[dict[str, Any]] = []
    if "overhead" in only:
        rows += overhead.run(release, limit=size["overhead_limit"], images=4)
        reencoded = overhead.run(release, limit=size["overhead_limit"], images=4, max_side=REENCODE_SIDE)[0]
        rows.append({**reencoded, "name": f"  same, every view re-encoded (--max-image-side {REENCODE_SIDE})"})
    if "concurrency" in only:
        rows += concurrency.run(release, requests=size["requests"], latency=latency, concurrency=concurrency_level)
    if "memory" in only:
        rows += memory.run(release, limit=size["memory_limit"])
    if "scaling" in only:  # whole-process CPU per request and memory at each size, with the exponents
        rows += scaling.run(release, sizes=size["scaling"])
    if "metrics" in only:
        rows += metric_cost.run(size["nutrition"], size["classification"])
    if "dedupe" in only:
        rows += construct_dedupe.run(size["dishes"], all_pairs_up_to=size["dishes"][1])
    if "construct" in only:  # a build from raw exports against the stand-in at 200 ms per call
        rows += construct_scale.run(size["merchants"], latency=0.2, concurrency=16)
    if "official" in only:  # --protocol official beside ours on one release in the authors' layout
        rows += official_cost.run(size["official_rows"], repeat=1 if quick else 3)
    if "startup" in only:
        startup = import_seconds()
        rows.append(result("start-up: import the harness and metric parsers", startup, None,
                           note="once per process (the metric parsers import without `evaluate`)"))
        if "overhead" in only:  # what a cold `python -m eval run` adds over the warm figure
            first = rows[0]
            rows.insert(2, result("  overhead incl. start-up (cold process)", first["measured"] + startup,
                                  first["reference"], note="the bare loop's own imports not counted"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--dataset", type=Path, default=PAPER_RELEASE,
                        help="release folder (default /tmp/paper; built at paper scale when missing)")
    parser.add_argument("--only", default=",".join(BENCHES), help=f"comma-separated subset of {','.join(BENCHES)}")
    parser.add_argument("--json", type=Path, help="also write the machine, sizes and results as JSON")
    args = parser.parse_args(argv)
    only = tuple(name.strip() for name in args.only.split(",") if name.strip())
    if unknown := sorted(set(only) - set(BENCHES)):
        parser.error(f"--only: unknown bench {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    try:
        import datasets

        datasets.disable_progress_bars()  # the table is the output
    except ImportError:
        pass
    info = machine()
    print(f"machine: {info['cpus']} cpus ({info['cpu']}), {info['memory_gib']} GiB, Python {info['python']}, "
          f"load {info['load_1min']}", flush=True)
    release = args.dataset
    try:
        if args.quick and not (release / "data").is_dir():
            import diningbench

            release = diningbench.SAMPLE_DIR  # a quick check should not wait for a paper-size build
            print(f"no release in {args.dataset}: --quick uses the embedded sample", flush=True)
        elif not (release / "data").is_dir():
            print(f"building the paper-size release into {release} (once; many minutes)...", flush=True)
        ensure_release(release)
        rows = run(release, quick=args.quick, only=only)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(rows))
    info["load_1min_after"] = machine()["load_1min"]
    write_json(args.json, {"machine": info, "quick": args.quick, "sizes": sizes(args.quick),
                           "release": str(release), "results": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
