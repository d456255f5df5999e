"""Run folders as reports read them: run.json plus scores.jsonl per task, and the paper's reported rows."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from diningbench import MAX_JSON_DEPTH, file_problem, finite_number, iter_jsonl_objects, read_json_file
from eval import protocols, tasks
from eval.protocols import Protocol
from eval.settings import RunSettings
from eval.store import RUN_FILE_BYTES, RUN_LINE_BYTES, json_line
from eval.types import ALPHABET, NUTRIENTS, RunInfo, ScoreRecord, TaskFigures, UserError, within_alphabet

REPORTED_CSV = Path(__file__).resolve().parents[1] / "data" / "table2_reported.csv"


class ReportError(UserError):
    """A bad input (missing file, malformed line): printed as one `error:` line."""


# ---------------------------------------------------------------- loading runs

@dataclass
class RunData:
    """One run folder: its settings (run.json) and its scored items (scores.jsonl) per task."""

    path: Path
    info: RunInfo
    scores: dict[str, list[ScoreRecord]] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)  # metrics.json as read (unchecked; `entry` reads it)

    @property
    def protocol(self) -> Protocol:
        """The protocol the run was asked and scored under (run.json `settings.protocol`; ours before there
        was a choice)."""
        return protocol_of(self.info)

    def scored_tasks(self) -> list[tuple[tasks.Task, list[ScoreRecord]]]:
        """Each registered task of scores.jsonl (`task_named`) with its items, in the file's order."""
        return [(task, rows) for name, rows in self.scores.items() if (task := task_named(name)) is not None]

    def entry(self, task: str) -> TaskFigures:
        """A task's metrics.json entry ({} when there is none)."""
        found = self.metrics.get(task)
        # Not checked: a folder from elsewhere may hold anything, so readers check each value they read.
        return cast(TaskFigures, found) if isinstance(found, dict) else {}

    def headline(self, task: tasks.Task) -> tuple[str, float | None, tuple[float, float] | None] | None:
        """(name, value, 95% interval) of the figure the run's protocol reports first for `task`, when it is
        not ours (the authors' on their release); None: ours is the headline."""
        entry = self.entry(task.name)
        found = self.protocol.headline(task, entry) if entry else None
        return None if found is None else (found[0], found[1], self.protocol.interval(entry))

    def question(self) -> str:
        """How the run asked, for the tables: the protocol and its images, or our views and CoT."""
        settings = self.info.get("settings")
        try:
            asked = RunSettings.from_saved(settings if isinstance(settings, dict) else {})
            return self.protocol.describe(asked)
        except (TypeError, ValueError, UserError):
            return "settings unreadable"

    def setting(self, key: str, default: Any = None) -> Any:
        """A setting as run.json holds it (in its settings, else at its top, as an older run.json kept the
        model), or `default` when it is not a value the setting takes (`RunSettings.saved_value`: a run folder
        from elsewhere may hold anything)."""
        settings = self.info.get("settings")
        found = settings if isinstance(settings, dict) and key in settings else {key: self.info.get(key)}
        return RunSettings.saved_value(found, key, default)

    @property
    def model(self) -> str:
        return str(self.setting("model") or self.path.name)

    @property
    def source(self) -> str | None:
        """The release the run read, as run.json names it (its dataset's source, else the --dataset setting);
        None: the embedded sample."""
        data = self.info.get("dataset")
        found = data.get("source") if isinstance(data, dict) else data or self.setting("dataset")
        return found if isinstance(found, str) and found else None  # a value of another type names none

    @property
    def fingerprints(self) -> dict[str, str]:
        """Each task's data fingerprint as run.json records it ({} when it records none)."""
        data = self.info.get("dataset")
        return _texts(data.get("fingerprints") if isinstance(data, dict) else None)

    @property
    def revisions(self) -> dict[str, str]:
        """The Hub commit each task's release was read at (the authors' release from the Hub; else {})."""
        return _texts(self.info.get("dataset_revision"))

    @property
    def is_baseline(self) -> bool:
        return self.model.startswith("baseline:")

    @property
    def label(self) -> str:
        """Model spec plus the settings that change answers, e.g. `openai:gpt-4o (en, 2 views, CoT)`."""
        tags = []
        lang = self.setting("lang") or "zh"
        if lang != "zh":
            tags.append(str(lang))
        if self.setting("images"):
            n = int(self.setting("images"))  # an int: `setting` checks the type
            tags.append(f"{n} view" + ("s" if n != 1 else ""))
        if self.setting("cot"):
            tags.append("CoT")
        return self.model + (f" ({', '.join(tags)})" if tags else "")


