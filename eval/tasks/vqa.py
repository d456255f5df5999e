"""Dietary VQA: a free-text answer to a question about the dish, judged against the reference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval import prompts
from eval.tasks.base import VALIDATE_HINT, Task, register
from eval.types import ScoreRecord
from metrics.judge_accuracy.core import final_answer


def question_of(row: Mapping[str, Any], lang: str = "zh") -> str:
    return str(row["question_en"] if lang == "en" and row.get("question_en") else row["question"])


class Vqa(Task):
    name = "vqa"
    title = "VQA"
    short = "VQA"
    hub_type = "visual-question-answering"
    hub_name = "Dietary VQA"
    judged = True
    item_fields = ("vqa_category",)
    breakdowns = ("cuisine", "category", "vqa_category", "n_images")
    slice_field = "vqa_category"
    slice_title = "VQA category"
    adapter_metric = "judge_accuracy"

    def prompt(self, row: Mapping[str, Any], *, lang: str, cot: bool) -> str:
        return prompts.vqa_prompt(question_of(row, lang), lang, cot=cot)

    def question(self, row: Mapping[str, Any], lang: str = "zh") -> str | None:
        return question_of(row, lang)

    def reference(self, row: Mapping[str, Any], lang: str = "zh") -> Any:
        answer = row.get("answer_en") if lang == "en" and row.get("answer_en") else row.get("answer")
        if not answer:
            raise ValueError(f"{self.name} item {row.get('id')}: the reference answer is empty; {VALIDATE_HINT}")
        return answer

    def parse(self, text: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
        return final_answer(text) or None

    def score(self, records: list[ScoreRecord], parsed: Sequence[Any], rows: Sequence[Mapping[str, Any]],
              lang: str) -> dict[str, Any]:
        raise TypeError("VQA is judged: eval.scoring asks the judge for its verdicts")


TASK = register(Vqa())
