"""Submissions: a visitor's run folder, re-scored here before it reaches the Leaderboard.

Nothing in a submission is believed: SECURITY.md lists each check and cap.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from diningbench import MAX_JSON_DEPTH, iter_jsonl_objects, json_depth_within
from eval.limiter import threads_for
from eval.tasks import Task, all_tasks, figure_of, is_judged, is_task, names

from .guard import GuardError, check_model_name, name_problem
from .hubsync import HubFolder

SUBMISSIONS_FOLDER = "submissions"  # under the results folder, next to humans/
HISTORY = "history"
SUBMISSION_JSON = "submission.json"
RUN_FILES = ("run.json", "predictions.jsonl", "scores.jsonl", "metrics.json")
MAX_LINE_BYTES = 1 << 20  # one predictions/scores line
MAX_JSON_BYTES = 4 << 20  # run.json, metrics.json (the harness writes kilobytes)
MAX_EPOCHS = 8  # epochs a submission may claim (each one more answer per item to re-score and judge)
ROTATIONS = 8  # CircularEval: one rotation per option
SCORE_SECONDS = 120.0  # wall-clock budget of one submission's checks and re-scoring (the operator's setting)
MAX_RAW_CHARS = 200_000  # one raw answer
RATIO_FLOOR = 1 << 20  # the ratio cap applies to members that unpack to more than this
TOLERANCE = 5e-5  # claimed and re-scored figures agree when they round to the same 0.01 %
HUB_REPO = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
VERIFIED, SELF_REPORTED = "verified", "self-reported"
KEPT_FILES = ["*/*.json", "*/*.jsonl", f"*/{HISTORY}/*/*.json"]  # what is pushed to the Hub and read back


class SubmissionError(ValueError):
    """A submission refused, with the reason (one line, safe to show)."""


@dataclass(frozen=True)
class Caps:
    """What one submission may weigh; the operator sets them (space/README.md)."""

    zip_bytes: int = 20 << 20
    unpacked_bytes: int = 200 << 20
    members: int = 64
    ratio: int = 100


# ---------------------------------------------------------------- a hostile zip, opened with care
def _mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return f"{name!r} is an absolute path"
    if any(part == ".." for part in PurePosixPath(name).parts):
        return f"{name!r} leaves the folder (`..`)"
    if stat.S_ISLNK(info.external_attr >> 16):
        return f"{name!r} is a symbolic link"
    if info.flag_bits & 0x1:
        return f"{name!r} is encrypted"
    return None


def _extract_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, dest: Path) -> Path:
    """Stream one member to `dest`, never past `cap` bytes whatever its header says (memory stays flat)."""
    written = 0
    try:
        with archive.open(info) as member, dest.open("wb") as out:
            while chunk := member.read(1 << 16):
                written += len(chunk)
                if written > cap:
                    raise SubmissionError(f"refused: {info.filename!r} unpacks to more than its header says")
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError):
        raise SubmissionError(f"refused: {info.filename!r} is corrupt") from None
    return dest


def open_zip(path: Path, caps: Caps, dest: Path) -> dict[str, Path]:
    """The run folder's files (RUN_FILES, by name), unpacked into `dest` as a stream; SubmissionError for
    anything hostile. Every member's name is checked before anything is read; sizes are judged from the
    central directory, so a member declaring 1 GB is refused without inflating a byte of it."""
    size = path.stat().st_size
    if size > caps.zip_bytes:
        raise SubmissionError(f"the zip is {_mb(size)}; at most {_mb(caps.zip_bytes)} is accepted")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        raise SubmissionError("not a zip file") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > caps.members:
            raise SubmissionError(f"the zip has {len(infos)} entries; at most {caps.members} are accepted")
        total = 0
        for info in infos:
            problem = _member_problem(info)
            if problem:
                raise SubmissionError(f"refused: {problem}")
            if info.file_size > caps.unpacked_bytes:
                raise SubmissionError(f"refused: {info.filename!r} unpacks to {_mb(info.file_size)}; "
                                      f"at most {_mb(caps.unpacked_bytes)} in all")
            if info.file_size > RATIO_FLOOR and info.file_size > caps.ratio * max(info.compress_size, 1):
                raise SubmissionError(f"refused: {info.filename!r} is compressed {info.file_size // max(info.compress_size, 1)}:1 "
                                      f"(at most {caps.ratio}:1)")
            total += info.file_size
        if total > caps.unpacked_bytes:
            raise SubmissionError(f"refused: the zip unpacks to {_mb(total)}; at most {_mb(caps.unpacked_bytes)}")
        runs = [i for i in infos if not i.is_dir() and PurePosixPath(i.filename).name == "run.json"]
        if len(runs) != 1:
            raise SubmissionError("the zip must hold one run folder (one run.json); "
                                  f"found {len(runs)}" + (": zip the folder `python -m eval run --out` wrote" if not runs else ""))
        wanted = {str(PurePosixPath(runs[0].filename).parent / name): name for name in RUN_FILES}
        dest.mkdir(parents=True, exist_ok=True)
        files = {wanted[i.filename]: _extract_member(archive, i, i.file_size, dest / wanted[i.filename])
                 for i in infos if i.filename in wanted}
    if "predictions.jsonl" not in files:
        raise SubmissionError("the run folder has no predictions.jsonl: the raw answers are what is re-scored")
    return files


# ---------------------------------------------------------------- bounded JSON
def parse_json(data: bytes | str | Path, name: str) -> Any:
    """JSON of a visitor's file: SubmissionError when over MAX_JSON_BYTES, malformed or nested deeper
    than MAX_JSON_DEPTH."""
    if isinstance(data, Path):
        if data.stat().st_size > MAX_JSON_BYTES:
            raise SubmissionError(f"{name}: {_mb(data.stat().st_size)}; at most {_mb(MAX_JSON_BYTES)} is read")
        data = data.read_bytes()
    try:
        value = json.loads(data)
    except RecursionError:
        raise SubmissionError(f"{name}: nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise SubmissionError(f"{name}: not valid JSON ({str(exc).splitlines()[0][:80]})") from None
    if not json_depth_within(value, MAX_JSON_DEPTH):
        raise SubmissionError(f"{name}: nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def iter_jsonl(source: bytes | Path, name: str, most: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of a visitor's JSON-lines file, read line by line (never whole), refused
    past `most` lines: what a run could hold is known before its lines are read."""
    for number, row in iter_jsonl_objects(source, name, error=SubmissionError, max_line_bytes=MAX_LINE_BYTES,
                                          max_depth=MAX_JSON_DEPTH):
        if number > most:
            raise SubmissionError(f"{name}: more than {most:,} lines, more than this run could hold "
                                  f"(the release's items x the run's epochs)")
        yield number, row


