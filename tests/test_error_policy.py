"""The CLIs' error policy: a user's mistake is our own exception type, raised where it is detected, and
prints one `error:` line (exit 2); anything else is a bug of ours: its traceback, exit 1."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

import construct.__main__ as construct_cli
import diningbench
from construct.errors import BuildError
from eval import cli
from eval.report.runs import ReportError
from eval.scoring import ScoringError
from eval.settings import UsageError
from eval.types import ConfigError, UserError, is_user_error
from tests.tools.imports import ROOT


def test_every_user_error_of_ours_derives_from_one_type():
    for kind in (UsageError, ConfigError, ScoringError, ReportError, BuildError):
        assert issubclass(kind, UserError)
    assert is_user_error(diningbench.DatasetError("x")) and is_user_error(BuildError("x"))
    assert is_user_error(FileNotFoundError(errno.ENOENT, "No such file", "x.json"))
    assert is_user_error(OSError(errno.ENOSPC, "No space left on device"))
    for bug in (ValueError("x"), KeyError("x"), TypeError("x"), OSError(errno.EBADF, "Bad file descriptor"),
                ImportError("x"), AttributeError("x")):
        assert not is_user_error(bug), bug


@pytest.mark.parametrize("bug", [ValueError("bad index"), KeyError("id"), OSError(errno.EBADF, "bad fd")])
def test_a_bug_in_the_eval_cli_keeps_its_traceback(bug, monkeypatch):
    def broken(args):
        raise bug

    monkeypatch.setattr(cli, "cmd_score", broken)
    with pytest.raises(type(bug)):
        cli.main(["score", "somewhere"])


def test_a_user_mistake_in_the_eval_cli_is_one_line(monkeypatch, capsys):
    def mistaken(args):
        raise ScoringError("somewhere is not a run folder (needs run.json and predictions.jsonl)")

    monkeypatch.setattr(cli, "cmd_score", mistaken)
    assert cli.main(["score", "somewhere"]) == 2
    assert capsys.readouterr().err == "error: somewhere is not a run folder (needs run.json and predictions.jsonl)\n"


def test_a_bug_in_the_construct_cli_keeps_its_traceback(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise KeyError("dish_id")

    monkeypatch.setattr(construct_cli.funnel, "write", broken)
    monkeypatch.setattr(construct_cli, "load_settings", lambda work: None)
    with pytest.raises(KeyError):
        construct_cli.main(["report", str(tmp_path)])


def test_a_construct_mistake_is_one_line(tmp_path, capsys):
    assert construct_cli.main(["report", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_bug_exits_1_with_a_traceback_from_the_command_line(tmp_path):
    """The process itself: python -m eval with a handler that fails as a bug would."""
    code = ("import sys; from eval import cli\n"
            "def broken(args): raise KeyError('a bug')\n"
            "cli.cmd_score = broken\n"
            "sys.exit(cli.main(['score', 'x']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" in done.stderr and "KeyError: 'a bug'" in done.stderr
