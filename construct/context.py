"""What every stage gets: the raw export, the work folder, the settings and the model pool."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from construct.models import Models
from construct.raw import RawExport
from construct.work import BuildSettings


@dataclass
class Context:
    raw: RawExport
    work: Path
    settings: BuildSettings
    models: Models
