"""The Leaderboard table: the paper's reported figures, the runs under results/, and people."""

from __future__ import annotations

import csv
import functools
import html
import json
import math
import re
import urllib.parse
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

import pandas as pd

from diningbench import (
    CONFIGS,
    MAX_JSON_DEPTH,
    PUBLISHED_ROWS,
    SAMPLE_DIR,
    iter_jsonl_objects,
    read_json_file,
)
from eval import tasks
from eval.backends import traits
from eval.numbers import component, headline, headline_ci, score_nutrition_rows
from eval.protocols import Protocol
from eval.report.runs import RunData, file_signature
from eval.report.tables import MISSING, SMALL_MARK, SMALL_SAMPLE
from eval.settings import IDENTITY_FIELDS, N_BOOT
from eval.specs import BACKENDS
from eval.store import RUN_LINE_BYTES
from eval.tasks import Task

# One short name per task, used in headers, the Items column and the Take-the-test tab alike.
TASK_SHORT = {t.name: t.short for t in tasks.all_tasks()}
# The short name of each component of a task measured by percentage errors (its MAPE column).
COMPONENT_SHORT = {"calories": "kcal", "protein": "Prot", "carbohydrates": "Carb", "fat": "Fat"}


def headline_column(task: Task) -> str:
    """The column of a task's headline: `Cls acc %`, or `Avg MAPE %` for a task measured by errors."""
    return "Avg MAPE %" if task.measure == "ape" else f"{task.short} acc %"


def interval_column(task: Task) -> str:
    return "MAPE 95% CI" if task.measure == "ape" else f"{task.short} 95% CI"


def component_columns(task: Task) -> dict[str, str]:
    """Component -> its MAPE column (tasks measured by percentage errors; none otherwise)."""
    return {c: f"{COMPONENT_SHORT.get(c, c)} MAPE %" for c in task.components}


# Table 2's error columns besides MAPE (tasks measured by percentage errors): the means of the four
# nutrients' MAE and RMSE, in their mixed units (kcal and g), as the paper averages them.
ERROR_COLUMNS = {"avg_mae": "Avg MAE", "avg_rmse": "Avg RMSE"}


def error_columns(task: Task) -> dict[str, str]:
    """Table 2's figure -> its column, for a task measured by percentage errors (none otherwise)."""
    return dict(ERROR_COLUMNS) if task.measure == "ape" else {}


def task_columns(task: Task) -> tuple[str, ...]:
    """The figure columns a task fills (its headline first); a row without any has no figure for it."""
    return (headline_column(task), *component_columns(task).values(), *error_columns(task).values())


COLUMNS = ["#", "Model", "Data", "Lang", "Status", "Protocol",
           *(c for t in tasks.all_tasks() for c in (headline_column(t), interval_column(t), *task_columns(t)[1:])),
           "Items", "Weights", "Size (B)", "Group", "Run", "Source"]
OFFICIAL = "official"  # the Protocol of figures their scripts give (the paper's, and runs on their release)
# What each header means, shown on hover (the `title` attribute) where the header is abbreviated.
TITLES = {
    "#": "Rank by the chosen metric within the row's group, as a range when the 95% intervals do not settle "
         "the order (2–4: between 2nd and 4th); groups that are not comparable are not ranked",
    "Data": "What the figures were measured on: paper (reported, not reproduced), full release, "
            "synthetic (the embedded sample, in either layout) or partial (a subset of items); hover for the "
            "release and its fingerprints",
    "Lang": "Prompt language",
    "Protocol": "official: the authors' scoring (their scripts' figures, as the paper reports them; a run on their "
                "release); ours: this project's strict parsers. Rows are ranked only against rows of the same protocol",
    "Avg MAE": "Nutrition: mean of the four nutrients' mean absolute errors (kcal and g, as the paper averages them), "
               "lower is better",
    "Avg RMSE": "Nutrition: mean of the four nutrients' root mean squared errors, lower is better",
    "Cls acc %": "Classification accuracy (%), higher is better",
    "Avg MAPE %": "Nutrition: average of the four nutrients' mean absolute percentage errors (%), lower is better",
    "kcal MAPE %": "Calories MAPE (%)", "Prot MAPE %": "Protein MAPE (%)",
    "Carb MAPE %": "Carbohydrates MAPE (%)", "Fat MAPE %": "Fat MAPE (%)",
    "VQA acc %": "VQA accuracy as judged (%), higher is better",
    "Items": "Items scored per task",
    "Status": "How far to trust the figures: verified (a submission re-scored here from its raw answers), "
              "self-reported (a model card's model-index), local run (the operator's results/), reported (paper) "
              "or people",
    "Weights": "open or closed weights, when known",
    "Size (B)": "Parameters in billions, when the model's name says",
    "Group": "Rows are ranked only against comparable rows: the same data and prompt language",
    "Run": "The run folder under results/; the Model cell links to it in the Runs tab",
    "Source": "Where the row comes from: the paper, a run folder under results/, or people who took the test",
}
# The interval column of each headline metric (shown with it as `24.45 [20.10, 28.80]`).
INTERVALS = {headline_column(t): interval_column(t) for t in tasks.all_tasks()}
# Metrics one may rank by, and whether higher is better (headlines first, then components).
RANKABLE = {**{headline_column(t): not t.lower_is_better for t in tasks.all_tasks()},
            **{c: False for t in tasks.all_tasks() for c in component_columns(t).values()},
            **{c: False for t in tasks.all_tasks() for c in error_columns(t).values()}}