# ---------------------------------------------------------------- the release this Space serves
class ReleaseRows(Mapping[str, dict[str, Any]]):
    """A config's rows by id, read from the (memory-mapped) dataset when asked: a full release's
    photos never sit in memory all at once."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.index = {str(item_id): n for n, item_id in enumerate(dataset["id"])}

    def __getitem__(self, item_id: str) -> dict[str, Any]:
        return self.dataset[self.index[item_id]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def meta(self) -> list[dict[str, Any]]:
        """Every row without its images: what scoring needs (references, breakdown fields)."""
        return list(self.dataset.remove_columns([c for c in ("images",) if c in self.dataset.column_names]))


@dataclass
class Release:
    """This Space's data: per task the fingerprint and the rows (with image bytes, for the hashes)."""

    source: str | None
    fingerprints: dict[str, str] = field(default_factory=dict)
    rows: dict[str, ReleaseRows] = field(default_factory=dict)


class Releases:
    """Each task's release data loaded once per Space (a submission needs the image bytes)."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self._cache: dict[str, tuple[str, ReleaseRows]] = {}  # task -> (fingerprint, rows)
        self._lock = threading.Lock()

    def get(self, tasks: Iterable[str]) -> Release:
        import diningbench

        merged = Release(self.source)
        with self._lock:
            for task in tasks:
                if task not in self._cache:
                    self._cache[task] = (diningbench.fingerprint(task, self.source),
                                         ReleaseRows(diningbench.load(task, self.source, decode_images=False)))
                merged.fingerprints[task], merged.rows[task] = self._cache[task]
        return merged


# ---------------------------------------------------------------- verification
@dataclass
class TaskCheck:
    task: str
    items: int  # distinct items answered (epoch 0, no rotation)
    release_items: int
    claimed: float | None  # the headline from the submitted scores.jsonl (or metrics.json)
    claimed_metrics: float | None  # the headline metrics.json states
    rescored: float | None
    differing: int  # items whose claimed score differs from the re-scored one
    verified: bool  # False: VQA with no judge here

    @property
    def mismatch(self) -> bool:
        return self.verified and (bool(self.differing) or any(
            c is not None and (self.rescored is None or abs(c - self.rescored) > TOLERANCE)
            for c in (self.claimed, self.claimed_metrics)))

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "items": self.items, "release_items": self.release_items,
                "claimed": self.claimed, "claimed_metrics": self.claimed_metrics, "rescored": self.rescored,
                "differing_items": self.differing, "verified": self.verified, "mismatch": self.mismatch}


def _settings_of(info: dict[str, Any]) -> Any:
    from eval.settings import RunSettings, UsageError

    settings = info.get("settings")
    if not isinstance(settings, dict):
        raise SubmissionError("run.json has no settings")
    try:
        run_settings = RunSettings.from_saved(settings)
        check_model_name(str(run_settings.model))
        # An imported run (`python -m eval import`) names its model as its framework did, not as a
        # backend spec; the judge is the operator's. Every other setting must be one a run can have.
        dataclasses.replace(run_settings, model="baseline:zero", judge=None).validate()
    except GuardError:
        raise SubmissionError("run.json settings: the model name must be letters, digits and . _ : / @ + - "
                              "(at most 128)") from None
    except (TypeError, ValueError, UsageError) as exc:
        raise SubmissionError(f"run.json settings: {' '.join(str(exc).split())[:200]}") from None
    if (why := name_problem(str(run_settings.model))) is not None:  # kept as given: it must not imitate another
        raise SubmissionError(f"run.json settings: the model name {str(run_settings.model)[:80]!r} is refused: {why}")
    return run_settings


def _predictions(source: bytes | Path, settings: Any, specs: Mapping[str, Task], release: Release, most: int,
                 deadline: _Deadline) -> list[Any]:
    """The run's answers, read as a stream: each line's task, id, epoch and rotation checked as it
    arrives (an item this release does not have, or an epoch past the run's own, stops the read there)."""
    from eval.store import key_of
    from eval.types import Prediction

    latest: dict[Any, Any] = {}
    for number, row in iter_jsonl(source, "predictions.jsonl", most):
        where = f"predictions.jsonl line {number}"
        if not isinstance(row.get("task"), str) or row["task"] not in specs or not isinstance(row.get("id"), str):
            raise SubmissionError(f"{where}: needs a task of run.json's ({', '.join(specs)}) and a string id")
        if row["id"] not in release.rows[row["task"]]:
            raise SubmissionError(f"refused: {where}: item {row['task']}/{row['id'][:60]} is not in this release "
                                  f"(tampered, or another release)")
        for name in ("raw", "error", "request_hash"):
            if row.get(name) is not None and not isinstance(row[name], str):
                raise SubmissionError(f"{where}: {name} must be text")
        if len(row.get("raw") or "") > MAX_RAW_CHARS:
            raise SubmissionError(f"{where}: the raw answer is longer than {MAX_RAW_CHARS} characters")
        rotations = ROTATIONS if settings.circular and specs[row["task"]].has_options else 1
        for name, bound in (("epoch", settings.epochs), ("rotation", rotations)):
            value = row.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < bound:
                raise SubmissionError(f"{where}: {name} {str(value)[:12]} is outside the run's own settings "
                                      f"(0 to {bound - 1})")
        if number % 256 == 0:
            deadline.check()
        prediction = Prediction.from_json(row)
        latest[key_of(prediction)] = prediction
    if not latest:
        raise SubmissionError("predictions.jsonl holds no answers")
    return list(latest.values())


class _Deadline(float):
    """When a submission's time budget ends (time.monotonic()), and how long the budget was."""

    budget: float = SCORE_SECONDS

    @classmethod
    def after(cls, seconds: float) -> _Deadline:
        deadline = cls(time.monotonic() + seconds)
        deadline.budget = seconds
        return deadline

    def check(self) -> None:
        if time.monotonic() > self:
            raise SubmissionError(f"refused: checking and re-scoring this run took over {self.budget:g} s of this "
                                  f"Space's time; submit fewer epochs or items")


def _check_release(info: dict[str, Any], tasks: list[str], release: Release) -> None:
    from eval.prompts import PROMPT_VERSION

    if info.get("prompt_version") != PROMPT_VERSION:
        raise SubmissionError(f"refused: the run used prompts {str(info.get('prompt_version'))[:40]!r}; "
                              f"this Space scores {PROMPT_VERSION!r} (run it again with this version)")
    data = info.get("dataset") if isinstance(info.get("dataset"), dict) else {}
    claimed = data.get("fingerprints") if isinstance(data.get("fingerprints"), dict) else {}
    identity = info.get("identity") if isinstance(info.get("identity"), dict) else {}
    for task in tasks:
        mine, theirs = release.fingerprints[task], claimed.get(task)
        if theirs is None:
            raise SubmissionError(f"refused: run.json names no dataset fingerprint for {task}")
        if theirs != mine or (isinstance(identity.get("dataset"), dict) and identity["dataset"].get(task) != mine):
            raise SubmissionError(f"refused: foreign release: the {task} answers were made on data "
                                  f"{str(theirs)[:40]!r}, this Space's release is {mine!r}")


def _check_hashes(predictions: list[Any], specs: Mapping[str, Task], settings: Any, release: Release,
                  deadline: _Deadline) -> None:
    """Every request hash must be the one this release's prompt and views give with the run's settings
    (within the submission's time budget: building each request decodes and resizes its photos). Each
    answer's item is one of the release's: `_predictions` refused any other as it read it."""
    from eval.images import ImageError
    from eval.requests import build_request

    wrong = []
    for p in predictions:
        deadline.check()
        try:
            expected = build_request(specs[p.task], release.rows[p.task][p.id], settings, p.epoch, p.rotation).request_hash
        except (ImageError, ValueError, TypeError, KeyError, IndexError):
            expected = None
        if p.request_hash != expected:
            wrong.append(f"{p.task}/{p.id}")
    if wrong:
        raise SubmissionError(f"refused: tampered: {len(wrong)} of {len(predictions)} request hashes do not match "
                              f"this release's prompt and images with run.json's settings (first: {wrong[0]})")


def _claimed(spec: Task, scores: list[dict[str, Any]]) -> float | None:
    from eval.numbers import headline

    rows = [r for r in scores if r.get("task") == spec.name]
    if spec.judged and not any(isinstance(r.get("correct"), bool) for r in rows):
        return None  # a run made without a judge claims no VQA figure: "not claimed", not 0%
    try:
        return headline(spec, rows) if rows else None
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
        return None


def _claimed_metrics(task: str, metrics: Any) -> float | None:
    entry = metrics.get(task) if isinstance(metrics, dict) else None
    value = entry.get(figure_of(task)) if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _item_outcome(row: dict[str, Any]) -> Any:
    if figure_of(row.get("task")) == "avg_mape":
        ape = row.get("ape")
        return tuple(sorted((k, None if v is None else round(float(v), 6)) for k, v in ape.items())) \
            if isinstance(ape, dict) else None
    return row.get("correct")


def _item_key(row: dict[str, Any]) -> tuple[str, Any]:
    """(id, epoch) of a scores line; a claimed line's epoch that is not a whole number is kept as text."""
    epoch = row.get("epoch") or 0
    return str(row.get("id")), epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else str(epoch)[:40]


def _differing(task: str, claimed: list[dict[str, Any]], rescored: list[dict[str, Any]]) -> int:
    mine = {_item_key(r): _item_outcome(r) for r in rescored if r["task"] == task}
    theirs: dict[tuple[str, Any], Any] = {}
    for r in claimed:
        if r.get("task") == task:
            try:
                theirs[_item_key(r)] = _item_outcome(r)
            except (TypeError, ValueError, AttributeError):
                theirs[_item_key(r)] = "unreadable"
    return sum(theirs.get(key, "missing") != outcome for key, outcome in mine.items()) if theirs else 0


@dataclass
class Verification:
    """What the Space found: the run's identity, each task's claimed and re-scored figures."""

    model: str
    label: str
    lang: str
    key: str
    source: str
    checks: list[TaskCheck]
    partial: bool
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # what a person should look at before trusting the row

    @property
    def mismatch(self) -> bool:
        return any(c.mismatch for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"status": VERIFIED, "model": self.model, "label": self.label, "lang": self.lang, "key": self.key,
                "source": self.source, "partial": self.partial, "mismatch": self.mismatch, "notes": self.notes,
                "flags": self.flags, "tasks": [c.to_json() for c in self.checks]}


MAX_MAPE = 100.0  # 10,000 %: a self-reported MAPE past it is no figure
IDENTICAL_SHARE = 0.5  # of a task's answers equal to the reference, character for character: flagged


def review_flags(checks: list[TaskCheck], rescored: list[dict[str, Any]],
                 meta: Mapping[str, Any]) -> list[str]:
    """Why a verified row needs a person's look: a perfect re-scored figure, or answers that repeat the
    public references (re-scoring cannot tell a run written from the references from a model)."""
    flags = [f"{c.task}: a perfect re-scored figure" for c in checks if c.verified and c.rescored is not None
             and c.items and c.rescored == (0.0 if figure_of(c.task) == "avg_mape" else 1.0)]
    by_task: dict[str, list[dict[str, Any]]] = {}
    for row in rescored:
        by_task.setdefault(row["task"], []).append(row)
    for task, rows in by_task.items():
        same = sum(_repeats_reference(task, r) for r in rows)
        if rows and same / len(rows) >= IDENTICAL_SHARE and figure_of(task) != "accuracy":
            flags.append(f"{task}: {same} of {len(rows)} answers equal the reference exactly")
    return flags


def _repeats_reference(task: str, row: dict[str, Any]) -> bool:
    """An answer that is the reference itself: every nutrient to the digit, or the reference text."""
    if figure_of(task) == "avg_mape":
        ape = row.get("ape")
        return isinstance(ape, dict) and bool(ape) and all(v == 0 for v in ape.values())
    raw, reference = row.get("raw"), row.get("reference")
    return isinstance(raw, str) and isinstance(reference, str) and " ".join(raw.split()) == " ".join(reference.split())


def _flat(value: Any) -> dict[str, str] | None:
    """A visitor's descriptive mapping (backend, packages) kept as at most 32 short text values."""
    if not isinstance(value, dict):
        return None
    return {str(k)[:64]: str(v)[:200] for k, v in list(value.items())[:32] if v is not None}


def submission_key(model: str, identity: dict[str, Any]) -> str:
    """One folder per model + settings: a readable model part and a hash of the settings."""
    digest = hashlib.sha256(json.dumps({"model": model, **identity}, sort_keys=True, default=str).encode())
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '-', model).strip('-')[:60]}-{digest.hexdigest()[:10]}"


