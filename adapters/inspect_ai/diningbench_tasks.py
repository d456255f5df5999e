"""DiningBench as inspect_ai tasks, asked and scored under the run's protocol, as `python -m eval run` does.

    inspect eval adapters/inspect_ai/diningbench_tasks.py@diningbench_nutrition -T language=en -T views=2 -T cot=true
    python -m eval import logs/ --from inspect --out results/NAME     # then `python -m eval report`

README.md ("Already using inspect_ai or lmms-eval?") has the setup and commands; `_task`, the `-T` parameters.
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
from eval import tasks
from eval.types import ImagePart

GRADER_ROLE = "grader"
# VQA scoring blocks a thread on each grader call while the event loop makes it; those threads must not
# be the loop's default executor, which the grader's own connection needs (asyncio's getaddrinfo): with
# as many samples scored at once as that pool has threads, every call would wait for a thread forever.
_SCORING_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="diningbench-vqa-scoring")
VIEWS_DIR = Path(os.environ.get("DININGBENCH_VIEWS_CACHE") or Path.home() / ".cache" / "diningbench" / "views")


def _view_file(view: ImagePart) -> str:
    """The view's bytes in a file named by their hash (checked before reuse) in ~/.cache/diningbench/views or
    $DININGBENCH_VIEWS_CACHE: a sample holds a path, not megabytes of base64, so a paper-size release fits in
    memory; inspect sends the file's bytes."""
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
    return Sample(id=item.id, input=[ChatMessageUser(content=[*images, ContentText(text=item.prompt)])],
                  target=common.target_text(item.reference),
                  metadata={"row": item.row, "prompt": item.prompt, "n_images": len(item.views)})


def _bad_option(message: str) -> Exception:
    """A bad `-T` option. Under the `inspect` command it is one line and exit status 2: inspect builds
    tasks inside a task group and prints any error from them as an exception group's traceback (hundreds
    of lines). Called from Python (`inspect_ai.eval`), it is a ValueError naming the option."""
    if Path(sys.argv[0]).name == "inspect":
        sys.stdout.flush()
        print(f"error: {message}", file=sys.stderr, flush=True)
        os._exit(2)  # nothing is written yet: no log, no sample
    return ValueError(message)


def _indices(value: Any) -> str | None:
    """`-T image_indices=0,1,2` (text), `=[0,1,2]` (a list) or `=0` (a number), as the harness spells it."""
    if value is None or value == "":
        return None
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _task(name: str, language: str, views: int | None, cot: bool, dataset: str | None, protocol: str | None,
          image_indices: Any) -> Task:
    """`language` (zh, the paper's, or en), `views` (the first N; default all) and `cot` (the chain-of-thought
    prompts) under ours; `dataset` (a release folder or Hub id; default the embedded sample); `protocol` (official
    or ours; default official on the authors' release, ours otherwise); `image_indices` (the authors' protocol:
    0 the merchant's photo, k the k-th customer photo; default 0)."""
    try:
        views = None if views in (None, "", "all") else int(views)
    except (TypeError, ValueError):
        raise _bad_option(f"diningbench_{name}: -T views={views}: give a number of views (1 or more) or all") from None
    if not isinstance(cot, bool):
        if (text := str(cot).strip().lower()) not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise _bad_option(f"diningbench_{name}: -T cot={cot}: give true or false")
        cot = text in ("1", "true", "yes", "on")
    try:
        settings = common.settings_for(name, lang=language, views=views, cot=cot, dataset=dataset,
                                       protocol=protocol or None, indices=_indices(image_indices))
        found = common.asked(settings)  # the protocol decided as `eval run` decides it, and checked
        samples = [_sample(item) for item in common.items(found)]
    except ValueError as exc:  # the settings', the protocol's and the release loader's one-line errors
        raise _bad_option(f"diningbench_{name}: {exc}") from None
    asked = found.settings
    config = common.generation(found)
    return Task(dataset=MemoryDataset(samples, name=f"diningbench_{name}",
                                      location=str(dataset) if dataset else "embedded sample"),
                solver=generate(), scorer=diningbench_scorer(name, asked.lang, asked.protocol),
                metrics=[headline_metric(found.data.spec)()],
                config=GenerateConfig(temperature=config.temperature, max_tokens=config.max_tokens),
                metadata={"diningbench": common.described(found)})


