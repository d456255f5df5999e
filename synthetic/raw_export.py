"""A raw merchant export (the input of `python -m construct run`) rendered from the synthetic menus, with a
real export's defects planted on purpose (`PLAN`, and a marketing-name item and a drink on every menu)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from synthetic.dish import Dish, plate, reference_view, user_views
from synthetic.nutrients import Nutrition, ingredient
from synthetic.recipes import STYLES
from synthetic.render import render
from synthetic.sample import menu

NUTRIENT_FIELDS = tuple(f.name for f in dataclasses.fields(Nutrition))  # the nutrition config's order

SIZE = 192  # px: big enough for a model to judge, small enough to render the export in about a second
MERCHANTS = [("merchant-01", "老街炒饭馆", "chinese", "fried_rice", 8), ("merchant-02", "Green Bowl 沙拉", "western", "salad", 8),
             ("merchant-03", "巷口小厨", "chinese", "fried_rice", 8), ("merchant-04", "さくら丼", "japanese", "rice_bowl", 6)]
# dish -> (defect, user photos). Every other menu dish has no photos (a distractor on the menu only).
PLAN = {
    "merchant-01-d0": ("blurred_user_photo", 3), "merchant-01-d1": ("wrong_dish_user_photo", 3),
    "merchant-01-d2": ("too_few_user_photos", 2), "merchant-01-d3": ("vague_ingredients", 3),
    "merchant-01-d4": ("merchant_atwater_gap", 3),
    "merchant-02-d0": ("merchant_per_100g", 3), "merchant-02-d1": ("reuploaded_user_photo", 3),
    "merchant-02-d2": ("tiny_and_cut_off_photos_and_merchant_macro_density", 3), "merchant-02-d3": ("ambiguous_item", 3),
    "merchant-03-d1": ("blurred_reference", 3), "merchant-03-d2": ("merchant_under_reported", 3),
    "merchant-03-d3": ("too_easy_item", 3), "merchant-03-d7": ("duplicate_of:merchant-01-d1", 3),
    "merchant-04-d0": ("small_menu_category", 3),
}
# Model-side defects the stand-in plants, by template dish: what its VQA draft gets wrong (whatever
# category the dish is drawn), and which classification filter pass flags the dish's item.
VQA_PLANTS = {"merchant-01-d0": "multiple_questions", "merchant-01-d1": "describes_image",
              "merchant-02-d0": "duplicate_of:merchant-01-d4", "merchant-04-d0": "audit1:false_premise",
              "merchant-02-d1": "audit2:trivial"}
CLASSIFICATION_PLANTS = {"merchant-02-d3": (1, "ambiguous"), "merchant-03-d3": (2, "too_easy")}
ODD_ITEM = ("冰镇酸梅汤", "Iced Sour Plum Drink", ["乌梅 20克", "山楂 10克", "冰糖 30克", "水 400毫升"], "1杯，约450克")


def _jpeg(img: Image.Image, quality: int = 85) -> bytes:
    out = io.BytesIO()
    img.convert("RGB").save(out, format="JPEG", quality=quality)
    return out.getvalue()


def _dish_row(dish: Dish, name: str, category: str, nutrition: dict | None = None,
              ingredients: list[str] | None = None) -> dict[str, Any]:
    lines = ingredients if ingredients is not None else [f"{ingredient(k).name_zh} {g:g}克" for k, g in dish.grams.items()]
    return {"dish_id": dish.dish_id, "merchant_id": dish.merchant_id, "name": name, "menu_category": category,
            "description": f"{dish.style.technique_zh}，现点现做", "ingredients": lines,
            "portion": dish.portion().split(" / ")[0], "nutrition": nutrition}


def _truth_of(dish: Dish, name: str, standard: str, name_en: str) -> dict[str, Any]:
    return {"dish_id": dish.dish_id, "merchant_id": dish.merchant_id, "name": name, "standard_name": standard,
            "name_en": name_en, "slots": {s: o.key for s, o in dish.choices}, "odd": False,
            "technique_zh": dish.style.technique_zh, "technique_en": dish.style.technique_en,
            "tags": sorted(dish.tags), "grams": sum(dish.grams.values()),
            "nutrition": dataclasses.asdict(dish.nutrition),
            "ingredients": [{"name": ingredient(k).name_zh, "grams": g, "usda_description": ingredient(k).description}
                            for k, g in dish.grams.items()]}


def in_block(template_id: str, block: int) -> str:
    """A template id (`merchant-03` or `merchant-03-d7`) in block `block` of four merchants.

    >>> in_block("merchant-03-d7", 0), in_block("merchant-03-d7", 2), in_block("merchant-01", 25)
    ('merchant-03-d7', 'merchant-11-d7', 'merchant-101')
    """
    head, _, tail = template_id.removeprefix("merchant-").partition("-")
    return f"merchant-{int(head) + len(MERCHANTS) * block:02d}" + (f"-{tail}" if tail else "")


def write_raw_export(out: str | Path, seed: int = 0, merchants: int = len(MERCHANTS)) -> dict[str, Any]:
    """Write merchants.jsonl, dishes.jsonl, photos.jsonl and images/ under `out`; return the truth (what each
    photo really shows, each dish's exact recipe, which defect sits where, which model-side defects the
    stand-in plants: `plants`) for test fakes to answer from, never written into the export itself.

    Merchant i (from 1) is a copy of template (i-1) mod 4 of `MERCHANTS` with its own menu draws, so every
    block of four carries the same planted defects on its own dishes (a partial last block, those of its
    merchants)."""
    if merchants < 1:
        raise ValueError(f"--merchants wants a positive number, got {merchants}")
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    merchants_rows, dishes, photos = [], [], []
    truth: dict[str, Any] = {"dishes": {}, "photos": {}, "defects": {}, "names_en": {},
                             "plants": {"vqa": {}, "classification": {}}}
    by_id: dict[str, Dish] = {}
    plan: dict[str, tuple[str, int]] = {}  # dish -> (defect with block ids, user photos)
    for m in range(merchants):
        block, k = divmod(m, len(MERCHANTS))
        tmid, mname, cuisine, style_key, n_menu = MERCHANTS[k]
        mid = in_block(tmid, block)
        mname = mname if block == 0 else f"{mname} {block + 1}号店"
        for template, (defect, n_user) in PLAN.items():
            if template.startswith(tmid + "-"):
                target = defect.partition(":")[2]
                plan[in_block(template, block)] = (f"duplicate_of:{in_block(target, block)}" if target else defect, n_user)
        for template, plant in VQA_PLANTS.items():
            if template.startswith(tmid + "-"):
                target = plant.partition(":")[2] if plant.startswith("duplicate_of:") else ""
                truth["plants"]["vqa"][in_block(template, block)] = (
                    f"duplicate_of:{in_block(target, block)}" if target else plant)
        for template, plant in CLASSIFICATION_PLANTS.items():
            if template.startswith(tmid + "-"):
                truth["plants"]["classification"][in_block(template, block)] = list(plant)
        style = STYLES[style_key]
        merchants_rows.append({"merchant_id": mid, "name": mname, "cuisine": cuisine})
        category = style.category_zh
        for i, d in enumerate(menu(style, mid, cuisine, 1, rng, k)[:n_menu]):
            d = dataclasses.replace(d, dish_id=f"{mid}-d{i}")
            name, name_en = d.name_zh, d.name_en
            if d.dish_id == in_block("merchant-03-d7", block):  # the same dish as merchant-01-d1, another name
                src = by_id[in_block("merchant-01-d1", block)]
                d = dataclasses.replace(src, dish_id=d.dish_id, merchant_id=mid, vessel_index=k)
                name, name_en = "家常" + d.name_zh, "Home-style " + d.name_en
            by_id[d.dish_id] = d
            nutrition = None
            n = d.nutrition
            grams = sum(d.grams.values())
            defect = plan.get(d.dish_id, ("", 0))[0]
            if defect == "merchant_atwater_gap":  # calories typed as half the macros' energy
                nutrition = {"unit": "per_serving", "calories": round(n.calories * 0.5), "protein": n.protein,
                             "carbohydrates": n.carbohydrates, "fat": n.fat}
            elif defect == "merchant_per_100g":
                nutrition = {"unit": "per_100g", **{f: round(getattr(n, f) / grams * 100, 2) for f in NUTRIENT_FIELDS}}
            elif defect.endswith("merchant_macro_density"):  # grams typed as per-serving for a bigger portion
                p, c, f = grams * 0.5, grams * 0.6, 2.0
                nutrition = {"unit": "per_serving", "calories": round(4 * p + 4 * c + 9 * f), "protein": p,
                             "carbohydrates": c, "fat": f}
            elif defect == "merchant_under_reported":  # consistent numbers, 40% of the real dish
                nutrition = {"unit": "per_serving", **{f: round(getattr(n, f) * 0.4, 1) for f in NUTRIENT_FIELDS}}
            ingredients = ["秘制酱汁", "精选食材", "美味可口，回味无穷"] if defect == "vague_ingredients" else None
            dishes.append(_dish_row(d, name, category, nutrition, ingredients))
            truth["dishes"][d.dish_id] = _truth_of(d, name, d.name_zh, d.name_en)
            truth["names_en"][name] = name_en
            truth["names_en"][d.name_zh] = d.name_en
        # Every menu also lists the first dish under a marketing name, and a drink.
        anchor = by_id[f"{mid}-d0"]
        extra = dataclasses.replace(anchor, dish_id=f"{mid}-d8")
        dishes.append(_dish_row(extra, "招牌" + anchor.name_zh, category))
        truth["dishes"][extra.dish_id] = _truth_of(extra, "招牌" + anchor.name_zh, anchor.name_zh, "Signature " + anchor.name_en)
        truth["names_en"]["招牌" + anchor.name_zh] = "Signature " + anchor.name_en
        drink = {"dish_id": f"{mid}-d9", "merchant_id": mid, "name": ODD_ITEM[0], "menu_category": category,
                 "description": "解腻饮品", "ingredients": ODD_ITEM[2], "portion": ODD_ITEM[3], "nutrition": None}
        dishes.append(drink)
        truth["dishes"][drink["dish_id"]] = {"dish_id": drink["dish_id"], "merchant_id": mid, "name": ODD_ITEM[0],
                                             "standard_name": ODD_ITEM[0], "name_en": ODD_ITEM[1], "slots": {},
                                             "odd": True}
        truth["names_en"][ODD_ITEM[0]] = ODD_ITEM[1]

    def add_photo(dish_id: str, k: int, role: str, data: bytes, shows: str, quality: str, defect: str = "") -> None:
        pid = f"{dish_id}-p{k}"
        rel = f"images/{pid}.jpg"
        (out / rel).write_bytes(data)
        photos.append({"photo_id": pid, "dish_id": dish_id, "role": role, "path": rel})
        truth["photos"][hashlib.sha256(data).hexdigest()] = {"photo_id": pid, "dish_id": dish_id, "shows": shows,
                                                             "quality": quality, "defect": defect}

    for dish_id, (defect, n_user) in plan.items():
        d = by_id[dish_id]
        block = (int(dish_id.split("-")[1]) - 1) // len(MERCHANTS)
        wrong = in_block("merchant-02-d5", block)
        if defect == "wrong_dish_user_photo" and wrong not in by_id:  # a partial block without merchant 2
            defect = ""
        truth["defects"][dish_id] = defect
        scene = plate(d, detail=0.5)
        views = [reference_view(d)] + user_views(d, n_user, np.random.default_rng(d.seed))
        images = [render(scene, v, SIZE, seed=d.seed + i, supersample=1) for i, v in enumerate(views)]
        for i, img in enumerate(images):
            bad_ref = i == 0 and defect == "blurred_reference"
            img = img.filter(ImageFilter.GaussianBlur(6)) if bad_ref else img
            add_photo(dish_id, i, "reference" if i == 0 else "user", _jpeg(img), dish_id, "bad" if bad_ref else "good",
                      "blurred_reference" if bad_ref else "")
        k = len(images)
        if defect == "blurred_user_photo":  # one more angle, out of focus
            view = user_views(d, n_user + 1, np.random.default_rng(d.seed))[-1]
            img = render(scene, view, SIZE, seed=d.seed + k, supersample=1).filter(ImageFilter.GaussianBlur(7))
            add_photo(dish_id, k, "user", _jpeg(img), dish_id, "bad", defect)
        elif defect == "wrong_dish_user_photo":  # a customer's photo of the salad next door
            other = by_id[wrong]
            img = render(plate(other, detail=0.5), user_views(other, 1, np.random.default_rng(1))[0], SIZE, seed=5,
                         supersample=1)
            add_photo(dish_id, k, "user", _jpeg(img), other.dish_id, "good", defect)
        elif defect == "reuploaded_user_photo":
            add_photo(dish_id, k, "user", _jpeg(images[1], quality=60), dish_id, "good", defect)
        elif defect.startswith("tiny_and_cut_off"):
            add_photo(dish_id, k, "user", _jpeg(images[1].resize((40, 40))), dish_id, "good", "tiny_photo")
            add_photo(dish_id, k + 1, "user", _jpeg(images[2])[:600], dish_id, "good", "cut_off_photo")

    for name, rows in (("merchants", merchants_rows), ("dishes", dishes), ("photos", photos)):
        with (out / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return truth