def _run_tasks(info: dict[str, Any]) -> dict[str, Task]:
    """run.json's tasks as their objects, in the registry's order (where the run's task names become tasks)."""
    found = info.get("tasks")
    if not isinstance(found, list) or not found or not all(is_task(t) for t in found):
        raise SubmissionError(f"run.json: `tasks` must list the run's tasks ({', '.join(names())})")
    return {task.name: task for task in all_tasks() if task.name in found}


def verify(files: Mapping[str, Path | bytes], release_for: Callable[[list[str]], Release], work: Path, *,
           judge: str | None, judge_cache: Path | None, source: str,
           budget: float = SCORE_SECONDS, max_epochs: int = MAX_EPOCHS) -> tuple[Verification, Path]:
    """Check and re-score a run folder's files in `work`; the re-scored run folder is `work`/run. Bounded by
    what the run claims and by the release: its epochs (at most `max_epochs`), its tasks, the release's items;
    predictions and claimed scores are read line by line, each id checked as it arrives; the whole check and
    re-scoring within `budget` seconds, else refused in one line."""
    from eval.report.runs import RunData
    from eval.runinfo import build_run_json, write_run_json
    from eval.scoring import SCORES, ScoringError, score_run
    from eval.settings import IDENTITY_FIELDS
    from eval.store import PREDICTIONS

    deadline = _Deadline.after(budget)
    info = parse_json(files["run.json"], "run.json")
    if not isinstance(info, dict):
        raise SubmissionError("run.json: not a JSON object")
    settings = _settings_of(info)
    if settings.model.startswith("human:"):
        raise SubmissionError("refused: people's runs come from the Take the test tab, not from submissions")
    if settings.epochs > max_epochs:
        raise SubmissionError(f"refused: run.json asks {settings.epochs} epochs; this Space re-scores at most "
                              f"{max_epochs}")
    specs = _run_tasks(info)
    tasks = list(specs)
    try:
        release = release_for(tasks)
    except (ValueError, OSError) as exc:
        raise SubmissionError(f"this Space cannot load its release: {' '.join(str(exc).split())[:160]}") from None
    _check_release(info, tasks, release)
    most = sum(len(release.rows[t]) * settings.epochs * (ROTATIONS if settings.circular and
                                                          specs[t].has_options else 1) for t in tasks)
    predictions = _predictions(files["predictions.jsonl"], settings, specs, release, most, deadline)
    tasks = [t for t in tasks if any(p.task == t for p in predictions)]
    _check_hashes(predictions, specs, settings, release, deadline)
    claimed_scores = [row for _, row in iter_jsonl(files["scores.jsonl"], "scores.jsonl", most)] \
        if "scores.jsonl" in files else []
    claimed_metrics = parse_json(files["metrics.json"], "metrics.json") if "metrics.json" in files else {}

    # The run folder as the Space keeps it: the submitted settings and answers, nothing the visitor
    # could use to steer scoring (no judge of theirs, no data source of theirs).
    run_dir = work / "run"
    run_dir.mkdir(parents=True)
    identity = {name: getattr(settings, name) for name in IDENTITY_FIELDS}
    public = {**settings.to_json(), "out": None, "judge": judge, "judge_cache": None, "engine_extra": {},
              "dataset": release.source,
              "concurrency": min(threads_for(settings.concurrency), 4)}  # re-judging here: 4 at most, auto or not
    # The one run.json builder; the prompt version is this Space's, which _check_release required.
    kept = build_run_json(settings=public, tasks=tasks, backend=_flat(info.get("backend")) or {},
                          dataset_source=release.source, fingerprints=release.fingerprints, judge=None,
                          packages=_flat(info.get("packages")) or {},
                          commit=str(info.get("git_commit"))[:60] if info.get("git_commit") else None)
    write_run_json(run_dir, kept)
    with (run_dir / PREDICTIONS).open("w", encoding="utf-8") as fh:
        for p in predictions:
            fh.write(json.dumps(p.to_json(), ensure_ascii=False) + "\n")
    meta = {task: release.rows[task].meta() for task in tasks}
    deadline.check()
    try:
        metrics = score_run(run_dir, judge=judge, rows=meta, judge_cache=judge_cache)
    except ScoringError as exc:
        raise SubmissionError(f"re-scoring failed: {exc}") from None
    deadline.check()
    rescored = [row for _, row in iter_jsonl_objects(run_dir / SCORES)]  # written just now by score_run
    checks = []
    for task in tasks:
        ids = {p.id for p in predictions if p.task == task and not p.epoch and not p.rotation}
        verified = not (specs[task].judged and not metrics.get(task, {}).get("scored", False))
        rescored_task = [r for r in rescored if r["task"] == task]
        checks.append(TaskCheck(
            task=task, items=len(ids), release_items=len(release.rows[task]),
            claimed=_claimed(specs[task], claimed_scores), claimed_metrics=_claimed_metrics(task, claimed_metrics),
            rescored=_claimed(specs[task], rescored_task) if verified else None,
            differing=_differing(task, claimed_scores, rescored_task) if verified else 0, verified=verified))
    notes = ["VQA not verified: this Space has no judge configured, so VQA answers are kept unscored"] \
        if any(not c.verified for c in checks) else []
    partial = bool(settings.limit or settings.ids) or any(c.items < c.release_items for c in checks)
    return Verification(model=settings.model, label=RunData(run_dir, kept).label, lang=settings.lang,
                        key=submission_key(settings.model, identity), source=source, checks=checks,
                        partial=partial, notes=notes, flags=review_flags(checks, rescored, meta)), run_dir


