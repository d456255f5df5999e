"""A folder of the Space kept in the operator's Hub dataset (people's runs, submissions): one
`CommitScheduler` per folder, made on first use, and the lock a writer holds so that a push never
sees half a folder."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class HubFolder:
    def __init__(self, folder: Path, hub_repo: str | None, path_in_repo: str, allow_patterns: Sequence[str]) -> None:
        self.folder, self.hub_repo, self.path_in_repo = Path(folder), hub_repo, path_in_repo
        self.allow_patterns = list(allow_patterns)
        self._scheduler: Any = None

    def scheduler(self) -> Any:
        """The CommitScheduler, or None when no repo is named (no network until something is written)."""
        if self.hub_repo and self._scheduler is None:
            from huggingface_hub import CommitScheduler

            self.folder.mkdir(parents=True, exist_ok=True)
            self._scheduler = CommitScheduler(repo_id=self.hub_repo, repo_type="dataset", folder_path=self.folder,
                                              path_in_repo=self.path_in_repo, every=5, private=True,
                                              allow_patterns=self.allow_patterns)
        return self._scheduler

    def writing(self) -> Any:
        """Hold while writing into the folder: the scheduler's lock, or nothing without a repo."""
        scheduler = self.scheduler()
        return scheduler.lock if scheduler is not None else contextlib.nullcontext()
