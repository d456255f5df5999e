"""Stage 2, dish selection: enough kept user photos and a kept reference photo, a detailed ingredient
list, near-duplicate dishes across merchants removed, cuisines capped.

Rules, each threshold a setting (construct/work.py:BuildSettings), and one model question: the same
dish under another name? Candidate pairs across merchants come from blocking that grows near-linearly
(MinHash LSH over ingredient names and name n-grams, optionally embeddings: construct/dedupe.py); the
model judges each pair; WORK/dishes/pairs.jsonl keeps every checked pair with how it was found and the
verdict, and a dropped dish's decision names its twin, the pair's verdict and reason.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from construct.context import Context
from construct.dedupe import candidates, char_ngrams, embed_texts, first_of_each
from construct.models import Ask, parse_json_object
from construct.photos import NAME as PHOTOS
from construct.raw import Dish
from construct.work import Decision, Stage, dropped, inputs_key, kept, write_jsonl

NAME = "dishes"
REVIEWED = "dish_review"  # the dishes a person approved (construct/review.py): what the task stages read
# Words of menu marketing, not of a recipe: an entry made of these names no ingredient.
MARKETING = ("秘制", "精选", "美味", "可口", "独家", "招牌", "优质", "特色", "匠心", "好吃", "鲜香",
             "delicious", "secret", "signature", "special", "premium", "tasty", "homemade", "chef's")
QUANTITY = re.compile(r"\d+(?:\.\d+)?\s*(?:克|g|kg|毫升|ml|个|片|只|份|勺)?", re.I)
PAIR_VERSION = "same-dish-v1"
# Names share words far more often than recipes share ingredients ("beef" on every menu): the name view
# pairs only names alike at Jaccard ~0.75 and up; ingredient lists pair from ~0.5 (construct/dedupe.py).
VIEW_ROWS = {"name": 8}
PAIR_PROMPT = """Task: same dish check.
Two dishes from the menus of two different restaurants. Are they one and the same dish under another
name (the same recipe: the same main ingredients, cooked the same way, about the same portion), not
merely two dishes of one kind?
Dish A ({a_id}): {a}
Dish B ({b_id}): {b}
Reply with one JSON object and nothing else: {{"same_dish": true or false, "reason": "..."}}"""


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


def pair_prompt(a: Dish, b: Dish) -> str:
    """The question put to the model for one candidate pair (ids let a reader of calls.jsonl find them)."""
    def card(d: Dish) -> str:
        return json.dumps({"name": d.name, "menu_category": d.menu_category, "ingredients": list(d.ingredients),
                           "portion": d.portion}, ensure_ascii=False)
    return PAIR_PROMPT.format(a_id=a.dish_id, a=card(a), b_id=b.dish_id, b=card(b))


def dish_views(dishes: list[Dish]) -> dict[str, list[set[str]]]:
    """The token sets blocking compares: ingredient names, and the name's character 2- and 3-grams."""
    return {"ingredients": [{ingredient_name(i) for i in d.ingredients} - {""} for d in dishes],
            "name": [char_ngrams(d.name) for d in dishes]}


def pair_asks(survivors: list[Dish], pairs: list[tuple[int, int]]) -> list[Ask]:
    """Ask: one same-dish question per candidate pair, its item "dish_a|dish_b"."""
    return [Ask(f"{survivors[i].dish_id}|{survivors[j].dish_id}", pair_prompt(survivors[i], survivors[j]))
            for i, j in pairs]


def parse_pair(text: str | None) -> tuple[bool | None, Any]:
    """Parse: (the model's same_dish verdict, None unless a boolean; its reason as given).

    >>> parse_pair('{"same_dish": true, "reason": "same recipe"}')
    (True, 'same recipe')
    >>> parse_pair('{"same_dish": "yes"}')
    (None, None)
    """
    answer = parse_json_object(text) or {}
    verdict = answer.get("same_dish")
    return (verdict if isinstance(verdict, bool) else None), answer.get("reason")


