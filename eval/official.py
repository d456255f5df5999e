"""The authors' protocol (`--protocol official`): how their scripts read an answer and what they print.

Pure functions of the answers and published rows, written from their three scripts (GitHub meituan/DiningBench
at 9c9bdf7). Their rules move the figures, so a figure beside the paper's is read their way, each under the name
and unit their script prints it with.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dataset.official_rows import PROTOCOL, normalize_keys, reference_letter
from dataset.official_rows import vqa_question as question_of
from eval.types import ALPHABET, NUTRIENTS, PredictionLine


def facts() -> dict[str, Any]:
    """The protocol's facts as published (dataset/official_protocol.json, which the data contract's
    reader of their release reads too)."""
    return PROTOCOL


def infer_error(why: str | None) -> str:
    """What their inference stores as `model_pred` for a request that failed."""
    return f"{facts()['error_marker']['inference']}: {why or 'failed'}"


def is_error(model_pred: str) -> bool:
    return facts()["error_marker"]["inference"] in model_pred


def paired_positions(rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> Iterator[int]:
    """The positions their scripts pair that hold a prediction: an answer meets its row by position (`idx`,
    the row's place among the file's non-blank lines), and only positions below min(rows, predictions) count."""
    return (i for i in range(min(len(rows), len(preds))) if preds.get(i) is not None)


# ------------------------------------------------------------------ the answer their scripts keep
_FLAGS = re.DOTALL | re.IGNORECASE
_BOXED = re.compile(r"\\boxed\{([^}]*)\}")


def clean_thinking(text: str, model_name: str) -> str:
    """`model_pred` from a model's whole text: its thinking removed when the model is on their lists
    (an `<answer>` tag, `<think>` blocks, or everything up to `</think>`), then the first `\\boxed{..}`
    taken, whatever the model.

    >>> clean_thinking("<think>hmm</think>\\n\\nB", "minicpm-v-4.5"), clean_thinking("<think>x</think>B", "gpt-4o")
    ('B', '<think>x</think>B')
    >>> clean_thinking("so \\\\boxed{C} it is", "any")
    'C'
    """
    lists = facts()["thinking_models"]
    if model_name in lists["answer_tag"]:
        text = re.sub(r"<analysis>.*?</analysis>", "", text, flags=_FLAGS)
        found = re.search(r"<answer>(.*?)</answer>", text, flags=_FLAGS)
        text = found.group(1).strip() if found else text.strip()
    elif model_name in lists["think_tags"] or model_name in lists["think_prefix"]:
        opening = "<think>" if model_name in lists["think_tags"] else ""  # think_prefix: from the start
        for ending in ("</think>\n\n", "</think>"):
            text = re.sub(f"{opening}.*?{ending}", "", text, flags=_FLAGS)
        text = text.strip()
    boxed = _BOXED.search(text)
    return boxed.group(1).strip() if boxed else text


def model_pred(raw: str | None, error: str | None, model_name: str) -> str:
    """The `model_pred` their inference would store for one answer: its text after `clean_thinking`, or
    for a failure `infer_error`'s marker."""
    if error is not None or raw is None:
        return infer_error(error)
    return raw if is_error(raw) else clean_thinking(raw, model_name)


# ------------------------------------------------------------------ classification
def first_letter(pred: str) -> str:
    """The choice their classification script reads: the first character for which `str.isalpha()` is
    true in the stripped, upper-cased answer ("" when there is none). Chinese characters are alphabetic.

    >>> first_letter("The answer is B"), first_letter("(C)"), first_letter("答案：C"), first_letter("42")
    ('T', 'C', '答', '')
    """
    return next((char for char in pred.upper() if char.isalpha()), "")  # stripping: whitespace is no letter


def classification_gt(row: Mapping[str, Any]) -> str:
    """The reference letter their inference writes as `gt_answer` ("" when the row has none)."""
    return reference_letter(row.get("ground_truth", "")) or ""


def classification_item(pred: str, gt_answer: str) -> tuple[bool, bool, str]:
    """(matched, cannot read, the letter read) for one answer: a first "letter" outside A-Z (答) cannot be
    read; one past the options (I-Z) is read, and wrong."""
    pred = pred.strip()
    if not pred or is_error(pred):
        return False, True, ""
    letter = first_letter(pred)
    unreadable = not letter or letter not in ALPHABET
    return letter == gt_answer and letter != "", unreadable, letter


def classification_items(rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]
                         ) -> list[tuple[bool, bool, str]]:
    """`classification_item` of each paired answer (a prediction's own `gt_answer` wins over the row's)."""
    return [classification_item(str(preds[i].get("model_pred", "")),
                                preds[i].get("gt_answer") or classification_gt(rows[i]))
            for i in paired_positions(rows, preds)]


