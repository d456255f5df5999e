"""`python -m eval run|score|import|report|sweep|judge-agreement|analyze`: argparse in front of eval.api and eval.report.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval import analysis, api, protocols, tasks
from eval.agreement import agreement_of_specs, parse_judge_spec
from eval.report import report
from eval.report.tables import pct, results_table, with_ci
from eval.settings import LANGS, N_BOOT, UsageError, add_run_arguments, settings_from_args
from eval.types import TaskFigures, is_user_error

EXIT_USAGE = 2
EXIT_INCOMPLETE = 3  # `run` finished, but some items failed after their retries (their errors are saved; rerun to ask them)


def cmd_run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    out = api.run(settings, progress=not args.no_progress)
    metrics = api.read_metrics(out)
    source = settings.dataset or os.environ.get("DININGBENCH_SOURCE") or "the embedded synthetic sample"
    asked_with = api.run_settings(out)  # as the run resolved them
    asked = protocols.of(asked_with).describe(asked_with)
    print(f"{settings.model} on {source} ({asked_with.lang}, {asked})\n")
    print(results_table(metrics, protocols.of(asked_with)))
    for line in filter(None, map(circular_line, metrics.values())):  # --circular: the task with options
        print("\n" + line)
    print(f"\nresults in {out}/ (predictions.jsonl, scores.jsonl, metrics.json, run.json, report.md)")
    return finish_line(out)


def finish_line(out: Path) -> int:
    """What each endpoint's limiter settled on; then, when items failed, why (the most frequent errors)
    and, as the last line, how many: exit EXIT_INCOMPLETE, so a partial run is never taken for a whole one."""
    from eval.report.runs import load_run

    run = load_run(out)
    if lines := report.concurrency_lines([run]):
        print("\nrequests in flight:\n" + terminal(lines))
    items = [r for records in run.scores.values() for r in records]
    failed = sum(1 for r in items if r.get("error"))
    if not failed:
        return 0
    print("\nwhy items failed:")
    for message, count in report.top_errors(items):
        print(f"  {count} × {message}")
    counts = run.info.get("counts") or {}
    total = sum(int(c.get("predictions") or 0) for c in counts.values() if isinstance(c, dict)) or len(items)
    print(f"incomplete: {failed} of {total} items failed; run the same command again to ask only those "
          f"(exit status {EXIT_INCOMPLETE})")
    return EXIT_INCOMPLETE


def circular_line(figures: TaskFigures) -> str | None:
    """`--circular`: the circular accuracy and the position-bias test, under the summary table."""
    found = figures.get("circular") or {}
    if not found.get("items"):
        return None
    bias = found.get("position_bias") or {}
    p_value = "–" if bias.get("p_value") is None else f"{bias['p_value']:.3g}"
    return (f"circular accuracy (right under all {found['rotations']} option rotations): "
            f"{with_ci(figures.get('circular_accuracy'), figures.get('circular_accuracy_ci95'))}% of "
            f"{found['items']} items, {pct(found.get('accuracy'))}% as stored; position bias "
            f"chi-square {bias.get('statistic', 0):.2f} (df {bias.get('df')}), p {p_value}")


def cmd_judge_agreement(args: argparse.Namespace) -> int:
    specs = [s for s in args.judges.split(",") if s.strip()]
    for spec in specs:
        api.check_reachable(parse_judge_spec(spec)[1], f"--judges {spec}")
    api.check_reachable(args.judge_base_url, "--judge-base-url")
    result = agreement_of_specs(args.dir, specs, human_labels=args.human_labels, judge_all=args.judge_all,
                                n_boot=args.n_boot, base_url=args.judge_base_url)
    print(terminal(report.agreement_section(result)))
    print(f"\nwrote {args.dir / 'judge_agreement.json'}", file=sys.stderr)
    return 0


def terminal(markdown: str) -> str:
    """Markdown written for files (text from elsewhere as character references, `&lt;`) as a terminal
    shows it: the characters themselves. A terminal renders no Markdown or HTML, so nothing becomes syntax.

    >>> terminal("| hard (&lt;⅓) | a&#42;b |")
    '| hard (<⅓) | a*b |'
    """
    return html.unescape(markdown)


def cmd_analyze(args: argparse.Namespace) -> int:
    text = analysis.analyze(args.dirs, out=args.out)
    print(terminal(text), end="")
    if args.out is not None:
        print(f"\nwrote {args.out / analysis.ANALYSIS_MD} and its plots", file=sys.stderr)
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    metrics = api.score(args.dir, judge=args.judge, judge_base_url=args.judge_base_url)
    print(results_table(metrics, protocols.of(api.run_settings(args.dir))))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from eval.official_io import export_official

    for path in export_official(args.run, args.out, overwrite=args.overwrite):
        print(f"wrote {path}")
    return 0


def _import_official(args: argparse.Namespace) -> Path:
    from eval.official_io import import_official

    if not args.task or not args.dataset:
        raise UsageError("--from official needs --task (the file's task) and --dataset (the authors' release "
                         "it was made on: a folder, one of its JSONL files, or meituan/DiningBench)")
    return import_official(args.log, args.task, args.out, dataset=args.dataset, lang=args.lang, model=args.model,
                           judge=args.judge, judge_base_url=args.judge_base_url)


def _import_framework(args: argparse.Namespace) -> Path:
    from eval.importer import import_run

    return import_run(args.log, args.framework, args.out, dataset=args.dataset, judge=args.judge,
                      judge_base_url=args.judge_base_url)


# `eval import --from F`: the authors' prediction files, or a framework's log (eval/importer.py).
IMPORTS: dict[str, Callable[[argparse.Namespace], Path]] = {"official": _import_official}


def cmd_import(args: argparse.Namespace) -> int:
    out = IMPORTS.get(args.framework, _import_framework)(args)
    print(results_table(api.read_metrics(out), protocols.of(api.run_settings(out))))
    from eval.runinfo import read_run_json

    if left_out := (read_run_json(out) or {}).get("imported", {}).get("left_out"):
        print(f"\nleft out of run.json (not on the import allow-list, or a credential): {', '.join(left_out)}")
    print(f"\nimported into {out}/ (predictions.jsonl, scores.jsonl, metrics.json, run.json, report.md)")
    return 0


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,2,3,4, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"view counts must be at least 1, got {text!r}")
    return values


def _lang_list(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or any(v not in LANGS for v in values):
        raise argparse.ArgumentTypeError(f"languages must be among {', '.join(LANGS)}, got {text!r}")
    return values


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", required=True, metavar="SPEC",
                        help="backend:model; repeat for one line per model")
    parser.add_argument("--task", required=True, choices=tasks.names())
    parser.add_argument("--images", type=_int_list, default=[1, 2, 3, 4], metavar="N,N,...",
                        help="view counts to sweep (default 1,2,3,4)")
    parser.add_argument("--cot", choices=("off", "on", "both"), default="off",
                        help="chain of thought: off (default), on, or both for a with/without chart")
    parser.add_argument("--lang", type=_lang_list, default=["zh"], metavar="zh,en",
                        help="prompt languages (default zh)")
    parser.add_argument("--out", type=Path, required=True, help="sweep folder: one run folder per cell")
    parser.add_argument("--n-boot", type=int, default=N_BOOT, help=f"bootstrap resamples (default {N_BOOT})")
    add_run_arguments(parser, skip=("task", "model", "images", "cot", "lang", "out", "ids", "overwrite"))


def cmd_sweep(args: argparse.Namespace) -> int:
    task = tasks.get(args.task)
    if task.judged and not args.judge:
        raise UsageError(f"sweep --task {args.task} needs --judge SPEC (e.g. --judge openai:gpt-4o): "
                         f"{task.title} is scored by a judge")
    base = settings_from_args(args, model=args.model[0], lang=args.lang[0], cot=False, images=None, out=None,
                              n_boot=args.n_boot, judge_cache=args.out / "judge_cache")
    cells = api.sweep_cells(base, models=args.model, langs=args.lang,
                            cots={"off": [False], "on": [True], "both": [False, True]}[args.cot],
                            images=args.images, out=args.out)
    text = api.run_sweep(cells, args.out, progress=not args.no_progress,
                         log=lambda line: print(line, file=sys.stderr))
    print(text, end="")
    print(f"\nwrote {args.out / 'report.md'} and the plots beside it", file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from eval.compare import compare_runs

    text, _ = compare_runs(args.dirs, n_perm=args.permutations)
    print(terminal(text))
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from eval.report import viewer as runs_tab  # gradio is imported only by the command that serves a page

    if not runs_tab.run_folders(args.dir):
        raise UsageError(f"{args.dir}: no run folder (scores.jsonl) there; score a run first")
    runs_tab.app(args.dir).launch(server_name="127.0.0.1", server_port=args.port, **runs_tab.launch_options())
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one `error:` line (with a pointer to --help), exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {message} (see `{self.prog} --help`)\n")


EXAMPLES = """examples:
  python -m eval run --task all --model baseline:random --limit 5   try the pipeline on the embedded sample
  python -m eval run --task classification --model openai:gpt-4o --dataset OWNER/NAME
  python -m eval run --task nutrition --model openai:Qwen/Qwen3-VL-8B-Instruct \\
      --base-url http://localhost:8000/v1 --images 2 --cot       a local server, 2 views, chain of thought
  python -m eval run --task vqa --model gemini:gemini-2.5-flash --judge openai:gpt-4o
  python -m eval score results/RUN --judge openai:gpt-4o         re-score saved predictions
  python -m eval compare results/A results/B                   is A better than B? difference, interval, p-value
  python -m eval report results/A results/B --compare --out report.md
  python -m eval import logs/ --from inspect --out results/inspect-run    an inspect_ai or lmms-eval result
  python -m eval report results/RUN --model-card --dataset OWNER/NAME --out README.md
  python -m eval sweep --task classification --model openai:gpt-4o --model baseline:median \\
      --images 1,2,3,4 --out sweeps/views                        the views figure (paper's Figure 4)

`python -m eval COMMAND --help` lists a command's flags."""


def version() -> str:
    """`DiningBench 0.1.0 (prompts diningbench-prompts-v2, commit abc123)`: the package, the prompts
    and the code a result came from, as run.json records them."""
    from importlib import metadata

    from eval.prompts import PROMPT_VERSION
    from eval.runinfo import git_commit

    try:
        number = metadata.version("diningbench")
    except metadata.PackageNotFoundError:  # a checkout run in place: read the version it declares
        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.M) \
            if pyproject.is_file() else None
        number = found.group(1) if found else "unknown"
    commit = git_commit()
    return f"DiningBench {number} (prompts {PROMPT_VERSION}" + (f", commit {commit}" if commit else "") + ")"


