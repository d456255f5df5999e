"""What a newcomer types first: --version, --help with examples, and help for every flag and positional."""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import diningbench
from eval import cli

ROOT = Path(__file__).resolve().parents[1]


def test_version_names_the_package_and_prompt_version(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("DiningBench 0.1.0 (prompts diningbench-prompts-") and out.endswith(")\n")


def test_help_ends_with_usage_examples_that_parse(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    examples = text.split("examples:\n", 1)[1]
    commands = " ".join(examples.replace("\\\n", " ").split("python -m eval ")[1:])
    assert "run --task all --model baseline:random --limit 5" in text and "--model-card" in examples
    parser = cli.build_parser()
    for line in re.sub(r"\\\n\s+", " ", cli.EXAMPLES).splitlines()[1:]:
        if line.startswith("  python -m eval "):  # every example is a valid command line (comment cut off)
            argv = line.split("python -m eval ", 1)[1].split("   ")[0].split()
            parser.parse_args(argv)
    assert commands


@pytest.mark.parametrize("command, flag, words", [
    ("run", "--image-order", ("reference-first", "random", "--seed")),
    ("run", "--seed", ("image-order random", "baseline:random")),
    ("sweep", "--concurrency", ("per cell", "default auto", "fixed N")),
])
def test_flags_explain_themselves(command, flag, words):
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    action = next(a for a in sub._actions if flag in a.option_strings)
    for word in words:
        assert word in action.help, (flag, word)


def test_diningbench_help_prints_the_whole_description_and_every_positional_has_help():
    text = subprocess.run([sys.executable, "diningbench.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    assert "Parquet + a README with `configs:`" in text  # the last line of the module docstring
    parser_help = {}
    for command in ("validate", "build", "sample", "push", "summary"):
        parser_help[command] = subprocess.run([sys.executable, "diningbench.py", command, "--help"], cwd=ROOT,
                                              capture_output=True, text=True, check=True).stdout
    assert "release folder or Hub dataset id" in parser_help["validate"]
    assert "Hub dataset repository OWNER/NAME" in parser_help["push"]
    assert diningbench.__doc__.splitlines()[0] in text


def test_every_positional_of_diningbench_has_help(monkeypatch):
    seen = []
    real = argparse.ArgumentParser.add_argument

    def record(self, *args, **kwargs):
        action = real(self, *args, **kwargs)
        seen.append(action)
        return action

    monkeypatch.setattr(argparse.ArgumentParser, "add_argument", record)
    with pytest.raises(SystemExit):
        diningbench.main(["--help"])
    positionals = [a for a in seen if not a.option_strings and a.dest != "help"]
    assert len(positionals) >= 5 and all(a.help for a in positionals), [a.dest for a in positionals if not a.help]


# ---------------------------------------------------------------- the CLI process
_THREADS_AFTER_NUMPY = """
import os, sys
from eval.process import load_numpy_single_threaded
load_numpy_single_threaded()
import numpy
print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through Linux's /proc")
@pytest.mark.parametrize("chosen", [None, "2"])
def test_the_cli_loads_numpy_with_one_openblas_thread_and_keeps_the_users_choice(chosen: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    if chosen is not None:
        env["OPENBLAS_NUM_THREADS"] = chosen
    done = subprocess.run([sys.executable, "-c", _THREADS_AFTER_NUMPY], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    threads, variable = done.stdout.split()
    if chosen is None:
        assert threads == "1"  # no OpenBLAS thread beside the main one (each would spin after numpy loads)
        assert variable == "None"  # put back: torch, loaded later for an `hf:` model, reads the user's environment
    else:
        assert variable == chosen
        assert int(threads) == min(int(chosen), os.cpu_count() or 1)


def test_the_cli_imports_with_the_collector_paused_then_frozen_out_of_its_way() -> None:
    script = ("import gc\nfrom eval.process import cli_imports\nbefore = gc.get_freeze_count()\n"
              "with cli_imports():\n    paused = not gc.isenabled()\n    import eval.cli\n"
              "print(paused, gc.isenabled(), gc.get_freeze_count() - before, gc.get_threshold()[0])")
    paused, enabled, frozen, threshold = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                                             check=True).stdout.split()
    assert (paused, enabled) == ("True", "True")
    assert int(frozen) > 20_000  # the harness's modules, functions and tables: never collected again
    assert int(threshold) == 20_000  # a run's few dicts per request are rarely in cycles


def test_a_silent_command_at_a_terminal_says_it_is_working(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import time

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(cli, "WORKING_AFTER", 0.05)
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    stop = cli._working("python -m eval report")
    deadline = time.monotonic() + 10
    while not err.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    stop()
    assert err.getvalue() == "python -m eval report: working...\n" and sys.stderr is err
    # A command that already said something (a progress line) gets no such line.
    said = Terminal()
    monkeypatch.setattr(sys, "stderr", said)
    stop = cli._working("python -m eval run")
    print("classification  3/40", file=sys.stderr)
    time.sleep(0.3)
    stop()
    assert said.getvalue() == "classification  3/40\n"
    # Not a terminal (a script, a pipe): nothing added, the streams left as they are.
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    stop = cli._working("python -m eval report")
    assert sys.stderr is plain
    time.sleep(0.3)
    stop()
    assert plain.getvalue() == ""
