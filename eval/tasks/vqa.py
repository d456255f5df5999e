"""Dietary VQA: a free-text answer to a question about the dish, judged against the reference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval import official, prompts
from eval.tasks.base import VALIDATE_HINT, Task, register
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

    def score(self, records: list[dict[str, Any]], parsed: Sequence[Any], rows: Sequence[Mapping[str, Any]],
              lang: str) -> dict[str, Any]:
        raise TypeError("VQA is judged: eval.scoring asks the judge for its verdicts")


    def official_headline(self, figures: Mapping[str, Any]) -> tuple[str, float | None]:
        if "model_evaluate_accuracy" in figures:
            return "model_evaluate_accuracy", figures["model_evaluate_accuracy"]
        return "rougeL_f1 (no judge)", figures.get("rougeL_f1")

    def official_fails(self, row: Mapping[str, Any], indices: Sequence[int]) -> str | None:
        """Their VQA script iterates `images` as a list: one given as a single string is split into
        characters, one-character paths that are no files, and the request fails."""
        images = self.published(row).get("images")
        return f"Image does not exist: {images[0]}" if isinstance(images, str) and images else None

    def official_item(self, model_pred: str, row: Mapping[str, Any], gt_answer: str | None = None) -> dict[str, Any]:
        """Before the judge: an empty or failed answer is wrong without a call; a row with an empty
        reference is left out of their total (`counted` False)."""
        answer = model_pred.strip()
        counted = bool(row.get("ground_truth", ""))
        failed = official.is_error(answer) or not answer
        return {"read": answer, "correct": False if failed and counted else None, "counted": counted,
                "judged": counted and not failed}

    def official_figures(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, Mapping[str, Any]]
                         ) -> dict[str, Any]:
        """ROUGE, and the judge's figures from each prediction's `eval_match` where the judge ran."""
        figures = official.vqa_rouge_figures(rows, preds)
        verdicts = {i: bool(preds[i].get("eval_match")) for i, *_ in official.vqa_tasks(rows, preds)
                    if "eval_match" in preds[i]}
        if verdicts:
            figures.update(official.vqa_judge_figures(verdicts))
        return figures


TASK = register(Vqa())
