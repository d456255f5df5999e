"""The authors' rows read as ours, and ours worded as theirs: one rule per published shape (`SHAPES`,
found by `Config.shape`): the options inside a classification prompt, a nutrition ground truth, the
photos a row names in the authors' order, and the row the harness reads (published fields kept)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dataset.jsonl import MAX_JSON_DEPTH, json_depth_within
from dataset.schema import COLUMNS, DECLARED, LETTERS, NUTRIENTS, config_of

# Facts of the authors' scripts (GitHub meituan/DiningBench at 9c9bdf7), byte for byte in
# official_protocol.json beside this file (the harness's eval/official.py reads the same file): the
# sentence every VQA prompt ends with (eval_vqa.py strips it to recover the question, the English one
# tried first) and the nutrient keys of a nutrition ground truth (eval_nutrition.py's nutrition_key_mapping).
PROTOCOL_FILE = Path(__file__).resolve().parent / "official_protocol.json"
PROTOCOL: dict[str, Any] = json.loads(PROTOCOL_FILE.read_text(encoding="utf-8"))
VQA_ENDINGS = {lang: PROTOCOL["vqa"][f"fixed_ending_{lang}"] for lang in ("en", "zh")}
NUTRIENT_KEYS = {name: nutrient for nutrient, names in PROTOCOL["nutrition_keys"].items() if not nutrient.startswith("_")
                 for name in names}
# Keys a nutrition ground truth may give the dish's refined name under (the first present wins).
DISH_NAME_KEYS = ("菜品名称", "菜品名", "菜名", "名称", "dish_name", "dish", "food_name", "name", "refined_name")
NO_OPTIONS = "options cannot be read from the prompt; cannot join analyses that need the options"


_OPTION = re.compile(r"(?<![A-Za-z0-9])(?:[(（]([A-H])[)）]|([A-H])\s*[.．:：、)）])[ \t]*")


def parse_options(prompt: str) -> list[str] | None:
    """The option texts a classification prompt lists, A.. in order, or None when they cannot be read. Markers
    may be `A.`, `A:`, `A：`, `A、`, `A)` or `(A)`, one option a line or several on one; the longest run A, B,
    C, ... with a text after every marker wins (an instruction such as "答案为A、B…" has empty texts and is no
    run).

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