def classification_figures(rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[str, Any]:
    """What eval_classification.py prints, from the file's rows and the predictions by `idx`."""
    paired = min(len(rows), len(preds))
    items = classification_items(rows, preds)
    matched, unreadable = sum(hit for hit, _, _ in items), sum(cannot for _, cannot, _ in items)
    return {"acc": matched / paired if paired else 0.0,
            "cannot_read_option_ratio": unreadable / paired if paired else 0.0,
            "cannot_read_option_count": unreadable, "matched": matched, "total_eval": paired,
            "test_count": len(rows), "pred_count": len(preds)}


# ------------------------------------------------------------------ nutrition
def nutrition_reference(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row's reference as their script reads it; None when it cannot (the row is left out)."""
    truth = row.get("ground_truth", {})
    try:
        values = (json.loads(truth) if isinstance(truth, str) else truth) if truth else {}
        return normalize_keys(values)
    except Exception:  # noqa: BLE001 - their rule: any failure leaves the row out ("ground truth missing")
        return None


def parse_nutrition_answer(pred: str) -> dict[str, Any] | None:
    """The four values their script reads from an answer, or None (a parse failure, penalised). The whole text
    as JSON; else, only when it holds a code fence, the first fenced object or the outermost braces. It must
    be an object with the four nutrients, each accepted by `float()`.

    >>> parse_nutrition_answer('{"卡路里": 500, "蛋白质": "20", "碳水化合物": 50, "脂肪": 20}')["protein"]
    '20'
    >>> parse_nutrition_answer('Here: {"calories": 500, "protein": 20, "carbohydrates": 50, "fat": 20}') is None
    True
    """
    try:
        found = json.loads(pred)
    except Exception:  # noqa: BLE001
        fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", pred, re.DOTALL) if "```" in pred else None
        braces = re.search(r"\{.*\}", pred, re.DOTALL) if "```" in pred and not fenced else None
        text = fenced.group(1) if fenced else braces.group(0) if braces else pred
        try:
            found = json.loads(text)
        except Exception:  # noqa: BLE001
            return None
    if not isinstance(found, dict):
        return None
    found = normalize_keys(found)
    try:
        for key in NUTRIENTS:
            float(found[key])
    except (KeyError, ValueError, TypeError):
        return None
    return found


def as_float(value: Any) -> float | None:
    """`float(value)` as their scripts take it; None where that raises ValueError or TypeError (None does)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


NutrientErrors = dict[str, tuple[float, float, float | None]]  # per nutrient: absolute, squared, percentage error


def nutrition_errors(reference: Mapping[str, Any], answer: Mapping[str, Any] | None) -> NutrientErrors:
    """Per nutrient with a usable reference: (absolute error, squared error, APE in percent or None for
    a zero reference, which leaves it out of MAPE only). An unread answer is penalised: error |reference|,
    100% APE."""
    errors: NutrientErrors = {}
    for key in NUTRIENTS:
        truth = as_float(reference.get(key))
        if truth is None:
            continue
        guess = None if answer is None else as_float(answer.get(key))
        if guess is None:
            errors[key] = (abs(truth), abs(truth) ** 2, 100.0 if truth != 0 else None)
        else:
            errors[key] = (abs(guess - truth), (guess - truth) ** 2,
                           abs((guess - truth) / truth) * 100 if truth != 0 else None)
    return errors


NutritionItem = tuple[Mapping[str, Any] | None, NutrientErrors] | None  # the answer read, its errors; None: no reference


def nutrition_items(rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> list[NutritionItem]:
    """Each paired answer as their script reads it: (the answer read or None, `nutrition_errors`), or None
    for a row whose reference cannot be read (left out: "ground truth missing")."""
    found: list[NutritionItem] = []
    for i in paired_positions(rows, preds):
        reference = nutrition_reference(rows[i])
        if reference is None:
            found.append(None)
            continue
        answer = parse_nutrition_answer(str(preds[i].get("model_pred", "")).strip())
        found.append((answer, nutrition_errors(reference, answer)))
    return found


def nutrition_figures(rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[str, Any]:
    """What eval_nutrition.py prints, plus Table 2's `avg_*` (the means of the four nutrients)."""
    paired = min(len(rows), len(preds))
    items = nutrition_items(rows, preds)
    read = [item for item in items if item is not None]
    parse_fail, gt_missing = sum(answer is None for answer, _ in read), len(items) - len(read)
    figures: dict[str, Any] = {}
    for key in NUTRIENTS:
        found = [errors[key] for _, errors in read if key in errors]
        percent = [ape for _, _, ape in found if ape is not None]
        n = len(found)
        figures[key] = {"mae": sum(error for error, _, _ in found) / n if n else 0.0,
                        "rmse": math.sqrt(sum(square for _, square, _ in found) / n) if n else 0.0,
                        "mape": sum(percent) / len(percent) if n and percent else 0.0,
                        "valid_count": n}
    for name in ("mae", "rmse", "mape"):
        figures[f"avg_{name}"] = sum(figures[k][name] for k in NUTRIENTS) / len(NUTRIENTS)
    figures.update(parse_fail_count=parse_fail, gt_missing_count=gt_missing, total_eval=paired,
                   test_count=len(rows), pred_count=len(preds))
    return figures


# ------------------------------------------------------------------ VQA
def vqa_question(row: Mapping[str, Any]) -> str:
    """The question their judge reads: the row's prompt without its fixed ending (English tried first)."""
    return question_of(str(row.get("prompt") or ""))


_PLACEHOLDER = re.compile(r"\{(question|gt_answer|pred_answer)\}")


def judge_prompt(question: str, reference: str, answer: str) -> str:
    """Their Chinese judge prompt for one item (sent for English files too), filled in one pass."""
    values = {"question": question, "gt_answer": reference, "pred_answer": answer}
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), facts()["vqa"]["judge_prompt"])