# ---------------------------------------------------------------- self-reported (a model card)
def self_reported(card_text: str, dataset_id: str | None, repo_id: str) -> dict[str, Any]:
    """metrics.json-shaped figures from a model card's `model-index` results on `dataset_id`."""
    import yaml

    if not dataset_id:
        raise SubmissionError("this Space has no Hub dataset id (DININGBENCH_SPACE_DATASET_ID), so results "
                              "stated in a model card cannot be matched to it")
    if not card_text.startswith("---"):
        raise SubmissionError(f"{repo_id}: the model card has no metadata block, and the repo no run folder")
    try:
        header = yaml.safe_load(card_text.split("---", 2)[1])
    except (yaml.YAMLError, IndexError):
        raise SubmissionError(f"{repo_id}: the model card's metadata is not valid YAML") from None
    if not json_depth_within(header, MAX_JSON_DEPTH):
        raise SubmissionError(f"{repo_id}: the model card's metadata is nested too deeply")
    index = header.get("model-index") if isinstance(header, dict) else None
    figures: dict[str, dict[str, Any]] = {}
    name, lang = None, "zh"
    for model in index if isinstance(index, list) else []:
        for result in (model.get("results") or []) if isinstance(model, dict) else []:
            dataset = result.get("dataset") if isinstance(result, dict) else None
            if not isinstance(dataset, dict) or dataset.get("type") != dataset_id:
                continue
            task = dataset.get("config")
            if not is_task(task):
                continue
            args = dataset.get("args") if isinstance(dataset.get("args"), dict) else {}
            if args.get("partial"):
                continue  # a partial export is not a benchmark result
            lang = str(args.get("lang") or lang)[:8]
            name = str(model.get("name") or repo_id)[:128]
            if (why := name_problem(name)) is not None:  # one name must not pass for another on the board
                raise SubmissionError(f"{repo_id}: the model card's name {name[:80]!r} is refused: {why}")
            for metric in result.get("metrics") or []:
                if not isinstance(metric, dict) or not isinstance(metric.get("value"), int | float) \
                        or isinstance(metric.get("value"), bool):
                    continue
                kind, value = metric.get("type"), float(metric["value"]) / 100
                low, high = (0.0, 1.0) if kind == "accuracy" else (0.0, MAX_MAPE)
                if not (math.isfinite(value) and low <= value <= high):
                    raise SubmissionError(f"{repo_id}: the model card's {task} {str(kind)[:40]} of {metric['value']} % is "
                                          f"outside its range ({low * 100:g} to {high * 100:g} %): refused")
                if kind == "accuracy" and figure_of(task) == "accuracy":
                    figures.setdefault(task, {})["accuracy"] = value
                elif figure_of(task) == "avg_mape" and isinstance(kind, str) and kind.endswith("mape"):
                    figures.setdefault(task, {})[kind] = value
    if not figures:
        raise SubmissionError(f"{repo_id}: no run folder, and no model-index result with dataset.type "
                              f"{dataset_id!r} in its model card")
    return {"model": name or repo_id, "lang": lang, "metrics": figures}