def task_named(name: object) -> tasks.Task | None:
    """A task name a run folder holds, as its task; None for a name no module registered (a folder from
    elsewhere). The one place a run folder's task names become tasks."""
    return tasks.get(name) if isinstance(name, str) and tasks.is_task(name) else None


def protocol_of(info: Any) -> Protocol:
    """The protocol a run.json names (`settings.protocol`; ours before there was a choice, and for a name
    no protocol registered or settings of another shape: a folder from elsewhere)."""
    settings = info.get("settings") if isinstance(info, dict) else None
    try:
        return protocols.of(settings if isinstance(settings, dict) else None)
    except (UserError, TypeError, ValueError):
        return protocols.get(None)


def _texts(found: Any) -> dict[str, str]:
    """A run.json map of task -> text, checked once where read: an entry that is not text is left out."""
    if not isinstance(found, dict):
        return {}
    return {key: value for key, value in found.items() if isinstance(key, str) and isinstance(value, str) and value}


def _line_problem(row: Any) -> str | None:
    """Why a parsed scores.jsonl line cannot be used (None when it can): the fields every reader relies on."""
    if not isinstance(row, dict) or "task" not in row or "id" not in row:
        return "has no `id`/`task`; is this a scores.jsonl?"
    if not isinstance(row["task"], str) or not isinstance(row["id"], str | int) or isinstance(row["id"], bool):
        return "has an `id` or `task` that is not text"
    epoch = row.get("epoch")
    if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0):
        return f"has `epoch` {str(epoch)[:40]!r}, not a whole number"
    return _value_problem(row)


def _value_problem(row: dict[str, Any]) -> str | None:
    """Why a value that scoring and comparisons read has the wrong type or range (None when all fit):
    `correct` true, false or null; `error` text or null; `merchant_id` text, a number or null; `n_options`
    (the options an item offered: chance accuracy and the circular figures count them) null or a whole number
    up to the alphabet's 26; for a percentage-error task, `ape` null or an object with every nutrient (null or
    a number >= 0), `abs_error` likewise, and `reference` an object of numbers >= 0."""
    if row.get("correct") is not None and not isinstance(row["correct"], bool):
        return f"has `correct` {str(row['correct'])[:40]!r}, not true, false or null"
    if row.get("error") is not None and not isinstance(row["error"], str):
        return "has an `error` that is not text"
    merchant = row.get("merchant_id")
    if merchant is not None and (not isinstance(merchant, str | int) or isinstance(merchant, bool)):
        return "has a `merchant_id` that is not text"
    options = row.get("n_options")
    if options is not None and not within_alphabet(options):
        return f"has `n_options` {str(options)[:40]!r}, not a whole number from 0 to {len(ALPHABET)}"
    task = task_named(row["task"])
    if task is None or task.measure != "ape":
        return None
    for name, nullable in (("ape", True), ("abs_error", False)):
        if (value := row.get(name)) is None:
            continue
        if not isinstance(value, dict):
            return f"has `{name}` that is not an object of {', '.join(NUTRIENTS)}"
        for nutrient in NUTRIENTS:
            if nutrient not in value:
                return f"has `{name}` without `{nutrient}`"
            if not (finite_number(value[nutrient], 0) or nullable and value[nutrient] is None):
                return f"has `{name}.{nutrient}` {str(value.get(nutrient))[:40]!r}, not a number >= 0"
    if (reference := row.get("reference")) is not None:
        if not isinstance(reference, dict):
            return "has a `reference` that is not an object of nutrients"
        for nutrient in NUTRIENTS:
            if not finite_number(reference.get(nutrient), 0):
                return f"has `reference.{nutrient}` {str(reference.get(nutrient))[:40]!r}, not a number >= 0"
    return None


