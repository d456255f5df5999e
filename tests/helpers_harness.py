"""Test fixtures for the harness: a tiny release with hand-picked answers, and fake-server oracles.

The release is small enough to reason about by hand:
- classification: 6 items, 2 merchants; answers A, B, A, C, A, D (so `baseline:first` scores 3/6).
- nutrition: 4 items, 2 menu categories, round numbers (medians and means are easy to check).
- vqa: 3 open-form questions.
Every item's views are distinct little images; one nutrition item has a large PNG reference view
(to exercise resizing).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from PIL import Image

import diningbench
from eval import requests, tasks
from eval.settings import RunSettings
from eval.types import NUTRIENTS
from tests.fakes.base import RecordedRequest, answer_key

CLASSIFICATION_ANSWERS = ["A", "B", "A", "C", "A", "D"]
NUTRITION = {  # id: (category, calories, protein, carbohydrates, fat)
    "n1": ("noodles", 400.0, 20.0, 50.0, 10.0),
    "n2": ("noodles", 600.0, 30.0, 70.0, 20.0),
    "n3": ("salad", 200.0, 10.0, 20.0, 8.0),
    "n4": ("salad", 300.0, 0.0, 30.0, 12.0),  # protein 0: left out of protein MAPE
}
VQA_ANSWERS = {"v1": "清蒸，保持鱼肉鲜嫩。", "v2": "建议少放酱汁，减少钠摄入。", "v3": "实际份量比参考图少约三分之一。"}


def jpeg(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="JPEG", quality=90)
    return out.getvalue()


def png(color: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def _views(seed: int, n: int, big: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    images = []
    for k in range(n):
        color = ((seed * 37 + k * 53) % 256, (seed * 91 + k * 17) % 256, (seed * 13 + k * 101) % 256)
        data = png(color, (300, 200)) if big and k == 0 else jpeg(color)
        images.append({"bytes": data, "path": f"{seed}_{k}.img"})
    # Stored order puts one user view before the reference, so ordering matters.
    roles = ["user", "reference"] + ["user"] * (n - 2)
    return images, roles


def _common(i: int, item_id: str, merchant: str, category: str, n_views: int, big: bool = False) -> dict[str, Any]:
    images, roles = _views(i, n_views, big)
    return {"id": item_id, "dish_id": f"d-{item_id}", "merchant_id": merchant, "category": category,
            "cuisine": "chinese" if merchant == "m1" else "western", "images": images, "image_roles": roles}


def classification_rows() -> list[dict[str, Any]]:
    rows = []
    for i, answer in enumerate(CLASSIFICATION_ANSWERS):
        merchant = "m1" if i < 3 else "m2"
        options = [f"菜品{i}-{k}" for k in range(8)]
        rows.append({**_common(i + 1, f"c{i + 1}", merchant, "主食" if i < 3 else "沙拉", 3),
                     "options": options, "options_en": [f"dish {i}-{k}" for k in range(8)], "answer": answer})
    return rows


def nutrition_rows() -> list[dict[str, Any]]:
    rows = []
    for i, (item_id, (category, kcal, protein, carbs, fat)) in enumerate(NUTRITION.items()):
        rows.append({**_common(20 + i, item_id, "m1" if i < 2 else "m2", category, 4, big=(i == 0)),
                     "dish_name": f"菜{item_id}", "dish_name_en": f"dish {item_id}", "ingredients": ["米饭"],
                     "portion": "1 份", "calories": kcal, "protein": protein, "carbohydrates": carbs, "fat": fat,
                     "nutrition_source": "computed"})
    return rows


def vqa_rows() -> list[dict[str, Any]]:
    categories = ["cuisine_technique", "dietary_suggestion", "multi_image_analysis"]
    rows = []
    for i, (item_id, answer) in enumerate(VQA_ANSWERS.items()):
        rows.append({**_common(40 + i, item_id, "m1" if i < 2 else "m2", "主菜", 2),
                     "question": f"问题{item_id}：这道菜应该怎样做？", "question_en": f"Question {item_id}?",
                     "answer": answer, "answer_en": f"answer {item_id}", "rationale": "因为……",
                     "rationale_en": "because ...", "vqa_category": categories[i]})
    return rows


def make_release(folder: Path) -> Path:
    """Write the tiny release (Parquet + card) with the dataset module's own writer."""
    rows = {"classification": classification_rows(), "nutrition": nutrition_rows(), "vqa": vqa_rows()}
    return diningbench.write_release(folder, {c: (len(r), iter(r)) for c, r in rows.items()})


def correct_answer(task: str, row: dict[str, Any]) -> str:
    if task == "classification":
        return row["answer"]
    if task == "nutrition":
        return json.dumps({k: row[k] for k in NUTRIENTS})
    return row["answer"]


def model_oracle(release: Path, settings: RunSettings, *, wrong: Iterable[str] = (),
                 overrides: dict[str, str] | None = None) -> Callable[[RecordedRequest], str]:
    """A fake model that knows every item (found by prompt text + image bytes) and answers right,
    except items in `wrong` (a deliberately wrong answer) and `overrides` (id -> raw text)."""
    known: dict[str, str] = {}
    wrong, overrides = set(wrong), overrides or {}
    for task in diningbench.CONFIGS:
        for row in diningbench.load(task, str(release), decode_images=False):
            request = requests.build_request(tasks.get(task), row, settings)
            images = [p.data for p in request.messages[0].images]
            answer = correct_answer(task, row)
            if row["id"] in wrong:
                answer = {"classification": "H", "nutrition": json.dumps(dict.fromkeys(NUTRIENTS, 1.0)),
                          "vqa": "WRONG ANSWER"}[task]
            known[answer_key(request.messages[0].text, images)] = overrides.get(row["id"], answer)

    def oracle(request: RecordedRequest) -> str:
        if not request.images:  # a judge prompt: wrong answers are graded I, the rest C
            return "GRADE: I" if "WRONG ANSWER" in request.prompt else "The answer matches.\nGRADE: C"
        return known.get(request.key, "I do not know this dish.")

    return oracle


def item_of(request: RecordedRequest, release: Path, settings: RunSettings) -> str | None:
    """Which item id a recorded request was about (for per-item assertions)."""
    for task in diningbench.CONFIGS:
        for row in diningbench.load(task, str(release), decode_images=False):
            built = requests.build_request(tasks.get(task), row, settings)
            if answer_key(built.messages[0].text, [p.data for p in built.messages[0].images]) == request.key:
                return row["id"]
    return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
