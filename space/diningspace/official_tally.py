"""The authors' figures for a visitor's evaluation on their release (`--protocol official`).

Each answer is read as their scripts read it (the harness's `eval.scoring.official_preds` and the task's
`official_item`), and at the end the task's `official_figures` give what their script prints for the
items asked, as if their file held those rows alone. Ours is scored beside it as usual. Nothing is
written: a VQA answer's judge reply is asked here, through the Space's request slots.
"""

from __future__ import annotations

from typing import Any

from eval import official, tasks
from eval.scoring import disagreements, official_preds, strict_verdict_of
from eval.types import Prediction


def is_authors_rows(row: dict[str, Any]) -> bool:
    """Rows of the authors' release carry their `prompt`: the harness then runs their protocol
    (`eval.api.resolve_protocol`), so the Space reports their figures."""
    return "prompt" in row


class OfficialTally:
    """Their reading of each answer as it arrives, and their figures at the end."""

    def __init__(self, task: str, model: str) -> None:
        self.task, self.model = task, model
        self.spec = tasks.get(task)
        self._items: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (row, line of their prediction file)
        self.records: list[dict[str, Any]] = []  # every answer's record, with its `official` reading

    def add(self, prediction: Prediction, row: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """Their line for this answer (`model_pred`, and `gt_answer` for classification); `record` gets
        their reading under `official`."""
        line = official_preds(self.task, [prediction], [row], self.model)[int(row["idx"])]
        record["official"] = {"idx": int(row["idx"]), "model_pred": line["model_pred"],
                              **self.spec.official_item(line["model_pred"], row, line.get("gt_answer"))}
        self._items.append((row, line))
        self.records.append(record)
        return line

    @staticmethod
    def judge_prompt(row: dict[str, Any], record: dict[str, Any]) -> str | None:
        """Their Chinese judge prompt for a VQA answer their judge step asks about; None for an answer it
        does not (an empty reference is left out; an empty or failed answer is wrong without a call)."""
        mine = record["official"]
        if not mine.get("judged"):
            return None
        return official.judge_prompt(official.vqa_question(row), str(row.get("ground_truth") or ""), mine["read"])

    @staticmethod
    def judged(line: dict[str, Any], record: dict[str, Any], reply: str | None) -> None:
        """Their verdict (`eval_match`, their keywords) and ours (the same reply read strictly) for one
        VQA answer; `reply` None: their step did not ask (a failed answer counts wrong, a row without a
        reference is left out), or the judge failed every attempt (wrong, as theirs)."""
        mine = record["official"]
        if mine.get("judged") and reply is not None:
            line.update(eval_match=official.keyword_verdict(reply), eval_result=reply)
            mine.update(correct=line["eval_match"], judge_reply=reply, strict=official.strict_verdict(reply))
        elif mine.get("counted"):
            marker = official.facts()["error_marker"]["judge" if mine.get("judged") else "inference"]
            line.update(eval_match=False, eval_result=marker)
            mine.update(correct=False, judge_reply=marker)
        strict_verdict_of(record)  # ours, as a run folder's scoring reads it

    def figures(self) -> dict[str, Any]:
        """`official` (their figures for the items answered, in their file's order),
        `official_headline` ([name, fraction]: what Table 2 reports) and `official_disagreements`."""
        ordered = sorted(self._items, key=lambda item: int(item[0]["idx"]))
        rows = [row for row, _ in ordered]
        figures = self.spec.official_figures(rows, {k: line for k, (_, line) in enumerate(ordered)})
        name, value = self.spec.official_headline(figures)
        return {"protocol": "official", "official": figures, "official_headline": [name, value],
                "official_disagreements": disagreements(self.task, self.records)}
