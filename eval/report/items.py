"""One run's items, one by one: what `python -m eval view` and the Space's Runs tab show: `run_items`
lists a run folder's scored items with a status to filter on, `item_detail` shows one item whole."""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import diningbench
from eval import requests, tasks
from eval.images import ImageError
from eval.numbers import headline
from eval.report.runs import ReportError, RunData, file_signature, load_run, task_named
from eval.report.tables import read_differently
from eval.runinfo import recorded_judge
from eval.scoring import JUDGE_CACHE
from eval.settings import RunSettings
from eval.store import PREDICTIONS, Prediction, read_predictions
from eval.types import ImagePart, Row, RunInfo, ScoreRecord
from metrics.judge_accuracy.core import VerdictCache, build_judge_prompt

STATUSES = ("correct", "wrong", "unparsed", "truncated", "failed", "unscored", "scored")
MAX_SEARCH = 200  # characters of a search; a longer one is cut
SUMMARY_SETTINGS = ("dataset", "lang", "images", "image_order", "cot", "circular", "limit", "epochs", "max_tokens",
                    "reasoning_effort", "judge")

# A viewer asks about one run many times (list, filter, page, next item): what was read from its files
# is kept for the last few runs and read again only when one of the files changes (its size or time).
MAX_CACHED_RUNS = 4
MAX_CACHED_DATASETS = 6
_WATCHED = ("run.json", "scores.jsonl", PREDICTIONS)


@dataclass
class _Entry:
    """One run as read: its data, the problems met, and (once asked, by `_once`) its predictions and search
    texts with the problems met reading them."""

    run: RunData
    problems: list[str]
    read: dict[str, tuple[Any, list[str]]] = field(default_factory=dict)
    derived: dict[str, Any] = field(default_factory=dict)


class _LRU:
    """A small thread-safe LRU of values tagged with a signature (a changed signature is a miss)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, signature: Any) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0] != signature:
                return None
            self._items.move_to_end(key)
            return found[1]

    def put(self, key: Any, signature: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = (signature, value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


_RUNS = _LRU(MAX_CACHED_RUNS)
_DATASETS = _LRU(MAX_CACHED_DATASETS)


def _entry(run_dir: Path | str, problems: list[str] | None = None) -> _Entry:
    """The run folder as read, from the cache while its files are unchanged (ReportError as load_run, with
    the lines it met on the way added to `problems`)."""
    path = Path(run_dir)
    key, signature = str(path.resolve()), file_signature(*(path / name for name in _WATCHED))
    if (found := _RUNS.get(key, signature)) is None:
        met: list[str] = []
        try:
            found = _Entry(run=load_run(path, met), problems=met)
        except ReportError:
            if problems is not None:
                problems.extend(met)
            raise
        _RUNS.put(key, signature, found)
    return found


def _loaded(run_dir: Path | str, problems: list[str] | None) -> _Entry | RunData:
    """With `problems` (viewers), the cached run with its problems added there; without, read anew so
    that a malformed line raises as `load_run` does."""
    if problems is None:
        return load_run(run_dir)
    entry = _entry(run_dir, problems)
    problems.extend(entry.problems)
    return entry


def derived(run_dir: Path | str, name: str, build: Callable[[], Any]) -> Any:
    """`build()`, kept with the cached run under `name` until the run's files change (what a viewer works
    out from a whole run: its table rows, its summary). `build` must not depend on anything else."""
    entry = _entry(run_dir)
    with _DERIVING:
        if name not in entry.derived:
            entry.derived[name] = build()
        return entry.derived[name]


_DERIVING = threading.Lock()


def note_problems(run_dir: Path | str, problems: list[str]) -> None:
    """Add the lines of the run's files that were left out when it was read (`scores.jsonl:N: why`)."""
    _loaded(run_dir, problems)


def _run_of(found: _Entry | RunData) -> RunData:
    return found.run if isinstance(found, _Entry) else found


def _once(found: _Entry | RunData, name: str, read: Callable[[list[str] | None], Any], problems: list[str] | None
          ) -> Any:
    """`read(problems)` for a run read anew; for a cached run, read once under `name` and kept with the
    problems met, which are added to `problems` at each ask."""
    if not isinstance(found, _Entry):
        return read(problems)
    if name not in found.read:
        met: list[str] = []
        found.read[name] = (read(met), met)
    value, met = found.read[name]
    if problems is not None:
        problems.extend(met)
    return value


