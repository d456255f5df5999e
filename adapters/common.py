"""What the framework adapters share: DiningBench items exactly as the harness asks them, and their scores.

The inspect_ai and lmms-eval tasks take every item from here: the prompt (`eval.prompts` through
`eval.requests.build_request`), the views (`eval.images`, the same bytes `python -m eval run` sends),
the reference, and the per-item score (`eval.scoring.score_prediction`, i.e. the metric modules'
parsers and scorers). Headline figures come from the harness's own `headline`, as in metrics.json.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval import numbers as _numbers  # headline figures and intervals
from eval import requests, scoring, tasks
from eval.settings import LANGS, RunSettings
from eval.types import DEFAULT_MAX_TOKENS, ImagePart, Prediction
from metrics.judge_accuracy.core import judge_items

ROOT = Path(__file__).resolve().parents[1]
TEMPERATURE = 0.0  # the paper's protocol: greedy decoding with 16,384 tokens
MAX_TOKENS = DEFAULT_MAX_TOKENS
ADAPTER_MODEL = "adapter"  # the model field of the settings that build prompts (not part of any prompt)


@dataclass(frozen=True)
class Item:
    """One question as the harness asks it: prompt text, the views sent, and what scoring needs."""

    task: str
    id: str
    prompt: str
    views: tuple[ImagePart, ...]
    reference: Any
    row: dict[str, Any]  # the dataset row without its images (breakdown fields, options, question)


def settings_for(task: str, *, lang: str = "zh", views: int | None = None, cot: bool = False,
                 dataset: str | None = None) -> RunSettings:
    """The harness settings behind an adapter task's parameters (a bad one is a one-line ValueError)."""
    if not tasks.is_task(task):
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(tasks.names())}")
    if lang not in LANGS:
        raise ValueError(f"language {lang!r}: choose one of {', '.join(LANGS)}")
    if views is not None and (isinstance(views, bool) or not isinstance(views, int) or views < 1):
        raise ValueError(f"views must be a number of views of at least 1, or None for all (got {views!r})")
    return RunSettings(task=task, model=ADAPTER_MODEL, lang=lang, images=views, cot=bool(cot),
                       dataset=str(dataset) if dataset else None)


def task_spec(task: str) -> tasks.Task:
    """The registered task object (what differs by task: its measure, whether a judge decides)."""
    return tasks.get(task)


def source_name(dataset: str | None) -> str:
    return str(dataset) if dataset else "embedded sample"


def fingerprint(task: str, dataset: str | None) -> str:
    import diningbench

    return diningbench.fingerprint(task, dataset)


def items(task: str, *, lang: str = "zh", views: int | None = None, cot: bool = False,
          dataset: str | None = None, limit: int | None = None) -> Iterator[Item]:
    """The task's items in dataset order, each built by `eval.requests.build_request`."""
    import diningbench

    settings = settings_for(task, lang=lang, views=views, cot=cot, dataset=dataset)
    rows = diningbench.load(tasks.get(task).source_config, settings.dataset, decode_images=False)
    if limit is not None:
        rows = rows.select(range(min(limit, len(rows))))
    for row in rows:
        request = requests.build_request(task, row, settings)
        meta = {k: v for k, v in row.items() if k != "images"}
        message = request.messages[0]
        yield Item(task=task, id=str(row["id"]), prompt=message.text, views=message.images,
                   reference=tasks.reference_of(task, meta, lang), row=meta)


def score_answer(task: str, row: dict[str, Any], raw: str | None, *, lang: str = "zh",
                 judge: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The scores.jsonl record of one answer: correct (classification), ape (nutrition), or the
    VQA verdict (rule first, then `judge(prompt) -> str` when given; unscored without one)."""
    text = tasks.parse_input(raw) if isinstance(raw, str) else raw
    spec = tasks.get(task)
    parsed = tasks.parse_output(task, text, row, lang) if not spec.judged and isinstance(text, str) else None
    # score_prediction scores the answer as parsed when it was made: parse it before, not after
    prediction = Prediction(id=str(row["id"]), task=task, raw=raw, parsed=parsed, error=None, attempts=1,
                            latency_s=0.0, usage=None, request_hash="")
    if spec.judged:
        record = scoring.item_record(task, row, prediction, lang=lang)
        verdict, decided_by, _ = judge_items([spec.question(row, lang) or ""], [record["reference"]], [text], judge)[0]
        record.update(parsed=tasks.parse_output(task, text or "", row, lang), verdict=verdict,
                      decided_by=scoring.DECIDED_BY.get(decided_by),
                      correct=None if verdict is None else verdict == "C")
        return record
    return scoring.score_prediction(prediction, row, lang)


def headline(task: str, records: Sequence[dict[str, Any]]) -> float | None:
    """The figure Table 2 ranks by (accuracy; Average MAPE for nutrition), as metrics.json has it."""
    return _numbers.headline(task, list(records))


def json_text(value: Any) -> str:
    """A reference or parsed answer as one line of JSON (what a framework's string fields hold)."""
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)