# ---------------------------------------------------------------- the Hub (visitors' repos)
def fetch_from_hub(repo_id: str, repo_type: str, dest: Path, caps: Caps) -> tuple[str, Path | dict[str, Path] | str]:
    """A visitor's Hub repo: ("zip", path), ("files", run files) or ("card", README text). Read anonymously
    (token=False): a visitor must not reach what only the operator's token can see. Sizes come from the Hub's
    file metadata before any download."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    repo_id = (repo_id or "").strip()
    if not HUB_REPO.match(repo_id):
        raise SubmissionError("Hub repo: write it as owner/name")
    if repo_type not in ("model", "dataset"):
        raise SubmissionError("Hub repo type: model or dataset")
    try:
        info = HfApi().repo_info(repo_id, repo_type=repo_type, files_metadata=True, token=False)
        siblings = {s.rfilename: (s.size or 0) for s in (info.siblings or [])}

        def download(name: str, cap: int) -> Path:
            if siblings[name] > cap:
                raise SubmissionError(f"{repo_id}/{name} is {_mb(siblings[name])}; at most {_mb(cap)} is accepted")
            local = Path(hf_hub_download(repo_id, name, repo_type=repo_type, revision=info.sha, token=False,
                                         cache_dir=dest / "cache"))
            if local.stat().st_size > cap:
                raise SubmissionError(f"{repo_id}/{name} is larger than the Hub said")
            return local

        zips = sorted(n for n in siblings if n.endswith(".zip"))
        runs = sorted(n for n in siblings if PurePosixPath(n).name == "run.json")
        if len(runs) == 1:
            files, total = {}, 0
            for name in RUN_FILES:
                path = str(PurePosixPath(runs[0]).parent / name)
                if path in siblings:
                    total += siblings[path]
                    if total > caps.unpacked_bytes:
                        raise SubmissionError(f"{repo_id}: the run folder is over {_mb(caps.unpacked_bytes)}")
                    files[name] = download(path, caps.unpacked_bytes)
            if "predictions.jsonl" not in files:
                raise SubmissionError(f"{repo_id}: the run folder has no predictions.jsonl")
            return "files", files
        if len(runs) > 1:
            raise SubmissionError(f"{repo_id} holds {len(runs)} run folders; put one per repo, or submit a zip")
        if len(zips) == 1:
            return "zip", download(zips[0], caps.zip_bytes)
        if len(zips) > 1:
            raise SubmissionError(f"{repo_id} holds {len(zips)} zips; keep one run folder's zip there")
        if "README.md" in siblings and repo_type == "model":
            return "card", download("README.md", 1 << 20).read_text(encoding="utf-8", errors="replace")
    except SubmissionError:
        raise
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise SubmissionError(f"{repo_id}: the Hub answered {status or 'an error'} (a public {repo_type} repo?)") from None
    except (OSError, ValueError) as exc:
        raise SubmissionError(f"{repo_id}: cannot read it from the Hub ({type(exc).__name__})") from None
    raise SubmissionError(f"{repo_id}: no run folder (run.json + predictions.jsonl), no zip"
                          + (", no model card" if repo_type == "model" else ""))


# ---------------------------------------------------------------- keeping submissions
class Submissions:
    """`<results>/submissions/`: one folder per model + settings, history kept, pushed to the Hub."""

    def __init__(self, results_dir: Path, *, hub_repo: str | None = None) -> None:
        self.folder = Path(results_dir) / SUBMISSIONS_FOLDER
        self.hub_repo = hub_repo
        self._hub = HubFolder(self.folder, hub_repo, SUBMISSIONS_FOLDER, KEPT_FILES)
        self._lock = threading.Lock()

    def _keep(self, key: str, write: Callable[[Path], None], owner: dict[str, Any]) -> Path:
        """Write a submission's folder; the one it replaces moves to its history/ first. A row belongs to
        whoever first submitted it: another owner's submission of the same model and settings gets a
        row of its own (the key and a tag of its owner), never replaces it."""
        scheduler = self._hub.scheduler()
        with self._lock, self._hub.writing():
            target = self.folder / key
            if _owner_of(target) not in (None, owner):
                target = self.folder / f"{key}-{owner_tag(owner)}"
                if _owner_of(target) not in (None, owner):  # cannot happen short of a hash collision
                    raise SubmissionError("refused: this row belongs to another submitter")
            if (target / SUBMISSION_JSON).is_file():
                try:
                    old = json.loads((target / SUBMISSION_JSON).read_text(encoding="utf-8"))
                    stamp = str(old.get("submitted_at") or "earlier")
                except ValueError:
                    stamp = "earlier"
                earlier = len(list((target / HISTORY).iterdir())) if (target / HISTORY).is_dir() else 0
                past = target / HISTORY / f"{earlier + 1:03d}-{re.sub(r'[^0-9A-Za-z]+', '', stamp)}"
                past.mkdir(parents=True, exist_ok=True)
                for name in (SUBMISSION_JSON, "metrics.json", "run.json"):
                    if (target / name).is_file():
                        shutil.copy2(target / name, past / name)
                for path in target.iterdir():
                    if path.is_file():
                        path.unlink()
            target.mkdir(parents=True, exist_ok=True)
            write(target)
        if scheduler is not None:
            scheduler.trigger()  # submissions are rare (rate-limited): push now rather than in 5 minutes
        return target

    def keep_verified(self, verification: Verification, run_dir: Path, owner: dict[str, Any]) -> Path:
        from eval.report.report import write_run_report

        def write(target: Path) -> None:
            for name in RUN_FILES:
                if (run_dir / name).is_file():
                    shutil.copy2(run_dir / name, target / name)
            info = json.loads((target / "run.json").read_text(encoding="utf-8"))
            info["submission"] = {**verification.to_json(), "key": target.name, "owner": owner, "submitted_at": _now()}
            if (earlier := _latest_history(target)) is not None:  # the submitter sees what this replaced
                info["submission"]["replaced"] = earlier
            (target / "run.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            (target / SUBMISSION_JSON).write_text(json.dumps(info["submission"], indent=2, ensure_ascii=False) + "\n",
                                                  encoding="utf-8")
            write_run_report(target)

        return self._keep(verification.key, write, owner)

    def keep_self_reported(self, found: dict[str, Any], repo_id: str) -> Path:
        owner = {"kind": "hub-repo", "who": repo_id}  # a card only ever updates its own repo's row
        record = {"status": SELF_REPORTED, "model": found["model"], "lang": found["lang"],
                  "source": f"hub:{repo_id}", "submitted_at": _now(), "mismatch": False, "partial": False,
                  "owner": owner}
        key = submission_key(found["model"], {"lang": found["lang"], "self_reported": True, "repo": repo_id})

        def write(target: Path) -> None:
            (target / "metrics.json").write_text(json.dumps(found["metrics"], indent=2) + "\n", encoding="utf-8")
            info = {"model": found["model"], "settings": {"model": found["model"], "lang": found["lang"]},
                    "dataset": {"source": "self-reported"}, "submission": record}
            (target / "run.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            (target / SUBMISSION_JSON).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

        return self._keep(key, write, owner)


def _latest_history(target: Path) -> dict[str, Any] | None:
    """What the newest entry of a row's history held: when it was submitted, partial or not, each task's
    re-scored figure, and how many earlier versions the history keeps."""
    past = sorted((target / HISTORY).iterdir()) if (target / HISTORY).is_dir() else []
    if not past:
        return None
    try:
        old = json.loads((past[-1] / SUBMISSION_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"versions": len(past)}
    return {"submitted_at": old.get("submitted_at"), "partial": old.get("partial"), "versions": len(past),
            "tasks": {t["task"]: t.get("rescored") for t in old.get("tasks") or [] if isinstance(t, dict)}}


def owner_record(user: str | None, secret: str | None) -> tuple[dict[str, Any], str | None]:
    """(who owns a submission, as kept; a new secret to give back, or None). The signed-in Hugging Face
    user on a Space with sign-in; else the owner secret the visitor gives, or one made now (only its
    SHA-256 is kept: submission.json may be public)."""
    if user:
        return {"kind": "hf-user", "who": str(user)[:96]}, None
    fresh = None
    if not (secret or "").strip():
        secret = fresh = secrets.token_urlsafe(18)
    digest = hashlib.sha256(str(secret).strip().encode()).hexdigest()
    return {"kind": "secret", "sha256": digest}, fresh


def owner_tag(owner: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(owner, sort_keys=True).encode()).hexdigest()[:8]


def _owner_of(folder: Path) -> dict[str, Any] | None:
    """The owner recorded in a kept submission; None for no submission there; a row kept before rows
    had owners belongs to nobody who can prove it ({"kind": "unknown"})."""
    path = folder / SUBMISSION_JSON
    if not path.is_file():
        return None
    try:
        owner = json.loads(path.read_text(encoding="utf-8")).get("owner")
    except (ValueError, AttributeError, OSError):
        owner = None
    return owner if isinstance(owner, dict) else {"kind": "unknown"}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def submit(*, zip_path: Path | None, hub_repo: str | None, repo_type: str, store: Submissions,
           release_for: Callable[[list[str]], Release], caps: Caps, judge: str | None,
           dataset_id: str | None, user: str | None = None, secret: str | None = None,
           budget: float = SCORE_SECONDS) -> dict[str, Any]:
    """One submission end to end: fetch, open, verify, keep. Returns what was kept (submission.json),
    with `owner_secret` when one was made for this submitter (shown once, never kept)."""
    if bool(zip_path) == bool((hub_repo or "").strip()):
        raise SubmissionError("give either a zip of a run folder or a Hub repo id, not both and not neither")
    with tempfile.TemporaryDirectory(prefix="dining-submit-") as tmp:
        work, repo = Path(tmp), str(hub_repo).strip()
        if zip_path:
            kind, payload, source = "zip", Path(zip_path), "zip upload"
        else:
            kind, payload = fetch_from_hub(repo, repo_type, work, caps)
            source = f"hub:{repo}"
        fresh = None
        if kind == "card":
            folder = store.keep_self_reported(self_reported(str(payload), dataset_id, repo), repo)
        else:
            files = open_zip(payload, caps, work / "in") if kind == "zip" else payload  # type: ignore[arg-type]
            verification, run_dir = verify(files, release_for, work, judge=judge, source=source,  # type: ignore[arg-type]
                                           judge_cache=store.folder.parent / ".judge_cache" if judge else None,
                                           budget=budget)
            owner, fresh = owner_record(user, secret)
            folder = store.keep_verified(verification, run_dir, owner)
        record = json.loads((folder / SUBMISSION_JSON).read_text(encoding="utf-8"))
        return {**record, "owner_secret": fresh} if fresh else record


# ---------------------------------------------------------------- read back at start
def restore(repo_id: str, folder: str, results_dir: Path, *, patterns: Iterable[str]) -> int:
    """Copy `<folder>/...` files matching `patterns` from the operator's Hub dataset into results/. Returns
    how many files came back; a one-line OSError when the Hub cannot be read."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    try:
        local = snapshot_download(repo_id, repo_type="dataset", allow_patterns=[f"{folder}/{p}" for p in patterns],
                                  local_dir=Path(results_dir) / ".hub" / folder.replace("/", "_"))
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise OSError(f"cannot read {repo_id} from the Hub ({type(exc).__name__})") from None
    source = Path(local) / folder
    files = [path for path in source.rglob("*") if path.is_file()] if source.is_dir() else []
    for path in files:
        target = Path(results_dir) / folder / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return len(files)


