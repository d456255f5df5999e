"""A second generator of menus for the dedupe bench, written apart from `bench.construct_dedupe`'s: Chinese
menus first, many merchants selling one standard dish under one name (bench/README.md describes them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

KINDS = ("same_name", "reordered", "marketing", "synonyms", "english")
TWIN_SHARE, NEAR_MISS_SHARE, STANDARD_SHARE, ENGLISH_MERCHANTS = 0.01, 0.05, 0.55, 0.25
SHARED_STAPLES = ("cooking oil", "salt", "soy sauce", "scallion", "ginger", "garlic")
TECHNIQUES = ("garlic sauce", "kung pao", "braised", "fried", "steamed", "spicy", "sweet and sour", "boiled",
              "twice cooked", "mapo", "teriyaki", "roasted")
SHAPES = ("diced", "shredded", "sliced")
BASES = ("bowl", "noodle", "soup", "fried rice", "porridge", "dumpling", "rice noodle")
MARKETING = ("【招牌】{}", "{}（秘制）", "特色·{}", "老{}", "Chef's Special - {}", "{} (House Favourite)", "*Signature* {}")
GARNISH = ("carrot", "onion", "bell pepper", "celery", "wood ear", "bamboo shoot")  # what a cook adds: few, common
TAIL_SHARE = 0.15  # dishes with an ingredient of their merchant's own (a word no lexicon knows)
NOT_VEGETABLES = {"rice noodle", "glass noodle", "pasta", "udon", "bread", "cheese", "parmesan", "milk", "cream",
                  "yogurt", "tomato puree", "coconut milk", "lemon", "peanut", "cashew", "plum", "hawthorn", "apple",
                  "mango", "pineapple"}
RARE = "乙丙戊己庚辛壬癸丑寅卯辰巳午未申酉戌亥鑫淼犇"  # characters no lexicon term uses


def _forms() -> tuple[dict[str, list[str]], dict[str, list[str]], set[str], list[str]]:
    """({concept: English forms}, {concept: Chinese forms}, proteins, vegetables) from the lexicon."""
    from construct.lexicon import PROTEINS, TERMS

    en, zh, vegetables = {}, {}, []
    for line in TERMS.strip().splitlines():
        concept, kind, e, z, _ = (p.strip() for p in line.split("|"))
        en[concept] = [f.strip() for f in e.split(";") if f.strip()]
        zh[concept] = [f.strip() for f in z.split(";") if f.strip()]
        if kind == "i" and concept not in PROTEINS | NOT_VEGETABLES and len(zh[concept][0]) >= 2:
            vegetables.append(concept)
    return en, zh, set(PROTEINS), vegetables


def _tail(rng: np.random.Generator) -> tuple[str, str]:
    """A merchant's own ingredient: (its Chinese name of rare characters, its English made-up word)."""
    k = int(rng.integers(1 << 30))
    zh = "".join(RARE[(k >> (5 * s)) % len(RARE)] for s in range(3))
    en = "".join("bcdfgklmnprstvz"[(k >> (4 * s)) % 15] + "aeiou"[(k >> (4 * s + 2)) % 5] for s in range(3))
    return zh, en