@task
def diningbench_classification(language: str = "zh", views: int | None = None, cot: bool = False,
                               dataset: str | None = None, protocol: str | None = None,
                               image_indices: str | None = None) -> Task:
    """Dish recognition: the dish's name among its options (accuracy)."""
    return _task("classification", language, views, cot, dataset, protocol, image_indices)


@task
def diningbench_nutrition(language: str = "zh", views: int | None = None, cot: bool = False,
                          dataset: str | None = None, protocol: str | None = None,
                          image_indices: str | None = None) -> Task:
    """Calories, protein, carbohydrates and fat per serving (Average MAPE, lower is better)."""
    return _task("nutrition", language, views, cot, dataset, protocol, image_indices)


@task
def diningbench_vqa(language: str = "zh", views: int | None = None, cot: bool = False,
                    dataset: str | None = None, protocol: str | None = None,
                    image_indices: str | None = None) -> Task:
    """Dietary questions, graded against the reference by the `grader` role (accuracy)."""
    return _task("vqa", language, views, cot, dataset, protocol, image_indices)


# ---------------------------------------------------------------- headline metrics
@functools.cache
def headline_metric(spec: tasks.Task) -> Any:
    """`common.metric_value` (ours: unparsed or unscored answers count as wrong) as an inspect metric named
    by the task object's `adapter_metric`."""
    @metric(name=spec.adapter_metric)
    def headline() -> Metric:
        def compute(scores: list[SampleScore]) -> float:
            return common.metric_value(spec, [s.score.metadata["record"] for s in scores
                                              if s.score.metadata and "record" in s.score.metadata])
        return compute
    return headline


# ---------------------------------------------------------------- scorers
def _grader() -> Model | None:
    """The model bound to the grader role (`--model-role grader=...`), or None. Not `get_model(role=...)`: it
    falls back to the model under evaluation, which must never grade itself."""
    try:
        from inspect_ai.model._model import model_roles  # the pinned inspect-ai's roles of this eval
    except ImportError:  # another inspect-ai: a role resolving to the model under evaluation is no grader
        grader = get_model(role=GRADER_ROLE)
        return None if grader is get_model() else grader
    return model_roles().get(GRADER_ROLE)


@scorer(metrics=[])  # the task's headline metric is given by the task (`headline_metric`)
def diningbench_scorer(task_name: str, language: str = "zh", protocol: str | None = None):  # noqa: ANN201
    """The answer read and scored by the run's protocol (`common.score_answer`), its judge prompts sent to
    the grader role."""
    # The scorer's settings are its arguments, as inspect records them in the log: the task by its name.
    found = common.scoring(tasks.get(task_name), language, protocol)
    judged = found.task.judged

    async def score(state: TaskState, target: Target) -> Score:
        grader = _grader() if judged else None
        loop = asyncio.get_running_loop()
        config = GenerateConfig(temperature=0.0, max_tokens=common.judge_budget(found.settings))

        def judge(prompt: str, grader: Model) -> str:  # the protocol's tally calls it from a scoring thread
            future = asyncio.run_coroutine_threadsafe(grader.generate(prompt, config=config), loop)
            return future.result().completion

        output = state.output
        record = await loop.run_in_executor(_SCORING_THREADS, functools.partial(
            common.score_answer, found, state.metadata["row"], output.completion if output is not None else "",
            model=str(state.model), judge=None if grader is None else functools.partial(judge, grader=grader)))
        value = common.item_value(found, record)
        record["truncated"] = output is not None and output.stop_reason == "max_tokens"
        record["n_images"] = state.metadata.get("n_images")
        parsed = record.get("parsed")
        answer = parsed if isinstance(parsed, str) or parsed is None else common.json_text(parsed)
        return Score(value=value, answer=answer, metadata={"record": record})
    return score
