"""`python -m construct {run,review,release,report}`: build a release from a raw merchant export."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from construct import funnel, pipeline, review
from construct.engine import check_available
from construct.errors import BuildError
from construct.work import BuildSettings, load_settings, settings_from_args
from dataset.official import LAYOUTS
from eval.settings import add_arguments
from eval.store import locked
from eval.types import is_user_error

RETIRED_MERGE = ("`merge` is retired: build the whole export in one run, on as many machines as you have, with "
                 "`python -m construct run RAW --out WORK --engine ray --ray-address ADDR` (README: Building at scale)")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m construct", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the stages (resumable) on a raw export")
    p.add_argument("raw", help="raw export folder (merchants.jsonl, dishes.jsonl, photos.jsonl, images)")
    p.add_argument("--out", required=True, help="work folder")
    add_arguments(p, BuildSettings(), required=("model",))
    p = sub.add_parser("merge", help="retired: use run --engine ray", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("review", help="export items (or base dishes) for review to CSV, or import the decisions")
    p.add_argument("work")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--export", dest="export_csv")
    g.add_argument("--import", dest="import_csv")
    g.add_argument("--approve-all", action="store_true",
                   help='approve every pending item, reviewer "bulk": the card says no person looked at them')
    p.add_argument("--stage", choices=("items", "dishes"), default=None,
                   help="dishes: the base-dish review before task generation; items (default): the final review")
    p.add_argument("--reviewer", default="", help="who decided (recorded with each decision; required for an audit)")
    p.add_argument("--audit", type=int, default=None, metavar="N",
                   help="with --export: N decided final items per task drawn at random for a second reviewer")
    p = sub.add_parser("release", help="build and validate the release (Parquet, or the authors' layout)")
    p.add_argument("work")
    p.add_argument("--out", required=True)
    p.add_argument("--layout", choices=LAYOUTS, default="parquet",
                   help="parquet: our release, images embedded (default); official: the authors' layout (classification"
                        ".jsonl, nutrition.jsonl, vqa.jsonl and their _en translations, images/, images.tar.gz)")
    p = sub.add_parser("report", help="write WORK/funnel.md and WORK/funnel.png")
    p.add_argument("work")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "run":
            settings = settings_from_args(args, str(Path(args.raw).resolve()))
            check_available(settings)  # before the work folder is touched: Ray installed when asked for
            pipeline.check_servers(settings)
            if note := settings.filter_note():
                print(f"note: {note}", flush=True)
            with locked(Path(args.out), "work folder"):
                start = time.monotonic()
                pipeline.run(args.out, settings, on_stage=lambda name: print(f"stage {name} ...", flush=True))
                print(f"stages done in {time.monotonic() - start:.2f} s", flush=True)
                if pending := pipeline.pending_dish_review(args.out):  # the run stopped at the base-dish review
                    print(f"{pending} selected base dish(es) in {args.out} await review before any task item is "
                          f"generated: python -m construct review {args.out} --stage dishes --export dishes.csv (fill "
                          "`decision`, then --import it), or the Space's Review tab; then run the same `python -m "
                          "construct run` again to continue.")
                    return 0
                md, png = funnel.write(Path(args.out), settings)
            print(md.read_text(encoding="utf-8"))
            print(f"wrote {md} and {png}; next: python -m construct review {args.out} --export review.csv")
        elif args.command == "merge":
            raise BuildError(RETIRED_MERGE)
        elif args.command == "review":
            with locked(Path(args.work), "work folder"):  # an export may record an audit sample
                stage = args.stage or "items"
                if args.audit is not None and (not args.export_csv or args.stage == "dishes"):
                    raise BuildError("--audit N goes with --export FILE (a sample of the final items)")
                if args.export_csv:
                    n = review.export_csv(args.work, args.export_csv, stage=stage, audit=args.audit)
                    what = "audit items" if args.audit is not None else "base dishes" if stage == "dishes" else "items"
                    print(f"wrote {n} {what} to {args.export_csv}: fill `decision` with approve or reject, then --import it"
                          + (" with --reviewer NAME" if args.audit is not None else ""))
                elif args.approve_all:
                    n = review.approve_all(args.work, stage=stage)
                    print(f'approved {n} pending {"base dish(es)" if stage == "dishes" else "item(s)"} in bulk, '
                          f'reviewer "bulk": the card will say no person looked at them')
                else:
                    counts = review.import_csv(args.work, args.import_csv, reviewer=args.reviewer, stage=args.stage)
                    print(", ".join(f"{k} {v}" for k, v in counts.items()))
        elif args.command == "release":
            from construct.release import build_release

            out, problems = build_release(args.work, args.out, layout=args.layout)
            for problem in problems:
                print(problem)
            errors = sum(p.level == "error" for p in problems)
            print(f"wrote {out}: {errors} error(s), {len(problems) - errors} warning(s)")
            return 1 if errors else 0
        else:
            md, png = funnel.write(Path(args.work), load_settings(Path(args.work)))
            print(md.read_text(encoding="utf-8"))
            print(f"wrote {md} and {png}")
    except pipeline.StageFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:
        if not is_user_error(exc):
            raise  # a bug of ours: its traceback, exit 1
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
