"""`python -m eval report DIR --model-card`: a model's results as a Hugging Face model card that
`huggingface_hub.ModelCard.load` reads, or (`--format yaml|json`) its metadata alone for `metadata_update`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval import protocols
from eval.numbers import (
    component,
    headline,
    headline_ci,
    resampled_unit,
    resampled_words,
    score_nutrition_rows,
)
from eval.report.runs import ReportError, RunData
from eval.report.tables import (
    SMALL_MARK,
    SMALL_SAMPLE,
    as_text,
    indices_sent,
    md_table,
    pct,
    read_differently,
    resampled_units,
    small_note,
)
from eval.settings import N_BOOT
from eval.tasks import Task, all_tasks
from eval.types import ScoreRecord

DATASET_NAME = "DiningBench"
SYNTHETIC = "synthetic"  # dataset type of the embedded sample and of any `diningbench.py sample` release
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
FORMATS = ("card", "yaml", "json")


@dataclass(frozen=True)
class DatasetRef:
    """Which data a run was measured on, as a model card names it, and why it is not the benchmark."""

    name: str  # the release card's pretty_name
    type: str  # a Hub id, `synthetic`, or the pretty_name of a local release with no Hub id
    revision: str | None
    hub: bool  # `type` is a Hub dataset id
    partial: tuple[str, ...]  # reasons this is not a full-benchmark result; empty when it is
    fingerprints: tuple[tuple[str, str], ...] = ()  # (task, the release's fingerprint) as run.json recorded them


def _card_header(folder: Path) -> tuple[dict[str, Any], str]:
    """A local release's README.md: its YAML header and its body ({} and "" when unreadable)."""
    import yaml  # here, not at import: `eval run` never writes a model card

    try:
        text = (folder / "README.md").read_text(encoding="utf-8")
        _, head, body = text.split("---\n", 2)
        header = yaml.safe_load(head)
    except (OSError, ValueError, yaml.YAMLError):
        return {}, ""
    return (header if isinstance(header, dict) else {}), body


def _declared_counts(header: dict[str, Any]) -> dict[str, int]:
    """num_examples of the test split per config, as the release card declares them."""
    counts = {}
    for info in header.get("dataset_info") or []:
        for split in (info.get("splits") or []) if isinstance(info, dict) else []:
            if isinstance(split, dict) and split.get("name") == "test" and isinstance(split.get("num_examples"), int):
                counts[str(info.get("config_name"))] = split["num_examples"]
    return counts


def dataset_ref(run: RunData, hub_id: str | None = None) -> DatasetRef:
    """The run's data: `--dataset` (a Hub id) wins, then run.json's source; the embedded sample and
    releases written by `diningbench.py sample` are synthetic. Partial when --limit/--ids were set
    or fewer items were scored than the release declares."""
    source = run.source or "embedded sample"
    reasons = []
    if run.setting("limit") is not None:
        reasons.append(f"--limit {run.setting('limit')}")
    if run.setting("ids"):
        reasons.append(f"--ids ({len(run.setting('ids'))} ids)")
    name, declared, synthetic, local = DATASET_NAME, {}, False, None
    if source in ("embedded sample", "embedded synthetic sample"):
        synthetic = True
    elif Path(source).expanduser().is_dir():
        local = Path(source).expanduser()
        header, body = _card_header(local)
        name = str(header.get("pretty_name") or DATASET_NAME)
        declared = _declared_counts(header)
        synthetic = "Synthetic data" in body.split("\n## ", 1)[0]  # the note `diningbench.py sample` writes
    for task, rows in run.scores.items():
        scored, expected = len({str(r["id"]) for r in rows}), declared.get(task)
        if expected is not None and scored < expected:
            reasons.append(f"{task}: {scored} of {expected} items")
    if synthetic:
        reasons.insert(0, "synthetic sample, not the benchmark")
    prints = run.fingerprints
    revision = next((p.rsplit("@", 1)[1] for p in prints.values() if p.startswith("hub:")), None)
    if revision is None and run.revisions:  # the Hub commit of the authors' release, per task
        revision = next(iter(run.revisions.values()))
    found = tuple(sorted(prints.items()))
    if hub_id is not None:
        return DatasetRef(name, hub_id, revision if source == hub_id else None, True, tuple(reasons), found)
    if synthetic:
        return DatasetRef(name, SYNTHETIC, None, False, tuple(reasons), found)
    if local is None and HUB_ID.fullmatch(source):
        return DatasetRef(name, source, revision, True, tuple(reasons), found)
    return DatasetRef(name, name, None, False, tuple(reasons), found)


