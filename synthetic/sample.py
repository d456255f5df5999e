"""Plans and renders the synthetic release: merchants, menus of 8 look-alike dishes, and the rows of
the three configs."""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from synthetic import vqa
from synthetic.dish import Dish, plate, reference_view, user_views
from synthetic.recipes import CUISINE_STYLES, STYLES, Style
from synthetic.render import render, to_jpeg

LETTERS = "ABCDEFGH"
# Paper (Table 3) cuisine counts, used as weights when drawing menu categories at paper scale.
CUISINE_WEIGHTS = {"chinese": 2086, "western": 286, "worldwide": 252, "asian": 187, "japanese": 118,
                   "latin_american": 48, "indian": 44}
VQA_PAPER = {"cuisine_technique": 532, "dietary_suggestion": 219, "multi_image_analysis": 35,
             "counterfactual_reasoning": 18}
VQA_SAMPLE = {"cuisine_technique": 5, "dietary_suggestion": 5, "multi_image_analysis": 3,
              "counterfactual_reasoning": 3}
SAMPLE_MENUS = [("chinese", "fried_rice"), ("chinese", "noodle_soup"), ("western", "salad"),
                ("indian", "curry"), ("japanese", "rice_bowl")]


@dataclass(frozen=True)
class Scale:
    classification: int
    nutrition: int
    vqa: dict[str, int]
    user_shots: tuple[int, ...]  # drawn per dish; paper mean 4.33 + 1 reference = 5.33 images
    image_size: int
    supersample: int
    detail: float = 1.0  # share of rice grains drawn (the dome underneath keeps piles solid)


SCALES = {
    "sample": Scale(40, 24, VQA_SAMPLE, (2, 3), 512, 2),
    "paper": Scale(2884, 1650, VQA_PAPER, (3, 4, 4, 5, 5, 5), 448, 1, detail=0.5),
    # For tests of the generator itself: one menu, small images, one VQA item per category.
    "tiny": Scale(8, 4, {c: 1 for c in VQA_SAMPLE}, (2,), 96, 1),
}


@dataclass
class Plan:
    dishes: list[Dish]
    menus: dict[str, list[Dish]]  # category key (merchant + style) -> its 8 dishes
    user_shots: dict[str, int]
    classification: list[tuple[Dish, int]]  # dish, answer position
    nutrition: list[Dish]
    vqa: list[tuple[Dish, str]]
    reality: dict[str, tuple[float, str]] = field(default_factory=dict)  # dish_id -> (shrink, dropped slot)


def menu(style: Style, merchant_id: str, cuisine: str, first_index: int, rng: np.random.Generator,
         vessel_index: int) -> list[Dish]:
    """8 dishes of one menu category: an anchor dish and 7 that each change one or two of its slots,
    so every distractor shares most of what the target looks like (hard negatives)."""
    slots = style.slots
    anchor = [int(rng.integers(len(opts))) for _, opts in slots]
    combos = [tuple(anchor)]
    while len(combos) < 8:
        combo = list(anchor)
        for s in rng.choice(len(slots), size=min(len(slots), int(rng.integers(1, 3))), replace=False):
            combo[s] = int(rng.integers(len(slots[s][1])))
        if tuple(combo) not in combos:
            combos.append(tuple(combo))
    return [Dish(f"dish-{first_index + k:05d}", merchant_id, cuisine, style,
                 tuple((name, opts[i]) for (name, opts), i in zip(slots, combo, strict=True)),
                 round(float(rng.uniform(0.8, 1.3)), 2), int(rng.integers(2 ** 31)), vessel_index)
            for k, combo in enumerate(combos)]


def plan(scale: str = "sample", seed: int = 0) -> Plan:
    """Decide every merchant, dish, item and answer position before any pixel is drawn."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    sc = SCALES[scale]
    rng = np.random.default_rng(seed)
    n_menus = math.ceil(sc.classification / 8)
    if scale in ("sample", "tiny"):
        layout = [(f"merchant-{i + 1:02d}", c, s) for i, (c, s) in enumerate(SAMPLE_MENUS)][:n_menus]
    else:
        names, weights = zip(*CUISINE_WEIGHTS.items(), strict=True)
        p = np.array(weights, dtype=float) / sum(weights)
        layout, merchant = [], 0
        while len(layout) < n_menus:
            merchant += 1
            cuisine = names[int(rng.choice(len(names), p=p))]
            styles = CUISINE_STYLES[cuisine]
            for style in styles[: int(rng.integers(1, len(styles) + 1))]:
                layout.append((f"merchant-{merchant:04d}", cuisine, style))
        layout = layout[:n_menus]
    menus = {f"{merchant_id}/{style}": menu(STYLES[style], merchant_id, cuisine, i * 8 + 1, rng, i)
             for i, (merchant_id, cuisine, style) in enumerate(layout)}
    dishes = [d for m in menus.values() for d in m]
    targets = dishes[: sc.classification]
    # Answer positions: as uniform over A-H as the item count allows, then shuffled.
    positions = np.resize(np.arange(8), len(targets))
    rng.shuffle(positions)
    nutrition = [dishes[i] for i in sorted(rng.choice(len(targets), sc.nutrition, replace=False))]
    vqa_dishes = rng.choice(len(targets), sum(sc.vqa.values()), replace=False)
    categories = [c for c, n in sc.vqa.items() for _ in range(n)]
    vqa_items = [(dishes[int(i)], c) for i, c in zip(vqa_dishes, categories, strict=True)]
    reality = {}
    for dish, category in vqa_items:
        if category == "multi_image_analysis":
            dropped = [slot for slot, o in dish.choices if o.pieces][-1]
            reality[dish.dish_id] = (round(float(rng.uniform(0.6, 0.75)), 2), dropped)
    shots = {d.dish_id: int(rng.choice(sc.user_shots)) for d in dishes}
    return Plan(dishes, menus, shots, list(zip(targets, (int(p) for p in positions), strict=True)), nutrition,
                vqa_items, reality)


def _render_dish(job: tuple[Dish, int, tuple[float, str] | None, Scale, str]) -> None:
    """Worker: write the dish's reference + user photos (and a 'reality' photo) as JPEG files."""
    dish, n_user, reality, sc, folder = job
    size, supersample = sc.image_size, sc.supersample
    rng = np.random.default_rng(dish.seed)
    scene = plate(dish, detail=sc.detail)
    views = [reference_view(dish)] + user_views(dish, n_user, rng)
    optimize = size <= 512 and supersample > 1
    for k, view in enumerate(views):
        jpeg = to_jpeg(render(scene, view, size, seed=dish.seed + k, supersample=supersample), optimize=optimize)
        Path(folder, f"{dish.dish_id}_{k}.jpg").write_bytes(jpeg)
    if reality:
        shrink, dropped = reality
        # The customer's photo of a disappointing order: same dish, smaller pile, one component missing.
        view = user_views(dish, 1, np.random.default_rng(dish.seed + 7))[0]
        img = render(plate(dish, shrink, dropped, sc.detail), view, size, seed=dish.seed + 99, supersample=supersample)
        Path(folder, f"{dish.dish_id}_reality.jpg").write_bytes(to_jpeg(img, optimize=optimize))


