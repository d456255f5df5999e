"""run.json: what produced a run folder (settings, backend, versions, data, code), never a key."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from dataset.jsonl import read_json_file
from eval.backends import traits
from eval.prompts import PROMPT_VERSION
from eval.settings import IDENTITY_FIELDS
from eval.specs import BACKENDS
from eval.store import write_atomically
from eval.types import RunInfo, RunJudge

RUN_JSON = "run.json"
# The packages whose versions run.json records: the data and metric core, then what each backend declares it
# imports (its TRAITS), in the registry's order.
PACKAGES = tuple(dict.fromkeys(("datasets", "evaluate", "numpy", "pillow",
                                *(package for name in BACKENDS for package in traits(name).packages))))


def identity(settings: dict[str, Any], dataset_fingerprints: dict[str, str]) -> dict[str, Any]:
    """The settings that change answers: a folder whose identity differs from the requested run's is
    someone else's results, never silently mixed."""
    return {**{name: settings.get(name) for name in IDENTITY_FIELDS}, "prompt_version": PROMPT_VERSION,
            "dataset": dataset_fingerprints}


def package_versions() -> dict[str, str | None]:
    """The installed version of each of PACKAGES (None when it is not installed). Read from the `Version:`
    header of each distribution's metadata: `metadata.version` parses the whole file with the email parser,
    descriptions included (13 ms for these ten, against 2 ms)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
            continue
        header = _VERSION_RE.search(dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "")
        versions[name] = header.group(1) if header else dist.version
    return versions


_VERSION_RE = re.compile(r"^Version:[ \t]*(\S+)", re.MULTILINE)


def git_commit(repo: Path | None = None) -> str | None:
    """The code's commit (with `+dirty` when the tree has changes); None outside a checkout."""
    cwd = repo or Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "") if commit else None


def read_run_json(run_dir: Path) -> RunInfo | None:
    """A folder's run.json (None when absent or not a JSON object); its values are not checked (RunInfo)."""
    path = Path(run_dir) / RUN_JSON
    if not path.exists():
        return None
    try:
        return cast(RunInfo, read_json_file(path))  # bounded, and a JSON object: a run folder may come from anywhere
    except ValueError:
        return None


def recorded_judge(info: RunInfo) -> tuple[str | None, str | None]:
    """(spec, server host) of the judge run.json records; None for what it does not record as text."""
    found = info.get("judge")
    spec, host = (found.get("spec"), found.get("base_url_host")) if isinstance(found, dict) else (None, None)
    return spec if isinstance(spec, str) else None, host if isinstance(host, str) else None


def write_run_json(run_dir: Path, info: RunInfo) -> None:
    write_atomically(Path(run_dir) / RUN_JSON, json.dumps(info, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def build_run_json(*, settings: dict[str, Any], tasks: list[str], backend: dict[str, Any],
                   dataset_source: str | None, fingerprints: dict[str, str], judge: RunJudge | None,
                   counts: dict[str, Any] | None = None, packages: dict[str, Any] | None = None,
                   commit: str | None | bool = True) -> RunInfo:
    """The run.json content, whoever writes it (a run, an import, the Space keeping a submission).
    `settings` must already be free of secrets (they come from flags only). `packages` and `commit`
    default to this process's; a kept submission passes the submitter's (`commit` None: unknown)."""
    public = {k: v for k, v in settings.items() if k not in ("engine_extra", "base_url", "judge_base_url")}
    public["engine_extra"] = {k: v for k, v in (settings.get("engine_extra") or {}).items()
                              if "key" not in k.lower() and "token" not in k.lower()}
    return {
        "model": settings["model"],
        "tasks": tasks,
        "settings": public,
        "base_url_host": backend.get("base_url_host"),
        "backend": backend,
        "judge": judge,
        "prompt_version": PROMPT_VERSION,
        "dataset": {"source": dataset_source or "embedded sample", "fingerprints": fingerprints},
        "identity": identity(settings, fingerprints),
        "packages": package_versions() if packages is None else packages,
        "git_commit": git_commit() if commit is True else commit or None,
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "counts": counts or {},
    }
