"""Where releases are fetched into and kept: the datasets cache folder, the fingerprints kept there,
and whether the Hub can be reached (or already cached a repository)."""

from __future__ import annotations

import json
import os
import threading
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer thread too
        partial.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass


def hash_file(digest: Any, path: Path) -> None:
    """Feed a file's bytes to `digest` (a hashlib object), a MiB at a time: what a fingerprint reads."""
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
