"""No writer follows a link or overwrites what it did not create. A run folder from elsewhere may carry
`.lock`, `report.md`, `run.json` or a judge cache linked to files outside it: `eval score`, a resumed
`eval run`, `eval import` and `eval export` refuse it in one line and write nothing outside. `eval export`
takes a new or empty folder, or with `--overwrite` one an earlier export wrote. Temp files have names
no other writer uses, are made with exclusive create, and what a killed writer left is removed at the
next start. Each hostile folder is built here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval import api, cli, store
from eval.official_io import export_official
from eval.settings import RunSettings, UsageError
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import make_release
from tests.helpers_official import write_folder

OUTSIDE = "someone's file, not the run's\n"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release") / "diningbench")


def made_run(release: Path, out: Path) -> Path:
    return api.run(RunSettings(task="classification", model="baseline:first", dataset=str(release), out=out,
                               n_boot=20), progress=False)


def one_error_line(code: int, capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def outside_file(tmp_path: Path, name: str = "outside.txt") -> Path:
    path = tmp_path / name
    path.write_text(OUTSIDE, encoding="utf-8")
    return path


def dead_pid() -> int:
    """The id of a process that has ended (reaped), as a killed writer's is."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ---------------------------------------------------------------- planted links in a run folder
@pytest.mark.parametrize("name", [".lock", "report.md", "run.json", "metrics.json", "scores.jsonl",
                                  "predictions.jsonl", "run.json.tmp", "judge_cache", "judge_cache/verdicts.jsonl"])
@pytest.mark.parametrize("command", ["score", "resume"])
def test_a_link_planted_in_a_run_folder_is_refused_in_one_line_and_nothing_outside_is_written(
        release, tmp_path, capsys, name, command) -> None:
    run = made_run(release, tmp_path / "run")
    target = outside_file(tmp_path) if name != "judge_cache" else tmp_path / "their_folder"
    if name == "judge_cache":
        target.mkdir()
    (run / name).parent.mkdir(exist_ok=True)
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(target)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and not p.is_symlink()}
    capsys.readouterr()
    if command == "score":
        code = cli.main(["score", str(run)])
    else:
        code = cli.main(["run", "--task", "classification", "--model", "baseline:first", "--dataset", str(release),
                         "--out", str(run), "--no-progress"])
    line = one_error_line(code, capsys)
    if command == "resume" and name == "run.json":  # `run` reads run.json first, to know whose folder it is
        assert "holds files but no run" in line
    else:
        assert f"holds a symbolic link, {name}" in line
    if name == "judge_cache":
        assert list(target.iterdir()) == []
    else:
        assert target.read_text(encoding="utf-8") == OUTSIDE
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and not p.is_symlink()}
    assert after == before  # refused before anything was written


def test_each_writer_refuses_a_link_where_it_writes(tmp_path) -> None:
    """Below the folder check: the one atomic writer, the append-only log and the lock, each alone."""
    target = outside_file(tmp_path)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "report.md").symlink_to(target)
    with pytest.raises(UsageError, match="report.md is a symbolic link"):
        store.write_atomically(folder / "report.md", "# report\n")
    (folder / "predictions.jsonl").symlink_to(target)
    with pytest.raises(UsageError, match="predictions.jsonl is a symbolic link"):
        store.JsonlLog(folder / "predictions.jsonl")
    with pytest.raises(UsageError, match="predictions.jsonl is a symbolic link"):
        store.repair_torn_tail(folder / "predictions.jsonl")  # it would truncate the target
    (folder / store.LOCK).symlink_to(tmp_path / "not_yet")  # a dangling link: the lock would create it
    with pytest.raises(UsageError, match=r"holds a symbolic link, \.lock"):
        with store.locked(folder):
            pass
    os.mkfifo(folder / "scores.jsonl")
    with pytest.raises(UsageError, match="scores.jsonl is not a regular file"):
        store.JsonlLog(folder / "scores.jsonl")  # a FIFO would block the writer for ever
    assert target.read_text(encoding="utf-8") == OUTSIDE and not (tmp_path / "not_yet").exists()
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "predictions.jsonl", "report.md", "scores.jsonl"]


def test_a_planted_file_or_link_at_the_temp_name_is_never_written_into(tmp_path, monkeypatch) -> None:
    """Temp names are unique (process id and 48 random bits) and made with exclusive create: even a
    planted link at the very name the writer draws is refused, never followed."""
    target = outside_file(tmp_path)
    monkeypatch.setattr(store.secrets, "token_hex", lambda n: "ab" * n)
    path = tmp_path / "metrics.json"
    (tmp_path / f"metrics.json.{os.getpid()}-{'ab' * 6}.tmp").symlink_to(target)
    with pytest.raises(FileExistsError):
        store.write_atomically(path, "{}\n")
    assert target.read_text(encoding="utf-8") == OUTSIDE and not path.exists()
    monkeypatch.undo()
    names = set()
    for _ in range(3):  # each write draws a fresh name, and leaves none behind
        store.write_atomically(path, ["{", "}\n"])
        names |= {p.name for p in tmp_path.iterdir()}
    assert path.read_text(encoding="utf-8") == "{}\n"
    assert names == {"metrics.json", "outside.txt", f"metrics.json.{os.getpid()}-{'ab' * 6}.tmp"}


