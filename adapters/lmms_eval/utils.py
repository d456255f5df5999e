"""DiningBench as lmms-eval tasks, asked and scored under the run's protocol, as `python -m eval run` does.

    lmms-eval --include_path adapters/lmms_eval --tasks diningbench_classification \
        --model openai --model_args model_version=MODEL,base_url=http://localhost:8000/v1 --log_samples --output_path logs/
    python -m eval import logs/ --from lmms-eval --out results/NAME      # then `python -m eval report`

README.md ("Already using inspect_ai or lmms-eval?") has the setup and commands; `options`, the settings."""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable
from typing import Any

from adapters import common
from eval import tasks


def options() -> dict[str, Any]:
    """The settings from the environment, as the flags of `python -m eval run` (a bad value is a one-line
    ValueError naming it): DININGBENCH_SOURCE (a release folder or Hub id; default the embedded sample),
    DININGBENCH_PROTOCOL (official or ours; default official on the authors' release, ours otherwise),
    DININGBENCH_IMAGE_INDICES (the authors' protocol: the images to send, e.g. 0,1,2), and under ours
    DININGBENCH_LANG (zh, en), DININGBENCH_VIEWS (first N views) and DININGBENCH_COT (1)."""
    views = os.environ.get("DININGBENCH_VIEWS", "").strip()
    try:
        n = int(views) if views and views != "all" else None
    except ValueError:
        raise ValueError(f"DININGBENCH_VIEWS={views!r}: expected a number of views, or all") from None
    cot = os.environ.get("DININGBENCH_COT", "").strip().lower() in ("1", "true", "yes", "on")
    lang = os.environ.get("DININGBENCH_LANG", "").strip() or "zh"
    indices = os.environ.get("DININGBENCH_IMAGE_INDICES", "").strip() or None
    if indices is not None:
        try:
            common.image_indices(indices)
        except ValueError:
            raise ValueError(f"DININGBENCH_IMAGE_INDICES={indices!r}: expected indices separated by commas, "
                             "e.g. 0,1,2") from None
    return {"lang": lang, "views": n, "cot": cot, "dataset": os.environ.get("DININGBENCH_SOURCE") or None,
            "protocol": os.environ.get("DININGBENCH_PROTOCOL", "").strip() or None, "indices": indices}


def asked(task: str) -> common.Asked:
    """The task's settings with the protocol decided as the harness decides it, and its release."""
    return common.asked(common.settings_for(task, **options()))


# ---------------------------------------------------------------- docs
def _process_docs(spec: tasks.Task, dataset: Any) -> Any:
    """The release's rows as documents: each one's id and position (its images are read when it is
    asked), from the release DININGBENCH_SOURCE names (the YAML's dataset, the embedded sample, else)."""
    from datasets import Dataset

    found = asked(spec.name)
    positions = list(found.data.indices)
    return Dataset.from_dict({"id": [str(found.data.rows[k]["id"]) for k in positions], "position": positions})


def _item(task: str, doc: dict[str, Any]) -> common.Item:
    """The document as the protocol asks it (lmms-eval asks for its text, target, views and score apart)."""
    return _item_at(task, int(doc["position"]), tuple(sorted(options().items())))


@functools.lru_cache(maxsize=32)
def _item_at(task: str, position: int, settings: tuple[tuple[str, Any], ...]) -> common.Item:
    return common.request_of(asked(task), next(asked(task).data.release.iter_rows([position])))


def _visual(spec: tasks.Task, doc: dict[str, Any]) -> list[Any]:
    """Every view the protocol sends, in its order, as PIL images (lmms-eval's `openai` model re-encodes
    each, as PNG unless LMMS_IMAGE_ENCODE_FORMAT picks another: the same pixels, never the stored bytes)."""
    from PIL import Image

    return [Image.open(io.BytesIO(view.data)).convert("RGB") for view in _item(spec.name, doc).views]


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """The first task's views (which views go out does not depend on the task under ours); the YAMLs
    name each task's own `<task>_doc_to_visual`."""
    return _visual(next(tasks.all_tasks()), doc)


def _target(spec: tasks.Task, doc: dict[str, Any]) -> str:
    """The reference as text: a letter or an answer as it is, the nutrients as one line of JSON ("" for a
    row only the authors' rules score)."""
    return common.target_text(_item(spec.name, doc).reference)


# ---------------------------------------------------------------- scoring
def _judge(found: common.Asked):  # noqa: ANN202 - a judge(prompt) -> str callable, or None
    """DININGBENCH_JUDGE (a harness spec, e.g. openai:gpt-4o; DININGBENCH_JUDGE_BASE_URL for a local
    server): the VQA judge, with the protocol's judge settings. Without it, VQA answers the rule cannot
    decide stay unscored."""
    if not (spec := os.environ.get("DININGBENCH_JUDGE")):
        return None
    from eval.judge import make_judge

    return make_judge(spec, os.environ.get("DININGBENCH_JUDGE_BASE_URL") or None,
                      **common.judge_options(found.settings))


def _process(spec: tasks.Task, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    """The scored record of one answer, under the metric name the task's YAML lists (its `adapter_metric`)."""
    raw = results[0] if results else None
    raw = raw if isinstance(raw, str) else getattr(raw, "text", None)
    found = asked(spec.name)
    item = _item(spec.name, doc)
    judge = _judge(found) if spec.judged else None
    try:
        record = common.score_answer(common.Scoring(spec, found.settings), item.row, raw, judge=judge)
    finally:
        if judge is not None:
            judge.close()
    record.update(prompt=item.prompt, raw=raw, n_images=len(item.views), diningbench=common.described(found))
    return {spec.adapter_metric: record}


# lmms-eval finds a task's functions by the names its YAML gives (`!function utils.nutrition_process_results`):
# `<task>_<kind>` for every registered task, so a new task needs its YAML and nothing here.
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "process_docs": _process_docs,
    "doc_to_visual": _visual,
    "doc_to_text": lambda spec, doc, lmms_eval_specific_kwargs=None: _item(spec.name, doc).prompt,
    "doc_to_target": _target,
    "process_results": _process,
    "aggregate": common.metric_value,  # the protocol's headline, as metrics.json has it (accuracy; Average MAPE, lower is better)
}


def _generation_kwargs(task: str) -> dict[str, Any]:
    """`<task>_generation_kwargs`: what lmms-eval sends with every request (`Protocol.generation`), read
    when it loads the task's YAML (a YAML's own numbers are fixed; the budget depends on the release)."""
    generation = common.generation(asked(task))
    return {"max_new_tokens": generation.max_tokens, "temperature": generation.temperature, "do_sample": False,
            "until": []}


def __getattr__(name: str) -> Any:
    """`<task>_<kind>`: the function of kind `kind` (a key of _FUNCTIONS) for the registered `task`;
    `<task>_generation_kwargs`: the task's generation settings under the run's protocol."""
    task = name.removesuffix("_generation_kwargs")
    if task != name and tasks.is_task(task):
        return _generation_kwargs(task)
    for kind, function in _FUNCTIONS.items():
        task = name.removesuffix(f"_{kind}")
        if task != name and tasks.is_task(task):
            bound = functools.partial(function, tasks.get(task))  # its signature: the function's, less `spec`
            bound.__name__ = bound.__qualname__ = name
            bound.__doc__ = function.__doc__
            return bound
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
