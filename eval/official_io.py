"""The authors' prediction files, both ways: `eval export --format official` and `eval import --from official`.

Exported, their scripts score our runs; imported, their file becomes a run folder scored by both readings.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, cast

import diningbench
from diningbench import MAX_JSON_DEPTH, iter_jsonl_objects
from eval import official, protocols, scoring, tasks
from eval.api import check_out
from eval.endpoints import host_of
from eval.importer import write_imported
from eval.protocols.official import official_preds, reading_of, rules_for
from eval.runinfo import build_run_json, read_run_json
from eval.settings import LANGS, N_BOOT, RunSettings, UsageError
from eval.store import LOCK, PREDICTIONS, read_predictions, refuse_planted_links, write_atomically
from eval.tasks.base import MAX_PARSED_CHARS
from eval.types import OfficialReading, Prediction, PredictionLine, Row, UserError

FORMATS = ("official",)
# A line of their prediction file: an answer of at most the parsers' bound, twice (model_pred and
# model_full_pred), its prompt and paths: well under this.
MAX_LINE_BYTES = 4 * MAX_PARSED_CHARS + (1 << 20)


class OfficialFileError(UserError):
    """A prediction file in the authors' format that cannot be imported (one line, naming the line)."""


def file_name(task: tasks.Task, lang: str) -> str:
    """`classification_pred.jsonl`, `vqa_en_pred.jsonl`: one file per task and language."""
    return f"{task.source_config}{'_en' if lang == 'en' else ''}_pred.jsonl"


# ---------------------------------------------------------------- export
def _paths(row: Row, task: str, settings: RunSettings) -> PredictionLine:
    """The image paths their inference records: one path as `image_path`, several as `image_paths`."""
    paths = list(row.get("image_paths") or [])
    chosen = [paths[k] for k in rules_for(task).images(row, settings.indices)
              if k < len(paths)]
    return {"image_path": chosen[0]} if len(chosen) == 1 else {"image_paths": chosen}


def check_export_out(out: Path, overwrite: bool) -> list[str]:
    """`--out` of an export is, as `eval run --out` is, a new or empty folder (`check_out`), or, with
    `--overwrite`, one an earlier export wrote (it holds only the authors' prediction files, none of them a
    link); a run folder is refused (its files are not an export's). Returns the earlier export's files."""
    if out.is_dir():
        refuse_planted_links(out)
        held = sorted(p.name for p in out.iterdir() if p.name != LOCK)
        names = {file_name(task, lang) for task in tasks.all_tasks() for lang in LANGS}  # all an export may write
        if held and set(held) <= names and all((out / name).is_file() for name in held):
            if not overwrite:
                raise UsageError(f"--out {out} holds an earlier export ({', '.join(held)}); add --overwrite to "
                                 "replace it, or choose a new folder")
            return held
    check_out(out)
    if out.is_dir() and any(p.name != LOCK for p in out.iterdir()):  # check_out lets a run resume there
        raise UsageError(f"--out {out} is a run folder; export into a new or empty folder")
    return []


