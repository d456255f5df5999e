"""Stage 2, dish selection: enough kept user photos and a kept reference photo, a detailed ingredient
list, near-duplicate dishes across merchants removed, cuisines capped.

All rules, no model: each threshold is a setting (construct/work.py:BuildSettings).
"""

from __future__ import annotations

import re
from collections import Counter

from construct.context import Context
from construct.photos import NAME as PHOTOS
from construct.raw import Dish, portion_grams
from construct.work import Decision, Stage, dropped, fingerprint, kept

NAME = "dishes"
# Words of menu marketing, not of a recipe: an entry made of these names no ingredient.
MARKETING = ("秘制", "精选", "美味", "可口", "独家", "招牌", "优质", "特色", "匠心", "好吃", "鲜香",
             "delicious", "secret", "signature", "special", "premium", "tasty", "homemade", "chef's")
QUANTITY = re.compile(r"\d+(?:\.\d+)?\s*(?:克|g|kg|毫升|ml|个|片|只|份|勺)?", re.I)
DUPLICATE_JACCARD = 0.9  # ingredient-name sets this alike ...
DUPLICATE_GRAMS = 0.15  # ... and portions within 15% are one dish under two names


def ingredient_name(entry: str) -> str:
    """'虾仁 80克' -> '虾仁'; 'shrimp 80 g' -> 'shrimp'."""
    return " ".join(QUANTITY.sub(" ", entry).split()).lower()


def is_detailed(ingredients: tuple[str, ...] | list[str]) -> tuple[bool, str]:
    """A detailed list enumerates components: >= 3 entries, at most a third of them marketing words or prose.

    >>> is_detailed(["米饭 270克", "鸡蛋 52克", "虾仁 80克"])
    (True, '')
    >>> is_detailed(["秘制酱汁", "精选食材，美味可口"])
    (False, '2 entries')
    """
    if len(ingredients) < 3:
        return False, f"{len(ingredients)} entries"
    vague = [e for e in ingredients if any(w in e.lower() for w in MARKETING) or len(ingredient_name(e)) > 24]
    if len(vague) * 3 > len(ingredients):
        return False, f"{len(vague)} of {len(ingredients)} entries are marketing text"
    return True, ""


def same_dish(a: Dish, b: Dish) -> bool:
    """One dish under two names: the same ingredients (by name) and about the same portion."""
    sa, sb = {ingredient_name(i) for i in a.ingredients}, {ingredient_name(i) for i in b.ingredients}
    if not sa or not sb or len(sa & sb) / len(sa | sb) < DUPLICATE_JACCARD:
        return False
    ga, gb = portion_grams(a.portion), portion_grams(b.portion)
    return ga is None or gb is None or abs(ga - gb) <= DUPLICATE_GRAMS * max(ga, gb)


def run(ctx: Context) -> None:
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    photos = Stage(ctx.work, PHOTOS)
    # A shard caps nothing: the caps rank dishes across the whole export, so the merge applies them.
    caps = {} if s.shard else s.cuisine_caps
    inputs = fingerprint(NAME, photos.fingerprint(), s.min_user_photos, caps)
    if stage.is_done(inputs):
        return
    reference: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    for item in photos.items():
        if item["role"] == "reference":
            reference[item["dish_id"]] = item["photo_id"]
        else:
            users.setdefault(item["dish_id"], []).append(item["photo_id"])
    raw_refs = {p.dish_id for p in ctx.raw.photos.values() if p.role == "reference"}
    decisions: dict[str, Decision] = {}
    survivors = []
    for dish in sorted(ctx.raw.dishes.values(), key=lambda d: (d.merchant_id, d.dish_id)):
        n_users = len(users.get(dish.dish_id, []))
        detailed, why = is_detailed(dish.ingredients)
        # A dropped merchant photo comes first: without it no user photo could be matched to the dish.
        if dish.dish_id in raw_refs and dish.dish_id not in reference:
            decisions[dish.dish_id] = dropped(dish.dish_id, "no_good_reference")
        elif n_users < s.min_user_photos:
            decisions[dish.dish_id] = dropped(dish.dish_id, "too_few_user_photos", kept_user_photos=n_users)
        elif dish.dish_id not in reference:
            decisions[dish.dish_id] = dropped(dish.dish_id, "no_reference_photo")
        elif not detailed:
            decisions[dish.dish_id] = dropped(dish.dish_id, "vague_ingredients", why=why)
        else:
            twin = next((t for t in survivors if t.merchant_id != dish.merchant_id and same_dish(t, dish)), None)
            if twin is not None:
                decisions[dish.dish_id] = dropped(dish.dish_id, "near_duplicate_dish", of=twin.dish_id,
                                                  names=[twin.name, dish.name])
            else:
                survivors.append(dish)
    # Cuisine caps: the dishes with most user photos stay (more views, better items).
    per_cuisine: Counter[str] = Counter()
    for dish in sorted(survivors, key=lambda d: (-len(users[d.dish_id]), d.dish_id)):
        cuisine = ctx.raw.cuisine_of(dish.dish_id)
        cap = caps.get(cuisine)
        if cap is not None and per_cuisine[cuisine] >= cap:
            decisions[dish.dish_id] = dropped(dish.dish_id, "cuisine_cap", cuisine=cuisine, cap=cap)
            continue
        per_cuisine[cuisine] += 1
        decisions[dish.dish_id] = kept(dish.dish_id, cuisine=cuisine)
    ordered = [decisions[d] for d in sorted(decisions)]
    items = [{"dish_id": d.dish_id, "merchant_id": d.merchant_id, "cuisine": ctx.raw.cuisine_of(d.dish_id),
              "name": d.name, "menu_category": d.menu_category, "reference": reference[d.dish_id],
              "user_photos": sorted(users[d.dish_id])}
             for d in sorted(survivors, key=lambda d: d.dish_id) if decisions[d.dish_id].verdict == "kept"]
    stage.finish(ordered, items, inputs, complete=True)
