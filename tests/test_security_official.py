"""A release in the authors' layout from an untrusted source: its archive, its image paths and its
lines must not make anyone write outside the cache, read a file outside the release, fill the disk or
memory, or hang. Each refusal is one line naming the member, the line or the item."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

import diningbench
from dataset import archive, official

PHOTO = b"\xff\xd8 a photo \xff\xd9"
SECRET = b"local secret: this file must never leave the machine"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setattr(official, "datasets_cache", lambda: folder)
    return folder


def unpacked(cache: Path) -> list[str]:
    """What is left in the folder archives are unpacked into (nothing, after a refusal)."""
    root = cache / "diningbench-official"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def vqa_release(folder: Path, paths: list[Any], *, photo_files: dict[str, bytes] | None = None) -> Path:
    """A folder with vqa.jsonl: one row per entry of `paths` (each its `images`), and the files given."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"id": k + 1, "prompt": "q?\n仅输出最终答案，不要包含任何解释、分析、前言或总结。", "ground_truth": "a",
             "images": images} for k, images in enumerate(paths)]
    (folder / "vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for rel, data in (photo_files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


def tar_gz(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, **fields: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def with_archive(tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    folder = vqa_release(tmp_path / "release", [["images/a.jpg"]])
    tar_gz(folder / "images.tar.gz", members)
    return folder


# ------------------------------------------------------------------------------------------ archive


@pytest.mark.parametrize(("hostile", "said"), [
    (member("/etc/cron.d/evil"), "absolute or non-portable path"),
    (member("images/../../evil.jpg"), "has a '..' component"),
    (member("images\\..\\evil.jpg"), "absolute or non-portable path"),
    (member("images/link.jpg", tarfile.SYMTYPE, linkname="/etc/passwd"), "is a symbolic link"),
    (member("images/hard.jpg", tarfile.LNKTYPE, linkname="/etc/passwd"), "is a hard link"),
    (member("images/dev", tarfile.CHRTYPE, devmajor=1, devminor=3), "is a device"),
    (member("images/fifo", tarfile.FIFOTYPE), "is a FIFO"),
])
def test_a_hostile_archive_member_is_refused_naming_it_and_nothing_is_left(tmp_path: Path, cache: Path,
                                                                          hostile: tarfile.TarInfo, said: str) -> None:
    folder = with_archive(tmp_path, [(member("images/a.jpg"), PHOTO), (hostile, b"x" if hostile.isreg() else None)])
    with pytest.raises(ValueError, match=f"images.tar.gz: member .* {said}") as refused:
        diningbench.read_official("vqa", folder)
    assert "\n" not in str(refused.value) and repr(hostile.name)[1:-1] in str(refused.value)
    assert unpacked(cache) == []
    assert not (tmp_path / "evil.jpg").exists()


def test_a_3_gib_member_is_refused_from_its_header_before_a_byte_of_it_is_written(tmp_path: Path, cache: Path) -> None:
    """The header says 3 GiB; the refusal needs nothing more (an extractor that wrote first would
    write 3 GiB of zeros, from an archive of 3 MB)."""
    folder = vqa_release(tmp_path / "release", [["images/a.jpg"]])
    big = member("images/zeros.jpg", size=3 << 30)
    with gzip.open(folder / "images.tar.gz", "wb", compresslevel=1) as out:
        out.write(big.tobuf(tarfile.PAX_FORMAT))
        for _ in range(8):
            out.write(bytes(1 << 20))
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"member 'images/zeros.jpg' is 3,221,225,472 bytes, over the 67,108,864"):
        diningbench.read_official("vqa", folder)
    assert time.monotonic() - started < 60 and unpacked(cache) == [] and folder_size(cache) < 300 << 20


def test_members_past_the_size_bounds_are_refused_as_they_come(tmp_path: Path, cache: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_PHOTO_BYTES", 1 << 20)
    folder = with_archive(tmp_path, [(member("images/a.jpg"), PHOTO), (member("images/big.jpg"), bytes(2 << 20))])
    with pytest.raises(ValueError, match="member 'images/big.jpg' is 2,097,152 bytes, over the 1,048,576"):
        diningbench.read_official("vqa", folder)
    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 3000)
    folder = with_archive(tmp_path / "total", [(member(f"images/{k}.jpg"), bytes(1000)) for k in range(5)])
    with pytest.raises(ValueError, match=r"add up to more than 3,000 bytes unpacked \(at member 'images/3.jpg'\)"):
        diningbench.read_official("vqa", folder)
    assert unpacked(cache) == []


def test_an_archive_of_100000_empty_members_is_refused_past_the_member_bound(tmp_path: Path, cache: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_MEMBERS", 2000)  # the bound is 50,000; the rule is the same, the test faster
    folder = vqa_release(tmp_path / "release", [["images/a.jpg"]])
    header = b"".join(member(f"images/{k}.jpg").tobuf(tarfile.USTAR_FORMAT) for k in range(100_000))
    with gzip.open(folder / "images.tar.gz", "wb", compresslevel=1) as out:
        out.write(header + bytes(1024))
    started = time.monotonic()
    with pytest.raises(ValueError, match="images.tar.gz: more than 2,000 members"):
        diningbench.read_official("vqa", folder)
    assert time.monotonic() - started < 60 and unpacked(cache) == []


def test_damaged_archives_and_clashing_members_are_one_line(tmp_path: Path, cache: Path) -> None:
    folder = vqa_release(tmp_path / "release", [["images/a.jpg"]])
    (folder / "images.tar.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="images.tar.gz is not a readable tar.gz archive"):
        diningbench.read_official("vqa", folder)
    folder = with_archive(tmp_path / "clash", [(member("images/a"), PHOTO), (member("images/a/b.jpg"), PHOTO)])
    with pytest.raises(ValueError, match="member 'images/a/b.jpg' clashes"):
        diningbench.read_official("vqa", folder)
    assert unpacked(cache) == []


def test_a_good_archive_is_unpacked_once_and_whole(tmp_path: Path, cache: Path) -> None:
    folder = with_archive(tmp_path, [(member("./images/a.jpg"), PHOTO)])
    first = diningbench.read_official("vqa", folder)
    assert next(first.iter_rows([0]))["images"] == [{"bytes": PHOTO, "path": "images/a.jpg"}]
    (key,) = [p for p in unpacked(cache) if "/" not in p]
    mtime = (cache / "diningbench-official" / key / "images" / "a.jpg").stat().st_mtime_ns
    diningbench.read_official("vqa", folder)
    assert (cache / "diningbench-official" / key / "images" / "a.jpg").stat().st_mtime_ns == mtime  # not again


# -------------------------------------------------------------------------------------- image paths


@pytest.mark.parametrize(("path", "said"), [
    ("/etc/passwd", "is absolute"),
    ("images/../../secret.jpg", "has a '..' component"),
    ("..\\secret.jpg", "has a '..' component"),
    ("C:\\secret.jpg", "is absolute"),
    ("images/ok.jpg\x00", "has control characters"),
    (7, "is a int, not a path"),
])
def test_an_image_path_that_leaves_the_release_is_refused_at_load_naming_the_row(tmp_path: Path, path: Any,
                                                                                 said: str) -> None:
    (tmp_path / "secret.jpg").write_bytes(SECRET)
    folder = vqa_release(tmp_path / "release", [["images/ok.jpg"], ["images/ok.jpg", path]],
                         photo_files={"images/ok.jpg": PHOTO})
    with pytest.raises(ValueError, match=r"vqa.jsonl item 2 \(idx 1\): images\[1\] .*" + said) as refused:
        diningbench.read_release("vqa", folder)
    assert "\n" not in str(refused.value)
    errors = [p for p in diningbench.validate(folder) if p.level == "error"]
    assert [(p.item_id, said in p.message) for p in errors] == [("2", True)]


def test_links_out_of_the_release_are_refused_wherever_they_sit(tmp_path: Path) -> None:
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / "secret.jpg").write_bytes(SECRET)
    folder = vqa_release(tmp_path / "release", [["images/ok.jpg"], ["images/link.jpg"]],
                         photo_files={"images/ok.jpg": PHOTO})
    (folder / "images" / "link.jpg").symlink_to(outside / "secret.jpg")
    with pytest.raises(ValueError, match=r"item 2 \(idx 1\): images\[0\] 'images/link.jpg' resolves outside"):
        diningbench.read_official("vqa", folder)
    linked = vqa_release(tmp_path / "linked", [["images/secret.jpg"]])
    (linked / "images").symlink_to(outside)  # the whole images folder points away
    with pytest.raises(ValueError, match="resolves outside"):
        diningbench.read_official("vqa", linked)
    jsonl = tmp_path / "elsewhere.jsonl"
    jsonl.write_text(json.dumps({"id": 1, "prompt": "q", "ground_truth": "a", "images": []}) + "\n")
    third = tmp_path / "third"
    third.mkdir()
    (third / "vqa.jsonl").symlink_to(jsonl)
    with pytest.raises(ValueError, match="vqa.jsonl is a symbolic link out of its folder"):
        diningbench.read_official("vqa", third)
    archived = vqa_release(tmp_path / "archived", [["images/a.jpg"]])
    tar_gz(tmp_path / "images.tar.gz", [(member("images/a.jpg"), PHOTO)])
    (archived / "images.tar.gz").symlink_to(tmp_path / "images.tar.gz")
    with pytest.raises(ValueError, match="images.tar.gz is a symbolic link out of its folder"):
        diningbench.read_official("vqa", archived)


def test_fifos_and_oversized_files_are_refused_by_their_stat_unread(tmp_path: Path) -> None:
    folder = vqa_release(tmp_path / "release", [["images/ok.jpg"], ["images/pipe.jpg"]],
                         photo_files={"images/ok.jpg": PHOTO})
    os.mkfifo(folder / "images" / "pipe.jpg")
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"item 2 \(idx 1\): images\[0\] 'images/pipe.jpg' is not a regular file"):
        diningbench.read_official("vqa", folder)  # a read would wait for a writer for ever
    big = vqa_release(tmp_path / "big", [["images/big.jpg"]])
    (big / "images").mkdir()
    with (big / "images" / "big.jpg").open("wb") as fh:
        fh.truncate(diningbench.MAX_PHOTO_BYTES + 1)  # sparse: nothing written, the size is what counts
    with pytest.raises(ValueError, match=r"'images/big.jpg' is 67,108,865 bytes, over the 67,108,864"):
        diningbench.read_official("vqa", big)
    pipe_file = tmp_path / "fifo"
    pipe_file.mkdir()
    os.mkfifo(pipe_file / "vqa.jsonl")
    with pytest.raises(ValueError, match="vqa.jsonl is not a regular file"):
        diningbench.read_official("vqa", pipe_file)
    assert time.monotonic() - started < 30


def test_a_row_of_too_many_images_is_refused_and_a_missing_one_only_when_read(tmp_path: Path) -> None:
    many = vqa_release(tmp_path / "many", [["images/ok.jpg"] * 65], photo_files={"images/ok.jpg": PHOTO})
    with pytest.raises(ValueError, match=r"item 1 \(idx 0\): 65 image paths; at most 64 a row"):
        diningbench.read_official("vqa", many)
    gone = vqa_release(tmp_path / "gone", [["images/ok.jpg"], ["images/gone.jpg"]], photo_files={"images/ok.jpg": PHOTO})
    release = diningbench.read_official("vqa", gone)
    assert next(release.iter_rows([0]))["images"][0]["bytes"] == PHOTO
    with pytest.raises(ValueError, match=r"vqa.jsonl item 2 \(idx 1\): image 'images/gone.jpg' not found"):
        list(release.iter_rows([1]))


def test_the_vqa_fallback_photo_stays_inside_the_release(tmp_path: Path) -> None:
    """A row without `images` sends images/{id:05d}.jpg; an id is made a number or left out, so it
    cannot name a path."""
    folder = tmp_path / "release"
    folder.mkdir()
    rows = [{"id": "../../etc/passwd", "prompt": "q", "ground_truth": "a"}, {"id": "12", "prompt": "q", "ground_truth": "a"}]
    (folder / "vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    release = diningbench.read_official("vqa", folder)
    assert [r["image_paths"] for r in release.rows] == [[], ["images/00012.jpg"]]


# --------------------------------------------------------------------------------------------- lines


def test_a_line_past_the_bound_is_one_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(official, "MAX_LINE_BYTES", 64 << 10)  # the bound is 4 MiB; a real row is a few KB
    folder = vqa_release(tmp_path / "release", [["images/a.jpg"]])
    with (folder / "vqa.jsonl").open("a") as fh:
        fh.write(json.dumps({"id": 2, "prompt": "x" * (1 << 20)}) + "\n")
    with pytest.raises(ValueError, match="vqa.jsonl line 2: longer than 65,536 bytes") as refused:
        diningbench.read_official("vqa", folder)
    assert "\n" not in str(refused.value)
    endless = tmp_path / "endless"
    endless.mkdir()
    (endless / "vqa.jsonl").write_bytes(b"[" * (2 << 20))  # no newline at all
    with pytest.raises(ValueError, match="vqa.jsonl line 1: longer than"):
        diningbench.read_official("vqa", endless)


@pytest.mark.parametrize(("text", "said"), [
    ('{"id": 1, "prompt": ' + "[" * 100 + "]" * 100 + "}\n", "nested deeper than 32 levels"),
    ('{"id": 1, "prompt": "q"\n', "invalid JSON"),
    ("[1, 2]\n", "not a JSON object"),
    (b'{"id": "\xff"}\n'.decode("latin-1"), "not UTF-8"),
])
def test_a_malformed_line_is_one_error_naming_it(tmp_path: Path, text: str, said: str) -> None:
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / "vqa.jsonl").write_bytes(text.encode("latin-1") if "not UTF-8" == said else text.encode())
    with pytest.raises(ValueError, match=f"vqa.jsonl line 1: {said}"):
        diningbench.read_official("vqa", folder)
    assert diningbench.main(["validate", str(folder)]) == 1


def test_the_number_of_rows_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(official, "MAX_ROWS", 10)
    folder = vqa_release(tmp_path / "release", [["images/a.jpg"]] * 11)
    with pytest.raises(ValueError, match="vqa.jsonl: more than 10 rows"):
        diningbench.read_official("vqa", folder)


def test_the_cli_says_a_refusal_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = vqa_release(tmp_path / "release", [["/etc/passwd"]])
    assert diningbench.main(["summary", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: vqa.jsonl item 1 (idx 0): images[0] '/etc/passwd' is absolute")


def test_the_writer_never_writes_outside_its_folder(tmp_path: Path) -> None:
    for rel in ("../escape.jpg", "/tmp/escape.jpg", "images\\..\\x.jpg"):
        with pytest.raises(ValueError, match="must be relative, below the release folder"):
            diningbench.write_official(tmp_path / "out", {"vqa.jsonl": [({"id": 1}, {rel: PHOTO})]})
    assert not (tmp_path / "escape.jpg").exists()
    with pytest.raises(ValueError, match="not a JSON-lines file name"):
        diningbench.write_official(tmp_path / "out", {"../vqa.jsonl": []})
