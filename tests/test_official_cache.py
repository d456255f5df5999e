"""The datasets cache folder is shared by every process on the machine: a run's unpacked release is
never removed under it, whatever other runs open meanwhile; what a killed unpack or writer left behind
is cleared at the next start; an archive rewritten in place is never served from the old unpacking.

Every test here uses real processes, and orders them by what they print, never by sleeping."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import diningbench
from dataset import cache as dataset_cache

ROOT = Path(__file__).resolve().parents[1]
ENDING = "\n仅输出最终答案，不要包含任何解释、分析、前言或总结。"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("HF_DATASETS_CACHE", str(folder))  # this process and the ones it starts
    return folder


def release(folder: Path, photo: bytes) -> Path:
    """A one-row VQA release in the authors' layout whose photo is in `images.tar.gz` only."""
    folder.mkdir(parents=True)
    row = {"id": 1, "prompt": "q?" + ENDING, "ground_truth": "a", "images": ["images/a.jpg"]}
    (folder / "vqa.jsonl").write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "images.tar.gz").write_bytes(tar_gz(photo))
    return folder


def tar_gz(photo: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("images/a.jpg")
        info.size = len(photo)
        tar.addfile(info, io.BytesIO(photo))
    return buffer.getvalue()


def unpacked(cache: Path) -> list[Path]:
    root = cache / "diningbench-official"
    return sorted(root.iterdir()) if root.exists() else []


def start(code: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def said(process: subprocess.Popen[str]) -> str:
    """The next line the process prints (waits for it)."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    return line.strip()


READER = """
import sys, diningbench
release = diningbench.read_official("vqa", sys.argv[1] if len(sys.argv) > 1 else {folder!r})
print("opened", flush=True)
sys.stdin.readline()
print(next(release.iter_rows([0]))["images"][0]["bytes"].decode(), flush=True)
"""


def test_a_release_a_run_reads_is_never_removed_while_others_open_four_more(tmp_path: Path, cache: Path) -> None:
    reader = start(READER.format(folder=str(release(tmp_path / "a", b"photo of A"))))
    assert said(reader) == "opened"
    (held,) = unpacked(cache)
    os.utime(held, ns=(1, 1))  # the least recently used: the first the sweep would take
    others = [str(release(tmp_path / name, f"photo of {name}".encode())) for name in "bcde"]
    opener = subprocess.run([sys.executable, "-c", "import sys, diningbench\nfor f in sys.argv[1:]:\n"
                             "    diningbench.read_official('vqa', f)", *others],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert opener.returncode == 0, opener.stderr
    assert held in unpacked(cache) and len(unpacked(cache)) == diningbench.UNPACKED_KEPT + 1
    out, err = reader.communicate("read now\n", timeout=60)
    assert reader.returncode == 0, err
    assert out.strip() == "photo of A"  # read after four other releases were opened by another process
    # Let go of (the process ended), it is the first taken at the next start.
    diningbench.read_official("vqa", release(tmp_path / "f", b"photo of F")).close()
    assert held not in unpacked(cache) and len(unpacked(cache)) == diningbench.UNPACKED_KEPT


UNPACKER = """
import sys
from dataset import archive
write = archive._write_member
def stalled(*args):
    print("writing", flush=True)
    sys.stdin.readline()
    write(*args)
archive._write_member = stalled
import diningbench
diningbench.read_official("vqa", {folder!r})
print("done", flush=True)
"""


def test_a_killed_unpack_is_cleared_at_the_next_start_and_a_live_one_is_not(tmp_path: Path, cache: Path) -> None:
    unpacking = start(UNPACKER.format(folder=str(release(tmp_path / "big", b"photo"))))
    assert said(unpacking) == "writing"
    (partial,) = unpacked(cache)
    assert ".partial-" in partial.name
    diningbench.read_official("vqa", release(tmp_path / "other", b"other photo")).close()
    assert partial in unpacked(cache)  # being written by a live process: left alone
    unpacking.send_signal(signal.SIGKILL)
    unpacking.communicate(timeout=60)
    assert partial in unpacked(cache)  # a kill -9 leaves it...
    diningbench.read_official("vqa", tmp_path / "other").close()
    assert partial not in unpacked(cache)  # ...and the next start clears it
    assert [p for p in unpacked(cache) if not p.name.isalnum()] == []


def test_a_killed_writers_temp_files_are_cleared_and_a_live_writers_kept(tmp_path: Path, cache: Path) -> None:
    images = cache / "diningbench-images"
    images.mkdir(parents=True)
    orphan, live = images / "x.arrow.1-1.tmp", images / "y.arrow.2-2.tmp"
    killed = start(f"from pathlib import Path\nfrom dataset import cache\nimport os, signal\n"
                   f"cache.temp_file(Path({str(orphan)!r}))\nos.kill(os.getpid(), signal.SIGKILL)")
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL and orphan.exists()
    writer = start(f"from pathlib import Path\nfrom dataset import cache\nimport sys\n"
                   f"held = cache.temp_file(Path({str(live)!r}))\nprint('writing', flush=True)\nsys.stdin.readline()")
    assert said(writer) == "writing"
    sample = diningbench.read_release("vqa")
    assert len(list(sample.iter_rows([0]))) == 1  # makes the release's image file: the sweep runs first
    assert not orphan.exists() and live.exists()
    writer.communicate("", timeout=60)
    assert [p.name for p in images.iterdir() if p.suffix == ".tmp"] == [live.name]
    dataset_cache.remove_unheld([live])  # nobody holds it now
    assert not live.exists()


def test_an_archive_rewritten_in_place_with_its_old_size_and_mtime_is_unpacked_again(tmp_path: Path) -> None:
    folder = release(tmp_path / "r", b"photo 1")
    first = diningbench.read_official("vqa", folder)
    assert next(first.iter_rows([0]))["images"][0]["bytes"] == b"photo 1"
    archive = folder / "images.tar.gz"
    before = archive.stat()
    # Another photo whose archive has the same size: only the ctime tells the two apart.
    photo, data = next((p, d) for k in range(2, 1000) if len(d := tar_gz(p := f"photo {k}".encode())) == before.st_size)
    with archive.open("r+b") as fh:  # in place: the same inode
        fh.write(data)
    # Put the old mtime back, again until the clock has moved past the first ctime (its tick is coarse).
    while archive.stat().st_ctime_ns == before.st_ctime_ns:
        os.utime(archive, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.utime(archive, ns=(before.st_atime_ns, before.st_mtime_ns))
    now = archive.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert next(diningbench.read_official("vqa", folder).iter_rows([0]))["images"][0]["bytes"] == photo
