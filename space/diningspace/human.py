"""Take the test: a person's answers become an ordinary run folder, scored like any model's."""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval import tasks
from eval.report.report import write_run_report
from eval.runinfo import build_run_json, write_run_json
from eval.scoring import score_run
from eval.store import PREDICTIONS
from eval.tasks import Task, answer_format
from eval.types import NUTRIENTS, Prediction

from .hubsync import HubFolder
from .leaderboard import HUMAN_GROUPS, HUMAN_PREFIX, dataset_label

HUMANS_FOLDER = "humans"  # under the results folder; the Leaderboard reads results/*/*/ too
MAX_NAME = 32
MAX_ANSWER_CHARS = 2000  # a VQA answer; longer ones are refused, not cut
MAX_NUMBER = 100_000.0  # any nutrition figure a person types (kcal or g per serving)
# Looking at a dish's photos and answering takes a person seconds; a sitting with any answer faster
# than this was not answered by a person and is kept but left out of the humans row (the operator's
# DININGBENCH_SPACE_MIN_ANSWER_SECONDS).
MIN_SECONDS_PER_ANSWER = 2.0


class HumanError(ValueError):
    """Something a person must change before going on (one line)."""


def clean_name(name: str | None) -> str:
    """The optional name as a spec part: letters, digits, `-` and `_` only; `anonymous` when empty.

    >>> clean_name("  Mei Chen! "), clean_name(""), clean_name("厨师")
    ('Mei-Chen', 'anonymous', '厨师')
    """
    text = re.sub(r"[^\w-]+", "-", (name or "")[:4 * MAX_NAME].strip()).strip("-_")[:MAX_NAME]
    return text or "anonymous"


def pick_items(ids: list[str], n: int, seed: int) -> list[str]:
    """`n` items in a seeded random order: the same seed gives the same test."""
    order = list(ids)
    random.Random(f"take-the-test:{seed}").shuffle(order)
    return order[:max(0, n)]


def answer_text(task: str, value: Any) -> str:
    """What the person answered, written the way a model would: a letter, a JSON object, or text.

    >>> answer_text("nutrition", [520, 21.5, 60, 14])
    '{"calories": 520.0, "protein": 21.5, "carbohydrates": 60.0, "fat": 14.0}'
    """
    if answer_format(task) == "letter":
        letter = str(value or "").strip().upper()
        if len(letter) != 1 or not letter.isalpha():
            raise HumanError("pick one letter")
        return letter
    if answer_format(task) == "nutrients":
        numbers = list(value or [])[:len(NUTRIENTS) + 1]
        try:
            floats = [float(v) for v in numbers]  # None is a TypeError
        except (TypeError, ValueError):
            floats = []
        if len(floats) != len(NUTRIENTS) or not all(0 <= v <= MAX_NUMBER for v in floats):  # NaN fails too
            raise HumanError(f"give all four numbers (0 to {MAX_NUMBER:,.0f}): calories, protein, carbohydrates, fat")
        return json.dumps(dict(zip(NUTRIENTS, floats, strict=True)))
    raw = str(value or "")
    text = raw if len(raw) > 4 * MAX_ANSWER_CHARS else " ".join(raw.split())  # a huge one is refused unsplit
    if not text:
        raise HumanError("write an answer")
    if len(text) > MAX_ANSWER_CHARS:
        raise HumanError(f"your answer is {len(text):,} characters; at most {MAX_ANSWER_CHARS:,}")
    return text


@dataclass
class Sitting:
    """One person taking the test: what they were asked and what they answered so far."""

    task: str
    ids: list[str]
    group: str
    name: str = "anonymous"
    lang: str = "zh"
    seed: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(6))
    answers: list[dict[str, Any]] = field(default_factory=list)  # {"id", "raw", "n_images", "seconds"}
    shown_at: float | None = None  # when the current item was shown (the server's clock; gr.State stays server-side)

    @property
    def spec(self) -> str:
        return f"{HUMAN_PREFIX}{self.name}"

    @property
    def subject(self) -> Task:
        """The task the sitting tests, as its object (the page's state keeps its name; start checked it)."""
        return tasks.get(self.task)

    @property
    def current(self) -> str | None:
        return self.ids[len(self.answers)] if len(self.answers) < len(self.ids) else None

    def to_state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> Sitting | None:
        return cls(**state) if state else None