class _VersionAction(argparse.Action):
    """--version, computed only when asked (it runs git)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version, prompt version and code commit, then exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version())
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m eval", description="DiningBench evaluation harness: ask a vision-language "
                     "model the benchmark's questions, score its answers, report and compare results.",
                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="evaluate a model (generation + scoring, resumable)")
    add_run_arguments(run)
    run.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    run.set_defaults(handler=cmd_run)
    score = sub.add_parser("score", help="re-score a run folder's saved predictions")
    score.add_argument("dir", type=Path, metavar="DIR")
    score.add_argument("--judge", metavar="SPEC", help="VQA judge model, e.g. openai:gpt-4o")
    score.add_argument("--judge-base-url", help="endpoint of the judge model")
    score.set_defaults(handler=cmd_score)
    imp = sub.add_parser("import", help="turn an inspect_ai log or lmms-eval samples file into a run folder, "
                                        "re-scored by our metrics")
    imp.add_argument("log", type=Path, metavar="LOG_OR_DIR", help="an inspect .eval/.json log, an lmms-eval "
                     "*_samples_diningbench_*.jsonl, or a folder of them")
    imp.add_argument("--from", dest="framework", required=True, choices=("inspect", "lmms-eval", "official"),
                     help="official: a prediction file the authors' scripts wrote (with --task and --dataset)")
    imp.add_argument("--task", choices=tasks.names(), help="--from official: the file's task")
    imp.add_argument("--lang", choices=("zh", "en"), default="zh", help="--from official: the release file it "
                     "answered (zh, or en for the _en files)")
    imp.add_argument("--model", metavar="SPEC", help="--from official: the model that answered, e.g. openai:NAME "
                     "(shown in reports; default openai:imported)")
    imp.add_argument("--out", type=Path, required=True, help="the run folder to write")
    imp.add_argument("--dataset", metavar="SOURCE", help="the release the result was made on (default: the "
                     "one it names, else the embedded sample)")
    imp.add_argument("--judge", metavar="SPEC", help="VQA judge model, e.g. openai:gpt-4o")
    imp.add_argument("--judge-base-url", help="endpoint of the judge model")
    imp.set_defaults(handler=cmd_import)
    export = sub.add_parser("export", help="write a run's answers as the authors' prediction files, for their "
                                           "scripts to score")
    export.add_argument("run", type=Path, metavar="RUN", help="a run folder made with --protocol official")
    export.add_argument("--format", choices=("official",), default="official", help="official: the authors' "
                        "prediction files (idx, model_pred, model_full_pred, ...)")
    export.add_argument("--out", type=Path, required=True, help="a new or empty folder to write the files into")
    export.add_argument("--overwrite", action="store_true", help="replace the files of an earlier export in --out "
                        "(a folder holding anything else is still refused)")
    export.set_defaults(handler=cmd_export)
    rep = sub.add_parser("report", help="tables, breakdowns, CIs, plots, model card")
    report.add_arguments(rep)
    rep.set_defaults(handler=report.main)
    sweep = sub.add_parser("sweep", help="run a grid of settings (images, CoT, language)")
    add_sweep_arguments(sweep)
    sweep.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    sweep.set_defaults(handler=cmd_sweep)
    agree = sub.add_parser("judge-agreement", help="re-judge a run's VQA answers with several judges: agreement, "
                                                   "Cohen's kappa, the rule against each judge")
    agree.add_argument("dir", type=Path, metavar="RUN")
    agree.add_argument("--judges", required=True, metavar="SPEC,SPEC",
                       help="judges to compare, comma-separated; SPEC@BASE_URL for a judge on its own server")
    agree.add_argument("--judge-base-url", help="server of the judges given without @BASE_URL")
    agree.add_argument("--human-labels", type=Path, metavar="FILE",
                       help='JSONL of {"id": ..., "verdict": "C" or "I"}: one more rater')
    agree.add_argument("--judge-all", action="store_true",
                       help="compare the judges' own verdicts on every answer, also those the rule decides")
    agree.add_argument("--n-boot", type=int, default=N_BOOT, help=f"bootstrap resamples (default {N_BOOT})")
    agree.set_defaults(handler=cmd_judge_agreement)
    analyze = sub.add_parser("analyze", help="error analysis across run folders: difficulty, distractors, "
                                             "nutrition error direction, truncation and loops, thinking vs instruct")
    analyze.add_argument("dirs", nargs="+", type=Path, metavar="RUN")
    analyze.add_argument("--out", type=Path, help="write analysis.md and its plots into this folder")
    analyze.set_defaults(handler=cmd_analyze)
    compare = sub.add_parser("compare", help="is A better than B? per task the paired difference on shared items, its "
                                             "interval resampling merchants where the rows name them, else items, "
                                             "and a p-value (the second and later runs each against the first)")
    compare.add_argument("dirs", nargs="+", type=Path, metavar="RUN", help="two or more run folders")
    compare.add_argument("--permutations", type=int, default=9_999,
                         help="random swaps of the permutation test, of whole merchants where the rows name them, else "
                              "of items (default 9,999; exact up to 14 merchants or items)")
    compare.set_defaults(handler=cmd_compare)
    view = sub.add_parser("view", help="browse a run's items in the browser: filters, views, prompt, answer, score")
    view.add_argument("dir", type=Path, metavar="DIR", help="a run folder, or a folder of run folders")
    view.add_argument("--port", type=int, help="local port (default: Gradio's, or GRADIO_SERVER_PORT)")
    view.set_defaults(handler=cmd_view)
    return parser


WORKING_AFTER = 2.0  # seconds of silence before a command at a terminal says it is working


class _Watched:
    """A stream that notes whether anything was written to it (for `_working`)."""

    def __init__(self, stream: Any, seen: threading.Event) -> None:
        self._stream, self._seen = stream, seen

    def write(self, text: str) -> int:
        if text:
            self._seen.set()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _working(command: str) -> Callable[[], None]:
    """At a terminal, one line on stderr when `command` has printed nothing for WORKING_AFTER seconds
    (loading a release, importing the plotting libraries); returns the function that stops watching. Not
    when stderr is a file or a pipe: what a script reads stays exactly what the command says."""
    if not sys.stderr.isatty():
        return lambda: None
    seen = threading.Event()
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Watched(sys.stdout, seen), _Watched(sys.stderr, seen)

    def say() -> None:
        if not seen.is_set():
            print(f"{command}: working...", file=streams[1], flush=True)

    timer = threading.Timer(WORKING_AFTER, say)
    timer.daemon = True
    timer.start()

    def stop() -> None:
        timer.cancel()
        sys.stdout, sys.stderr = streams

    return stop


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Our own progress line is the one that matters. Said through the variable `datasets` reads when
    # it is imported (a Hub id; a release folder never imports it), as `disable_progress_bars()` would;
    # a value the user set wins, as it does there.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    stop = _working(f"python -m eval {argv[0] if argv else sys.argv[1] if len(sys.argv) > 1 else ''}".strip())
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted: finished samples are saved; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:
        if not is_user_error(exc):
            raise  # a bug of ours: its traceback, exit 1
        message = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.strerror:  # a full disk, a read-only folder: say which file
            message = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        stop()
