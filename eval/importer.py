"""`python -m eval import`: a result made by inspect_ai or lmms-eval becomes a DiningBench run folder.

Nothing is taken on trust: the raw answers are checked against the release and scored again as any run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diningbench import MAX_JSON_DEPTH, file_problem, finite_number, iter_jsonl_objects, read_json_file
from eval import protocols, requests, scoring, tasks
from eval.endpoints import check_reachable, host_of
from eval.report.report import write_run_report
from eval.runinfo import build_run_json, read_run_json, write_run_json
from eval.settings import N_BOOT, RunSettings, UsageError, image_indices
from eval.store import PredictionStore
from eval.types import Prediction, RunInfo, UserError

FRAMEWORKS = ("inspect", "lmms-eval")
TASK_PREFIX = "diningbench_"
INSTALL_HINT = "pip install -r adapters/requirements.txt"
# The settings of a framework's log that reach run.json: an allow-list, never a deny-list (a field
# named `authorization`, `api_base` or `hf_auth` carries a credential under a name no list foresees).
ALLOWED = {
    "task_args": ("language", "views", "cot", "dataset", "protocol", "image_indices"),  # the adapter tasks' own
    "generate_config": ("temperature", "top_p", "top_k", "max_tokens", "seed", "stop_seqs", "frequency_penalty",
                        "presence_penalty", "num_choices", "reasoning_effort", "reasoning_tokens", "max_connections",
                        "timeout", "max_retries", "system_message"),
    "model_args": ("model_version", "pretrained", "model", "max_new_tokens", "temperature", "top_p", "batch_size",
                   "max_pixels", "min_pixels", "dtype", "attn_implementation", "revision", "num_concurrent",
                   "max_retries", "timeout", "modality"),
}
# A value that carries a credential whatever its field is called: URL userinfo, a bearer value, a key's shape.
_CREDENTIAL = re.compile(r"://[^/\s@]+@|\bbearer\s+\S|\b(?:sk|hf|pk|rk|ghp|gho|xox[abp]|AIza)[-_][A-Za-z0-9_-]{8,}|"
                         r"\bAIza[A-Za-z0-9_-]{20,}", re.I)


class ImportRefused(UserError):
    """A result that cannot become a DiningBench run (one line, naming the file or the item)."""


@dataclass
class Answer:
    id: str
    epoch: int  # 0-based, as predictions.jsonl counts
    raw: str | None
    prompt: str | None  # the text the framework sent, compared with ours
    error: str | None = None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    n_views: int | None = None  # views the framework sent, when its log says


@dataclass
class Result:
    """One task's answers from one framework log, with what the adapter recorded of its settings."""

    task: str
    source: Path
    model: str
    lang: str
    images: int | None
    cot: bool
    dataset: str | None
    fingerprint: str | None
    framework: dict[str, Any]
    protocol: str | None = None  # the protocol the adapter asked under (None: made before there was a choice)
    image_indices: str | None = None
    answers: list[Answer] = field(default_factory=list)


def _public(settings: dict[str, Any], kind: str, left_out: list[str]) -> dict[str, Any]:
    """The fields of `settings` on ALLOWED[kind] whose values carry nothing like a credential; the
    names of the others go to `left_out`."""
    kept = {name: value for name, value in settings.items()
            if name in ALLOWED[kind] and not _CREDENTIAL.search(json.dumps(value, default=str))}
    left_out.extend(f"{kind}.{name}" for name in settings if name not in kept)
    return kept


def _credential_free(value: Any, name: str, left_out: list[str]) -> Any:
    """`value` unless it looks like a credential (then None, its name in `left_out`)."""
    if value is not None and _CREDENTIAL.search(str(value)):
        left_out.append(name)
        return None
    return value