def _settings(run: RunData) -> dict[str, Any]:
    return {"lang": str(run.setting("lang") or "zh"), "images": run.setting("images") or "all",
            "cot": bool(run.setting("cot"))}


def _protocol_args(run: RunData, task: str, ref: DatasetRef) -> dict[str, Any]:
    """The dataset args of a result whose figure is the run's protocol's own: the protocol by name, the
    image indices its requests named (or the views by count) and, where the release has no revision,
    the fingerprint of the task's release as the run recorded it."""
    settings = _settings(run)
    args: dict[str, Any] = {"lang": settings.pop("lang"), "protocol": run.protocol.name}
    if (indices := indices_sent(run)) is None:
        args.update(settings)
    else:
        args["image_indices"] = ",".join(map(str, indices))
    if not ref.revision and (fingerprint := dict(ref.fingerprints).get(task)):
        args["fingerprint"] = fingerprint
    return args


def _figure_name(name: str, run: RunData, spec: Task) -> str:
    """A figure of the run's protocol as a card names it: the name its scoring prints and the protocol
    (`acc (%), the authors' protocol`), so that it is never read as ours."""
    return f"{name} (%{', lower is better' if spec.lower_is_better else ''}), {run.protocol.title}"


def _metric_type(run: RunData, name: str) -> str:
    """A metric `type` of the run's protocol (`official_acc`): distinct from ours' types, so the Hub never
    merges the two readings."""
    return re.sub(r"\W+", "_", f"{run.protocol.name}_{name}").strip("_")


def _protocol_metrics(run: RunData, spec: Task) -> list[dict[str, Any]] | None:
    """The figures the run's protocol reports for a task (metrics.json), as percentages, when its headline
    is not ours (the authors' figure on their release: what the paper's Table 2 reports); None: ours."""
    if (found := run.headline(spec)) is None:
        return None
    name, value, _ = found
    if value is None:
        return []
    out = [{"type": _metric_type(run, name), "name": _figure_name(name, run, spec), "value": round(100 * value, 2)}]
    entry = run.entry(spec.name)
    for part in spec.components:
        if (mape := run.protocol.component(spec, entry, part, "mape")) is not None:
            out.append({"type": _metric_type(run, f"{part}_mape"), "name": f"{part} mape (%), {run.protocol.title}",
                        "value": round(100 * mape, 2)})
    return out


def _trials(rows: list[ScoreRecord]) -> int:
    """What an interval of ours over these rows resampled, counted: merchants where rows name them, else items."""
    if resampled_unit(rows) == "merchants":
        return len({str(r.get("merchant_id")) for r in rows})
    return len(rows)


def _items_cell(rows: list[ScoreRecord]) -> str:
    """`24 (5 merchants)`, the merchants only where the rows name them."""
    return f"{len(rows)} ({_trials(rows)} merchants)" if resampled_unit(rows) == "merchants" else str(len(rows))


def _metrics(spec: Task, rows: list[ScoreRecord]) -> list[dict[str, Any]]:
    """The figures a model card shows for one task, as percentages, each with its own `type`; empty
    when unscored. Types are distinct so the Hub's widget and leaderboards never merge two figures."""
    value = headline(spec, rows)
    if value is None:
        return []
    if spec.measure != "ape":
        return [{"type": "accuracy", "name": "Accuracy (%)", "value": round(100 * value, 2)}]
    figures = score_nutrition_rows(rows)
    out = [{"type": "avg_mape", "name": "Average MAPE (%)", "value": round(100 * value, 2)}]
    for nutrient in spec.components:
        if (mape := component(figures, nutrient, "mape")) is not None:
            out.append({"type": f"{nutrient}_mape", "name": f"{nutrient.capitalize()} MAPE (%)",
                        "value": round(100 * mape, 2)})
    return out


