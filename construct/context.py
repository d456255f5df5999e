"""What every stage gets: the raw export, the work folder, the settings, the model pool and the engine
(construct/engine.py: where the prefilter and the calls run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from construct.engine import LocalEngine
from construct.models import Models
from construct.raw import RawExport
from construct.work import BuildSettings


@dataclass
class Context:
    raw: RawExport
    work: Path
    settings: BuildSettings
    models: Models
    engine: Any = field(default_factory=LocalEngine)
