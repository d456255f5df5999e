"""`python -m eval run|score|report|sweep`: argparse in front of eval.api, eval.report, eval.sweep.

Every user mistake ends as one `error: ...` line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from eval.api import IMAGE_ORDERS, RunSettings, UsageError
from eval.types import TASKS, ConfigError

EXIT_USAGE = 2


def _positive(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, choices=(*TASKS, "all"), help="task to evaluate, or all three")
    p.add_argument("--model", required=True, metavar="SPEC",
                   help="backend:model, e.g. openai:gpt-4o, gemini:gemini-2.5-flash, vllm:Qwen/Qwen3-VL-8B-Instruct, "
                        "hf:PATH, baseline:category-mean")
    p.add_argument("--base-url", help="OpenAI-compatible or Gemini endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--dataset", metavar="SOURCE",
                   help="release folder or Hub id (default: $DININGBENCH_SOURCE, else the embedded sample)")
    p.add_argument("--limit", type=_positive, help="first N items (after --ids)")
    p.add_argument("--ids", help="comma-separated item ids")
    p.add_argument("--images", type=_positive, help="send the first N views after ordering (default: all)")
    p.add_argument("--image-order", default="reference-first", choices=IMAGE_ORDERS)
    p.add_argument("--cot", action="store_true", help="prepend the three-step chain-of-thought template")
    p.add_argument("--lang", default="zh", choices=("zh", "en"), help="prompt language (default zh, the paper's)")
    p.add_argument("--concurrency", type=_positive, default=8, help="concurrent API requests (default 8)")
    p.add_argument("--judge", metavar="SPEC", help="VQA judge model, e.g. openai:gpt-4o")
    p.add_argument("--judge-base-url", help="endpoint of the judge model")
    p.add_argument("--max-tokens", type=_positive, default=4096,
                   help="generation limit (default 4096; raise it for thinking models, keeping prompt + limit under the server context)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="run folder (default results/<model>-<task>-<settings>/)")
    p.add_argument("--max-image-side", type=_positive, default=1024, help="resize bound in pixels (default 1024)")
    p.add_argument("--batch-size", type=_positive, default=8, help="batch size for local engines (vllm:, hf:)")
    p.add_argument("--tensor-parallel-size", type=_positive, help="vllm: tensor parallel size")
    p.add_argument("--data-parallel-size", type=_positive, help="vllm: data parallel size")
    p.add_argument("--max-pixels", type=_positive, help="local engines: processor pixel cap per image")
    p.add_argument("--min-pixels", type=_positive, help="local engines: processor pixel floor per image")
    p.add_argument("--dtype", help="local engines: weights dtype, e.g. bfloat16 (default: the model's)")
    p.add_argument("--device", help="hf: device, e.g. cuda, cpu, mps (default: auto)")
    p.add_argument("--trust-remote-code", action="store_true", default=None,
                   help="local engines: allow the model repository's own code")
    p.add_argument("--max-model-len", type=_positive, default=16384, help="local engines: context (default 16384)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per API request (default 120)")
    p.add_argument("--max-attempts", type=_positive, default=6, help="attempts per sample incl. retries (default 6)")
    p.add_argument("--overwrite", action="store_true", help="replace the predictions already in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    engine = {name: getattr(args, name) for name in
              ("tensor_parallel_size", "data_parallel_size", "max_pixels", "min_pixels", "max_model_len",
               "dtype", "device", "trust_remote_code")
              if getattr(args, name) is not None}
    ids = [i.strip() for i in args.ids.split(",") if i.strip()] if args.ids else None
    return RunSettings(
        task=args.task, model=args.model, base_url=args.base_url, dataset=args.dataset, limit=args.limit,
        ids=ids, images=args.images, image_order=args.image_order, cot=args.cot, lang=args.lang,
        concurrency=args.concurrency, max_tokens=args.max_tokens, seed=args.seed, judge=args.judge,
        judge_base_url=args.judge_base_url, out=args.out, max_image_side=args.max_image_side,
        batch_size=args.batch_size, timeout=args.timeout, max_attempts=args.max_attempts,
        overwrite=args.overwrite, engine_options=engine)


def cmd_run(args: argparse.Namespace) -> int:
    from eval import api
    from eval.scoring import METRICS, results_table

    settings = settings_from_args(args)
    out = api.run(settings, progress=not args.no_progress)
    metrics = json.loads((out / METRICS).read_text(encoding="utf-8"))
    source = settings.dataset or os.environ.get("DININGBENCH_SOURCE") or "the embedded synthetic sample"
    print(f"{settings.model} on {source} ({settings.lang}, "
          f"{settings.images or 'all'} views{', CoT' if settings.cot else ''})\n")
    print(results_table(metrics))
    print(f"\nresults in {out}/ (predictions.jsonl, scores.jsonl, metrics.json, run.json, report.md)")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from eval import api
    from eval.scoring import results_table

    metrics = api.score(args.dir, judge=args.judge, judge_base_url=args.judge_base_url)
    print(results_table(metrics))
    return 0


def _delegate(module_name: str):
    def handler(args: argparse.Namespace) -> int:
        return int(importlib.import_module(module_name).main(args) or 0)
    return handler


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one `error:` line (with a pointer to --help), exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m eval", description="DiningBench evaluation harness")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="evaluate a model (generation + scoring, resumable)")
    add_run_arguments(run)
    run.set_defaults(handler=cmd_run)
    score = sub.add_parser("score", help="re-score a run folder's saved predictions")
    score.add_argument("dir", type=Path, metavar="DIR")
    score.add_argument("--judge", metavar="SPEC", help="VQA judge model, e.g. openai:gpt-4o")
    score.add_argument("--judge-base-url", help="endpoint of the judge model")
    score.set_defaults(handler=cmd_score)
    for name, module, text in (("report", "eval.report", "tables, breakdowns, CIs, plots, model card"),
                               ("sweep", "eval.sweep", "run a grid of settings (images, CoT, language)")):
        p = sub.add_parser(name, help=text)
        try:
            importlib.import_module(module).add_arguments(p)
        except ImportError as exc:
            p.set_defaults(missing=f"`{name}` is unavailable: {exc}")
        p.set_defaults(handler=_delegate(module))
    return parser


USER_ERRORS: tuple[type[BaseException], ...] = (UsageError, ConfigError, ValueError, FileNotFoundError,
                                                  PermissionError, ImportError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "missing", None):
        print(f"error: {args.missing}", file=sys.stderr)
        return EXIT_USAGE
    try:
        import datasets

        datasets.disable_progress_bars()  # our own progress line is the one that matters
    except ImportError:
        pass
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("\ninterrupted: finished samples are saved; rerun the same command to resume", file=sys.stderr)
        return 130
    except USER_ERRORS as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE
