"""DiningBench as inspect_ai tasks, scored by DiningBench's own metric modules.

    inspect eval adapters/inspect_ai/diningbench_tasks.py@diningbench_classification --model openai/gpt-4o
    inspect eval adapters/inspect_ai/diningbench_tasks.py@diningbench_nutrition -T language=en -T views=2 -T cot=true
    inspect eval adapters/inspect_ai/diningbench_tasks.py@diningbench_vqa --model-role grader=openai/gpt-4o
    python -m eval import logs/ --from inspect --out results/NAME     # then `python -m eval report`

Each sample is the item exactly as `python -m eval run` asks it (eval/prompts.py's prompt, the same
views as image content, in the same order and bytes); the scorers call the metric modules' parsers
and per-item scorers, and the task metrics are the headline figures of metrics.json. Parameters:
`language` (zh, the paper's, or en), `views` (first N views; default all), `cot` (the
chain-of-thought prompts), `dataset` (a release folder or Hub id; default the embedded sample).
VQA answers are graded by the model bound to the `grader` role with DiningBench's judge prompt;
closed-form answers are decided by the metric's rule first; with no grader, the rest stay unscored.
The views are kept as files named by their hash in ~/.cache/diningbench/views (or
$DININGBENCH_VIEWS_CACHE), so that a sample holds a path rather than the image itself.

inspect loads this file by its path: the checkout must be importable (`pip install -e .` in the
environment that has inspect_ai, as `make test` does for .venv-adapters).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageUser, ContentImage, ContentText, GenerateConfig, Model, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import TaskState, generate

from adapters import common
from eval.prompts import PROMPT_VERSION
from eval.types import ImagePart

GRADER_ROLE = "grader"
# VQA scoring blocks a thread on each grader call while the event loop makes it; those threads must not
# be the loop's default executor, which the grader's own connection needs (asyncio's getaddrinfo): with
# as many samples scored at once as that pool has threads, every call would wait for a thread forever.
_SCORING_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="diningbench-vqa-scoring")
VIEWS_DIR = Path(os.environ.get("DININGBENCH_VIEWS_CACHE") or Path.home() / ".cache" / "diningbench" / "views")


def _view_file(view: ImagePart) -> str:
    """The view's bytes in a file named by their hash (checked before reuse): a sample holds a path,
    not megabytes of base64, so a paper-size release fits in memory; inspect sends the file's bytes."""
    digest = hashlib.sha256(view.data).hexdigest()
    path = VIEWS_DIR / (digest + (".png" if view.mime_type == "image/png" else ".jpg"))
    try:
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
            return str(path)
        VIEWS_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(view.data)
        os.replace(tmp, path)
    except OSError:  # a read-only home: the view travels inline instead
        return f"data:{view.mime_type};base64,{base64.b64encode(view.data).decode()}"
    return str(path)


def _sample(item: common.Item) -> Sample:
    images = [ContentImage(image=_view_file(v)) for v in item.views]
    target = item.reference if isinstance(item.reference, str) else common.json_text(item.reference)
    return Sample(id=item.id, input=[ChatMessageUser(content=[*images, ContentText(text=item.prompt)])],
                  target=target, metadata={"row": item.row, "prompt": item.prompt, "n_images": len(item.views)})


def _scorer_for(name: str) -> Any:
    """The task's scorer, by what the task object says: judged, by percentage errors, or right/wrong."""
    spec = common.task_spec(name)
    return judge_scorer if spec.judged else nutrition_scorer if spec.measure == "ape" else choice_scorer


def _bad_option(message: str) -> Exception:
    """A bad `-T` option. Under the `inspect` command it is one line and exit status 2: inspect builds
    tasks inside a task group and prints any error from them as an exception group's traceback (hundreds
    of lines). Called from Python (`inspect_ai.eval`), it is a ValueError naming the option."""
    if Path(sys.argv[0]).name == "inspect":
        sys.stdout.flush()
        print(f"error: {message}", file=sys.stderr, flush=True)
        os._exit(2)  # nothing is written yet: no log, no sample
    return ValueError(message)


def _task(name: str, language: str, views: int | None, cot: bool, dataset: str | None) -> Task:
    try:
        views = None if views in (None, "", "all") else int(views)
    except (TypeError, ValueError):
        raise _bad_option(f"diningbench_{name}: -T views={views}: give a number of views (1 or more) or all") from None
    if not isinstance(cot, bool) and str(cot).strip().lower() not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise _bad_option(f"diningbench_{name}: -T cot={cot}: give true or false")
    cot = cot if isinstance(cot, bool) else str(cot).strip().lower() in ("1", "true", "yes", "on")
    try:
        found = list(common.items(name, lang=language, views=views, cot=cot, dataset=dataset))  # a generator
    except ValueError as exc:  # settings_for's and the release loader's one-line errors
        raise _bad_option(f"diningbench_{name}: {exc}") from None
    samples = [_sample(item) for item in found]
    return Task(
        dataset=MemoryDataset(samples, name=f"diningbench_{name}", location=common.source_name(dataset)),
        solver=generate(),
        scorer=_scorer_for(name)(name, language),
        metrics=[headline_metric(name)()],
        config=GenerateConfig(temperature=common.TEMPERATURE, max_tokens=common.MAX_TOKENS),
        metadata={"diningbench": {"task": name, "lang": language, "images": views, "cot": cot,
                                  "dataset": dataset, "fingerprint": common.fingerprint(name, dataset),
                                  "prompt_version": PROMPT_VERSION}},
    )


@task
def diningbench_classification(language: str = "zh", views: int | None = None, cot: bool = False,
                               dataset: str | None = None) -> Task:
    """Dish recognition: the dish's name among its options (accuracy)."""
    return _task("classification", language, views, cot, dataset)


@task
def diningbench_nutrition(language: str = "zh", views: int | None = None, cot: bool = False,
                          dataset: str | None = None) -> Task:
    """Calories, protein, carbohydrates and fat per serving (Average MAPE, lower is better)."""
    return _task("nutrition", language, views, cot, dataset)


@task
def diningbench_vqa(language: str = "zh", views: int | None = None, cot: bool = False,
                    dataset: str | None = None) -> Task:
    """Dietary questions, graded against the reference by the `grader` role (accuracy)."""
    return _task("vqa", language, views, cot, dataset)


# ---------------------------------------------------------------- headline metrics
def _records(scores: list[SampleScore]) -> list[dict[str, Any]]:
    return [s.score.metadata["record"] for s in scores if s.score.metadata and "record" in s.score.metadata]


@functools.cache
def headline_metric(task_name: str) -> Any:
    """The task's headline figure, as metrics.json has it (accuracy, unparsed or unscored answers
    counting as wrong; Average MAPE for nutrition, a fraction), as an inspect metric named by the task
    object's `adapter_metric`."""
    @metric(name=common.task_spec(task_name).adapter_metric)
    def headline() -> Metric:
        def compute(scores: list[SampleScore]) -> float:
            value = common.headline(task_name, _records(scores))
            return float("nan") if value is None else float(value)
        return compute
    return headline


# ---------------------------------------------------------------- scorers
def _answer(state: TaskState) -> str:
    return state.output.completion if state.output is not None else ""


def _score(record: dict[str, Any], state: TaskState, value: Any) -> Score:
    record["truncated"] = state.output is not None and state.output.stop_reason == "max_tokens"
    record["n_images"] = state.metadata.get("n_images")
    parsed = record.get("parsed")
    return Score(value=value, answer=parsed if isinstance(parsed, str) or parsed is None else common.json_text(parsed),
                 metadata={"record": record})


@scorer(metrics=[])  # the task's headline metric is given by the task (`headline_metric`)
def choice_scorer(task_name: str, language: str = "zh"):  # noqa: ANN201 - inspect's scorer protocol
    """The option letter read by dining_accuracy's `parse_choice`, against the answer."""
    async def score(state: TaskState, target: Target) -> Score:
        record = common.score_answer(task_name, state.metadata["row"], _answer(state), lang=language)
        return _score(record, state, 1.0 if record["correct"] else 0.0)
    return score


@scorer(metrics=[])
def nutrition_scorer(task_name: str, language: str = "zh"):  # noqa: ANN201
    """nutrition_error's `parse_nutrition` and per-item APE; the sample value is its mean APE."""
    async def score(state: TaskState, target: Target) -> Score:
        record = common.score_answer(task_name, state.metadata["row"], _answer(state), lang=language)
        apes = [v for v in (record["ape"] or {}).values() if v is not None]
        return _score(record, state, sum(apes) / len(apes) if apes else 0.0)
    return score


def _grader() -> Model | None:
    """The model bound to the grader role (`--model-role grader=...`), or None when none is.

    `get_model(role=...)` falls back to the model under evaluation, which must never grade itself:
    the roles bound for this eval are read directly.
    """
    try:
        from inspect_ai.model._model import model_roles  # the pinned inspect-ai's roles of this eval
    except ImportError:  # another inspect-ai: a role resolving to the model under evaluation is no grader
        grader = get_model(role=GRADER_ROLE)
        return None if grader is get_model() else grader
    return model_roles().get(GRADER_ROLE)


@scorer(metrics=[])
def judge_scorer(task_name: str, language: str = "zh"):  # noqa: ANN201
    """judge_accuracy's rule, then DiningBench's judge prompt sent to the grader role."""
    async def score(state: TaskState, target: Target) -> Score:
        grader = _grader()
        loop = asyncio.get_running_loop()
        config = GenerateConfig(temperature=0.0, max_tokens=common.MAX_TOKENS)

        def judge(prompt: str) -> str:  # judge_items calls it from its worker thread
            future = asyncio.run_coroutine_threadsafe(grader.generate(prompt, config=config), loop)
            return future.result().completion

        record = await loop.run_in_executor(_SCORING_THREADS, functools.partial(
            common.score_answer, task_name, state.metadata["row"], _answer(state), lang=language,
            judge=judge if grader is not None else None))
        verdict = record.get("verdict")
        return _score(record, state, {"C": 1.0, "I": 0.0}.get(verdict, 0.0))
    return score
