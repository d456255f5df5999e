"""The one declaration of a run's settings: CLI flags, defaults, identity and engine options derive from it."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval import tasks as task_registry
from eval.specs import SpecError, parse_spec
from eval.types import DEFAULT_MAX_TOKENS, UserError

IMAGE_ORDERS = ("reference-first", "user-first", "random")
LANGS = ("zh", "en")
REASONING_EFFORTS = ("minimal", "low", "medium", "high")
AUTO = "auto"  # --concurrency auto: each endpoint's limit learnt while the run goes (eval/limiter.py)
MAX_CONCURRENCY = 256  # --max-concurrency's default: above vLLM's default max_num_seqs (128-256), ~36 MB of views
N_BOOT = 1000  # bootstrap resamples of every 95% interval: RunSettings.n_boot, each report's and command's default


def concurrency_value(text: str | int) -> int | str:
    """`--concurrency`: a number of requests in flight, or `auto`.

    >>> concurrency_value("auto"), concurrency_value("16"), concurrency_value(4)
    ('auto', 16, 4)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value == AUTO:
        return AUTO
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"expected a number or 'auto', got {text!r}") from None


class UsageError(UserError):
    """A user mistake (bad flag, unknown task, unreachable server...): printed as one `error:` line."""


def opt(default: Any, help: str, *, identity: bool = False, engine: bool = False, cli: bool = True,
        **argparse_kwargs: Any) -> Any:
    """A settings field: its default, its flag's help, and what it is part of (also for other settings
    declarations: construct/work.py's BuildSettings)."""
    meta = {"help": help, "identity": identity, "engine": engine, "cli": cli, "argparse": argparse_kwargs}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def concurrency_arg(value: str) -> int | str:
    try:
        return concurrency_value(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class RegisteredTasks:
    """`--task`'s choices: the tasks registered when they are asked for (a module may register one after
    this one is imported), and `all`. argparse and a saved setting's check read them alike."""

    def __iter__(self) -> Iterator[str]:
        return iter((*task_registry.names(), "all"))

    def __contains__(self, value: object) -> bool:
        return value == "all" or task_registry.is_task(value)


@dataclass
class RunSettings:
    """Everything that defines a run. `task` is one task or "all"; `images` None = every view."""

    task: str = opt("all", "task to evaluate, or all three", choices=RegisteredTasks())
    model: str = opt("", "backend:model, e.g. openai:gpt-4o, gemini:gemini-2.5-flash, "
                         "vllm:Qwen/Qwen3-VL-8B-Instruct, hf:PATH, baseline:category-mean",
                     identity=True, metavar="SPEC")
    base_url: str | None = opt(None, "OpenAI-compatible or Gemini endpoint, e.g. http://localhost:8000/v1")
    dataset: str | None = opt(None, "release folder or Hub id (default: $DININGBENCH_SOURCE, else the "
                                    "embedded sample)", metavar="SOURCE")
    limit: int | None = opt(None, "first N items (after --ids)")
    ids: Sequence[str] | None = opt(None, "comma-separated item ids")
    images: int | None = opt(None, "send the first N views after ordering (default: all)", identity=True)
    protocol: str | None = opt(None, "how items are asked and scored: official (the authors' scripts: each row's "
                                     "prompt verbatim, images chosen by --image-indices and sent as stored, "
                                     "14,336 tokens, their figures as the headline, ours beside them) or ours "
                                     "(this project's prompts and parsers); default: official on the authors' "
                                     "release, ours otherwise (eval/protocols/)", identity=True)
    image_indices: str | None = opt(None, "--protocol official: the images to send, e.g. 0,1,2 (0 the merchant's "
                                          "photo, k the k-th customer photo; default 0, the authors'); VQA rows "
                                          "send their own images", identity=True, metavar="I,J,...")
    image_order: str = opt("reference-first", "order of an item's views before --images keeps the first N: "
                                              "reference-first (the merchant's photo, then customers'; default), "
                                              "user-first (customers' photos first), or random (a shuffle per "
                                              "item, seeded by --seed and the item id)",
                           identity=True, choices=IMAGE_ORDERS)
    cot: bool = opt(False, "each task's chain-of-thought prompt (three steps, then a marked final answer)",
                    identity=True)
    lang: str = opt("zh", "prompt language (default zh, the paper's)", identity=True, choices=LANGS)
    max_tokens: int = opt(DEFAULT_MAX_TOKENS, f"generation limit, thinking included (default "
                                              f"{DEFAULT_MAX_TOKENS}, the paper's; local servers get "
                                              "what fits their context)", identity=True)
    reasoning_effort: str | None = opt(None, "OpenAI reasoning models: reasoning effort; Gemini 3: its "
                                             "thinking level", identity=True, choices=REASONING_EFFORTS)
    thinking_budget: int | None = opt(None, "Gemini thinking models: thinking tokens (-1 dynamic, 0 off)",
                                      identity=True)
    seed: int = opt(0, "seed (default 0) of --image-order random and of baseline:random, and the sampling "
                       "seed sent to APIs that take one; the same seed gives the same prompts", identity=True)
    epochs: int = opt(1, "ask each item K times (for models that only sample at temperature 1)")
    circular: bool = opt(False, "classification: ask each item under every rotation of its options too (CircularEval); "
                                "it counts correct only if every rotation is")
    max_image_side: int = opt(1024, "resize bound in pixels (default 1024)", identity=True)
    concurrency: int | str = opt(AUTO, "requests in flight per endpoint (default auto: learnt while the run goes, "
                                       "from the server's latency, its 429s and 503s and its rate-limit headers), "
                                       "or a fixed N; the VQA judge's too. In a sweep, per cell: cells run one "
                                       "after another", type=concurrency_arg, metavar="N|auto")
    max_concurrency: int = opt(MAX_CONCURRENCY, f"with --concurrency auto: the most requests in flight per "
                                                f"endpoint (default {MAX_CONCURRENCY})")
    judge: str | None = opt(None, "VQA judge model, e.g. openai:gpt-4o", metavar="SPEC")
    judge_base_url: str | None = opt(None, "endpoint of the judge model")
    out: Path | None = opt(None, "run folder (default results/<model>-<task>-<settings>/)")
    batch_size: int = opt(8, "batch size for local engines (vllm:, hf:)")
    timeout: float = opt(120.0, "wall-clock seconds for one attempt of one request (default 120)")
    max_attempts: int = opt(6, "attempts per sample incl. retries (default 6)")
    overwrite: bool = opt(False, "replace the predictions already in --out")
    # Local engines (vllm:, hf:): passed to the backend's make() when set.
    tensor_parallel_size: int | None = opt(None, "vllm: tensor parallel size", engine=True)
    data_parallel_size: int | None = opt(None, "vllm: data parallel size", engine=True)
    max_pixels: int | None = opt(None, "local engines: processor pixel cap per image", engine=True)
    min_pixels: int | None = opt(None, "local engines: processor pixel floor per image", engine=True)
    dtype: str | None = opt(None, "local engines: weights dtype, e.g. bfloat16 (default: the model's)",
                            engine=True)
    device: str | None = opt(None, "hf: device, e.g. cuda, cpu, mps (default: auto)", engine=True)
    trust_remote_code: bool | None = opt(None, "local engines: allow the model repository's own code",
                                         engine=True)
    max_model_len: int | None = opt(None, "vllm: context length (default 16384)", engine=True)
    # Programmatic only: not flags.
    retry_base_delay: float = opt(1.0, "seconds before the first retry without Retry-After", cli=False)
    n_boot: int = opt(N_BOOT, "bootstrap resamples for the 95% intervals in metrics.json", cli=False)
    judge_cache: Path | None = opt(None, "verdict cache folder (default: the run folder's judge_cache/); a "
                                         "sweep shares one, so an answer is judged once", cli=False)
    engine_extra: dict[str, Any] = opt({}, "further backend options (tests, the Space)", cli=False)

    @property
    def tasks(self) -> tuple[str, ...]:
        return task_registry.names() if self.task == "all" else (self.task,)

    @property
    def selected_tasks(self) -> tuple[task_registry.Task, ...]:
        """The tasks run, as their objects: where `--task` becomes them (UnknownTask, one line, for a name no
        module registered)."""
        return tuple(task_registry.all_tasks()) if self.task == "all" else (task_registry.get(self.task),)

    @property
    def indices(self) -> tuple[int, ...]:
        """`--image-indices` as numbers: the views the authors' protocol sends ((0,) when not given)."""
        return image_indices(self.image_indices)

    @property
    def protocol_budget(self) -> bool:
        """Whether the generation limit is the protocol's own (ours: DEFAULT_MAX_TOKENS, shrunk to fit a local
        server's context; the authors': their budget). run.json records that as max_tokens DEFAULT_MAX_TOKENS,
        in every run folder made so far, so the value itself is the record: a limit asked as
        `--max-tokens 16384` reads back as the protocol's, and a flag cannot tell them apart without making
        those folders unresumable."""
        return self.max_tokens == DEFAULT_MAX_TOKENS

    @property
    def engine_options(self) -> dict[str, Any]:
        """The local-engine options that were set, for the backend's make()."""
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                   if f.metadata.get("engine") and getattr(self, f.name) is not None}
        return {**options, **self.engine_extra}

    def validate(self) -> None:
        """Raise UsageError (one line, naming the argument) for settings that cannot run."""
        if self.task not in RegisteredTasks():
            raise UsageError(f"unknown --task {self.task!r}; choose one of {', '.join(RegisteredTasks())}")
        if self.images is not None and self.images < 1:
            raise UsageError(f"--images must be at least 1 (got {self.images}); omit it to send every view")
        if self.image_order not in IMAGE_ORDERS:
            raise UsageError(f"unknown --image-order {self.image_order!r}; choose one of {', '.join(IMAGE_ORDERS)}")
        if self.image_indices is not None:
            image_indices(self.image_indices)  # a UsageError naming the flag
        if self.lang not in LANGS:
            raise UsageError(f"unknown --lang {self.lang!r}; choose zh or en")
        try:
            self.concurrency = concurrency_value(self.concurrency)
        except ValueError as exc:
            raise UsageError(f"--concurrency: {exc}") from None
        for name in ("concurrency", "max_concurrency", "max_tokens", "max_image_side", "batch_size", "max_attempts",
                     "epochs"):
            if not (name == "concurrency" and self.concurrency == AUTO) and (value := getattr(self, name)) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1 (got {value})")
        if self.circular and not any(t.has_options for t in self.selected_tasks):
            with_options = [t.name for t in task_registry.all_tasks() if t.has_options]
            raise UsageError(f"--circular rotates lettered options; use it with --task {' or '.join(with_options)} or all")
        if self.limit is not None and self.limit < 1:
            raise UsageError(f"--limit must be at least 1 (got {self.limit})")
        if self.timeout <= 0:
            raise UsageError(f"--timeout must be positive (got {self.timeout})")
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise UsageError(f"unknown --reasoning-effort {self.reasoning_effort!r}; "
                             f"choose one of {', '.join(REASONING_EFFORTS)}")
        if self.thinking_budget is not None and self.thinking_budget < -1:
            raise UsageError(f"--thinking-budget must be -1 (dynamic), 0 (off) or a token count "
                             f"(got {self.thinking_budget})")
        if not self.model:
            raise UsageError("--model is required, e.g. --model baseline:category-mean")
        for flag, spec in (("--model", self.model), ("--judge", self.judge)):
            if spec is not None:
                try:
                    parse_spec(spec)
                except SpecError as exc:
                    raise UsageError(f"{flag}: {exc}") from None

    def default_out(self, question: Sequence[str]) -> Path:
        """`results/<model>-<task>-<settings>/`, readable and unique per setting that changes answers;
        `question` names how the protocol asks (its `folder_parts`)."""
        model = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model).strip("-")
        parts = [model, self.task, self.lang, *question]
        if self.cot:
            parts.append("cot")
        if self.reasoning_effort:
            parts.append(f"effort-{self.reasoning_effort}")
        if self.thinking_budget is not None:
            parts.append(f"think{self.thinking_budget}")
        if not self.protocol_budget:
            parts.append(f"tok{self.max_tokens}")
        if self.seed:
            parts.append(f"seed{self.seed}")
        return Path("results") / "-".join(parts)

    @classmethod
    def from_saved(cls, saved: Any) -> RunSettings:
        """The settings a run.json keeps, back as RunSettings (paths, the judge cache and backend extras
        are not part of what was asked, so they are left out). A run folder may come from anywhere: each
        value is checked here, once, against its field's type (and its choices), and one that does not fit
        is a UsageError naming it; readers then take the settings as typed."""
        if not isinstance(saved, dict):
            raise UsageError("run.json: its settings are not an object")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        # A setting a run.json holds as null where the field has a value (an older run) keeps its default.
        values = {k: v for k, v in saved.items() if k in fields and k not in ("out", "judge_cache", "engine_extra")
                  and not (v is None and fields[k].default is not None)}
        if isinstance(values.get("ids"), list):
            values["ids"] = tuple(values["ids"])
        for name, value in values.items():
            if not _takes(name, value):
                raise UsageError(f"run.json: setting {name} is {str(value)[:40]!r}, which --{name.replace('_', '-')} "
                                 "does not take")
        return cls(**values)

    @staticmethod
    def saved_value(saved: Any, name: str, default: Any = None) -> Any:
        """One setting of run.json's `settings` (a folder from elsewhere may hold anything): its value when it
        is one its field takes (type and choices), else `default` (absent, null, or not such a value)."""
        value = saved[name] if isinstance(saved, dict) and name in saved else None
        return value if value is not None and _takes(name, value) else default

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["out"] = str(self.out) if self.out is not None else None
        data["judge_cache"] = str(self.judge_cache) if self.judge_cache is not None else None
        data["ids"] = list(self.ids) if self.ids is not None else None
        data["engine_extra"] = {k: v for k, v in self.engine_extra.items()
                                if v is None or isinstance(v, str | int | float | bool)}
        return data


