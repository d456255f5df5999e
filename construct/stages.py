"""The construction stages, registered once: each stage's name (its folder WORK/<name>/, the `stage` of its
call logs and requests), its place in the build and whether the pipeline runs it; and the prompts the
stages send, each under an id, with the stand-in's answer to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PHOTOS = "photos"
DISHES = "dishes"
DISH_REVIEW = "dish_review"  # the dishes a person approved (construct/review.py): what the task stages read
CLASSIFICATION = "classification"  # the three task stages are named after the task whose items they write
NUTRITION = "nutrition"
VQA = "vqa"
TRANSLATE = "translate"
REVIEW = "review"

# Files a stage passes on beside its items.jsonl, read by a later stage.
RULED_OUT = "ruled_out.jsonl"  # WORK/photos/: the dishes a free rule ruled out: {"dish_id", "reason", ...}
GLOSSARY_FILE = "glossary.json"  # WORK/dishes/: the model's English for names the lexicon cannot read


def shown_photos(dish: dict[str, Any]) -> list[tuple[str, str]]:
    """(photo id, role) of what a task stage shows a model to judge a dish (a DISH_REVIEW item)."""
    return [(dish["reference"], "reference")] + [(u, "user") for u in dish["user_photos"][:3]]


def task_item(item_id: str, dish: dict[str, Any], photos: list[str] | None = None, /, **fields: Any) -> dict[str, Any]:
    """A task stage's item for `dish` (a DISH_REVIEW item); `photos` default to all of the dish's."""
    return {"id": item_id, "dish_id": dish["dish_id"], "merchant_id": dish["merchant_id"],
            "category": dish["menu_category"], "cuisine": dish["cuisine"],
            "photos": [dish["reference"], *dish["user_photos"]] if photos is None else photos, **fields}


@dataclass(frozen=True)
class StageDef:
    """`runs`: the pipeline runs `construct/<name>.py`'s `run(ctx)`; else construct/review.py writes it."""

    name: str
    runs: bool = True


# In the order of a build (the funnel lists them so).
STAGES: tuple[StageDef, ...] = (
    StageDef(PHOTOS),
    StageDef(DISHES),
    StageDef(DISH_REVIEW, runs=False),
    StageDef(CLASSIFICATION),
    StageDef(NUTRITION),
    StageDef(VQA),
    StageDef(TRANSLATE),
    StageDef(REVIEW, runs=False),
)


def names() -> tuple[str, ...]:
    """Every stage's name, in the order of a build."""
    return tuple(s.name for s in STAGES)


@dataclass(frozen=True)
class Prompt:
    """A prompt a stage sends, under an id. A request carries its messages and nothing else, so the
    prompt's opening (its first line, up to its first field) is the mark that names it: a reader of
    requests (the stand-in) finds the id with `prompt_of`, from this declaration, never from a copy of
    the text. `format` fills the template as `str.format` does.

    >>> Prompt("vqa.generate", "Task: VQA generation ({category}).\\n{guidance}").opening
    'Task: VQA generation ('
    """

    id: str
    template: str

    @property
    def opening(self) -> str:
        return self.template.split("\n", 1)[0].split("{", 1)[0]

    def format(self, **fields: Any) -> str:
        return self.template.format(**fields)


_BY_OPENING: dict[str, Prompt] = {}
# The stand-in's answer to each prompt, by prompt id: (oracle, request) -> the JSON object a careful model
# would reply with (construct/standin.py registers the built-in stages' answers; a new stage registers its own).
STANDIN_ANSWERS: dict[str, Callable[[Any, Any], Any]] = {}


def prompt(prompt_id: str, template: str) -> Prompt:
    """Declare a prompt: ValueError when another prompt id opens the same way (two prompts may share an
    opening only under one id: one question in two shapes)."""
    declared = Prompt(prompt_id, template)
    if not declared.opening.strip():
        raise ValueError(f"prompt {prompt_id} has no opening line to be named by")
    taken = _BY_OPENING.setdefault(declared.opening, declared)
    if taken.id != prompt_id:
        raise ValueError(f"prompt {prompt_id} opens as prompt {taken.id} does ({declared.opening!r}): give it its "
                         f"own first line")
    return declared


def prompt_of(text: str) -> Prompt | None:
    """The declared prompt a request's text was made from (by its opening), or None."""
    first = text.split("\n", 1)[0]
    if first in _BY_OPENING:
        return _BY_OPENING[first]
    return next((p for opening, p in _BY_OPENING.items() if "{" in p.template.split("\n", 1)[0]
                 and first.startswith(opening)), None)


def standin_answer(*prompts: Prompt) -> Callable[[Callable[[Any, Any], Any]], Callable[[Any, Any], Any]]:
    """Register the function below as the stand-in's answer to `prompts`."""
    def register(answer: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        for declared in prompts:
            STANDIN_ANSWERS[declared.id] = answer
        return answer
    return register