def standard_menus(n: int, seed: int = 0) -> tuple[list[Any], dict[frozenset[str], str], list[list[str]], dict[str, str]]:
    """What `realistic_menus` returns: the dishes, the planted pairs {pair: kind}, each dish's concepts (for
    made-up vectors) and a glossary {Chinese text: English} of the `english` twins. Twins (1% of dishes per kind)
    are another merchant's copy of an earlier dish, often a standard one that hundreds of merchants also sell:
    `same_name` (one ingredient dropped, another added, the grams a little off), `reordered` (青豆牛肉盖饭),
    `marketing` (【招牌】鱼香 牛肉青豆盖饭), `synonyms` (西红柿 for 番茄, aubergine for eggplant), `english` (the other
    language; its own tail ingredient a word no lexicon knows, which the glossary gives). `near_miss` (5%): the
    protein, the base or the technique swapped: alike, not twins."""
    from construct.raw import Dish

    rng = np.random.default_rng(seed + 1000)
    en, zh, proteins, vegetables = _forms()
    protein_list = sorted(proteins)
    glossary: dict[str, str] = {}

    def title() -> dict[str, Any]:
        t = {"technique": str(rng.choice(TECHNIQUES)), "protein": str(rng.choice(protein_list)),
             "vegetables": [str(v) for v in rng.choice(vegetables, int(rng.integers(0, 3)), replace=False)]}
        if rng.random() < 0.25:  # 宫保鸡丁: a cut instead of a base
            t |= {"shape": str(rng.choice(SHAPES)), "base": None}
        else:
            t |= {"shape": None, "base": str(rng.choice(BASES))}
        return t

    catalogue = [title() for _ in range(max(150, n // 12))]
    popularity = 1 / np.arange(1, len(catalogue) + 1) ** 1.1
    popularity /= popularity.sum()

    def word(c: str, lang: str, alt: bool = False) -> str:
        forms = (zh if lang == "zh" else en)[c]
        return forms[1] if alt and len(forms) > 1 else forms[0]

    def name(t: dict[str, Any], lang: str, alt: bool = False, reorder: bool = False) -> str:
        vegs = [word(v, lang, alt) for v in t["vegetables"]]
        protein = word(t["protein"], lang, alt)
        tech = "" if reorder else word(t["technique"], lang, alt)
        if lang == "zh":
            if t["shape"]:  # 鸡肉 -> 鸡丁
                short = protein[:-1] if protein.endswith("肉") and protein[:-1] in zh[t["protein"]] else protein
                protein = short + word(t["shape"], "zh")
            head = "".join(vegs + [protein]) if reorder else protein + "".join(vegs)
            return tech + head + (word(t["base"], "zh", alt) if t["base"] else "")
        words = [protein.title()] + (["and", " and ".join(vegs).title()] if vegs else [])
        shape = word(t["shape"], "en").title() + " " if t["shape"] else ""
        base = word(t["base"], "en", alt).title() if t["base"] else ""
        if reorder:
            return f"{base or shape.strip()} with {' '.join(words)}".strip()
        return " ".join(filter(None, [tech.title(), shape + " ".join(words), base]))

    def recipe(t: dict[str, Any]) -> list[tuple[str, int]]:
        lines = [(t["protein"], int(rng.integers(80, 220)))] + [(v, int(rng.integers(20, 120))) for v in t["vegetables"]]
        if t["base"] in ("bowl", "fried rice", "porridge"):
            lines.append(("rice", int(rng.integers(150, 300))))
        elif t["base"] in ("noodle", "rice noodle", "dumpling"):
            lines.append(({"dumpling": "flour"}.get(t["base"], t["base"]), int(rng.integers(150, 300))))
        extras = [str(v) for v in rng.choice(GARNISH, int(rng.integers(0, 2)), replace=False)
                  if v not in t["vegetables"]]
        lines += [(v, int(rng.integers(10, 60))) for v in extras]
        if rng.random() < TAIL_SHARE:
            lines.append((f"tail:{int(rng.integers(1 << 30))}", int(rng.integers(5, 40))))
        return lines + [(s, int(rng.integers(2, 20))) for s in SHARED_STAPLES]

    tails: dict[str, tuple[str, str]] = {}

    def render(t: dict[str, Any], lines: list[tuple[str, int]], lang: str, did: str, merchant: str,
               kind: str = "") -> Dish:
        alt = kind == "synonyms"
        shown = name(t, lang, alt, reorder=kind == "reordered")
        if kind == "marketing":
            cut = len(word(t["technique"], "zh"))  # a space after the technique: 鱼香 牛肉青豆盖饭
            shown = str(rng.choice(MARKETING)).format(shown[:cut] + " " + shown[cut:] if lang == "zh" else shown)
        entries = []
        for c, g in lines:
            if c.startswith("tail:"):
                pair = tails.setdefault(c, _tail(np.random.default_rng(int(c[5:]))))
                text = pair[0] if lang == "zh" else pair[1]
            else:
                text = word(c, lang, alt)
            entries.append(f"{text} {g}克" if lang == "zh" else f"{text} {g} g")
        order = rng.permutation(len(entries)) if kind else range(len(entries))
        return Dish(did, merchant, shown, "", "", tuple(entries[k] for k in order), f"about {sum(g for _, g in lines)} g")

    dishes: list[Dish] = []
    made: list[tuple[dict[str, Any], list[tuple[str, int]], str]] = []
    planted: dict[frozenset[str], str] = {}
    merchant_no, left, lang, used = -1, 0, "zh", set()
    while len(dishes) < n:
        if left == 0:
            merchant_no, left, used = merchant_no + 1, int(rng.integers(12, 31)), set()
            lang = "en" if rng.random() < ENGLISH_MERCHANTS else "zh"
        merchant = f"s{merchant_no:05d}"
        did = f"{merchant}-{left:02d}"
        draw = rng.random()
        src = int(rng.integers(max(0, len(dishes) - 6000), len(dishes))) if len(dishes) > 40 else -1
        if src >= 0 and dishes[src].merchant_id != merchant and draw < TWIN_SHARE * len(KINDS) + NEAR_MISS_SHARE:
            t, lines, src_lang = made[src]
            t, lines = dict(t), list(lines)
            if draw < TWIN_SHARE * len(KINDS):
                kind = KINDS[int(draw / TWIN_SHARE)]
                out_lang = ("en" if src_lang == "zh" else "zh") if kind == "english" else src_lang
                if kind == "same_name":
                    drop = next(k for k in range(len(lines) - 1, 0, -1) if lines[k][0] != t["protein"])
                    added = next(str(v) for v in rng.permutation(vegetables) if v not in dict(lines))
                    lines = [(c, max(1, int(g * rng.uniform(0.9, 1.1)))) for c, g in lines[:drop] + lines[drop + 1:]]
                    lines.append((added, int(rng.integers(10, 40))))
                dishes.append(render(t, lines, out_lang, did, merchant, kind))
                if kind == "english":
                    zh_dish = dishes[src] if out_lang == "en" else dishes[-1]
                    en_dish = dishes[-1] if out_lang == "en" else dishes[src]
                    glossary[zh_dish.name] = en_dish.name
                    glossary.update({tails[c][0]: tails[c][1] for c, _ in lines if c.startswith("tail:")})
            else:
                kind = "near_miss"
                part = str(rng.choice(["protein", "protein", "base", "technique"]))
                pool = {"protein": protein_list, "base": list(BASES), "technique": list(TECHNIQUES)}[part]
                if t[part] is None:
                    part, pool = "protein", protein_list
                new = next(str(x) for x in rng.permutation(pool) if x != t[part])
                lines = [(new if c == t[part] else c, g) for c, g in lines]
                t[part] = new
                out_lang = src_lang
                dishes.append(render(t, lines, out_lang, did, merchant))
            planted[frozenset((dishes[src].dish_id, did))] = kind
            made.append((t, lines, out_lang))
        else:
            if rng.random() < STANDARD_SHARE:
                k = int(rng.choice(len(catalogue), p=popularity))
                if k in used:
                    continue
                used.add(k)
                t = catalogue[k]
            else:
                t = title()
            lines = recipe(t)
            dishes.append(render(t, lines, lang, did, merchant))
            made.append((t, lines, lang))
        left -= 1
    concepts = [[c for c, _ in lines] + [t["technique"]] for t, lines, _ in made]
    return dishes, planted, concepts, glossary