def automated(sitting: Sitting, min_seconds: float = MIN_SECONDS_PER_ANSWER) -> str | None:
    """Why the sitting looks scripted (None when it looks like a person's): any answer came faster than
    `min_seconds` after its item was shown (each answer is timed on the server, from when its own item
    was shown), or an answer carries no time (it was sent without its item being shown).

    >>> automated(Sitting("classification", ["a", "b", "c"], "cook", answers=[{"seconds": s} for s in (3, 9, 0.1)]))
    'answer 3 came 0.1 s after its item was shown (under 2 s)'
    """
    for k, answer in enumerate(sitting.answers, start=1):
        seconds = answer.get("seconds")
        if not isinstance(seconds, int | float) or isinstance(seconds, bool):
            return f"answer {k} was sent without its item being shown"
        if seconds < min_seconds:
            return f"answer {k} came {seconds:.1f} s after its item was shown (under {min_seconds:g} s)"
    return None


def start(task: str, ids: list[str], n: int, *, group: str, name: str, lang: str, seed: int,
          consent: bool) -> Sitting:
    if not consent:
        raise HumanError("tick the consent box to take the test")
    if group not in HUMAN_GROUPS:
        raise HumanError(f"choose one of {', '.join(HUMAN_GROUPS)}")
    chosen = pick_items(ids, int(n), int(seed))
    if not chosen:
        raise HumanError(f"no {task} items to answer")
    return Sitting(task=task, ids=chosen, group=group, name=clean_name(name), lang=lang, seed=int(seed))


def prediction_of(sitting: Sitting, answer: dict[str, Any], row: dict[str, Any]) -> Prediction:
    """The predictions.jsonl line of one answer; the hash ties the item to this sitting."""
    digest = hashlib.sha256(f"{sitting.task}|{answer['id']}|{sitting.token}".encode()).hexdigest()
    return Prediction(id=str(answer["id"]), task=sitting.task, raw=answer["raw"],  # type: ignore[arg-type]
                      parsed=sitting.subject.read_answer(answer["raw"], row, sitting.lang), error=None,
                      attempts=1, latency_s=0.0, usage=None, request_hash=digest, finish_reason="stop",
                      n_images=answer.get("n_images"))


class HumanRuns:
    """Writes people's sittings as run folders under `<results>/humans/`, and pushes them to the Hub."""

    def __init__(self, results_dir: Path, *, hub_repo: str | None = None, dataset: str | None = None,
                 judge: str | None = None, min_seconds: float = MIN_SECONDS_PER_ANSWER) -> None:
        self.folder = Path(results_dir) / HUMANS_FOLDER
        self.min_seconds = min_seconds
        self.dataset = dataset_label(dataset)
        self.judge = judge
        self._hub = HubFolder(self.folder, hub_repo, HUMANS_FOLDER, ["*/run.json", "*/predictions.jsonl"])
        self._lock = threading.Lock()

    def scheduler(self) -> Any:
        """The CommitScheduler, made on first use (no network until someone finishes a test)."""
        return self._hub.scheduler()

    def save(self, sitting: Sitting, rows: dict[str, dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
        """Write, score and report the sitting's run folder; returns (folder, the task's figures)."""
        if not sitting.answers:
            raise HumanError("answer at least one item first")
        run_dir = self.folder / f"human-{sitting.group}-{sitting.token}"
        # concurrency 1: a VQA sitting's judge asks one question at a time, inside the one request
        # slot of the Space its scoring holds (human_tab.HumanTab.finish).
        settings = {"model": sitting.spec, "lang": sitting.lang, "seed": sitting.seed, "dataset": self.dataset,
                    "images": None, "limit": None, "ids": None, "concurrency": 1}
        info = build_run_json(settings=settings, tasks=[sitting.task],
                              backend={"backend": "human", "model": sitting.name, "base_url_host": None,
                                       "note": "a person answered in the Space's Take the test tab"},
                              dataset_source=self.dataset, fingerprints={}, judge=None,
                              counts={sitting.task: len(sitting.answers)})
        info["human"] = {"group": sitting.group, "person": sitting.token}
        if scripted := automated(sitting, self.min_seconds):
            info["human"]["automated"] = scripted  # kept, but left out of the humans row
        info.pop("git_commit", None)  # says nothing about a person's answers
        with self._lock, self._hub.writing():
            run_dir.mkdir(parents=True, exist_ok=True)
            write_run_json(run_dir, info)
            lines = [json.dumps(prediction_of(sitting, a, rows[a["id"]]).to_json(), ensure_ascii=False)
                     for a in sitting.answers]
            (run_dir / PREDICTIONS).write_text("\n".join(lines) + "\n", encoding="utf-8")
            metrics = score_run(run_dir, judge=self.judge if sitting.subject.judged else None,
                                rows={sitting.task: [rows[a["id"]] for a in sitting.answers]})
            write_run_report(run_dir)
        return run_dir, metrics.get(sitting.task, {})