def rescore_restored(folder: Path, *, judge: str | None) -> int:
    """Score the restored run folders that came back without scores.jsonl (people's runs push only
    run.json and predictions.jsonl); returns how many were scored. A folder that cannot be scored is
    skipped, never fatal."""
    from eval.report.report import write_run_report
    from eval.scoring import ScoringError, score_run

    scored = 0
    for run_dir in sorted(p.parent for p in Path(folder).glob("*/predictions.jsonl")):
        if (run_dir / "scores.jsonl").is_file():
            continue
        try:
            info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
            judged = any(is_judged(t) for t in (info.get("tasks") or []) if isinstance(t, str))
            score_run(run_dir, judge=judge if judged else None)
            write_run_report(run_dir)
            scored += 1
        except (ScoringError, OSError, ValueError):
            continue
    return scored


def restore_results(settings: Any) -> list[str]:
    """At start: people's runs and submissions the operator's Hub datasets keep, back under results/. People's
    runs come back as run.json + predictions.jsonl and are scored again here; submissions come back with the
    figures this Space computed. Returns one line per repo for the log; a Hub that cannot be read is a
    warning, never a Space that does not start."""
    from .human import HUMANS_FOLDER

    lines = []
    jobs = [(settings.human_repo, HUMANS_FOLDER, ["*/run.json", "*/predictions.jsonl"], "people's runs"),
            (settings.submit_repo, SUBMISSIONS_FOLDER, KEPT_FILES, "submissions")]
    for repo, folder, patterns, what in jobs:
        if not repo:
            continue
        try:
            count = restore(repo, folder, settings.results_dir, patterns=patterns)
        except OSError as exc:
            lines.append(f"warning: {what} not restored: {exc}")
            continue
        scored = rescore_restored(Path(settings.results_dir) / folder, judge=settings.judge)
        lines.append(f"restored {count} file(s) of {what} from {repo}" + (f", {scored} run(s) scored" if scored else ""))
    return lines
