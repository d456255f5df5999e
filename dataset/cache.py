"""Where releases are fetched into and kept: the datasets cache folder, the fingerprints kept there,
what a process holds in it, and whether the Hub can be reached (or already cached a repository)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
import uuid
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def datasets_cache() -> Path:
    """The folder `datasets` caches in (`datasets.config.HF_DATASETS_CACHE`), found from the same
    variables in the same order, without importing `datasets`."""
    xdg_cache = os.getenv("XDG_CACHE_HOME", "~/.cache")
    hf_home = os.path.expanduser(os.getenv("HF_HOME", os.path.join(xdg_cache, "huggingface")))
    return Path(os.getenv("HF_DATASETS_CACHE", os.path.join(hf_home, "datasets")))


def hub_reachable(timeout: float = 3.0) -> bool:
    """One TCP connect to the Hub's endpoint (HF_HUB_OFFLINE counts as unreachable)."""
    import socket
    from urllib.parse import urlsplit

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((endpoint.hostname or "huggingface.co", endpoint.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _in_hub_cache(repo_id: str) -> bool:
    """True when the datasets/hub cache already holds files of this dataset repo."""
    try:
        from huggingface_hub import scan_cache_dir

        return any(r.repo_id == repo_id and r.repo_type == "dataset" for r in scan_cache_dir().repos)
    except Exception:  # noqa: BLE001 - no cache folder yet
        return False


# ------------------------------------------------------------------------------ held while in use

# The cache folder is shared by every process on the machine. What a process reads there (an unpacked
# archive) it holds with a shared flock, what it is writing (a partial folder, a temp file) with an
# exclusive one, and anything is removed only by a process that takes an exclusive lock on it without
# waiting: never what another process holds. The kernel drops a process's locks when it ends, kill -9
# included, so what a killed writer left behind is removable at the next start.


class Held:
    """A flock on a cache entry, held until `close()`, until this object is collected, or until the
    process ends."""

    def __init__(self, fd: int) -> None:
        self._close = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        self._close()


def hold(path: Path, *, shared: bool, wait: bool = True) -> Held | None:
    """A flock on `path` (a folder or a file), once it is sure `path` still names what was locked (it
    may have been moved away for removal while this waited); None when `path` names nothing, or, with
    `wait` False, when another holds it. A shared lock waits only for a remover's rename."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        if os.path.samestat(os.fstat(fd), os.lstat(path)):
            return Held(fd)
    except (BlockingIOError, FileNotFoundError):  # held by another; moved away meanwhile
        pass
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def remove_unheld(paths: Iterable[Path]) -> None:
    """Remove each of `paths` that no process holds: locked, moved aside under a name nobody opens, then
    deleted (a removal cut short leaves a `.removing-*` entry, itself removed next time)."""
    for path in paths:
        if (held := hold(path, shared=False, wait=False)) is None:
            continue
        aside = path.with_name(f".removing-{uuid.uuid4().hex}")
        try:
            os.rename(path, aside)
        except OSError:
            held.close()
            continue
        held.close()
        if aside.is_dir():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            aside.unlink(missing_ok=True)


def temp_file(path: Path) -> Held:
    """`path` created empty for this writer, held exclusively until the writer closes it (so the next
    start's sweep of orphaned temp files never takes one being written)."""
    for _ in range(100):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        except FileExistsError:  # left by a killed writer whose process id this one now has
            remove_unheld([path])
            continue
        held = hold(path, shared=False, wait=False)
        if held is not None:
            return held
    raise FileExistsError(f"{path} is held by another writer")


FINGERPRINTS_KEPT = 256


def _fingerprints_path() -> Path:
    return datasets_cache() / "diningbench-fingerprints.json"


def _read_fingerprints() -> dict[str, Any]:
    """The fingerprints kept so far, by the key of the files they were computed from ({} when none)."""
    try:
        found = json.loads(_fingerprints_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_fingerprints(known: dict[str, Any]) -> None:
    """Best effort (a read-only cache folder only costs the next run a re-hash); atomic, bounded."""
    path = _fingerprints_path()
    kept = dict(list(known.items())[-FINGERPRINTS_KEPT:])
    partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer thread too
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_unheld(path.parent.glob(f"{path.name}.*.tmp"))  # a killed writer's
        held = temp_file(partial)
        try:
            partial.write_text(json.dumps(kept), encoding="utf-8")
            os.replace(partial, path)
        finally:
            held.close()
    except OSError:
        partial.unlink(missing_ok=True)


def hash_file(digest: Any, path: Path) -> None:
    """Feed a file's bytes to `digest` (a hashlib object), a MiB at a time: what a fingerprint reads."""
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