def _adapter_settings(meta: Any, where: str) -> dict[str, Any]:
    if not isinstance(meta, dict) or not tasks.is_task(meta.get("task")):
        raise ImportRefused(f"{where}: not made by the DiningBench adapter tasks (no DiningBench settings recorded); "
                            "run adapters/inspect_ai/diningbench_tasks.py or the adapters/lmms_eval tasks")
    lang, images = meta.get("lang") or "zh", meta.get("images")
    protocol, indices = meta.get("protocol"), meta.get("image_indices")
    if lang not in ("zh", "en") or not (images is None or (isinstance(images, int) and images >= 1)) \
            or not (protocol is None or protocol in protocols.names()) \
            or not (indices is None or isinstance(indices, str)):
        raise ImportRefused(f"{where}: unreadable DiningBench settings (lang {lang!r}, images {images!r}, "
                            f"protocol {protocol!r}, image indices {indices!r})")
    try:
        indices = None if indices is None else ",".join(map(str, image_indices(indices)))
    except UsageError:
        raise ImportRefused(f"{where}: unreadable DiningBench image indices {indices!r}") from None
    return {"task": meta["task"], "lang": lang, "images": images, "cot": bool(meta.get("cot")),
            "dataset": meta.get("dataset") or None, "fingerprint": meta.get("fingerprint"),
            "protocol": protocol, "image_indices": indices}