def export_official(run_dir: Path | str, out: Path | str, *, overwrite: bool = False) -> list[Path]:
    """Write the run's answers as the authors' prediction files (one per task) into `out`: a new or empty
    folder, or with `overwrite` one an earlier export wrote (its files are replaced)."""
    run_dir, out = Path(run_dir), Path(out)
    earlier = check_export_out(out, overwrite)
    info = read_run_json(run_dir)
    if info is None or not (run_dir / PREDICTIONS).is_file():
        raise UsageError(f"{run_dir} is not a run folder (needs run.json and {PREDICTIONS})")
    settings = RunSettings.from_saved(info.get("settings") or {})
    if not protocols.of(settings).asks_as_published:
        raise UsageError(f"{run_dir} was asked under our protocol (our prompts and images), not the authors'; their "
                         "scripts would score other questions: run it again with --protocol official")
    predictions = read_predictions(run_dir / PREDICTIONS)
    scores = _official_records(run_dir)
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for spec in tasks.all_tasks():
        task = spec.name
        mine = [p for p in predictions.values() if p.task == task and p.epoch == 0 and not p.rotation]
        if not mine:
            continue
        rows = scoring.load_rows(spec, settings.dataset, settings.lang)
        preds = official_preds(task, mine, [rows[p.id] for p in mine], settings.model, settings.indices)
        lines = []
        for p in mine:
            row = rows[p.id]
            line = preds[int(row["idx"])]
            failed = p.error is not None or p.raw is None or official.is_error(line["model_pred"])
            full = line["model_pred"] if failed else p.raw
            item: PredictionLine = {"idx": int(row["idx"])}
            if spec.has_options:
                item["gt_answer"] = line["gt_answer"]
            item.update({"model_pred": line["model_pred"], "model_full_pred": full, "model_input": row.get("prompt", "")})
            if not spec.has_options:
                item["label"] = row.get("ground_truth")
            item.update(_paths(row, task, settings))
            verdict: OfficialReading = scores.get((task, p.id), {})
            if "judge_reply" in verdict:
                item.update({"eval_match": bool(verdict.get("correct")), "eval_result": verdict["judge_reply"]})
            elif "eval_match" in line:
                item.update({"eval_match": line["eval_match"], "eval_result": line.get("eval_result")})
            lines.append(item)
        lines.sort(key=lambda item: item["idx"])
        path = out / file_name(spec, settings.lang)
        write_atomically(path, [json.dumps(item, ensure_ascii=False) + "\n" for item in lines])
        written.append(path)
    if not written:
        raise UsageError(f"{run_dir} holds no answers to export")
    for name in set(earlier) - {path.name for path in written}:  # the earlier export's other tasks
        (out / name).unlink(missing_ok=True)
    return written


def _official_records(run_dir: Path) -> dict[tuple[str, str], OfficialReading]:
    """Each scored item's `official` reading (the judge's reply and verdict), by (task, id)."""
    found: dict[tuple[str, str], OfficialReading] = {}
    path = run_dir / scoring.SCORES
    if not path.is_file():
        return found
    for _, record in iter_jsonl_objects(path, policy="skip", max_depth=MAX_JSON_DEPTH, max_line_bytes=MAX_LINE_BYTES):
        mine = reading_of(record) if record.get("epoch", 0) == 0 else None
        if mine is not None:
            found[(str(record.get("task")), str(record.get("id")))] = mine
    return found


# ---------------------------------------------------------------- import
def _strict_loads(data: bytes) -> Any:
    """json.loads that refuses NaN and Infinity (Python's accepts them; JSON has no such numbers)."""
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    return json.loads(data, parse_constant=refuse)


def read_official_file(path: Path, task: str, n_rows: int) -> dict[int, PredictionLine]:
    """The lines of one of their prediction files by `idx`, each checked as someone else's (the bounds and
    types SECURITY.md lists); an OfficialFileError names the first line that cannot be taken."""
    if not path.is_file():
        raise OfficialFileError(f"{path}: no such file")
    by_idx: dict[int, PredictionLine] = {}
    seen_at: dict[int, int] = {}
    for number, line in iter_jsonl_objects(path, path.name, error=OfficialFileError, loads=_strict_loads,
                                           max_line_bytes=MAX_LINE_BYTES, max_depth=MAX_JSON_DEPTH):
        where = f"{path.name} line {number}"
        idx = line.get("idx")
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise OfficialFileError(f"{where}: idx must be an integer, got {type(idx).__name__}")
        if not 0 <= idx < n_rows:
            raise OfficialFileError(f"{where}: idx {idx} is not a row of the release ({n_rows} rows)")
        if idx in seen_at:
            raise OfficialFileError(f"{where}: idx {idx} again (first at line {seen_at[idx]}); one line per item")
        for name in ("model_pred", "model_full_pred", "gt_answer", "eval_result", "model_input"):
            value = line.get(name)
            if value is not None and not isinstance(value, str):
                raise OfficialFileError(f"{where}: {name} must be text, got {type(value).__name__}")
            if isinstance(value, str) and len(value) > 2 * MAX_PARSED_CHARS and name != "model_input":
                raise OfficialFileError(f"{where}: {name} is {len(value):,} characters; answers are read up to "
                                        f"{2 * MAX_PARSED_CHARS:,}")
        if not isinstance(line.get("model_pred"), str):
            raise OfficialFileError(f"{where}: no model_pred")
        if "eval_match" in line and not isinstance(line["eval_match"], bool):
            raise OfficialFileError(f"{where}: eval_match must be true or false")
        seen_at[idx] = number
        by_idx[idx] = cast(PredictionLine, line)  # checked above: idx, the text fields, eval_match (paths where read)
    if not by_idx:
        raise OfficialFileError(f"{path}: no prediction lines")
    return by_idx