def find_twins(ctx: Context, survivors: list[Dish]) -> tuple[dict[str, str], list[dict[str, Any]], bool]:
    """({dropped dish: the dish it repeats}, every checked pair with its verdict, complete). Candidate
    pairs across merchants come from blocking (construct/dedupe.py); the model judges each one."""
    s = ctx.settings
    vectors = embed_texts(s, [f"{d.name}: {', '.join(ingredient_name(i) for i in d.ingredients)}" for d in survivors])
    found = candidates(dish_views(survivors), vectors=vectors, seed=s.seed, rows=VIEW_ROWS,
                       allowed=lambda i, j: survivors[i].merchant_id != survivors[j].merchant_id)
    pairs = found.pairs()
    asks = pair_asks(survivors, pairs)
    answers = ctx.models.ask(NAME, s.model, PAIR_VERSION, asks) if asks else {}
    checked, same = [], []
    for (i, j), ask in zip(pairs, asks, strict=True):
        answer = answers[ask.item]
        verdict, reason = parse_pair(answer.text)
        checked.append({"pair": [survivors[i].dish_id, survivors[j].dish_id], "via": found.via[(i, j)],
                        "model": s.model, "same_dish": verdict, "reason": reason, "error": answer.error})
        if verdict is True:
            same.append((survivors[i].dish_id, survivors[j].dish_id))
    merchant = {d.dish_id: d.merchant_id for d in survivors}
    twins = first_of_each([d.dish_id for d in survivors], same, allowed=lambda a, b: merchant[a] != merchant[b])
    return twins, checked, all(c["error"] is None for c in checked)


def cuisine_caps(counts: Counter[str] | dict[str, int], explicit: dict[str, int],
                 ratio: float | None) -> dict[str, tuple[int, str]]:
    """{cuisine: (most dishes kept, "explicit" | "ratio")}: a cuisine named in `explicit` gets its cap;
    any other keeps at most `ratio` times the dishes of the largest other cuisine (the balance of the
    paper's Table 3: Chinese 2,086 to Western 286, 7.3 to 1). None or 0: no ratio rule.

    >>> cuisine_caps({"chinese": 900, "western": 100, "japanese": 40}, {}, 7.3)
    {'chinese': (730, 'ratio')}
    >>> cuisine_caps({"chinese": 900, "western": 100}, {"western": 50}, None)
    {'western': (50, 'explicit')}
    """
    out = {c: (n, "explicit") for c, n in explicit.items()}
    if ratio:
        for cuisine, n in counts.items():
            others = [m for c, m in counts.items() if c != cuisine]
            if cuisine not in out and others and n > ratio * max(others):
                out[cuisine] = (int(ratio * max(others)), "ratio")
    return out


def run(ctx: Context) -> None:
    """The rules, then the same-dish pairs the model judges, then the cuisine caps; decisions, items and
    the checked pairs written."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    photos = Stage(ctx.work, PHOTOS)
    # A shard caps nothing: the caps rank dishes across the whole export, so the merge applies them.
    caps = {} if s.shard else s.cuisine_caps
    inputs = inputs_key(NAME, photos.items_hash(), s.min_user_photos, caps, s.cuisine_ratio, s.model, PAIR_VERSION, s.embed_model)
    if stage.is_done(inputs):
        return
    reference, users = kept_photos(photos.items())
    decisions: dict[str, Decision] = {}
    survivors = check_rules(ctx, reference, users, decisions)
    twins, checked, complete = find_twins(ctx, survivors)
    check_twins(ctx, survivors, twins, checked, decisions)
    check_caps(ctx, survivors, users, caps, decisions)
    ordered = [decisions[d] for d in sorted(decisions)]
    items = [{"dish_id": d.dish_id, "merchant_id": d.merchant_id, "cuisine": ctx.raw.cuisine_of(d.dish_id),
              "name": d.name, "menu_category": d.menu_category, "reference": reference[d.dish_id],
              "user_photos": sorted(users[d.dish_id])}
             for d in sorted(survivors, key=lambda d: d.dish_id) if decisions[d.dish_id].verdict == "kept"]
    write_jsonl(stage.dir / "pairs.jsonl", checked)
    stage.finish(ordered, items, inputs, complete=complete)


def kept_photos(photos: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The photo filters' items as ({dish: its reference photo}, {dish: its user photos})."""
    reference: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    for item in photos:
        if item["role"] == "reference":
            reference[item["dish_id"]] = item["photo_id"]
        else:
            users.setdefault(item["dish_id"], []).append(item["photo_id"])
    return reference, users


