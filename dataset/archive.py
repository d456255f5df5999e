"""Unpacking an images archive from an untrusted release (`images.tar.gz`): streamed, member by
member, bounded before anything past a bound is written, into a folder that appears whole or not at all."""

from __future__ import annotations

import os
import shutil
import tarfile
import threading
import zlib
from pathlib import Path, PurePosixPath, PureWindowsPath

from dataset.cache import hold
from dataset.schema import MAX_PHOTO_BYTES, DatasetError

# The authors' archive holds ~16k photos in a few GB. The bounds stop a hostile one (a 3 GiB member of
# zeros compresses to 3 MB; 100,000 empty members to a few MB) from filling the disk or the inode table.
MAX_MEMBERS = 50_000
MAX_UNPACKED_BYTES = 32 << 30
_CHUNK = 1 << 20


def unpack_once(archive: Path, dest: Path) -> Path:
    """`archive` unpacked into `dest` (made now, unless an earlier call made it); returns `dest`. Members are
    unpacked into a partial folder beside `dest`, which is renamed to `dest` once every member is in: a reader
    never sees half an archive, and a refused archive leaves nothing behind. Refused, in one DatasetError
    naming the member: an absolute name, a `..` component, a backslash or drive in the name, a link (symbolic
    or hard), a device or FIFO; a member over MAX_PHOTO_BYTES, a total over MAX_UNPACKED_BYTES or more than
    MAX_MEMBERS members, each found from the member's header before its bytes are read."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f"{dest.name}.partial-{os.getpid()}-{threading.get_ident()}")
    held = None
    while held is None:  # held while it is written: the next start's sweep takes only a killed unpack's
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        held = hold(partial, shared=False, wait=False)
    try:
        _unpack(archive, partial)
        try:
            os.rename(partial, dest)
        except OSError:
            if not dest.is_dir():  # another process finished first: use its copy
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        held.close()
    return dest


def _unpack(archive: Path, into: Path) -> None:
    name = archive.name
    members = total = 0
    try:
        with archive.open("rb") as raw, tarfile.open(fileobj=raw, mode="r|gz") as tar:
            for member in tar:
                members += 1
                if members > MAX_MEMBERS:
                    raise DatasetError(f"{name}: more than {MAX_MEMBERS:,} members; an images archive holds at most that many")
                parts = _member_parts(name, member)
                if member.isdir() or not parts:  # no parts: `.` itself, the folder made already
                    into.joinpath(*parts).mkdir(parents=True, exist_ok=True)
                    continue
                if member.size > MAX_PHOTO_BYTES:
                    raise DatasetError(f"{name}: member {member.name!r} is {member.size:,} bytes, over the "
                                       f"{MAX_PHOTO_BYTES:,} a photo may have")
                total += member.size
                if total > MAX_UNPACKED_BYTES:
                    raise DatasetError(f"{name}: members add up to more than {MAX_UNPACKED_BYTES:,} bytes unpacked "
                                       f"(at member {member.name!r})")
                _write_member(tar, member, into.joinpath(*parts))
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{name} is not a readable tar.gz archive ({type(exc).__name__}: "
                           f"{(str(exc).splitlines() or [''])[0]})") from None


def _member_parts(archive: str, member: tarfile.TarInfo) -> tuple[str, ...]:
    """The member's path as components below the unpacking folder (`./` dropped), or a refusal."""
    if not (member.isreg() or member.isdir()):
        kind = ("a symbolic link" if member.issym() else "a hard link" if member.islnk() else
                "a device" if member.ischr() or member.isblk() else "a FIFO" if member.isfifo() else "not a file")
        raise DatasetError(f"{archive}: member {member.name!r} is {kind}; an images archive holds only files and folders")
    text = member.name
    if "\\" in text or "\x00" in text or PureWindowsPath(text).drive or text.startswith("/"):
        raise DatasetError(f"{archive}: member {text!r} has an absolute or non-portable path")
    parts = tuple(p for p in PurePosixPath(text).parts if p != ".")
    if ".." in parts:
        raise DatasetError(f"{archive}: member {text!r} has a '..' component")
    return parts


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    source = tar.extractfile(member)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: nothing here ever makes a link, and a name already taken is written over, not followed.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except (NotADirectoryError, IsADirectoryError, FileExistsError):
        raise DatasetError(f"member {member.name!r} clashes with a file or folder already unpacked") from None
    with os.fdopen(fd, "wb") as out:
        for block in iter(lambda: source.read(_CHUNK), b"") if source is not None else ():
            out.write(block)