DEFAULT_RANK = headline_column(next(tasks.all_tasks()))
REPORTED = "reported (paper)"
HUMAN_GROUPS = ("layperson", "cook", "dietitian")
HUMAN_PREFIX = "human:"


def _figure(value: Any, scale: float = 1) -> float | None:
    """A figure (an error in kcal and g) rounded to two decimals, after multiplying by `scale`; None when absent."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number * scale, 2) if math.isfinite(number) else None


_percent = functools.partial(_figure, scale=100)  # a fraction from metrics.json as a percentage


def _reported_number(text: str) -> float | None:
    try:
        return round(float(text), 2) if text.strip() else None
    except ValueError:
        return None


def _interval(value: Any, merchants: Any = None) -> str | None:
    """`[20.10, 28.80]`, the CLI's interval style (`‡` after it from fewer than 20 merchants); None
    without one."""
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = _percent(value[0]), _percent(value[1])
        if low is not None and high is not None:
            small = isinstance(merchants, int) and not isinstance(merchants, bool) and merchants < SMALL_SAMPLE
            return f"[{low:.2f}, {high:.2f}]" + (SMALL_MARK if small else "")
    return None


def reported_rows(csv_path: Path | None) -> list[dict[str, Any]]:
    """Rows of the paper's Table 2, every model (and its English-prompt Table 4 rows); [] if the file is absent."""
    if csv_path is None or not csv_path.is_file():
        return []
    rows = []
    with csv_path.open(newline="", encoding="utf-8") as fh:
        for rec in csv.DictReader(fh):
            row = dict.fromkeys(COLUMNS)
            for task in tasks.all_tasks():
                key = "avg_mape" if task.measure == "ape" else f"{task.name}_acc"
                row[headline_column(task)] = _reported_number(rec.get(key) or "")
                for part, column in component_columns(task).items():
                    row[column] = _reported_number(rec.get(f"{part}_mape") or "")
                for name, column in error_columns(task).items():
                    row[column] = _reported_number(rec.get(name) or "")
            row.update({
                "Model": rec.get("model", ""), "Data": "paper", "Source": REPORTED, "Lang": rec.get("lang", ""),
                "Protocol": OFFICIAL, "Items": f"full benchmark ({rec.get('type', '')} model)",
                "Status": REPORTED, "Weights": _weights_of_type(rec.get("type", "")),
                "Size (B)": model_size(rec.get("model", "")), "_spec": rec.get("model", ""),
            })
            rows.append(row)
    return rows


def _component_mape(nutrition: dict[str, Any], nutrient: str) -> Any:
    """A nutrient's MAPE whichever way metrics.json nests it (`fat_mape`, `fat.mape`, `mape.fat`)."""
    if f"{nutrient}_mape" in nutrition:
        return nutrition[f"{nutrient}_mape"]
    if isinstance(nutrition.get(nutrient), dict):
        return nutrition[nutrient].get("mape")
    if isinstance(nutrition.get("mape"), dict):
        return nutrition["mape"].get(nutrient)
    return None


_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[bB](?![A-Za-z0-9])")


def model_size(name: str) -> float | None:
    """Parameters in billions when the name says (`Qwen-3-VL-30B-A3B` -> 30.0); None otherwise.

    >>> model_size("vllm:Qwen/Qwen2.5-VL-7B-Instruct"), model_size("InternVL-3.5-14B"), model_size("gpt-4o")
    (7.0, 14.0, None)
    """
    match = _SIZE.search(str(name).rsplit("/", 1)[-1])
    return float(match.group(1)) if match else None


def _weights_of_type(kind: str) -> str | None:
    return {"open": "open", "proprietary": "closed", "closed": "closed"}.get(kind.strip().lower())


def weights_of(run: RunData) -> str | None:
    """open (a local engine loaded them), closed (a provider's API), None when the run cannot tell. Asked of
    the backend's declared traits: open weights; a provider that serves only its own models; or a provider's
    public endpoint, when the run sent nowhere else (an OpenAI-compatible server may serve any)."""
    backend = run.model.split(":", 1)[0]
    if backend not in BACKENDS:
        return None
    declared = traits(backend)
    if declared.open_weights:
        return "open"
    if declared.closed_weights or (declared.public_endpoint and not run.info.get("base_url_host")):
        return "closed"
    return None


def _status(run: RunData) -> str:
    submission = run.info.get("submission")
    if not isinstance(submission, dict):
        return "local run"
    if submission.get("status") == "self-reported":
        return "self-reported"
    status = "verified · claims differ" if submission.get("mismatch") else "verified"
    return status + (" · flagged for review" if submission.get("flags") else "")