def _predictions(run_dir: Path | str, found: _Entry | RunData, problems: list[str] | None
                 ) -> dict[tuple[str, str, int, int], Prediction]:
    return _once(found, "predictions", lambda met: read_predictions(Path(run_dir) / PREDICTIONS, met), problems)


def item_facts(run_dir: Path | str, problems: list[str] | None = None) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Per (task, id, epoch): the answer's `latency_s`, `attempts` and output `tokens` (None when not kept),
    from predictions.jsonl (the first rotation of a circular run)."""
    found = _loaded(run_dir, problems if problems is not None else [])
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for (task, item_id, epoch, rotation), p in _predictions(run_dir, found, problems).items():
        if rotation == 0:
            tokens = p.usage.get("completion_tokens") if isinstance(p.usage, dict) else None
            out[(task, item_id, epoch)] = {"latency_s": p.latency_s, "attempts": p.attempts, "tokens": tokens}
    return out


def status_of(row: ScoreRecord, task: tasks.Task | None) -> str:
    """What happened to one scored item of `task` (None: a task no module registered), in the words the
    filters use.

    >>> from eval.tasks.vqa import TASK as vqa
    >>> status_of({"task": "vqa", "error": None, "parsed": None, "correct": False}, vqa)
    'unparsed'
    >>> status_of({"task": "vqa", "error": None, "parsed": "No.", "correct": None}, vqa)
    'unscored'
    """
    if row.get("error"):
        return "failed"
    if row.get("truncated"):
        return "truncated"
    if row.get("parsed") is None:
        return "unparsed"
    if task is not None and task.measure == "ape":
        return "scored"
    if row.get("correct") is None:
        return "unscored"
    return "correct" if row["correct"] else "wrong"


def status_matches(wanted: str, status: str) -> bool:
    """Whether an item of `status` passes the filter `wanted`: `wrong` also takes unparsed, truncated and
    failed items, since each of them counts as wrong."""
    return status == wanted or wanted == "wrong" and status in ("unparsed", "truncated", "failed")


def run_items(run_dir: Path | str, *, status: str | None = None, task: str | None = None,
              cuisine: str | None = None, search: str | None = None,
              problems: list[str] | None = None) -> list[dict[str, Any]]:
    """The run's scored items (scores.jsonl lines plus `status`; where the run's protocol's figure leads,
    `protocol` (its title) and `protocol_reading`, the item as that protocol reads it), filtered (`status` as
    `status_matches` takes it). `search` keeps the items whose raw answer, prompt, parsed answer, reference or
    error holds it (any case). With `problems`, bad lines are left out and named there (`scores.jsonl:N: why`)
    instead of stopping the listing."""
    loaded = _loaded(run_dir, problems)
    run = _run_of(loaded)
    needle = " ".join((search or "").split())[:MAX_SEARCH].casefold()
    found = None
    if needle:
        texts = _once(loaded, "texts", lambda met: _search_texts(run_dir, loaded, met), problems)
        found = {key for key, text in texts.items() if needle in text}
    out = []
    registered = {spec.name: spec for spec, _ in run.scored_tasks()}
    for task_name, rows in run.scores.items():
        if task is not None and task_name != task:
            continue
        spec = registered.get(task_name)  # None: a task no module registered, its items listed as they are
        led = spec if spec is not None and _protocol_headline(run, spec) is not None else None
        for row in rows:
            state = status_of(row, spec)
            item = {**row, "status": state}
            if led is not None:  # the run's protocol's own reading of the answer, beside ours
                read = run.protocol.read_rows(led, [row])
                item.update(protocol=run.protocol.title, protocol_reading=read[0] if read else None)
            if (cuisine is None or row.get("cuisine") == cuisine) and (
                    status is None or status_matches(status, state)) and (
                    found is None or (task_name, str(row["id"])) in found):
                out.append(item)
    return out


def _search_texts(run_dir: Path | str, loaded: _Entry | RunData, problems: list[str] | None
                  ) -> dict[tuple[str, str], str]:
    """Each item's searchable text, spaces folded and casefolded: raw answers, prompt, error, parsed,
    reference. Prompts are rebuilt as text from run.json's settings and the dataset the run names; when that
    cannot be done the other fields are still searched."""
    run = _run_of(loaded)
    raws: dict[tuple[str, str], str] = {}
    for (task, item_id, _epoch, _rotation), prediction in _predictions(run_dir, loaded, problems).items():
        raws[(task, item_id)] = raws.get((task, item_id), "") + "\n" + (prediction.raw or "")
    prompts = _prompt_texts(run, problems)
    out: dict[tuple[str, str], str] = {}
    for task, rows in run.scores.items():
        for row in rows:
            key = (task, str(row["id"]))
            fields = [raws.get(key, ""), prompts.get(key, ""), row.get("error")]
            fields += [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                       for v in (row.get("parsed"), row.get("reference")) if v is not None]
            text = "\n".join(" ".join(str(f).split()).casefold() for f in fields if f)
            out[key] = out[key] + "\n" + text if key in out else text
    return out


def _prompt_texts(run: RunData, problems: list[str] | None) -> dict[tuple[str, str], str]:
    """Each scored item's prompt text (no views), rebuilt from the run's settings."""
    try:
        settings = _settings(run.info)
    except (TypeError, ValueError):
        return {}
    out = {}
    for spec, rows in run.scored_tasks():
        wanted = {str(r["id"]) for r in rows}
        try:
            release, _ = _dataset(spec, settings.dataset, settings.lang)
        except ReportError as exc:
            if problems is not None:
                problems.append(f"prompts not searched: {str(exc)[:160]}")
            continue
        for row in release.rows:  # metadata: the prompt needs no image
            if str(row["id"]) in wanted:
                try:
                    out[(spec.name, str(row["id"]))] = run.protocol.prompt_text(spec, row, settings)
                except (ValueError, TypeError, KeyError):
                    continue
    return out


def run_summary(run_dir: Path | str, problems: list[str] | None = None) -> dict[str, Any]:
    """What a run is at a glance: its model and settings, and per task the number of items, the headline
    figure (accuracy, or Average MAPE for nutrition, as fractions; None when nothing was answered or scored)
    and how many items are correct / wrong / unparsed / truncated / failed / unscored. `wrong` counts only
    answers parsed and judged wrong, so the counts add up to the items (with `scored` for nutrition)."""
    return derived(run_dir, "run_summary", lambda: _summary(_run_of(_loaded(run_dir, problems))))


def _summary(run: RunData) -> dict[str, Any]:
    found = run.info.get("settings")
    settings: dict[str, Any] = found if isinstance(found, dict) else {}
    shown = {k: settings.get(k) for k in SUMMARY_SETTINGS if settings.get(k) not in (None, "", False)}
    out: dict[str, Any] = {"model": run.model, "settings": shown, "tasks": {}}
    for spec, rows in run.scored_tasks():
        counts = Counter(status_of(row, spec) for row in rows)
        out["tasks"][spec.name] = {"n": len(rows), "headline": headline(spec, rows),
                                   "counts": {k: counts[k] for k in STATUSES if counts[k]}}
        if (led := _protocol_headline(run, spec)) is not None:
            out["tasks"][spec.name]["protocol"] = led
            out["asked"] = run.question()
    return out


def _protocol_headline(run: RunData, spec: tasks.Task) -> dict[str, Any] | None:
    """The figure the run's protocol reports first for a task when it is not ours (the authors' on their
    release): its name, value and interval, the items it read, how many answers ours reads differently and
    the release it was read on (the fingerprint run.json recorded); None: ours is the headline."""
    try:
        found = run.headline(spec)
    except (TypeError, ValueError):  # an interval that is no pair of numbers (a folder from elsewhere)
        found = None
    if found is None or not (found[1] is None or isinstance(found[1], int | float) and not isinstance(found[1], bool)):
        return None
    entry = run.entry(spec.name)
    total = run.protocol.counted(spec, entry)
    return {"title": run.protocol.title, "name": found[0], "value": found[1], "interval": found[2],
            "items": total if isinstance(total, int) and not isinstance(total, bool) else None,
            "differ": read_differently(entry),
            "resampled": str(entry.get("official_resampled") or "items"),
            "fingerprint": run.fingerprints.get(spec.name), "revision": run.revisions.get(spec.name)}


@dataclass
class ItemDetail:
    """Everything about one answered item."""

    task: str
    id: str
    status: str
    prompt: str
    prompt_verified: bool  # the rebuilt request hashes to the one the prediction kept
    views: list[ImagePart] = field(default_factory=list)
    raw: str | None = None
    parsed: Any = None
    reference: Any = None
    score: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    finish_reason: str | None = None
    judge_reply: str | None = None
    note: str | None = None


def _settings(info: RunInfo) -> RunSettings:
    saved = info.get("settings")
    return RunSettings.from_saved(saved if isinstance(saved, dict) else {})


def item_detail(run_dir: Path | str, task: str, item_id: str, *, epoch: int = 0,
                problems: list[str] | None = None) -> ItemDetail:
    """One item whole; a ReportError names what is missing. With `problems`, malformed lines of
    scores.jsonl and predictions.jsonl are left out and named there (`file:N`)."""
    run_dir, item_id = Path(run_dir), str(item_id)
    loaded = _loaded(run_dir, problems)
    run = _run_of(loaded)
    scored = next((r for r in run.scores.get(task, []) if str(r["id"]) == item_id and (r.get("epoch") or 0) == epoch),
                  None)
    if scored is None:
        raise ReportError(f"{run_dir.name}: no scored {task} item {item_id[:80]!r}")
    if (spec := task_named(task)) is None:
        raise ReportError(f"{run_dir.name}: {str(task)[:80]!r} is not a task a module registered")
    try:
        settings = _settings(run.info)
    except (TypeError, ValueError) as exc:
        raise ReportError(f"{run_dir.name}/run.json: its settings cannot be read ({str(exc)[:200]})") from None
    prediction = _predictions(run_dir, loaded, problems).get((task, item_id, epoch, 0))
    full = _row_with_images(spec, item_id, settings.dataset, settings.lang)
    detail = ItemDetail(task=task, id=item_id, status=status_of(scored, spec), prompt="", prompt_verified=False,
                        raw=prediction.raw if prediction else None, parsed=scored.get("parsed"),
                        reference=scored.get("reference"), error=scored.get("error"),
                        finish_reason=scored.get("finish_reason"),
                        score={k: scored.get(k) for k in ("correct", "ape", "abs_error", "verdict", "decided_by")
                               if scored.get(k) is not None})
    if full is None:
        detail.note = "the item is not in the dataset the run names; its prompt and views cannot be shown"
        return detail
    try:
        request = requests.build_request(spec, full, settings, epoch)
    except (ImageError, ValueError, TypeError) as exc:
        detail.note = f"cannot rebuild the request: {exc}"
        return detail
    detail.prompt = request.messages[0].text
    detail.views = list(request.messages[0].images)
    detail.prompt_verified = prediction is not None and prediction.request_hash == request.request_hash
    if not detail.prompt_verified:
        detail.note = ("rebuilt from run.json's settings, but it does not hash to the request the prediction kept "
                       "(the prompts or the data changed since the run)")
    judge = recorded_judge(run.info)[0]
    detail.judge_reply = run.protocol.judge_reply(scored) if spec.judged else None
    if spec.judged and judge and detail.raw is not None and detail.judge_reply is None and _cache_readable(run_dir):
        question = spec.question(full, settings.lang) or ""
        try:
            hit = VerdictCache(run_dir / JUDGE_CACHE, judge).get(build_judge_prompt(question, detail.reference, detail.raw))
        except ValueError:  # unreadable: the reply is not shown
            hit = None
        reply = hit.get("raw") if hit else None
        detail.judge_reply = reply if isinstance(reply, str) else None
    return detail


MAX_CACHE_SHOWN = 64 << 20  # a judge cache past this is not read for one item's reply (a run's is ~1 KB per item)


def _cache_readable(run_dir: Path) -> bool:
    """Whether the run folder's judge cache may be read for a reply: a regular file inside the folder (its
    folder not a link out of it either) and not past MAX_CACHE_SHOWN; the folder may come from anywhere."""
    try:
        return diningbench.file_problem(run_dir / JUDGE_CACHE / "verdicts.jsonl", run_dir,
                                        max_bytes=MAX_CACHE_SHOWN) is None
    except OSError:
        return False


def _dataset(task: tasks.Task, source: str | None, lang: str) -> tuple[Any, dict[str, int]]:
    """The task's release as the harness reads it (`diningbench.read_release`: our Parquet or the authors'
    layout, in the run's language; images read per row) and each id's position, kept for the last few
    sources."""
    key = (task.source_config, source, lang)
    if (found := _DATASETS.get(key, None)) is None:
        try:
            release = diningbench.read_release(key[0], source, lang=lang)
        except (ValueError, OSError) as exc:
            raise ReportError(f"cannot load {task} from {source or 'the embedded sample'}: {exc}") from None
        found = (release, {str(row["id"]): n for n, row in enumerate(release.rows)})
        _DATASETS.put(key, None, found)
    return found


def _row_with_images(task: tasks.Task, item_id: str, source: str | None, lang: str) -> Row | None:
    """The item's dataset row with its stored image bytes (as the run read it), or None when the release
    lacks it."""
    release, position = _dataset(task, source, lang)
    return next(iter(release.iter_rows([position[item_id]])), None) if item_id in position else None
