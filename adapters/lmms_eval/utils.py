"""DiningBench as lmms-eval tasks: our prompts, views, parsers, scorers and headline figures.

    lmms-eval --include_path adapters/lmms_eval --tasks diningbench_classification \
        --model openai --model_args model_version=MODEL,base_url=http://localhost:8000/v1 --log_samples --output_path logs/
    python -m eval import logs/ --from lmms-eval --out results/NAME      # then `python -m eval report`

Run from the repository root, with the checkout importable (`pip install -e .` in the environment that
has lmms-eval, as `make test` does for .venv-adapters): the YAMLs point lmms-eval's `datasets` loader at the embedded sample
(`diningbench/`). `DININGBENCH_SOURCE` (a release folder or Hub id) swaps in another release;
`DININGBENCH_LANG` (zh, en), `DININGBENCH_VIEWS` (first N views) and `DININGBENCH_COT` (1) choose the
prompt, as `--lang`, `--images` and `--cot` do for `python -m eval run`.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable
from typing import Any

from adapters import common
from eval import tasks
from eval.images import select_views, views_for_request
from eval.prompts import PROMPT_VERSION
from eval.settings import RunSettings


def options() -> dict[str, Any]:
    """The prompt settings from the environment (a bad value is a one-line ValueError naming it)."""
    views = os.environ.get("DININGBENCH_VIEWS", "").strip()
    try:
        n = int(views) if views and views != "all" else None
    except ValueError:
        raise ValueError(f"DININGBENCH_VIEWS={views!r}: expected a number of views, or all") from None
    cot = os.environ.get("DININGBENCH_COT", "").strip().lower() in ("1", "true", "yes", "on")
    lang = os.environ.get("DININGBENCH_LANG", "").strip() or "zh"
    return {"lang": lang, "views": n, "cot": cot, "dataset": os.environ.get("DININGBENCH_SOURCE") or None}


def _settings(task: str):  # noqa: ANN202 - eval.settings.RunSettings
    return common.settings_for(task, **options())


# ---------------------------------------------------------------- docs
def _process_docs(task: str, dataset: Any) -> Any:
    """The rows with their images as stored bytes (never decoded twice); another release when
    DININGBENCH_SOURCE names one."""
    from datasets import Image, List

    import diningbench

    settings = _settings(task)
    if settings.dataset:
        return diningbench.load(tasks.get(task).source_config, settings.dataset, decode_images=False)
    return dataset.cast_column("images", List(Image(decode=False)))


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """Every view the harness sends (first N with DININGBENCH_VIEWS), in its order, as PIL images."""
    from PIL import Image

    settings = _settings(tasks.names()[0])  # which views go out does not depend on the task
    views = views_for_request(doc, n=settings.images, order=settings.image_order, seed=settings.seed,
                              max_side=settings.max_image_side)
    return [Image.open(io.BytesIO(view.data)).convert("RGB") for view in views]


def _text(task: str, doc: dict[str, Any]) -> str:
    return tasks.prompt_text(task, doc, _settings(task))


def _target(task: str, doc: dict[str, Any]) -> str:
    """The reference as text: a letter or an answer as it is, the nutrients as one line of JSON."""
    reference = tasks.reference_of(task, doc, options()["lang"])
    return reference if isinstance(reference, str) or reference is None else common.json_text(reference)


# ---------------------------------------------------------------- scoring
def _judge():  # noqa: ANN202 - a judge(prompt) -> str callable, or None
    """DININGBENCH_JUDGE (a harness spec, e.g. openai:gpt-4o; DININGBENCH_JUDGE_BASE_URL for a local
    server): the VQA judge. Without it, VQA answers the rule cannot decide stay unscored."""
    spec = os.environ.get("DININGBENCH_JUDGE")
    if not spec:
        return None
    from eval.judge import make_judge

    return make_judge(spec, os.environ.get("DININGBENCH_JUDGE_BASE_URL") or None)


def _process(task: str, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    """The scored record of one answer, under the metric name the task's YAML lists (its `adapter_metric`)."""
    raw = results[0] if results else None
    raw = raw if isinstance(raw, str) else getattr(raw, "text", None)
    row = {k: v for k, v in doc.items() if k != "images"}
    judge = _judge() if tasks.get(task).judged else None
    try:
        record = common.score_answer(task, row, raw, lang=options()["lang"], judge=judge)
    finally:
        if judge is not None:
            judge.close()
    settings = options()
    record.update(prompt=_text(task, doc), raw=raw, n_images=len(select_views(
        doc.get("image_roles") or [], settings["views"], RunSettings.image_order, seed=0, item_id=str(doc["id"]))))
    record["diningbench"] = {"task": task, "lang": settings["lang"], "images": settings["views"], "cot": settings["cot"],
                             "dataset": settings["dataset"], "fingerprint": _fingerprint(task, settings["dataset"]),
                             "prompt_version": PROMPT_VERSION}
    return {tasks.get(task).adapter_metric: record}


@functools.lru_cache(maxsize=8)
def _fingerprint(task: str, dataset: str | None) -> str:
    return common.fingerprint(task, dataset)


def _aggregate(task: str, records: list[dict[str, Any]]) -> float:
    value = common.headline(task, records)
    return float("nan") if value is None else float(value)


# lmms-eval finds a task's functions by the names its YAML gives (`!function utils.nutrition_process_results`):
# `<task>_<kind>` for every registered task, so a new task needs its YAML and nothing here.
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "process_docs": _process_docs,
    "doc_to_text": lambda task, doc, lmms_eval_specific_kwargs=None: _text(task, doc),
    "doc_to_target": _target,
    "process_results": _process,
    "aggregate": _aggregate,  # the task's headline, as metrics.json has it (accuracy; Average MAPE, lower is better)
}


def __getattr__(name: str) -> Callable[..., Any]:
    """`<task>_<kind>`: the function of kind `kind` (a key of _FUNCTIONS) for the registered `task`."""
    for kind, function in _FUNCTIONS.items():
        task = name.removesuffix(f"_{kind}")
        if task != name and tasks.is_task(task):
            bound = functools.partial(function, task)  # its signature: the function's, less `task`
            bound.__name__ = bound.__qualname__ = name
            bound.__doc__ = function.__doc__
            return bound
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