def data_kind(run: RunData, metrics: dict[str, Any] | None = None) -> str:
    """synthetic (the embedded sample), partial (--limit or --ids, or people's few items) or full release. A
    run in the authors' layout (`metrics` holds their figures per task) names the size of the file it read
    (`official.test_count`): the published release has PUBLISHED_ROWS; a file of the embedded sample's size is
    the sample in their layout (`python diningbench.py sample --layout official`), and any other size is not
    the benchmark either: partial."""
    if run.source in (None, "embedded sample", "embedded synthetic sample"):
        return "synthetic"
    sizes = _file_sizes(run.protocol, metrics or {})
    if sizes and all(sample_rows().get(config) == n for config, n in sizes.items()):
        return "synthetic"
    if sizes and any(PUBLISHED_ROWS.get(config) != n for config, n in sizes.items()):
        return "partial"
    submission = run.info.get("submission")
    if run.setting("limit") or run.setting("ids") or run.info.get("human") or (
            isinstance(submission, dict) and submission.get("partial")):
        return "partial"  # a submission is partial when it left items of the release unanswered
    return "full release"


def _file_sizes(protocol: Protocol, metrics: dict[str, Any]) -> dict[str, int]:
    """The rows of each config's file a run in the authors' layout read (their figures' `test_count`)."""
    sizes = {}
    for task in tasks.all_tasks():
        entry = metrics.get(task.name)
        found = protocol.own_figures(entry) if isinstance(entry, dict) else None
        count = found.get("test_count") if found is not None else None
        if isinstance(count, int) and not isinstance(count, bool):
            sizes[task.source_config] = count
    return sizes


@functools.cache
def sample_rows() -> dict[str, int]:
    """Rows of each config of the embedded sample (its Parquet metadata, read once)."""
    import pyarrow.parquet as pq

    return {config: sum(pq.ParquetFile(path).metadata.num_rows
                        for path in sorted((SAMPLE_DIR / "data" / config).glob("*.parquet")))
            for config in CONFIGS}


def dataset_label(source: str | None) -> str | None:
    """A run's data as a visitor sees it: a Hub id as it is, a local release by its folder's name only
    (the operator's own path stays on the operator's machine)."""
    if source is None or not Path(source).expanduser().is_absolute():
        return source
    return Path(source).name


def data_source(run: RunData) -> str:
    """The run's data as the Data cell's hover shows it: the release and, when run.json names them, the
    fingerprint of each config's data and the Hub revision it was read at (what says which version of the
    release the figures are on)."""
    label = str(dataset_label(run.source) if run.source else "embedded synthetic sample")
    if run.fingerprints:
        label += " · fingerprints " + ", ".join(f"{k} {v[:24]}" for k, v in sorted(run.fingerprints.items())[:3])
    if run.revisions:  # the Hub commit of the authors' release
        label += " · revision " + ", ".join(sorted({v[:12] for v in run.revisions.values()}))
    return label


def run_dirs(results_dir: Path) -> list[Path]:
    """Run folders with a metrics.json: results/<run>/ and the cells of sweeps, results/<sweep>/<cell>/."""
    if not results_dir.is_dir():
        return []
    found = [*results_dir.glob("*/metrics.json"), *results_dir.glob("*/*/metrics.json")]
    return sorted(path.parent for path in found)


_READ: dict[str, tuple[Any, Any]] = {}  # folder -> (its files' stat, what _read_run gave): read again on a change
MAX_READ = 8192


def _read_run(folder: Path, problems: list[str] | None = None) -> tuple[dict[str, Any], RunData] | None:
    """(metrics, run) of a run folder, or None with the reason in `problems`: a run being written, a
    broken, oversized or deeply nested file is skipped rather than break the table. What was read is kept
    until metrics.json or run.json changes (the board reads every folder for every view)."""
    signature = file_signature(folder / "metrics.json", folder / "run.json")
    cached = _READ.get(str(folder))
    if cached is None or cached[0] != signature:
        cached = (signature, _read_files(folder))
        if len(_READ) >= MAX_READ:
            _READ.clear()
        _READ[str(folder)] = cached
    found = cached[1]
    if isinstance(found, str):
        if problems is not None:
            problems.append(found)
        return None
    metrics, info = found
    return metrics, RunData(folder, info)


def _read_files(folder: Path) -> tuple[dict[str, Any], dict[str, Any]] | str:
    try:
        metrics = read_json_file(folder / "metrics.json")
        run_path = folder / "run.json"
        info = read_json_file(run_path) if run_path.is_file() else {}
    except (OSError, ValueError) as exc:
        return f"{folder.name}/{exc}" if isinstance(exc, ValueError) else f"{folder.name}: unreadable"
    return metrics, info


def _items(counts: dict[str, Any]) -> str:
    """`Cls 40 · Nutr 40` in the tasks' short names."""
    return " · ".join(f"{TASK_SHORT[t]} {counts[t]}" for t in TASK_SHORT if counts.get(t) is not None)