def normalize_keys(values: Mapping[str, Any]) -> dict[str, Any]:
    """Their key normalisation (eval_nutrition.py): a nutrient's Chinese or English key becomes its English
    name, the first one seen winning; other keys are kept as they are.

    >>> normalize_keys({"卡路里": 512, "calories": 9, "蛋白质": "30", "菜品名称": "宫保鸡丁"})
    {'calories': 512, 'protein': '30', '菜品名称': '宫保鸡丁'}
    """
    normalized: dict[str, Any] = {}
    for key, value in values.items():  # an English name is a key of its own: no other key takes its place
        normalized.setdefault(NUTRIENT_KEYS.get(key, key), value)
    return normalized


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
    found = normalize_keys(value)
    name = next((value[k].strip() for k in DISH_NAME_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
    return {**{n: _number(found.get(n)) for n in NUTRIENTS}, "dish_name": name}


def reference_letter(ground_truth: Any) -> str | None:
    """A classification row's reference letter as their inference writes it (`gt_answer`): the ground
    truth stripped and upper-cased; None when it is not text.

    >>> reference_letter(" b\\n"), reference_letter(2)
    ('B', None)
    """
    return ground_truth.strip().upper() if isinstance(ground_truth, str) else None


def fixed_ending(prompt: str) -> str | None:
    """The fixed sentence a VQA prompt ends with (the English one tried first, as eval_vqa.py strips
    them), or None when it ends with neither."""
    return next((ending for ending in (VQA_ENDINGS["en"], VQA_ENDINGS["zh"]) if prompt.endswith(ending)), None)


def vqa_question(prompt: str) -> str:
    """The question a VQA prompt asks, as their judge reads it: the prompt without its fixed ending, stripped.

    >>> vqa_question("这道菜辣吗？" + VQA_ENDINGS["zh"]), vqa_question(" no ending ")
    ('这道菜辣吗？', 'no ending')
    """
    ending = fixed_ending(prompt)
    return (prompt[: -len(ending)] if ending else prompt).strip()


def vqa_image_fallback(item_id: Any) -> list[str]:
    """The photo the authors' VQA script sends for a row without `images`: images/{id:05d}.jpg."""
    if item_id is None or item_id == "":
        return []
    try:
        return [f"images/{int(item_id):05d}.jpg"]
    except (ValueError, TypeError, OverflowError):
        text = str(item_id).strip()
        return [f"images/{text.zfill(5)}.jpg"] if text.isdigit() else []


# ----------------------------------------------------------------------------- the published shapes

# How one of our rows is worded in the authors' layout: their shape (the options inside the prompt and
# the letter asked for; the four nutrients as a JSON object; the question then the fixed ending), our
# words. The sample and a constructed release (`construct release --layout official`) both write so.
_CLASSIFY_WORDING = {"zh": ("请根据图片判断这是菜单上的哪一道菜：", "请只输出正确选项的字母（A-H）。"),
                    "en": ("Which dish on the menu do the photos show?",
                           "Answer with the letter of the correct option (A-H) only.")}
_NUTRITION_WORDING = {"zh": "请估计图中这道菜一份的营养成分（卡路里单位千卡，其余单位克），只输出JSON：",
                     "en": "Estimate the nutrition of one serving of the dish in the photos (calories in kcal, the "
                           "rest in grams). Output only JSON:"}
_NUTRIENT_NAMES = {"zh": ("卡路里", "蛋白质", "碳水化合物", "脂肪"), "en": NUTRIENTS}
_DISH_NAME_KEY = {"zh": "菜品名称", "en": "dish_name"}
# Our columns holding the texts of each language (the Chinese ones are the unsuffixed columns).
_TEXTS = {column: english for config in DECLARED for column, english in config.english.items()}


def text_of(row: Mapping[str, Any], column: str, lang: str) -> Any:
    """The row's `column` in `lang`: `options` in en is `options_en`."""
    return row[_TEXTS[column] if lang == "en" else column]


def classification_prompt(options: list[str], lang: str, marker: str = "{}. ") -> str:
    """The question, one option a line after its letter (`marker` formats it), the letter asked for.

    >>> print(classification_prompt(["Mapo Tofu", "Kung Pao Chicken"], "en"))
    Which dish on the menu do the photos show?
    A. Mapo Tofu
    B. Kung Pao Chicken
    Answer with the letter of the correct option (A-H) only.
    """
    head, tail = _CLASSIFY_WORDING[lang]
    return "\n".join([head, *(marker.format(LETTERS[j]) + o for j, o in enumerate(options)), tail])


def nutrition_prompt(lang: str) -> str:
    """The request and the JSON object to fill, its nutrient keys in `lang`."""
    return _NUTRITION_WORDING[lang] + json.dumps(dict.fromkeys(_NUTRIENT_NAMES[lang], 0), ensure_ascii=False)


def nutrition_ground_truth(dish_name: Any, values: Iterable[Any], keys_lang: str) -> dict[str, Any]:
    """{dish name, the four nutrients} under the keys of `keys_lang` (both are read by the authors' script).

    >>> nutrition_ground_truth("宫保鸡丁", [512, 30, 40, 20.5], "zh")
    {'菜品名称': '宫保鸡丁', '卡路里': 512, '蛋白质': 30, '碳水化合物': 40, '脂肪': 20.5}
    """
    return {_DISH_NAME_KEY[keys_lang]: dish_name, **dict(zip(_NUTRIENT_NAMES[keys_lang], values, strict=True))}


def vqa_prompt(question: str, lang: str) -> str:
    """The question and the fixed sentence the authors' VQA prompts end with."""
    return f"{question}{VQA_ENDINGS[lang]}"


class Shape:
    """How the rows of one shape (`Config.shape`) are published in the authors' layout: the fields
    naming their photos, what our columns read from a row, and one of our rows worded as theirs.
    This base is the shape of a prompt and a ground truth with the photos as `standard_image` (the
    reference, when one leads) and `user_images`; a subclass says what the prompt and truth hold."""

    lists_images = False  # the photos as one `images` list instead

    def images(self, published: Mapping[str, Any]) -> tuple[list[tuple[str, Any]], bool]:
        """((field, path) of each photo in the authors' order, whether a standard image leads):
        [standard_image when non-empty] + user_images (one string counts as one item)."""
        standard, users = published.get("standard_image"), published.get("user_images")
        found = [("standard_image", standard)] if standard else []
        if isinstance(users, list):
            found += [(f"user_images[{k}]", p) for k, p in enumerate(users)]
        elif users:
            found.append(("user_images", users))
        return found, bool(standard)

    def read(self, published: Mapping[str, Any], prompt: str, truth: Any) -> dict[str, Any]:
        """Our columns as the published row gives them (the ones it cannot give are left null)."""
        raise NotImplementedError

    def words(self, row: Mapping[str, Any], lang: str) -> tuple[str, Any]:
        """(the prompt, the ground truth) one of our rows is published with in `lang`."""
        raise NotImplementedError

    def publish(self, item_id: Any, row: Mapping[str, Any], lang: str, image_paths: list[str]) -> dict[str, Any]:
        """One of our rows as the published object, its photos at `image_paths` (see `published_row`)."""
        prompt, truth = self.words(row, lang)
        roles = row.get("image_roles") or ["reference"]
        standard = bool(image_paths) and roles[0] == "reference"
        return {"id": item_id, "prompt": prompt, "ground_truth": truth,
                "standard_image": image_paths[0] if standard else "", "user_images": list(image_paths[standard:])}


class _ChoiceShape(Shape):
    """Lettered options inside the prompt, the letter as the ground truth."""

    def read(self, published: Mapping[str, Any], prompt: str, truth: Any) -> dict[str, Any]:
        return {"options": parse_options(prompt), "options_en": None, "answer": reference_letter(truth)}

    def words(self, row: Mapping[str, Any], lang: str) -> tuple[str, Any]:
        return classification_prompt(text_of(row, "options", lang), lang), row["answer"]


class _NutrientShape(Shape):
    """A fixed request, the dish's name and four nutrients as the ground truth (an object or its JSON),
    the nutrient keys in the file's language."""

    def read(self, published: Mapping[str, Any], prompt: str, truth: Any) -> dict[str, Any]:
        return {**(nutrition_truth(truth) or dict.fromkeys([*NUTRIENTS, "dish_name"])), "nutrition_source": None}

    def words(self, row: Mapping[str, Any], lang: str) -> tuple[str, Any]:
        return nutrition_prompt(lang), nutrition_ground_truth(text_of(row, "dish_name", lang),
                                                              [row[n] for n in NUTRIENTS], lang)


class _QuestionShape(Shape):
    """The question then the fixed ending, a free answer, the rationale as `reasoning`, the photos as
    `images` (none: the id's fallback photo, as the authors' script reads it)."""

    lists_images = True

    def images(self, published: Mapping[str, Any]) -> tuple[list[tuple[str, Any]], bool]:
        images = published.get("images")
        if not images:
            return [("images (from the id)", p) for p in vqa_image_fallback(published.get("id"))], False
        items = images if isinstance(images, list) else [images]
        return [(f"images[{k}]", p) for k, p in enumerate(items)], False

    def read(self, published: Mapping[str, Any], prompt: str, truth: Any) -> dict[str, Any]:
        reasoning = published.get("reasoning")
        return {"question": vqa_question(prompt), "answer": truth if isinstance(truth, str) or truth is None else str(truth),
                "rationale": reasoning if isinstance(reasoning, str) else None, "vqa_category": None}

    def publish(self, item_id: Any, row: Mapping[str, Any], lang: str, image_paths: list[str]) -> dict[str, Any]:
        return {"id": item_id, "prompt": vqa_prompt(text_of(row, "question", lang), lang),
                "ground_truth": text_of(row, "answer", lang), "images": list(image_paths),
                "reasoning": text_of(row, "rationale", lang)}


# Each shape a config may declare (`Config.shape`), by name.
SHAPES: dict[str, Shape] = {"choice": _ChoiceShape(), "nutrients": _NutrientShape(), "question": _QuestionShape()}


def shape_of(config: str) -> Shape:
    """The rule of the shape `config` is published in."""
    return SHAPES[config_of(config).shape]


def published_images(config: str, published: Mapping[str, Any]) -> tuple[list[tuple[str, Any]], bool]:
    """((field, path) of each image in the authors' order, whether a standard image leads), as the config's
    shape reads them (`Shape.images`; VQA's `images`, the id's fallback photo when it has none)."""
    return shape_of(config).images(published)


def derive_row(config: str, idx: int, item_id: str, published: dict[str, Any]) -> dict[str, Any]:
    """One published row as the harness's row: our columns (null where the release cannot give them),
    the published fields, and the whole published object."""
    shape = shape_of(config)
    images, standard = shape.images(published)
    prompt = published.get("prompt")
    prompt = prompt if isinstance(prompt, str) else ""
    truth = published.get("ground_truth")
    row: dict[str, Any] = {name: None for name in COLUMNS[config]}
    row.update(id=item_id, idx=idx, published=published, prompt=prompt, ground_truth=truth,
               image_paths=[p for _, p in images], has_standard_image=standard,
               image_roles=["reference" if standard and k == 0 else "user" for k in range(len(images))],
               merchant_id=None, dish_id=None, cuisine=None, category=None)
    row.update(shape.read(published, prompt, truth))
    return row


def published_row(config: str, item_id: Any, row: Mapping[str, Any], lang: str,
                  image_paths: list[str]) -> dict[str, Any]:
    """One of our rows (our columns) as the authors' published object in `lang`, its photos at
    `image_paths` (relative to the release folder, in the row's order), worded by the config's shape.
    Classification and nutrition: the first photo is `standard_image` when the row's `image_roles` (or,
    without them, its order) make it the reference, the others `user_images`; VQA: all of them as
    `images`, the rationale as `reasoning`. The nutrient keys follow `lang`."""
    return shape_of(config).publish(item_id, row, lang, image_paths)
