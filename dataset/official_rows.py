"""The authors' rows read as ours: the options inside a classification prompt, a nutrition ground truth,
the photos a row names in the authors' order, and the row the harness reads (published fields kept)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataset.jsonl import MAX_JSON_DEPTH, json_depth_within
from dataset.schema import COLUMNS, LETTERS, NUTRIENTS

# Facts of the authors' scripts (GitHub meituan/DiningBench at 9c9bdf7), byte for byte in
# official_protocol.json beside this file (the harness's eval/official.py reads the same file): the
# sentence every VQA prompt ends with (eval_vqa.py strips it to recover the question, the English one
# tried first) and the nutrient keys of a nutrition ground truth (eval_nutrition.py's nutrition_key_mapping).
PROTOCOL_FILE = Path(__file__).resolve().parent / "official_protocol.json"
PROTOCOL: dict[str, Any] = json.loads(PROTOCOL_FILE.read_text(encoding="utf-8"))
VQA_ENDINGS = {"en": PROTOCOL["vqa"]["fixed_ending_en"], "zh": PROTOCOL["vqa"]["fixed_ending_zh"]}
NUTRIENT_KEYS = {name: nutrient for nutrient, names in PROTOCOL["nutrition_keys"].items() if not nutrient.startswith("_")
                 for name in names}
# Keys a nutrition ground truth may give the dish's refined name under (the first present wins).
DISH_NAME_KEYS = ("菜品名称", "菜品名", "菜名", "名称", "dish_name", "dish", "food_name", "name", "refined_name")
NO_OPTIONS = "options cannot be read from the prompt; cannot join analyses that need the options"


_OPTION = re.compile(r"(?<![A-Za-z0-9])(?:[(（]([A-H])[)）]|([A-H])\s*[.．:：、)）])[ \t]*")


def parse_options(prompt: str) -> list[str] | None:
    """The option texts a classification prompt lists, A.. in order, or None when they cannot be read.

    Markers may be `A.`, `A:`, `A：`, `A、`, `A)` or `(A)`, one option a line or several on one; the
    longest run A, B, C, ... with a text after every marker wins (an instruction such as "答案为A、B…"
    has empty texts and is no run).

    >>> parse_options("这道菜是？\\nA. 宫保鸡丁\\nB: 鱼香肉丝\\n(C) 回锅肉\\n只输出字母。")
    ['宫保鸡丁', '鱼香肉丝', '回锅肉']
    >>> parse_options("Which dish? A、Kung Pao B、Mapo Tofu"), parse_options("no options here")
    (['Kung Pao', 'Mapo Tofu'], None)
    """
    marks = list(_OPTION.finditer(prompt))
    runs: list[list[str]] = []
    run: list[str] = []
    for k, mark in enumerate(marks):
        letter = mark.group(1) or mark.group(2)
        end = marks[k + 1].start() if k + 1 < len(marks) else len(prompt)
        text = prompt[mark.end():end].split("\n", 1)[0].strip()
        if letter == LETTERS[len(run):len(run) + 1] and text:
            run.append(text)
            continue
        runs.append(run)
        run = [text] if letter == "A" and text else []
    runs.append(run)
    best = max(runs, key=len)
    return best if len(best) >= 2 else None


def _number(value: Any) -> float | None:
    """A nutrient as the authors' float() reads it (a number, or numeric text); None when it is not one
    or not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def nutrition_truth(ground_truth: Any) -> dict[str, Any] | None:
    """A nutrition ground truth (an object, or a JSON string of one) as our four nutrients (floats,
    None where missing or unreadable) and `dish_name`; None when it is not an object at all. A
    nutrient's first key wins, Chinese or English, as in the authors' normalisation.

    >>> nutrition_truth('{"菜品名称": "宫保鸡丁", "卡路里": "512", "calories": 9, "蛋白质": 30, "fat": 20.5}')
    {'calories': 512.0, 'protein': 30.0, 'carbohydrates': None, 'fat': 20.5, 'dish_name': '宫保鸡丁'}
    """
    value = ground_truth
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, dict) or not json_depth_within(value, MAX_JSON_DEPTH):
        return None
    found: dict[str, Any] = {}
    for key, raw in value.items():
        nutrient = NUTRIENT_KEYS.get(key)
        if nutrient and nutrient not in found:
            found[nutrient] = raw
    name = next((value[k].strip() for k in DISH_NAME_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
    return {**{n: _number(found.get(n)) for n in NUTRIENTS}, "dish_name": name}


def vqa_image_fallback(item_id: Any) -> list[str]:
    """The photo the authors' VQA script sends for a row without `images`: images/{id:05d}.jpg."""
    if item_id is None or item_id == "":
        return []
    try:
        return [f"images/{int(item_id):05d}.jpg"]
    except (ValueError, TypeError, OverflowError):
        text = str(item_id).strip()
        return [f"images/{text.zfill(5)}.jpg"] if text.isdigit() else []


def _asks_questions(config: str) -> bool:
    """Whether the config's published rows list their photos as `images` (the VQA rows) rather than
    as standard_image + user_images; known from our columns, as every config-specific rule here."""
    return "question" in COLUMNS[config]


def published_images(config: str, published: Mapping[str, Any]) -> tuple[list[tuple[str, Any]], bool]:
    """((field, path) of each image in the authors' order, whether a standard image leads).

    Classification and nutrition: [standard_image when non-empty] + user_images (one string counts
    as one item); VQA: `images`, or the id's fallback photo when it has none."""
    if _asks_questions(config):
        images = published.get("images")
        if not images:
            return [("images (from the id)", p) for p in vqa_image_fallback(published.get("id"))], False
        items = images if isinstance(images, list) else [images]
        return [(f"images[{k}]", p) for k, p in enumerate(items)], False
    standard, users = published.get("standard_image"), published.get("user_images")
    found = [("standard_image", standard)] if standard else []
    if isinstance(users, list):
        found += [(f"user_images[{k}]", p) for k, p in enumerate(users)]
    elif users:
        found.append(("user_images", users))
    return found, bool(standard)


def derive_row(config: str, idx: int, item_id: str, published: dict[str, Any]) -> dict[str, Any]:
    """One published row as the harness's row: our columns (null where the release cannot give them),
    the published fields, and the whole published object."""
    images, standard = published_images(config, published)
    prompt = published.get("prompt")
    prompt = prompt if isinstance(prompt, str) else ""
    truth = published.get("ground_truth")
    row: dict[str, Any] = {name: None for name in COLUMNS[config]}
    row.update(id=item_id, idx=idx, published=published, prompt=prompt, ground_truth=truth,
               image_paths=[p for _, p in images], has_standard_image=standard,
               image_roles=["reference" if standard and k == 0 else "user" for k in range(len(images))],
               merchant_id=None, dish_id=None, cuisine=None, category=None)
    if "options" in COLUMNS[config]:
        row.update(options=parse_options(prompt), options_en=None,
                   answer=truth.strip().upper() if isinstance(truth, str) else None)
    elif NUTRIENTS[0] in COLUMNS[config]:
        row.update(nutrition_truth(truth) or dict.fromkeys([*NUTRIENTS, "dish_name"]), nutrition_source=None)
    else:
        question = prompt
        for ending in VQA_ENDINGS.values():
            if question.endswith(ending):
                question = question[: -len(ending)]
                break
        reasoning = published.get("reasoning")
        row.update(question=question.strip(), answer=truth if isinstance(truth, str) or truth is None else str(truth),
                   rationale=reasoning if isinstance(reasoning, str) else None, vqa_category=None)
    return row