@functools.cache
def _field_checks() -> dict[str, tuple[Any, Any]]:
    """Each field's (type hint, choices), resolved once."""
    hints = typing.get_type_hints(RunSettings)
    return {f.name: (hints[f.name], f.metadata.get("argparse", {}).get("choices"))
            for f in dataclasses.fields(RunSettings)}


def _takes(name: str, value: Any) -> bool:
    """Whether setting `name` takes `value` as run.json holds it: its field's type, and one of its choices."""
    hint, choices = _field_checks()[name]
    return _fits(value, hint) and (choices is None or value is None or value in choices)


def _fits(value: Any, hint: Any) -> bool:
    """Whether a value read from JSON is of a settings field's type (an int is no bool, a number is a float,
    a path is text, a sequence of text is a JSON list of text)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int or hint is float:
        return isinstance(value, int | float if hint is float else int) and not isinstance(value, bool)
    if hint is str or hint is Path:
        return isinstance(value, str)
    if origin in (Sequence, tuple, list):
        return isinstance(value, tuple | list) and all(isinstance(item, str) for item in value)
    if origin is dict:
        return isinstance(value, dict)
    return True


def image_indices(text: str | None) -> tuple[int, ...]:
    """`--image-indices` as a tuple (None: the authors' default, the merchant's photo alone). Written `0,1,2`
    or `[0,1,2]` (the authors' scripts take both spellings for one meaning).

    >>> image_indices("0,1,2"), image_indices("[0, 2]"), image_indices(None)
    ((0, 1, 2), (0, 2), (0,))
    """
    if text is None:
        return (0,)
    parts = [p.strip() for p in str(text).strip().strip("[]").split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts) or len(parts) > 64:
        raise UsageError(f"--image-indices takes up to 64 indices >= 0 separated by commas, e.g. 0,1,2 (got {text!r})")
    return tuple(int(p) for p in parts)


IDENTITY_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSettings) if f.metadata["identity"])
DEFAULTS = RunSettings()


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None


def add_run_arguments(parser: argparse.ArgumentParser, *, skip: Sequence[str] = ()) -> None:
    """The settings' flags (`--max-tokens` for `max_tokens`...), with their one default and help. `skip`
    leaves out fields a command declares itself (sweep's lists of models, views and CoT)."""
    add_arguments(parser, DEFAULTS, skip=skip, required=("task", "model"))


def add_arguments(parser: argparse.ArgumentParser, defaults: Any, *, skip: Sequence[str] = (),
                  required: Sequence[str] = ()) -> None:
    """One flag per `opt` field of the settings dataclass instance `defaults` (any declaration made
    with `opt`, e.g. the construction's BuildSettings), its default taken from that instance."""
    for f in dataclasses.fields(defaults):
        meta = f.metadata
        if not meta.get("cli", False) or f.name in skip:
            continue
        kwargs: dict[str, Any] = dict(meta["argparse"])
        if f.name in required:
            kwargs["required"] = True
        elif f.type in ("bool", "bool | None"):
            kwargs.update(action="store_true", default=getattr(defaults, f.name))
        else:
            kwargs["default"] = getattr(defaults, f.name)
        for prefix, kind in (("int", _int), ("float", float), ("Path", Path)):
            if f.type.startswith(prefix):
                kwargs.setdefault("type", kind)
                break
        parser.add_argument("--" + f.name.replace("_", "-"), help=meta["help"], **kwargs)


def settings_from_args(args: argparse.Namespace, **overrides: Any) -> RunSettings:
    """A RunSettings from parsed flags (every field the parser has), plus explicit overrides."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(RunSettings) if hasattr(args, f.name)}
    if isinstance(values.get("ids"), str):
        values["ids"] = [i.strip() for i in values["ids"].split(",") if i.strip()] or None
    values.update(overrides)
    return RunSettings(**values)