# ---------------------------------------------------------------- temp files of killed writers
KILLED_WRITER = """
import sys
from pathlib import Path
from eval.store import write_atomically

def lines():
    yield "first line\\n"
    print("writing", flush=True)
    sys.stdin.readline()  # killed here, its temp file half written
    yield "never\\n"

write_atomically(Path(sys.argv[1]), lines())
"""

HOLDER = """
import sys
from pathlib import Path
from eval.store import locked

with locked(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.readline()
"""


def child(code: str, path: Path) -> subprocess.Popen[str]:
    """A Python process of this checkout running `code` on `path`; it waits on its stdin."""
    return subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_a_killed_writers_temp_file_is_removed_at_the_next_start_and_only_ours(release, tmp_path) -> None:
    run = made_run(release, tmp_path / "run")
    holder = child(HOLDER, run)  # another live process holds the folder: nothing is removed while it does
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    writer = child(KILLED_WRITER, run / "scores.jsonl")
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    writer.kill()
    writer.wait()
    [orphan] = [p.name for p in run.iterdir() if p.name.endswith(".tmp")]
    assert orphan.startswith(f"scores.jsonl.{writer.pid}-")
    gone = f"metrics.json.{dead_pid()}-{'0' * 12}.tmp"
    live = f"report.md.{os.getppid()}-{'1' * 12}.tmp"  # a writer still running (the process that started ours)
    kept = ["notes.tmp", f"scores.jsonl.{dead_pid()}.tmp", f"x.{dead_pid()}-{'2' * 12}.tmp.bak"]  # not our pattern
    for name in [gone, live, *kept]:
        (run / name).write_text("partial", encoding="utf-8")
    with pytest.raises(UsageError, match=f"in use by pid {holder.pid} "):
        api.score(run)
    assert (run / orphan).exists() and (run / gone).exists()
    holder.communicate("")  # it lets go and ends
    api.score(run)
    left = {p.name for p in run.iterdir() if "tmp" in p.name}
    assert left == {live, *kept}


# ---------------------------------------------------------------- eval export --out
@pytest.fixture(scope="module")
def official_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("official")
    folder = write_folder(root / "release")
    with FakeOpenAIServer(lambda request: "A") as server:
        return api.run(RunSettings(task="classification", model="openai:plain-model", base_url=server.base_url,
                                   dataset=str(folder), out=root / "run", n_boot=20), progress=False)


def export(run: Path, out: Path, *more: str) -> int:
    return cli.main(["export", str(run), "--format", "official", "--out", str(out), *more])


def test_export_takes_a_new_folder_or_overwrite_for_an_earlier_export(official_run, tmp_path, capsys) -> None:
    out = tmp_path / "export"
    assert export(official_run, out) == 0
    first = (out / "classification_pred.jsonl").read_bytes()
    assert [json.loads(line)["idx"] for line in first.splitlines()] == list(range(12))
    line = one_error_line(export(official_run, out), capsys)
    assert "holds an earlier export (classification_pred.jsonl); add --overwrite" in line
    (out / "vqa_pred.jsonl").write_text("an earlier export's other task\n", encoding="utf-8")
    assert export(official_run, out, "--overwrite") == 0
    assert sorted(p.name for p in out.iterdir()) == ["classification_pred.jsonl"]  # the folder is this export
    assert (out / "classification_pred.jsonl").read_bytes() == first  # the same run exports the same bytes
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export(official_run, empty) == 0


@pytest.mark.parametrize("planted", ["link", "foreign", "run folder", "file"])
def test_export_refuses_a_folder_it_did_not_write_even_with_overwrite(official_run, tmp_path, capsys, planted) -> None:
    target = outside_file(tmp_path)
    out = tmp_path / "export"
    out.mkdir()
    if planted == "link":  # their file name, linked to someone's file
        (out / "classification_pred.jsonl").symlink_to(target)
        why = "holds a symbolic link, classification_pred.jsonl"
    elif planted == "foreign":
        (out / "classification_pred.jsonl").write_text("theirs\n", encoding="utf-8")
        (out / "notes.txt").write_text("mine\n", encoding="utf-8")
        why = "holds files but no run"
    elif planted == "run folder":
        out = official_run
        why = "is a run folder; export into a new or empty folder"
    else:
        out.rmdir()
        out.write_text("mine\n", encoding="utf-8")
        why = "is a file, not a folder"
    before = {p.name: p.read_bytes() for p in out.iterdir() if not p.is_symlink()} if out.is_dir() else out.read_bytes()
    for more in ((), ("--overwrite",)):
        assert why in one_error_line(export(official_run, out, *more), capsys)
    assert target.read_text(encoding="utf-8") == OUTSIDE
    after = {p.name: p.read_bytes() for p in out.iterdir() if not p.is_symlink()} if out.is_dir() else out.read_bytes()
    assert after == before


def test_export_official_as_a_function_refuses_the_same(official_run, tmp_path) -> None:
    out = tmp_path / "export"
    [path] = export_official(official_run, out)
    with pytest.raises(UsageError, match="add --overwrite"):
        export_official(official_run, out)
    assert export_official(official_run, out, overwrite=True) == [path]
