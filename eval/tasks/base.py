"""What a task is: one object that says everything that differs from one task to another.

The rest of the project asks the object; nothing outside `eval/tasks/` compares a task's name with a string.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeGuard

from eval.types import Row, ScoreRecord, UserError

Measure = Literal["correct", "ape"]
AnswerFormat = Literal["letter", "nutrients", "text"]

# Parsers read at most this much of an answer: its first and last halves. A model that loops to its
# limit can write megabytes, and its answer, if it gave one, sits at one end (answer first, or a
# final answer last). The raw text is kept whole in predictions.jsonl.
MAX_PARSED_CHARS = 200_000
VALIDATE_HINT = "check the release with `python diningbench.py validate SOURCE`"


class UnknownTask(UserError):
    """A task name no module registered (one line, naming the known ones)."""


def parse_input(text: str) -> str:
    """What the parsers read of an answer: all of it up to MAX_PARSED_CHARS, else both ends.

    >>> len(parse_input("x" * 1_000_000)) <= MAX_PARSED_CHARS + 2
    True
    """
    if len(text) <= MAX_PARSED_CHARS:
        return text
    half = MAX_PARSED_CHARS // 2
    return text[:half] + "\n\n" + text[-half:]


class Task:
    """One task. Subclasses set the class attributes and override the hooks that differ. `measure` says what
    one item's score is: "correct" (right or wrong: the headline is accuracy, higher is better) or "ape"
    (absolute percentage errors per component of `components`: the headline is the average MAPE, lower is
    better). `judged` tasks get their verdicts from a judge model (their `score` is never called:
    `eval.scoring` asks the judge)."""

    name: ClassVar[str]
    config: ClassVar[str] = ""  # the release config whose rows it asks (default: its name)
    title: ClassVar[str]  # "Classification": headings and plot titles
    short: ClassVar[str]  # "Cls": narrow table columns
    hub_type: ClassVar[str] = "image-text-to-text"  # the model card's task type
    hub_name: ClassVar[str] = ""  # the model card's readable task name
    measure: ClassVar[Measure] = "correct"
    components: ClassVar[tuple[str, ...]] = ()  # measure "ape": the values an answer gives
    judged: ClassVar[bool] = False
    has_options: ClassVar[bool] = False  # lettered options: rotations (--circular), chance level
    answer_format: ClassVar[AnswerFormat] = "text"  # how the Space asks a person for an answer
    human_question: ClassVar[str] = "Answer a question about the dish"  # the Space's heading for people
    item_fields: ClassVar[tuple[str, ...]] = ()  # row fields each scores.jsonl line keeps
    breakdowns: ClassVar[tuple[str, ...]] = ("cuisine", "category", "n_images")  # report dimensions
    slice_field: ClassVar[str | None] = None  # reports slice paired comparisons by this field too
    slice_title: ClassVar[str] = ""  # that field's name in headings
    adapter_metric: ClassVar[str] = "accuracy"  # the metric name the lmms-eval adapter's YAML lists

    # ------------------------------------------------------------ what the headline is
    @property
    def figure(self) -> str:
        """metrics.json's key of the headline figure (its interval: the same with `_ci95`)."""
        return "avg_mape" if self.measure == "ape" else "accuracy"

    @property
    def figure_name(self) -> str:
        return "Average MAPE" if self.measure == "ape" else "accuracy"

    @property
    def lower_is_better(self) -> bool:
        return self.measure == "ape"

    @property
    def source_config(self) -> str:
        return self.config or self.name

    # ------------------------------------------------------------ asking
    def prompt(self, row: Mapping[str, Any], *, lang: str, cot: bool) -> str:
        raise NotImplementedError

    def n_options(self, row: Mapping[str, Any]) -> int | None:
        """Options offered (classification); None for a task without options."""
        return len(row.get("options") or []) if self.has_options else None

    def rotations(self, row: Mapping[str, Any]) -> int:
        """How many option orders `--circular` asks (1: the row as stored)."""
        return max(1, self.n_options(row) or 0) if self.has_options else 1

    def rotate(self, row: Row, rotation: int) -> Row:
        """The row as rotation `rotation` shows it (a task without options: the row itself)."""
        return row

    # ------------------------------------------------------------ answers
    def reference(self, row: Mapping[str, Any], lang: str = "zh") -> Any:
        """The reference answer; an unusable one is a ValueError naming the item."""
        raise NotImplementedError

    def parse(self, text: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
        """The parsed answer of `text` (already cut by `parse_input`), None when none is given."""
        raise NotImplementedError

    def read_answer(self, text: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
        """The parsed answer of a model's whole reply, its ends kept when it is long (`parse_input`)."""
        return self.parse(parse_input(text), row, lang)

    def score(self, records: list[ScoreRecord], parsed: Sequence[Any], rows: Sequence[Mapping[str, Any]],
              lang: str) -> dict[str, Any]:
        """Fill each record's score fields (`correct`, or `ape`/`abs_error`) from its parsed answer (None
        = unparsed or failed) and return the metric's result (its figures, without the intervals)."""
        raise NotImplementedError

    def agreement_answer(self, record: Mapping[str, Any]) -> Any:
        """What must be the same across epochs for an item to count as answered alike."""
        return record.get("verdict") if self.judged else record.get("parsed")

    def question(self, row: Mapping[str, Any], lang: str = "zh") -> str | None:
        """The question a judge reads beside the answer (judged tasks)."""
        return None

    def __repr__(self) -> str:
        return f"<task {self.name}>"


_REGISTRY: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add a task under its name (a second task of that name replaces the first: tests and plugins)."""
    if not isinstance(getattr(task, "name", None), str) or not task.name.isidentifier():
        raise ValueError(f"a task needs a name made of letters, digits and _ (got {getattr(task, 'name', None)!r})")
    _REGISTRY[task.name] = task
    return task


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def get(name: str) -> Task:
    """The registered task called `name`; UnknownTask (one line) otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownTask(f"unknown task {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def names() -> tuple[str, ...]:
    """Every registered task's name, the benchmark's three first, in registration order."""
    return tuple(_REGISTRY)


def all_tasks() -> Iterator[Task]:
    return iter(tuple(_REGISTRY.values()))


def is_task(name: object) -> TypeGuard[str]:
    return isinstance(name, str) and name in _REGISTRY