def check_rules(ctx: Context, reference: dict[str, str], users: dict[str, list[str]],
                decisions: dict[str, Decision]) -> list[Dish]:
    """The rules before any model question, dishes in (merchant, id) order: the dishes that pass;
    a drop decision for the others."""
    raw_refs = {p.dish_id for p in ctx.raw.photos.values() if p.role == "reference"}
    survivors = []
    for dish in sorted(ctx.raw.dishes.values(), key=lambda d: (d.merchant_id, d.dish_id)):
        n_users = len(users.get(dish.dish_id, []))
        detailed, why = is_detailed(dish.ingredients)
        # A dropped merchant photo comes first: without it no user photo could be matched to the dish.
        if dish.dish_id in raw_refs and dish.dish_id not in reference:
            decisions[dish.dish_id] = dropped(dish.dish_id, "no_good_reference")
        elif n_users < ctx.settings.min_user_photos:
            decisions[dish.dish_id] = dropped(dish.dish_id, "too_few_user_photos", kept_user_photos=n_users)
        elif dish.dish_id not in reference:
            decisions[dish.dish_id] = dropped(dish.dish_id, "no_reference_photo")
        elif not detailed:
            decisions[dish.dish_id] = dropped(dish.dish_id, "vague_ingredients", why=why)
        else:
            survivors.append(dish)
    return survivors


def check_twins(ctx: Context, survivors: list[Dish], twins: dict[str, str], checked: list[dict[str, Any]],
                decisions: dict[str, Decision]) -> None:
    """Drop (from `survivors` too) each dish the model found to repeat another, naming the twin and the verdict."""
    verdict_of = {tuple(sorted(c["pair"])): c for c in checked}
    for dish in list(survivors):
        twin = twins.get(dish.dish_id)
        if twin is not None:
            pair = verdict_of[tuple(sorted((twin, dish.dish_id)))]
            decisions[dish.dish_id] = dropped(dish.dish_id, "near_duplicate_dish", of=twin,
                                              names=[ctx.raw.dishes[twin].name, dish.name], via=pair["via"],
                                              model=pair["model"], model_reason=pair["reason"])
            survivors.remove(dish)


def check_caps(ctx: Context, survivors: list[Dish], users: dict[str, list[str]], caps: dict[str, int],
               decisions: dict[str, Decision]) -> None:
    """The cuisine caps (none in a shard): the dishes with most user photos stay (more views, better
    items); a kept or cuisine_cap decision for every survivor."""
    s = ctx.settings
    limits = {} if s.shard else cuisine_caps(Counter(ctx.raw.cuisine_of(d.dish_id) for d in survivors), caps,
                                             s.cuisine_ratio)
    per_cuisine: Counter[str] = Counter()
    for dish in sorted(survivors, key=lambda d: (-len(users[d.dish_id]), d.dish_id)):
        cuisine = ctx.raw.cuisine_of(dish.dish_id)
        cap, rule = limits.get(cuisine, (None, ""))
        if cap is not None and per_cuisine[cuisine] >= cap:
            decisions[dish.dish_id] = dropped(dish.dish_id, "cuisine_cap", cuisine=cuisine, cap=cap, rule=rule)
            continue
        per_cuisine[cuisine] += 1
        decisions[dish.dish_id] = kept(dish.dish_id, cuisine=cuisine)