def _read_jsonl(path: Path, problems: list[str] | None = None) -> list[ScoreRecord]:
    """The lines of a scores.jsonl; a bad line is a ReportError naming it, or, with `problems`, a
    `scores.jsonl:N: why` entry there and the line left out (viewers show what they can). The one place a
    record read back is checked (`_line_problem`): readers after it take it as typed."""
    rows: list[ScoreRecord] = []
    strict = problems is None
    seen: dict[tuple[str, str, int], int] = {}  # (task, id, epoch) -> its line
    for number, row in iter_jsonl_objects(path, str(path) if strict else path.name, loads=json_line,
                                          policy="strict" if strict else "skip", problems=problems,
                                          error=ReportError, max_depth=MAX_JSON_DEPTH,
                                          max_line_bytes=RUN_LINE_BYTES):
        problem = _line_problem(row)
        if problem is None:
            key = (row["task"], str(row["id"]), row.get("epoch") or 0)
            if key in seen:  # counted twice, an item would weigh twice in every figure and test
                problem = (f"the same item as line {seen[key]} ({key[0]} {key[1][:80]!r}, epoch {key[2]}); "
                           "counted once")
            else:
                seen[key] = number
        if problem is not None:
            if problems is None:
                raise ReportError(f"{path} line {number}: {problem.removesuffix('; counted once')}")
            problems.append(f"{path.name}:{number}: {problem}")
            continue
        rows.append(cast(ScoreRecord, row))  # checked above: the fields and value types readers rely on
    return rows


def load_run(path: Path | str, problems: list[str] | None = None) -> RunData:
    """Read run.json and scores.jsonl of one run folder; a one-line ReportError when unusable. With
    `problems`, bad scores.jsonl lines are left out and named there (`scores.jsonl:N: why`), as is a run.json
    that is not JSON, so that a viewer can show the rest."""
    path = Path(path)
    scores_path = path / "scores.jsonl"
    if not scores_path.exists():
        raise ReportError(f"{path}: no scores.jsonl; score the run first with `python -m eval score {path}`")
    for name in ("scores.jsonl", "run.json"):  # a run folder may come from anywhere: refused, even by viewers
        if (why := _run_file_problem(path, name)) is not None:
            raise ReportError(f"{path / name}: {why}")
    info: RunInfo = {}
    if (path / "run.json").is_file():
        try:
            info = read_json_file(path / "run.json")
        except ValueError as exc:
            if problems is None:
                raise ReportError(f"{path / 'run.json'}: {str(exc).split(': ', 1)[-1]}") from None
            problems.append(f"{exc}; its settings are not used")
    run = RunData(path=path, info=info, metrics=_metrics(path, problems))
    for row in _read_jsonl(scores_path, problems):
        run.scores.setdefault(row["task"], []).append(row)
    if not run.scores:
        raise ReportError(f"{scores_path}: no scored items")
    return run


def _metrics(path: Path, problems: list[str] | None) -> dict[str, Any]:
    """metrics.json ({} when absent or unusable: the figures are then read from scores.jsonl alone)."""
    if not (path / "metrics.json").is_file() or _run_file_problem(path, "metrics.json") is not None:
        return {}
    try:
        found = read_json_file(path / "metrics.json")
    except ValueError as exc:
        if problems is not None:
            problems.append(f"{exc}; its figures are not used")
        return {}
    return found if isinstance(found, dict) else {}


def _run_file_problem(folder: Path, name: str) -> str | None:
    try:
        return file_problem(folder / name, folder, max_bytes=RUN_FILE_BYTES)
    except OSError as exc:
        return f"unreadable ({exc.strerror or type(exc).__name__})"


def file_signature(*paths: Path) -> tuple[Any, ...]:
    """Each file's (modification time, size), None for one that is not there: what readers that keep a
    run folder's content compare to know it changed."""
    out: list[Any] = []
    for path in paths:
        try:
            found = path.stat()
            out.append((found.st_mtime_ns, found.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def run_folders(root: Path) -> list[Path]:
    """`root` itself when it is a run folder, else the run folders below it (sweep cells too)."""
    root = Path(root)
    if (root / "scores.jsonl").is_file():
        return [root]
    return sorted({p.parent for p in root.glob("*/scores.jsonl")} | {p.parent for p in root.glob("*/*/scores.jsonl")})


def expand_run_dirs(paths: Sequence[Path | str]) -> list[Path]:
    """Run folders named directly, plus the cell folders of any sweep folder (holding run folders)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ReportError(f"{path}: not a folder")
        if (path / "scores.jsonl").is_file():
            found.append(path)
            continue
        cells = sorted(p.parent for p in path.glob("*/scores.jsonl"))
        if not cells:
            raise ReportError(f"{path}: neither a run folder (scores.jsonl) nor a sweep folder of runs")
        found.extend(cells)
    return found


def load_reported(langs: Sequence[str] = ("zh",)) -> list[dict[str, Any]]:
    """The paper's Table 2 (and Table 4 for en) rows, as percentages; missing cells are None."""
    with REPORTED_CSV.open(encoding="utf-8") as handle:
        return [{k: v if k in ("model", "type", "lang") else float(v) if v else None for k, v in row.items()}
                for row in csv.DictReader(handle) if row["lang"] in langs]