def checked_refs(runs: Sequence[RunData], *, hub_id: str | None = None,
                 allow_partial: bool = False) -> list[DatasetRef]:
    """Each run's DatasetRef; a synthetic or partial run is refused unless `allow_partial`."""
    if hub_id is not None and not HUB_ID.fullmatch(hub_id):
        raise ReportError(f"--dataset {hub_id!r} is not a Hub dataset id (owner/name)")
    refs = [dataset_ref(run, hub_id) for run in runs]
    if not allow_partial:
        for run, ref in zip(runs, refs, strict=True):
            if ref.partial:
                raise ReportError(f"{run.path}: not a full-benchmark result ({'; '.join(ref.partial)}); "
                                  "pass --allow-partial to export it marked as partial")
    return refs


def model_index(runs: Sequence[RunData], *, hub_id: str | None = None,
                allow_partial: bool = False) -> list[dict[str, Any]]:
    """The `model-index` of one model: one result per task and setting, named as the model was given."""
    models = sorted({run.model for run in runs})
    if len(models) != 1:
        raise ReportError(f"a model card describes one model; these runs are of {', '.join(models)}: "
                          "export each model's run folders separately")
    results = []
    for run, ref in zip(runs, checked_refs(runs, hub_id=hub_id, allow_partial=allow_partial), strict=True):
        for spec in all_tasks():
            task = spec.name
            if task not in run.scores:
                continue
            theirs = _protocol_metrics(run, spec)
            metrics = _metrics(spec, run.scores[task]) if theirs is None else theirs
            if not metrics:
                continue
            args: dict[str, Any] = _settings(run) if theirs is None else _protocol_args(run, task, ref)
            if ref.partial:
                args["partial"] = "; ".join(ref.partial)
            dataset = {"name": ref.name, "type": ref.type, "config": task, "split": "test"}
            if ref.revision:
                dataset["revision"] = ref.revision
            results.append({"task": {"type": spec.hub_type, "name": spec.hub_name or spec.title},
                            "dataset": {**dataset, "args": args}, "metrics": metrics})
    if not results:
        raise ReportError("nothing to export: no scored task in these runs (score VQA with --judge first)")
    return [{"name": models[0], "results": results}]


def metadata(runs: Sequence[RunData], *, hub_id: str | None = None, allow_partial: bool = False) -> dict[str, Any]:
    """The card's YAML metadata: what `huggingface_hub.metadata_update(repo, metadata)` takes."""
    index = model_index(runs, hub_id=hub_id, allow_partial=allow_partial)
    refs = {ref.type for ref in checked_refs(runs, hub_id=hub_id, allow_partial=True) if ref.hub}
    return {"tags": ["diningbench"], **({"datasets": sorted(refs)} if refs else {}), "model-index": index}


def results_table(runs: Sequence[RunData], *, n_boot: int = N_BOOT) -> str:
    """Markdown table for a model card body: headline figures with 95% intervals (resampling what each run
    recorded). A run whose protocol's figure leads (the authors' on their release) shows that figure, named
    with its protocol and image indices; ours of the same answers follows in its own table."""
    rows, beside, notes, small = [], [], [], False
    for run in runs:
        settings = _settings(run)
        setting = f"{settings['lang']}, {settings['images']} views, {'CoT' if settings['cot'] else 'no CoT'}"
        for spec in all_tasks():
            if spec.name not in run.scores:
                continue
            items, title = run.scores[spec.name], spec.hub_name or spec.title
            figure = "Average MAPE (%, lower is better)" if spec.lower_is_better else "Accuracy (%)"
            value, interval, trials = headline(spec, items), headline_ci(spec, items, n_boot=n_boot), _trials(items)
            ours = ["not scored" if value is None else pct(value), _interval(interval, trials)]
            small = small or trials < SMALL_SAMPLE
            if (theirs := run.headline(spec)) is None:
                rows.append([run.model, title, setting, figure, *ours, _items_cell(items)])
                continue
            name, their_value, their_interval = theirs
            entry = run.entry(spec.name)
            # The items the protocol's headline read, as it counted them (their judge's total for VQA).
            count = run.protocol.counted(spec, entry)
            count = len(items) if count is None else count
            small = small or count < SMALL_SAMPLE
            rows.append([run.model, title, f"{settings['lang']}, {run.question()}", _figure_name(name, run, spec),
                         "not scored" if their_value is None else pct(their_value), _interval(their_interval, count),
                         str(count)])
            beside.append([run.model, title, figure, *ours, _items_cell(items), str(read_differently(entry))])
            notes.append(run.protocol.headline_note(spec, entry))
    table = md_table(["Model", "Task", "Setting", "Figure", "Value", "95% CI", "Items"], rows)
    if beside:
        # the notes are the protocol's own words (no text from a run folder): Markdown as written
        table += (f"\n\nThe same answers read by {protocols.get(None).title}, beside the figures above:\n\n"
                  + md_table(["Model", "Task", "Figure", "Value", "95% CI", "Items", "Items read differently"], beside)
                  + "\n\n" + "\n".join(f"- {note}" for note in notes if note))
    return table + ("\n\n" + small_note(resampled_units(runs)) if small else "")