def import_official(source: Path | str, task: str, out: Path | str, *, dataset: str, lang: str = "zh",
                    model: str | None = None, judge: str | None = None, judge_base_url: str | None = None,
                    n_boot: int = N_BOOT) -> Path:
    """Turn a prediction file their scripts wrote into a run folder scored by both readings."""
    if not tasks.is_task(task):
        raise UsageError(f"--task {task!r}: choose one of {', '.join(tasks.names())}")
    source, out = Path(source), Path(out)
    spec = tasks.get(task)
    try:
        release = diningbench.read_release(spec.source_config, dataset, lang=lang)
        fingerprint = diningbench.fingerprint(spec.source_config, dataset, lang=lang)
    except (ValueError, OSError) as exc:
        raise UsageError(f"cannot read the release {dataset}: {' '.join(str(exc).split())[:300]}") from None
    rows = sorted(release.rows, key=lambda r: int(r.get("idx", 0)))
    if not rows or "prompt" not in rows[0]:
        raise UsageError(f"--dataset {dataset} is not the authors' release (its rows carry no prompt)")
    lines = read_official_file(source, task, len(rows))
    settings = RunSettings(task=task, model=model or "openai:imported", dataset=dataset, lang=lang,
                           protocol="official", judge=judge)
    settings.validate()
    predictions = []
    for idx in sorted(lines):
        line, row = lines[idx], rows[idx]
        pred = line["model_pred"]
        failed = official.is_error(pred)
        raw = None if failed else (line.get("model_full_pred") if isinstance(line.get("model_full_pred"), str) else pred)
        kept: PredictionLine = {"model_pred": pred}
        if isinstance(line.get("gt_answer"), str) and line["gt_answer"]:
            kept["gt_answer"] = line["gt_answer"]
        if isinstance(line.get("eval_match"), bool):
            kept.update({"eval_match": line["eval_match"], "eval_result": line.get("eval_result")})
        parsed = None
        if raw is not None and scoring.usable_reference(spec, row, lang):
            parsed = spec.read_answer(raw, row, lang)
        identity = json.dumps([task, row.get("prompt"), line.get("image_path"), line.get("image_paths"), "imported"],
                              ensure_ascii=False)
        sent: list[Any] = line["image_paths"] if isinstance(line.get("image_paths"), list) else [line.get("image_path")]
        predictions.append(Prediction(
            id=str(row["id"]), task=task, raw=raw, parsed=parsed, error=pred if failed else None, attempts=1,
            latency_s=0.0, usage=None, request_hash=hashlib.sha256(identity.encode()).hexdigest()[:32],
            n_images=sum(1 for p in sent if isinstance(p, str)), imported=kept))
    info = build_run_json(settings=settings.to_json(), tasks=[task], backend={"framework": "authors' scripts",
                          "imported_from": [source.name]}, dataset_source=dataset, fingerprints={task: fingerprint},
                          judge={"spec": judge, "base_url_host": host_of(judge_base_url)} if judge else None,
                          counts={task: {"predictions": len(predictions),
                                         "failed": sum(p.error is not None for p in predictions), "truncated": 0}})
    info["imported"] = {"framework": "official", "logs": [str(source)], "left_out": []}
    if revision := getattr(release, "revision", None):
        info["dataset_revision"] = {task: revision}
    return write_imported(out, info, predictions, judge=judge, judge_base_url=judge_base_url, n_boot=n_boot,
                          rows={task: release.rows})


__all__ = ["FORMATS", "OfficialFileError", "export_official", "file_name", "import_official", "read_official_file"]