def keyword_verdict(reply: Any) -> bool:
    """Their reading of a judge's reply: any negative keyword (substring, lower-cased text) means wrong,
    then any positive one means right; nothing found means wrong.

    >>> keyword_verdict("是"), keyword_verdict("否"), keyword_verdict("不是"), keyword_verdict("I don't know")
    (True, False, True, False)
    """
    if not isinstance(reply, str):
        return False
    text = reply.strip().lower()
    vqa = facts()["vqa"]
    if any(word in text for word in vqa["negative_keywords"]):
        return False
    return any(word in text for word in vqa["positive_keywords"])


_STRICT = {"是": True, "yes": True, "正确": True, "correct": True,
           "否": False, "no": False, "不是": False, "错误": False, "incorrect": False, "不正确": False}


def strict_verdict(reply: Any) -> bool | None:
    """This project's strict reading of the same reply: one word that says yes or no, nothing else
    (punctuation and quotes aside); None when the reply says neither plainly.

    >>> strict_verdict("“是”。"), strict_verdict("不是"), strict_verdict("是的，但不完全一致")
    (True, False, None)
    """
    if not isinstance(reply, str):
        return None
    return _STRICT.get(re.sub(r"[\s\"'“”‘’「」。.,，!！:：*]+", "", reply).lower())


def vqa_tasks(rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]
              ) -> list[tuple[int, str, str, str, bool]]:
    """The items their judge step evaluates: (idx, answer, reference, question, failed); a row with an
    empty reference is left out, and a failed (empty or failed) answer counts wrong without a call."""
    found = []
    for i in paired_positions(rows, preds):
        reference = rows[i].get("ground_truth", "")
        if not reference:
            continue
        answer = str(preds[i].get("model_pred", "")).strip()
        found.append((i, answer, reference, vqa_question(rows[i]), is_error(answer) or not answer))
    return found


def vqa_judge_figures(verdicts: Mapping[int, bool]) -> dict[str, Any]:
    """What eval_vqa.py --model_evaluate prints, from each judged item's `eval_match`."""
    total = len(verdicts)
    correct = sum(1 for match in verdicts.values() if match)
    return {"model_evaluate_accuracy": correct / total if total else 0.0, "model_evaluate_correct": correct,
            "model_evaluate_total": total}


def vqa_rouge_figures(rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[str, Any]:
    """What eval_vqa.py --evaluate (ROUGE) prints: mean ROUGE-1/2/L precision, recall and F1 over the
    answers rouge-chinese can score on jieba tokens (an empty answer raises there and is left out)."""
    import logging

    import jieba
    from rouge_chinese import Rouge

    jieba.setLogLevel(logging.WARNING)
    rouge = Rouge()
    sums: dict[str, list[float]] = {f"{kind}_{part}": [] for kind in ("rouge1", "rouge2", "rougeL")
            for part in ("precision", "recall", "f1")}
    paired = min(len(rows), len(preds))
    extracted = 0
    for i in paired_positions(rows, preds):
        reference = rows[i].get("ground_truth", "")
        answer = str(preds[i].get("model_pred", "")).strip()
        extracted += answer != ""
        if not reference:
            continue
        try:
            scores = rouge.get_scores(" ".join(jieba.cut(answer)), " ".join(jieba.cut(reference)))[0]
        except Exception:  # noqa: BLE001 - their rule: an answer rouge cannot score is left out
            continue
        for kind, key in (("rouge1", "rouge-1"), ("rouge2", "rouge-2"), ("rougeL", "rouge-l")):
            for part, letter in (("precision", "p"), ("recall", "r"), ("f1", "f")):
                sums[f"{kind}_{part}"].append(scores[key][letter])
    figures: dict[str, Any] = {name: sum(values) / len(values) if values else 0.0 for name, values in sums.items()}
    figures.update(answer_extracted=extracted, rouge_scored=len(sums["rouge1_f1"]), total_eval=paired)
    return figures