def _interval(interval: Sequence[float] | None, trials: int) -> str:
    return "–" if interval is None else f"[{pct(interval[0])}, {pct(interval[1])}]{SMALL_MARK if trials < SMALL_SAMPLE else ''}"


def _resampled(runs: Sequence[RunData]) -> str:
    """What the card's intervals resampled, from what the runs recorded."""
    units = resampled_units(runs)
    return "whole merchants" if units <= {"merchants"} else resampled_words(units)


def render_model_card(runs: Sequence[RunData], *, hub_id: str | None = None, allow_partial: bool = False,
                      fmt: str = "card", n_boot: int = N_BOOT) -> str:
    """`card`: a whole README.md (YAML metadata block, then the body); `yaml`/`json`: the metadata only."""
    if fmt not in FORMATS:
        raise ReportError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    meta = metadata(runs, hub_id=hub_id, allow_partial=allow_partial)
    if fmt == "json":
        return json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
    import yaml

    block = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    if fmt == "yaml":
        return block
    refs = checked_refs(runs, hub_id=hub_id, allow_partial=True)
    parts = [f"---\n{block}---", f"# {as_text(meta['model-index'][0]['name'])} on {DATASET_NAME}"]
    if partial := sorted({reason for ref in refs for reason in ref.partial}):
        parts.append("> **Not a full-benchmark result** (" + as_text("; ".join(partial)) + "): these figures check the "
                     "pipeline and do not compare with the paper's or with full-release runs.")
    parts.append(results_table(runs, n_boot=n_boot))
    if len(runs) > 1:  # the same model under several settings: is each setting better than the first?
        from eval.report.paired import comparison

        if paired := comparison(runs, against_first=True, n_boot=n_boot):
            clustered = "a paired" if resampled_units(runs) == {"items"} else "a clustered paired"
            parts += ["## Settings compared", paired,
                      "Each later setting against the first, on the items both answered: the paired difference "
                      f"(percentage points), its 95% interval resampling {_resampled(runs).removeprefix('whole ')}, "
                      f"and the p-value of {clustered} permutation test (`python -m eval compare`)."]
    sources = []
    led = any(run.headline(spec) is not None for run in runs for spec, _ in run.scored_tasks())
    for ref in {ref.type: ref for ref in refs}.values():
        # ref.type of a Hub dataset matched HUB_ID (letters, digits, `-_./`); names come from a release card.
        link = f"[{as_text(ref.name)}](https://huggingface.co/datasets/{ref.type})" if ref.hub else as_text(ref.type)
        prints = sorted({p for r in refs if r.type == ref.type for p in r.fingerprints})
        if ref.revision:
            link += f" at revision {as_text(ref.revision[:12])}"
        elif led and prints:  # the release a protocol's figures were read on, as the run recorded it
            link += " (fingerprints " + ", ".join(f"{as_text(k)} {as_text(v[:16])}" for k, v in prints) + ")"
        sources.append(link)
    parts.append(f"Dataset: {', '.join(sources)}, split `test`. Intervals: 95% bootstrap, resampling "
                 f"{_resampled(runs)}. Values are percentages; for Average MAPE lower is better.")
    return "\n\n".join(parts) + "\n"