def local_rows(results_dir: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per run folder (sweep cells included) with a readable metrics.json; people's runs
    excluded; a folder whose files cannot be read is skipped, named in `problems`."""
    rows = []
    for folder in run_dirs(results_dir):
        read = _read_run(folder, problems)
        if read is None:
            continue
        metrics, run = read
        if run.model.startswith(HUMAN_PREFIX):
            continue  # people appear as one row per group (humans_rows), never one by one
        rel = folder.relative_to(results_dir).as_posix()
        submission = run.info.get("submission") if isinstance(run.info.get("submission"), dict) else None
        row = dict.fromkeys(COLUMNS)
        counts = {}
        named = set()
        own, ours = False, False  # figures of the run's protocol's own reading; figures of ours
        protocol = run.protocol
        for task in tasks.all_tasks():
            entry: dict[str, Any] = metrics[task.name] if isinstance(metrics.get(task.name), dict) else {}
            theirs = protocol.own_figures(entry)
            if theirs is not None:
                _official_figures(row, protocol, task, entry, theirs)
                named.add(protocol.name)
                own = True
            else:
                row[headline_column(task)] = _percent(entry.get(task.figure))
                row[interval_column(task)] = _interval(entry.get(f"{task.figure}_ci95"), entry.get("merchants"))
                for part, column in component_columns(task).items():
                    row[column] = _percent(_component_mape(entry, part))
                for name, column in error_columns(task).items():
                    row[column] = _mean_error(entry, task, name.removeprefix("avg_"))
                if entry:
                    named.add("ours")
                    ours = True
            counted = protocol.counted(task, entry) if theirs else None
            counts[task.name] = entry.get("n") if counted is None else counted
        row.update({
            "Model": run.label, "Data": data_kind(run, metrics), "Lang": str(run.setting("lang") or ""),
            "Source": f"submitted: {str(submission.get('source'))[:80]}" if submission else f"local run: {rel}",
            "Protocol": " + ".join(sorted(named)) or None, "Items": _items(counts),
            "_data_source": data_source(run),
            "Status": _status(run), "Weights": weights_of(run), "Size (B)": model_size(run.model),
            "Run": rel if (folder / "scores.jsonl").is_file() else None, "_spec": run.model,
            "_updated": str(run.info.get("updated_at") or "") if isinstance(run.info.get("updated_at"), str) else "",
            "_settings": _settings_key(run), "_owner": _owner_key(run),
        })
        if own:  # the run's protocol reads answers its own way: the hover says how it asked
            row["_asked"] = run.question()
            if not ours:  # every figure its own: ranked among the runs of that protocol alone
                row["_own_protocol"] = protocol.name
        rows.append(row)
    return rows


def _official_figures(row: dict[str, Any], protocol: Protocol, task: Task, entry: dict[str, Any],
                      figures: Mapping[str, Any]) -> None:
    """A task's cells from the figures of the run's protocol (the authors': metrics.json `official`): its
    headline with its item-bootstrap interval (`protocol.interval`), their per-nutrient MAPE (in percent)
    and Avg MAE / RMSE; ours' reading of the same answers, with its interval, is kept for the headline
    cell's hover (`_beside`)."""
    _, value = protocol.headline(task, entry) or ("", None)
    row[headline_column(task)] = _percent(value)
    # ‡ from the items its figure read, counted as the Items cell counts them (the run's items where it names none)
    counted = protocol.counted(task, entry)
    row[interval_column(task)] = _interval(protocol.interval(entry), entry.get("n") if counted is None else counted)
    for part, column in component_columns(task).items():
        nutrient = figures.get(part)
        row[column] = _figure(nutrient.get("mape") if isinstance(nutrient, dict) else None)  # already percent
    for name, column in error_columns(task).items():
        row[column] = _figure(figures.get(name))
    ours = _percent(entry.get(task.figure))
    if ours is not None:
        interval = _interval(entry.get(f"{task.figure}_ci95"), entry.get("merchants"))
        differ = entry.get("official_disagreements")
        row.setdefault("_beside", {})[headline_column(task)] = (
            f"the figure of {protocol.title}; ours' reading of the same answers: {ours:.2f}"
            + (f" {interval}" if interval else "")
            + (f", {differ} items read differently" if isinstance(differ, int) and not isinstance(differ, bool) else ""))


def _mean_error(entry: dict[str, Any], task: Task, kind: str) -> float | None:
    """Ours' Avg MAE or RMSE: the mean of the components' figures, as Table 2 averages them."""
    values = [entry.get(f"{part}_{kind}") for part in task.components]
    if not values or any(not isinstance(v, int | float) or isinstance(v, bool) for v in values):
        return None
    return _figure(sum(values) / len(values))


def _settings_key(run: RunData) -> str:
    """The run's model + settings as one string: run.json's `identity` (what the harness hashes a request
    by), else the same fields read from its settings (eval/settings.py marks them: settings outside them,
    such as concurrency, change how a run is made, not its answers), with its prompt version and tasks:
    the fingerprints that tell such a run's tasks apart in its data source may not have been kept."""
    identity = run.info.get("identity")
    if not isinstance(identity, dict):
        identity = {name: run.setting(name) for name in IDENTITY_FIELDS}
        identity.update(prompt_version=run.info.get("prompt_version"), task=run.setting("task"))
    return json.dumps(identity, sort_keys=True, default=str)


def _owner_key(run: RunData) -> str:
    """Whose row this is: `local` for the operator's runs, else the submission's owner as kept (the
    signed-in user, the hash of the owner secret, or the card's own repository). Rows of different owners
    are never merged, whatever their model names."""
    submission = run.info.get("submission")
    if not isinstance(submission, dict):
        return "local"
    owner = submission.get("owner")
    if isinstance(owner, dict):
        return json.dumps(owner, sort_keys=True, default=str)
    return f"source:{str(submission.get('source'))[:200]}"  # kept before rows had owners: its source


def newest_per_model(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of the run folders of one owner (`_owner_key`) with the same model and settings (`_settings_key`),
    data, status and data source, the newest (run.json's `updated_at`, then the folder name) is the row;
    `Source` says how many earlier runs it stands for and names them."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row.get("Model"), row.get("_settings"), row.get("Data"), row.get("Lang"), row.get("Status"),
               row.get("_data_source"), row.get("_owner"))
        groups.setdefault(key, []).append(row)
    out = []
    for same in groups.values():
        same = sorted(same, key=lambda r: (str(r.get("_updated") or ""), str(r.get("Run") or r.get("Source"))))
        newest = dict(same[-1])
        if len(same) > 1:
            earlier = [str(r.get("Run") or r.get("Source")) for r in reversed(same[:-1])]
            named = ", ".join(earlier[:3]) + (", …" if len(earlier) > 3 else "")
            newest["Source"] = f"{newest['Source']} · newest of {len(same)} runs (earlier: {named})"
            newest["_earlier"] = len(earlier)
        out.append(newest)
    return out


def _scored_items(folder: Path) -> list[dict[str, Any]]:
    try:
        return [row for _, row in iter_jsonl_objects(folder / "scores.jsonl", policy="skip", max_depth=MAX_JSON_DEPTH,
                                                     max_line_bytes=RUN_LINE_BYTES)]
    except OSError:
        return []


def humans_rows(results_dir: Path, *, n_boot: int = N_BOOT) -> list[dict[str, Any]]:
    """One row per group of people (layperson / cook / dietitian) who took the test. Every person's scored
    items of a group are pooled. The interval is a cluster bootstrap whose cluster is one person's answers on
    one merchant's dishes: it resamples people and merchants together, so a person who knows one restaurant
    well, or a restaurant that is easy for one person, does not count as many independent items. It does not
    model a person's skill across merchants (a crossed two-way bootstrap would), so with few people it is on
    the narrow side."""
    pooled: dict[str, dict[str, list[dict[str, Any]]]] = {}
    people: dict[str, set[str]] = {}
    kinds: dict[str, set[str]] = {}
    excluded: dict[str, int] = {}
    for folder in run_dirs(results_dir):
        read = _read_run(folder)
        human = read[1].info.get("human") if read else None
        if not read or not read[1].model.startswith(HUMAN_PREFIX) or not isinstance(human, dict):
            continue
        group = str(human.get("group") or "layperson")
        person = str(human.get("person") or folder.name)
        if human.get("automated"):  # kept on disk, never pooled (space/diningspace/human.py `automated`)
            excluded[group] = excluded.get(group, 0) + 1
            continue
        people.setdefault(group, set()).add(person)
        kinds.setdefault(group, set()).add(data_kind(read[1]))
        for item in _scored_items(folder):
            task = item.get("task")
            if tasks.is_task(task):
                clustered = {**item, "merchant_id": f"{person}|{item.get('merchant_id')}"}
                pooled.setdefault(group, {}).setdefault(task, []).append(clustered)
    rows = []
    for group in sorted(pooled, key=lambda g: (HUMAN_GROUPS.index(g) if g in HUMAN_GROUPS else 99, g)):
        by_task = pooled[group]
        row = dict.fromkeys(COLUMNS)
        for task in tasks.all_tasks():
            items = by_task.get(task.name) or []
            value = headline(task, items) if items else None
            row[headline_column(task)] = _percent(value)
            row[interval_column(task)] = _interval(headline_ci(task, items, n_boot=n_boot) if value is not None else None)
            figures = score_nutrition_rows(items) if task.components and items else {}
            for part, column in component_columns(task).items():
                row[column] = _percent(component(figures, part, "mape")) if figures else None
        n_people = len(people[group])
        row.update({
            "Model": f"humans ({group})", "Data": "synthetic" if "synthetic" in kinds[group] else "partial",
            "Source": f"Take the test: {n_people} {'person' if n_people == 1 else 'people'}"
                      + (f"; {excluded[group]} scripted sittings left out" if excluded.get(group) else ""),
            "Items": _items({t: len(v) for t, v in by_task.items()}),
            "Lang": "", "Status": "people", "_spec": f"{HUMAN_PREFIX}{group}",
        })
        rows.append(row)
    return rows


# ---------------------------------------------------------------- groups: what is ranked against what
GROUP_NOTES = {
    "paper": "the paper's figures, reported and not reproduced here",
    "self-reported": "read from model cards, not re-scored here",
    "partial": "a subset of items: not ranked",
    "synthetic": "the embedded sample, not the benchmark: not ranked",
    "people": "people who took the test, on a few items each: not ranked",
    "baselines": "reference baselines without a model: not ranked",
}
GROUP_ORDER = ("full release", "self-reported", "paper", "partial", "synthetic", "people", "baselines")
ROW_KINDS = GROUP_ORDER


def row_kind(row: dict[str, Any]) -> str:
    """What kind of row this is, for grouping and the Show filter."""
    spec = str(row.get("_spec") or row.get("Model") or "")
    if row.get("Status") == "people" or spec.startswith(HUMAN_PREFIX):
        return "people"
    if spec.startswith("baseline:"):
        return "baselines"
    if row.get("Status") == "self-reported":
        return "self-reported"
    return str(row.get("Data") or "partial")


def group_of(row: dict[str, Any]) -> tuple[str, bool]:
    """(the row's group name, whether rows of the group are ranked against each other). Only like is ranked
    with like: the full release under one prompt language; the paper's figures and model cards' figures each
    among themselves; everything else is shown, not ranked."""
    kind = row_kind(row)
    lang = str(row.get("Lang") or "zh")
    own = row.get("_own_protocol")
    if kind == "full release" and isinstance(own, str) and own:  # another reading's figures: not ranked with ours
        return f"{kind} · {lang} · {own} protocol", True
    if kind in ("full release", "paper", "self-reported"):
        return f"{kind} · {lang}", True
    return kind, False


def _figures(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(c) for c in (*RANKABLE, *INTERVALS.values(), "Items"))


def collapse(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one owner and model with the same data, language and figures become one row (a sweep over
    settings a baseline ignores gives many identical rows); `Source` says how many were merged."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    order = []
    for row in rows:
        key = (row.get("_spec"), row.get("Data"), row.get("Lang"), row.get("Status"), row.get("_owner"), _figures(row))
        if row.get("_spec") is None or key not in merged:
            key = key if row.get("_spec") is not None else (id(row),)
            merged[key] = {**row, "_merged": [row]}
            order.append(key)
            continue
        merged[key]["_merged"].append(row)
    out = []
    for key in order:
        row = merged[key]
        same = row.pop("_merged")
        if len(same) > 1:
            labels = sorted({str(r["Model"]) for r in same})
            row["Model"] = labels[0] if len(labels) == 1 else f"{row['_spec']} ({len(same)} settings, same figures)"
            row["Source"] = f"{len(same)} identical rows: {', '.join(str(r['Source']) for r in same[:3])}" + (
                ", …" if len(same) > 3 else "")
        out.append(row)
    return out


def rank(rows: Sequence[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """Rows grouped (GROUP_ORDER, then language), each group ordered by `metric` (best first, blanks
    last). Ranked groups number their rows 1..k; rows of other groups get no number."""
    if metric not in RANKABLE:
        raise ValueError(f"cannot rank by {metric!r}; choose one of {', '.join(RANKABLE)}")
    higher_better = RANKABLE[metric]
    groups: dict[str, list[dict[str, Any]]] = {}
    ranked_group: dict[str, bool] = {}
    for row in rows:
        name, ranked = group_of(row)
        groups.setdefault(name, []).append(row)
        ranked_group[name] = ranked

    def order(name: str) -> tuple[int, int, str]:
        kind, _, rest = name.partition(" · ")  # the paper's language (zh) first, then en
        lang = rest.split(" · ")[0]
        return (GROUP_ORDER.index(kind) if kind in GROUP_ORDER else len(GROUP_ORDER),
                {"zh": 0, "en": 1}.get(lang, 2), rest)

    out = []
    for name in sorted(groups, key=order):
        members = groups[name]
        valued = [r for r in members if r.get(metric) is not None]
        blank = [r for r in members if r.get(metric) is None]
        valued.sort(key=lambda r: -r[metric] if higher_better else r[metric])  # stable: ties keep their order
        ranges = rank_ranges(valued, metric, higher_better) if ranked_group[name] else [None] * len(valued)
        out += [{**r, "Group": name, "#": span} for r, span in zip(valued, ranges, strict=True)]
        out += [{**r, "Group": name, "#": None} for r in blank]
    return out


def _bounds(row: dict[str, Any], metric: str) -> tuple[float, float] | None:
    """The row's 95% interval (percent) of `metric` when it is a task's headline and the row has one."""
    if metric not in INTERVALS:
        return None
    found = re.findall(r"-?\d+(?:\.\d+)?", str(row.get(INTERVALS[metric]) or ""))
    return (float(found[0]), float(found[1])) if len(found) == 2 else None


def rank_ranges(ordered: Sequence[dict[str, Any]], metric: str, higher_better: bool) -> list[int | str]:
    """Each row's rank as a range, best first: 1 + the rows surely better, to the group's size less the
    rows surely worse. "Surely" is cautious: one row's 95% interval wholly beyond the other's (a row
    without an interval is compared by its value alone). Rows whose difference is not significant share
    a range ("2–4", as arena-style boards show rank spreads); a clear order gives single numbers.

    >>> rows = [{"Cls acc %": v, "Cls 95% CI": f"[{v - 5:.2f}, {v + 5:.2f}]"} for v in (80.0, 78.0, 60.0)]
    >>> rank_ranges(rows, "Cls acc %", True)
    ['1–2', '1–2', 3]
    """
    # Counted with sorted lists, not pair by pair (a 300-row board cost 90,000 comparisons per view): "j surely
    # better than i" is "j's low above i's high" when both have intervals, "j's value above i's" otherwise.
    # A lower-is-better metric is negated first, so one rule serves both.
    sign = 1.0 if higher_better else -1.0
    values = [sign * float(r[metric]) for r in ordered]
    spans: list[tuple[float, float] | None] = []
    for r in ordered:
        found = _bounds(r, metric)
        spans.append(None if found is None else (found if sign > 0 else (-found[1], -found[0])))
    lows = sorted(span[0] for span in spans if span is not None)
    highs = sorted(span[1] for span in spans if span is not None)
    bare = sorted(v for v, span in zip(values, spans, strict=True) if span is None)
    every = sorted(values)
    n, out = len(ordered), []
    for value, span in zip(values, spans, strict=True):
        if span is None:  # compared with every row by value alone
            better, worse = n - bisect_right(every, value), bisect_left(every, value)
        else:
            low, high = span
            better = len(lows) - bisect_right(lows, high) + len(bare) - bisect_right(bare, value)
            worse = bisect_left(highs, low) + bisect_left(bare, value)
            better -= low > high  # a row never counts against itself (an interval written backwards would)
            worse -= high < low
        best, worst = 1 + better, n - worse
        out.append(best if best == worst else f"{best}–{worst}")
    return out


def all_rows(csv_path: Path | None, results_dir: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row before grouping: local runs and submissions (the newest run of each model + settings),
    people, the paper; identical ones collapsed; run folders that cannot be read are named in `problems`."""
    return collapse([*newest_per_model(local_rows(results_dir, problems)), *humans_rows(results_dir),
                     *reported_rows(csv_path)])


def leaderboard_rows(csv_path: Path | None, results_dir: Path, metric: str = DEFAULT_RANK) -> list[dict[str, Any]]:
    """Every row, grouped and ranked by `metric` within comparable groups."""
    return rank(all_rows(csv_path, results_dir), metric)


def leaderboard_table(csv_path: Path | None, results_dir: Path, metric: str = DEFAULT_RANK) -> pd.DataFrame:
    """The grouped, ranked rows as a DataFrame (the /leaderboard API), blanks as None."""
    rows = [{c: row.get(c) for c in COLUMNS} for row in leaderboard_rows(csv_path, results_dir, metric)]
    return pd.DataFrame(rows, columns=COLUMNS, dtype=object)


# ---------------------------------------------------------------- search and filters
ANY = "any"
SIZES = {"≤ 10B": (0.0, 10.0), "10–40B": (10.0, 40.0), "> 40B": (40.0, math.inf)}
TASK_COLUMNS = {t.name: task_columns(t) for t in tasks.all_tasks()}


def filter_rows(rows: Sequence[dict[str, Any]], *, search: str = "", kinds: Sequence[str] | None = None,
                lang: str = ANY, task: str = ANY, weights: str = ANY, size: str = ANY) -> list[dict[str, Any]]:
    """The rows a visitor asked for: model text (case-insensitive, every word), row kinds, prompt
    language, rows with a figure for `task`, open/closed weights, a size bracket (`unknown`: no size)."""
    words = search.lower().split()
    out = []
    for row in rows:
        if words and not all(w in f"{row.get('Model')} {row.get('_spec') or ''}".lower() for w in words):
            continue
        if kinds is not None and row_kind(row) not in kinds:
            continue
        if lang != ANY and str(row.get("Lang") or "zh") != lang:
            continue
        if task != ANY and all(row.get(c) is None for c in TASK_COLUMNS.get(task, ())):
            continue
        if weights != ANY and row.get("Weights") != weights:
            continue
        if size != ANY:
            value = row.get("Size (B)")
            if size == "unknown" and value is not None:
                continue
            if size in SIZES and (value is None or not SIZES[size][0] < value <= SIZES[size][1]):
                continue
        out.append(row)
    return out


def _cell_text(row: dict[str, Any], column: str) -> str:
    value = row.get(column)
    if column in RANKABLE:  # a headline (its interval beside it) or another figure
        if value is None:
            return MISSING
        interval = row.get(INTERVALS.get(column, ""))
        return f"{value:.2f} {interval}" if interval else f"{value:.2f}"
    if column == "Size (B)" and value is not None:
        return f"{value:g}"
    return MISSING if value is None or value == "" else str(value)


# The page merges each interval into its metric's cell, and shows the group as a heading row.
SHOWN = [c for c in COLUMNS if c not in INTERVALS.values() and c not in ("Group", "Run")]
OPTIONAL = [c for c in SHOWN if c not in ("#", "Model")]  # what the column picker offers
DEFAULT_SHOWN = ["Data", "Lang", "Status", "Protocol", *INTERVALS, "Items"]


def run_link(rel: str) -> str:
    """The page's own address with `?run=<folder>`: the Space opens that run in the Runs tab."""
    return "?" + urllib.parse.urlencode({"run": rel})


PAGE_ROWS = 50  # rows per page of the board; the rest are a click away (Earlier / Later rows)


def _order_key(row: dict[str, Any], column: str) -> tuple[int, Any]:
    value = row.get(column)
    if value is None or value == "":
        return (1, "")
    return (0, value) if isinstance(value, int | float) and not isinstance(value, bool) else (0, str(value).casefold())


def order_within_groups(rows: Sequence[dict[str, Any]], column: str | None, descending: bool = False
                        ) -> list[dict[str, Any]]:
    """Ranked rows (grouped, as `rank` gives them) sorted by another column inside each group, blanks last;
    the groups and each row's rank stay as they are. No column (or a metric one ranks by): unchanged."""
    if not column or column in RANKABLE or column not in COLUMNS:
        return list(rows)
    out: list[dict[str, Any]] = []
    for _, group in groupby(rows, key=lambda r: r.get("Group")):
        members = list(group)
        valued = [r for r in members if _order_key(r, column)[0] == 0]
        valued.sort(key=lambda r: _order_key(r, column)[1], reverse=descending)
        out += valued + [r for r in members if _order_key(r, column)[0] == 1]
    return out


def page_rows(rows: Sequence[dict[str, Any]], page: int) -> tuple[list[dict[str, Any]], int, str]:
    """(the rows of page `page`, clamped to the pages there are, `Rows 51–100 of 300`)."""
    last = max(0, (len(rows) - 1) // PAGE_ROWS)
    page = min(max(int(page or 0), 0), last)
    shown = list(rows[page * PAGE_ROWS:(page + 1) * PAGE_ROWS])
    text = f"Rows {page * PAGE_ROWS + 1}–{page * PAGE_ROWS + len(shown)} of {len(rows)}" if rows else ""
    return shown, page, text


def leaderboard_html(rows: Sequence[dict[str, Any]], metric: str, columns: Sequence[str] | None = None,
                     order: str | None = None, descending: bool = False) -> str:
    """The table as the page shows it: a heading row per group, the # and Model columns frozen while
    the rest scrolls sideways inside its own box; on a phone only #, Model (wrapping) and the ranked
    figure show (`db-opt` cells hide). A click on a header sorts by it (`data-sort`, read by the tab's
    script): a metric ranks by it, another column orders each group by it."""
    shown = ["#", "Model", *[c for c in SHOWN[2:] if columns is None or c in columns or c == metric]]

    def th(column: str) -> str:
        classes = ["db-num"] if column in RANKABLE else []
        classes += ["db-ranked"] if column == metric else []
        classes += {"#": ["db-rank"], "Model": ["db-model"]}.get(column, [])
        classes += [] if column in ("#", "Model") or column == metric else ["db-opt"]
        css = f" class='{' '.join(classes)}'" if classes else ""
        title = TITLES.get(column, column)
        if column == "#":
            return f"<th{css} title='{html.escape(title, quote=True)}'>#</th>"
        how = "rank by this column, best first" if column in RANKABLE else "order each group by it (again: reverse)"
        attrs = f" title='{html.escape(f'{title}. Click: {how}', quote=True)}' data-sort='{html.escape(column, quote=True)}'"
        attrs += " tabindex='0' role='button'"
        arrow = ""
        if column == order or not order and column == metric:
            down = descending if column == order else RANKABLE[metric]
            attrs += f" aria-sort='{'descending' if down else 'ascending'}'"
            arrow = f" <span class='db-arrow'>{'▼' if down else '▲'}</span>"
        return f"<th{css}{attrs}>{html.escape(column)}{arrow}</th>"

    body = []
    group = None
    for row in rows:
        if row.get("Group") and row["Group"] != group:
            group = row["Group"]
            kind = group.split(" · ")[0]
            note = GROUP_NOTES.get(kind, "ranked by the chosen metric" if group_of(row)[1] else "not ranked")
            body.append(f"<tr class='db-group'><th colspan='2' class='db-group-name'>{html.escape(group)}</th>"
                        f"<td colspan='{len(shown) - 2}'>{html.escape(note)}</td></tr>")
        cells = []
        for column in shown:
            text = html.escape(_cell_text(row, column))
            opt = "" if column in ("#", "Model") or column == metric else " db-opt"
            if column == "Model":
                link = (f"<a href='{html.escape(run_link(row['Run']), quote=True)}' title='open this run in the "
                        f"Runs tab'>{text}</a>") if row.get("Run") else text
                cells.append(f"<td class='db-model' title='{text}'>{link}</td>")
            elif column == "Data":
                kind = str(row.get("Data") or "")
                tag = {"full release": "full"}.get(kind, kind)
                hover = html.escape(str(row.get("_data_source") or TITLES["Data"]), quote=True)
                cells.append(f"<td class='db-opt' title='{hover}'><span class='db-tag db-tag-"
                             f"{html.escape(tag, quote=True)}'>{text}</span></td>")
            elif column == "Status":
                tag = "mismatch" if "differ" in text else text.split(" ")[0].replace("-", "")
                cells.append(f"<td class='db-opt'><span class='db-tag db-status-{html.escape(tag, quote=True)}'>"
                             f"{text}</span></td>")
            elif column == "#":
                cells.append(f"<td class='db-num db-rank'>{'' if row.get('#') is None else text}</td>")
            elif column in RANKABLE:
                value, _, interval = text.partition(" ")  # the interval may wrap below its value on a phone
                inner = f"{value} <span class='db-ci'>{interval}</span>" if interval else value
                beside = (row.get("_beside") or {}).get(column)  # ours, beside the protocol's own figure
                hover = f" title='{html.escape(str(beside), quote=True)}'" if beside else ""
                cells.append(f"<td class='{'db-num db-ranked' if column == metric else 'db-num'}{opt}'{hover}>{inner}</td>")
            elif column == "Protocol" and row.get("_asked"):  # how the run asked: protocol and image indices
                hover = html.escape(f"{row.get('Protocol')}: {row['_asked']}", quote=True)
                cells.append(f"<td class='db-opt' title='{hover}'>{text}</td>")
            else:
                cells.append(f"<td class='db-opt' title='{text}'>{text}</td>")
        human = " class='db-humans'" if row_kind(row) == "people" else ""
        body.append(f"<tr{human}>{''.join(cells)}</tr>")
    if not rows:
        body.append(f"<tr><td colspan='{len(shown)}' class='db-none'>No row matches these filters.</td></tr>")
    head = "".join(th(c) for c in shown)
    return (f"<div class='db-scroll' id='db-board-scroll'><table class='db-board'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")