def _images(folder: Path, names: list[str]) -> list[dict[str, Any]]:
    return [{"bytes": (folder / n).read_bytes(), "path": n} for n in names]


def _common(dish: Dish, item_id: str) -> dict[str, Any]:
    return {"id": item_id, "dish_id": dish.dish_id, "merchant_id": dish.merchant_id,
            "category": f"{dish.style.category_zh} ({dish.style.category_en})", "cuisine": dish.cuisine}


def release_rows(scale: str = "sample", seed: int = 0, workers: int | None = None,
                 cache_dir: Path | None = None) -> dict[str, tuple[int, Iterator[dict[str, Any]]]]:
    """Render into `cache_dir` in worker processes, then return `{config: (count, rows)}` for
    `diningbench.write_release`, the rows streaming from it, so a paper-size release stays memory-bounded and
    byte-identical for a seed whatever the worker count."""
    if cache_dir is None:
        raise ValueError("release_rows needs a cache_dir for the rendered photos")
    p = plan(scale, seed)
    sc = SCALES[scale]
    needed = {d.dish_id: d for d, _ in p.classification} | {d.dish_id: d for d in p.nutrition}
    needed |= {d.dish_id: d for d, _ in p.vqa}
    jobs = [(d, p.user_shots[d.dish_id], p.reality.get(d.dish_id), sc, str(cache_dir)) for d in needed.values()]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers > 1:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            list(pool.imap_unordered(_render_dish, jobs, chunksize=4))
    else:
        list(map(_render_dish, jobs))
    folder = Path(cache_dir)

    def shots(dish: Dish) -> tuple[list[str], list[str]]:
        n = 1 + p.user_shots[dish.dish_id]
        return [f"{dish.dish_id}_{k}.jpg" for k in range(n)], ["reference"] + ["user"] * (n - 1)

    def classification() -> Iterator[dict[str, Any]]:
        for i, (dish, pos) in enumerate(p.classification, 1):
            siblings = [d for d in p.menus[f"{dish.merchant_id}/{dish.style.key}"] if d.dish_id != dish.dish_id]
            order = np.random.default_rng(dish.seed + 1).permutation(len(siblings))
            options = [siblings[int(k)] for k in order]
            options.insert(pos, dish)
            names, roles = shots(dish)
            yield {**_common(dish, f"classification-{i:05d}"), "images": _images(folder, names), "image_roles": roles,
                   "options": [d.name_zh for d in options], "options_en": [d.name_en for d in options],
                   "answer": LETTERS[pos]}

    def nutrition() -> Iterator[dict[str, Any]]:
        for i, dish in enumerate(p.nutrition, 1):
            names, roles = shots(dish)
            n = dish.nutrition
            yield {**_common(dish, f"nutrition-{i:05d}"), "images": _images(folder, names), "image_roles": roles,
                   "dish_name": dish.name_zh, "dish_name_en": dish.name_en, "ingredients": dish.ingredient_lines(),
                   "portion": dish.portion(), "calories": n.calories, "protein": n.protein,
                   "carbohydrates": n.carbohydrates, "fat": n.fat, "nutrition_source": "computed"}

    def vqa_rows() -> Iterator[dict[str, Any]]:
        for i, (dish, category) in enumerate(p.vqa, 1):
            rng = np.random.default_rng(dish.seed + 3)
            if category == "multi_image_analysis":
                shrink, dropped = p.reality[dish.dish_id]
                item = vqa.multi_image_analysis(dish, shrink, dropped)
                names, roles = [f"{dish.dish_id}_0.jpg", f"{dish.dish_id}_reality.jpg"], ["reference", "user"]
            else:
                item = getattr(vqa, category)(dish, rng)
                # Technique questions show the merchant photo; the others a customer photo.
                names, roles = (([f"{dish.dish_id}_0.jpg"], ["reference"]) if category == "cuisine_technique"
                                else ([f"{dish.dish_id}_1.jpg"], ["user"]))
            yield {**_common(dish, f"vqa-{i:05d}"), "images": _images(folder, names), "image_roles": roles,
                   **item, "vqa_category": category}

    return {"classification": (len(p.classification), classification()),
            "nutrition": (len(p.nutrition), nutrition()), "vqa": (len(p.vqa), vqa_rows())}