def _logs(path: Path, pattern: str, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """`path` when it is a file, else the files below it matching `pattern` (and ending in one of `suffixes`)."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob(pattern) if (suffixes is None or p.suffix in suffixes) and p.is_file())


# ---------------------------------------------------------------- inspect_ai
def _usage(model_usage: dict[str, Any]) -> dict[str, int] | None:
    for usage in (model_usage or {}).values():
        found = {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens}
        if usage.reasoning_tokens is not None:
            found["reasoning_tokens"] = usage.reasoning_tokens
        return found
    return None


def _last_text(messages: Any) -> str | None:
    if isinstance(messages, str):
        return messages
    content = messages[-1].content if messages else None
    if isinstance(content, str):
        return content
    texts = [c.text for c in content or [] if getattr(c, "type", None) == "text" and c.text != "(Image)"]
    return texts[-1] if texts else None


def _image_count(messages: Any) -> int | None:
    """Views in an inspect sample's input; logs written without images keep an "(Image)" stand-in."""
    if isinstance(messages, str) or not messages or isinstance(messages[-1].content, str):
        return None
    return sum(getattr(c, "type", None) == "image" or (getattr(c, "type", None) == "text" and c.text == "(Image)")
               for c in messages[-1].content)


def read_inspect(path: Path) -> list[Result]:
    """The DiningBench tasks' samples of inspect eval logs (a .eval/.json file or a folder of them)."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ImportRefused(f"reading inspect logs needs inspect_ai: {INSTALL_HINT}") from None
    results = []
    for log_path in _logs(path, "*", (".eval", ".json")):
        try:
            log = read_eval_log(str(log_path))
        except Exception as exc:  # noqa: BLE001 - inspect raises many types for a file that is not a log
            if path.is_file():
                raise ImportRefused(f"{log_path}: not an inspect eval log ({type(exc).__name__})") from None
            continue
        if not str(log.eval.task).split("/")[-1].startswith(TASK_PREFIX):
            continue
        if log.status != "success" or not log.samples:
            raise ImportRefused(f"{log_path}: the inspect run did not finish (status {log.status}); rerun it")
        meta = _adapter_settings((log.eval.metadata or {}).get("diningbench"), str(log_path))
        left_out: list[str] = []
        framework = {"framework": "inspect_ai", "version": (log.eval.packages or {}).get("inspect_ai"),
                     "task": log.eval.task, "task_args": _public(dict(log.eval.task_args or {}), "task_args", left_out),
                     "model": _credential_free(log.eval.model, "model", left_out),
                     "model_roles": {k: _credential_free(v.model, f"model_roles.{k}", left_out)
                                     for k, v in (getattr(log.eval, "model_roles", None) or {}).items()},
                     "generate_config": _public(log.plan.config.model_dump(exclude_none=True), "generate_config", left_out),
                     "left_out": left_out, "log": log_path.name}
        result = Result(source=log_path, model=str(log.eval.model), framework=framework, **meta)
        for sample in log.samples:
            output = sample.output
            error = sample.error.message if sample.error is not None else None
            stop = output.stop_reason if output is not None else None
            result.answers.append(Answer(
                id=str(sample.id), epoch=int(sample.epoch) - 1, raw=None if error else output.completion,
                prompt=_last_text(sample.input), error=error, n_views=_image_count(sample.input),
                finish_reason={"max_tokens": "length", "model_length": "length", "content_filter": "content_filter"}
                .get(str(stop), "stop" if stop else None), usage=_usage(sample.model_usage)))
        results.append(result)
    if not results:
        raise ImportRefused(f"{path}: no inspect log of a DiningBench task "
                            f"({', '.join(TASK_PREFIX + name for name in tasks.names())}) there")
    return results


# ---------------------------------------------------------------- lmms-eval
def _lmms_config(samples: Path) -> dict[str, Any]:
    """The results file written beside a samples file (same timestamp): model and version."""
    stamp = samples.name.split("_samples_")[0]
    found = samples.with_name(f"{stamp}_results.json")
    try:  # a log folder may come from anywhere: bounded, never through a link out of its folder
        info = read_json_file(found) if found.exists() and file_problem(found, found.parent) is None else {}
    except (ValueError, OSError):
        info = {}
    config = _object(info.get("config"))
    args = config.get("model_args") or ""
    pairs = dict(part.split("=", 1) for part in str(args).split(",") if "=" in part)
    left_out: list[str] = []
    return {"framework": "lmms-eval", "version": info.get("lmms_eval_version"), "model_type": config.get("model"),
            "model_args": _public(pairs, "model_args", left_out), "limit": config.get("limit"), "left_out": left_out,
            "generation_kwargs": _object(_object(info.get("configs")).get(samples.stem.split("_samples_")[-1]))
            .get("generation_kwargs"), "log": samples.name}


def _object(found: Any) -> dict[str, Any]:
    return found if isinstance(found, dict) else {}


def read_lmms(path: Path) -> list[Result]:
    """The DiningBench tasks' samples files of an lmms-eval `--log_samples` run (a file or a folder)."""
    results = []
    for samples in _logs(path, f"*_samples_{TASK_PREFIX}*.jsonl"):
        framework = _lmms_config(samples)
        model = framework["model_args"].get("model_version") or framework["model_args"].get("pretrained") \
            or framework.get("model_type") or "unknown"
        result = None
        for number, row in iter_jsonl_objects(samples, str(samples), error=ImportRefused, max_depth=MAX_JSON_DEPTH):
            record = next((row[t.adapter_metric] for t in tasks.all_tasks() if isinstance(row.get(t.adapter_metric), dict)),
                          None)  # the per-item record under the task's metric name (its lmms-eval YAML lists it)
            if record is None:
                raise ImportRefused(f"{samples}:{number}: no DiningBench record; was it made by the "
                                    "adapters/lmms_eval tasks?")
            meta = _adapter_settings(record.get("diningbench"), f"{samples}:{number}")
            if result is None:
                result = Result(source=samples, model=str(model), framework=framework, **meta)
            found = row.get("filtered_resps")
            found = found[0] if isinstance(found, list) and found else found
            raw = found if isinstance(found, str) or found is None else json.dumps(found, ensure_ascii=False)
            failed = isinstance(raw, str) and raw.startswith("[LMMS_EVAL_REQUEST_FAILED")
            counted = row.get("token_counts")  # a log from anywhere: a count is used only where it is one
            counts = counted[0] if isinstance(counted, list) and counted and isinstance(counted[0], dict) else {}
            usage = {name: int(counts[key]) for name, key in (("prompt_tokens", "input_tokens"),
                                                              ("completion_tokens", "output_tokens"))
                     if finite_number(counts.get(key), 0)} if counts else None
            result.answers.append(Answer(id=str(record.get("id")), epoch=0, raw=None if failed else raw,
                                         prompt=row.get("input") if isinstance(row.get("input"), str)
                                         else record.get("prompt"), error=raw if failed else None, usage=usage,
                                         n_views=record.get("n_images") if isinstance(record.get("n_images"), int)
                                         else None))
        if result is not None:
            results.append(result)
    if not results:
        raise ImportRefused(f"{path}: no lmms-eval samples file of a DiningBench task "
                            f"(*_samples_{TASK_PREFIX}*.jsonl; run lmms-eval with --log_samples)")
    return results


# ---------------------------------------------------------------- into a run folder
def _settings(results: list[Result], dataset: str | None, judge: str | None) -> RunSettings:
    first = results[0]
    for other in results[1:]:
        if (other.lang, other.images, other.cot, other.protocol, other.image_indices) != \
                (first.lang, first.images, first.cot, first.protocol, first.image_indices):
            raise ImportRefused(f"{other.source}: made with other settings than {first.source} (language, views, "
                                "chain of thought, protocol or image indices); import them into separate folders")
        if other.model != first.model:
            raise ImportRefused(f"{other.source}: another model ({other.model}) than {first.source} ({first.model})")
    if len({r.task for r in results}) != len(results):
        raise ImportRefused("several logs of the same task; import one log per task")
    return RunSettings(task=first.task if len(results) == 1 else "all", model=first.model, lang=first.lang,
                       images=first.images, cot=first.cot, dataset=dataset, judge=judge, protocol=first.protocol,
                       image_indices=first.image_indices)


def _release(task: tasks.Task, settings: RunSettings) -> tuple[Any, str]:
    """The task's release as `eval run` reads it (either layout) and its fingerprint."""
    import diningbench

    config = task.source_config
    try:
        return (diningbench.read_release(config, settings.dataset, lang=settings.lang),
                diningbench.fingerprint(config, settings.dataset, lang=settings.lang))
    except (ValueError, OSError) as exc:
        why = " ".join(str(exc).split())[:300]
        raise ImportRefused(f"cannot read the release {settings.dataset or 'embedded sample'}: {why}") from None


def _checked_predictions(result: Result, task: tasks.Task, settings: RunSettings) -> tuple[list[Prediction], str]:
    """The result's answers as predictions, each checked against the release item it names, as the
    run's protocol asks it (its prompt: language and chain of thought under ours, the row's own under
    theirs; as many views), and the release's fingerprint."""
    where = result.source.name
    release, expected = _release(task, settings)
    if result.fingerprint is not None and result.fingerprint != expected:
        raise ImportRefused(f"{where}: made on another release of {result.task} (fingerprint {result.fingerprint}, "
                            f"{settings.dataset or 'the embedded sample'} has {expected}); pass --dataset with the "
                            "release it was made on")
    protocol = protocols.of(settings)
    position = {str(r["id"]): n for n, r in enumerate(release.rows)}
    answers = sorted(result.answers, key=lambda a: (a.epoch, position.get(a.id, -1)))
    for answer in answers:
        if answer.id not in position:
            raise ImportRefused(f"{where}: item {answer.id} is not in the {result.task} release "
                                f"({settings.dataset or 'embedded sample'})")
    asked = sorted({position[a.id] for a in answers})
    rows = dict(zip(asked, release.iter_rows(asked), strict=True))
    predictions = []
    for answer in answers:
        row = rows[position[answer.id]]
        request = requests.build_request(task, row, settings, answer.epoch)
        ours = request.messages[0].text
        sent = request.metadata["n_images"]
        if answer.prompt != ours:
            raise ImportRefused(f"{where}: item {answer.id}: the prompt differs from DiningBench's "
                                f"({settings.lang}, {protocol.describe(settings)}: {sent} views); it was not asked as the benchmark "
                                "asks it")
        if answer.n_views is not None and answer.n_views != sent:
            raise ImportRefused(f"{where}: item {answer.id}: {answer.n_views} views were sent where DiningBench "
                                f"sends {sent}; it was not asked as the benchmark asks it")
        meta = {k: v for k, v in row.items() if k != "images"}
        parsed = task.read_answer(answer.raw, meta, settings.lang) \
            if answer.raw is not None and protocol.scores_row(task, meta, settings.lang) else None
        predictions.append(Prediction(
            id=answer.id, task=result.task, raw=answer.raw, parsed=parsed, error=answer.error, attempts=1,
            latency_s=0.0, usage=answer.usage, request_hash=request.request_hash,
            finish_reason=answer.finish_reason, truncated=answer.finish_reason == "length",
            n_images=sent, epoch=answer.epoch))
    return predictions, expected


def write_imported(out: Path, info: RunInfo, predictions: list[Prediction], *, judge: str | None,
                   judge_base_url: str | None, n_boot: int, rows: dict[str, Any] | None = None) -> Path:
    """Write an imported run folder (`out`: new, empty, or an earlier import) and score it by the normal
    path: run.json, predictions.jsonl, then scores.jsonl, metrics.json and report.md. For this import and
    `eval import --from official` (eval/official_io.py)."""
    from eval import api

    api.check_out(out)
    previous = read_run_json(out)
    if previous is not None and "imported" not in previous:
        raise UsageError(f"--out {out} holds a run made by the harness; choose another folder")
    check_reachable(judge_base_url, "--judge-base-url")
    with api.locked(out):
        for name in api.RUN_FILES:
            (out / name).unlink(missing_ok=True)
        write_run_json(out, info)
        with PredictionStore(out) as store:
            for prediction in predictions:
                store.append(prediction)
        scoring.score_run(out, judge=judge, judge_base_url=judge_base_url, n_boot=n_boot, rows=rows)
        write_run_report(out)
    return out


def import_run(source: Path | str, framework: str, out: Path | str, *, dataset: str | None = None,
               judge: str | None = None, judge_base_url: str | None = None, n_boot: int = N_BOOT) -> Path:
    """Turn an inspect log or lmms-eval samples file (or a folder of them) into a scored run folder."""
    source, out = Path(source), Path(out)
    if framework not in FRAMEWORKS:
        raise UsageError(f"--from {framework!r}: choose one of {', '.join(FRAMEWORKS)}")
    if not source.exists():
        raise UsageError(f"{source}: no such file or folder")
    results = read_inspect(source) if framework == "inspect" else read_lmms(source)
    dataset = dataset or results[0].dataset
    settings = _settings(results, dataset, judge)
    checked = {r.task: _checked_predictions(r, tasks.get(r.task), settings) for r in results}  # a log's task name
    predictions = {name: found for name, (found, _) in checked.items()}
    fingerprints = {name: fingerprint for name, (_, fingerprint) in checked.items()}
    backend = {"framework": results[0].framework["framework"], "imported_from": [str(r.source.name) for r in results],
               **{r.task: r.framework for r in results}}
    info = build_run_json(settings=settings.to_json(), tasks=[t for t in tasks.names() if t in predictions], backend=backend,
                          dataset_source=dataset, fingerprints=fingerprints,
                          judge={"spec": judge, "base_url_host": host_of(judge_base_url)} if judge else None,
                          counts={t: {"predictions": len(p), "failed": sum(x.error is not None for x in p),
                                      "truncated": sum(x.truncated for x in p)} for t, p in predictions.items()})
    left_out = sorted({name for r in results for name in r.framework.pop("left_out", [])})
    info["imported"] = {"framework": results[0].framework["framework"], "logs": [str(r.source) for r in results],
                        "left_out": left_out}
    return write_imported(out, info, [p for task in tasks.names() for p in predictions.get(task, [])], judge=judge,
                          judge_base_url=judge_base_url, n_boot=n_boot)
