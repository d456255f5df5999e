"""Build the paper-size synthetic release once (timed) for the benches: `python -m bench.release`.

Its build time is kept beside it (`<release>.build.json`), so later bench runs report it without rebuilding."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.common import PAPER_RELEASE, BenchError, ensure_release, release_counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.release", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PAPER_RELEASE, help="release folder (default /tmp/paper)")
    parser.add_argument("--scale", default="paper", choices=("paper", "sample", "tiny"))
    parser.add_argument("--rebuild", action="store_true", help="build again even if the folder holds a release")
    args = parser.parse_args(argv)
    try:
        record = ensure_release(args.out, args.scale, rebuild=args.rebuild)
    except BenchError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(json.dumps({"release": str(args.out), "rows": release_counts(args.out), "build": record}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
