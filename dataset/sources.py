"""Where a release is: the source a command was given (or its default), a local folder, and the
Parquet files of one config in our layout."""

from __future__ import annotations

import os
from pathlib import Path

from dataset.schema import SAMPLE_DIR


def _source(source: str | os.PathLike | None) -> str:
    """Argument -> DININGBENCH_SOURCE -> the embedded sample."""
    if source is None or str(source) == "":
        source = os.environ.get("DININGBENCH_SOURCE") or SAMPLE_DIR
    return str(source)


def _local(source: str) -> Path | None:
    path = Path(source).expanduser()
    # Absolute: datasets resolves data_files relative to the dataset folder, not the working directory.
    return path.resolve() if path.is_dir() else None


def _data_files(folder: Path, config: str) -> list[Path]:
    return sorted((folder / "data" / config).glob("*.parquet"))
