"""Construction dedupe on menus that look like real ones, at 2k, 8k and 32k dishes: candidate pairs per
dish, recall of planted twins by kind, blocking time and its growth, and what a judge that is wrong on 5% of
the other candidates would drop, with the former all-pairs rule timed beside it at the small sizes.

    python -m bench.construct_dedupe                 # 2,000 / 8,000 / 32,000 dishes
    python -m bench.construct_dedupe --sizes 1000,4000 --all-pairs-up-to 1000

Each size is measured on two generators written apart: `realistic_menus` below and
`bench/dedupe_menus.py:standard_menus`. Times are CPU seconds of this process."""

from __future__ import annotations

import argparse
import hashlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import machine, result, table, write_json

PER_MERCHANT = 20
KINDS = ("marketing", "synonym", "reordered", "ingredients", "language")
TWIN_SHARE = 0.01  # of dishes, per kind
NEAR_MISS_SHARE = 0.03
MARKETING = ("Signature", "Grandma's", "Chef's Special", "House", "Classic", "Famous", "Authentic", "Homestyle")
MARKETING_ZH = ("招牌", "特色", "秘制", "家常", "经典")
SYNONYMS = {"scallion": "green onion", "shrimp": "prawns", "eggplant": "aubergine", "cilantro": "coriander",
            "bell pepper": "capsicum", "zucchini": "courgette", "noodle": "lo mein", "chili": "chilli",
            "bok choy": "pak choi", "tofu": "bean curd", "beef": "sliced beef", "pork rib": "spare ribs",
            "rice": "steamed rice", "fried": "stir-fried", "roasted": "barbecued", "soup": "broth",
            "dumpling": "potstickers", "cooking oil": "vegetable oil", "ground pork": "minced pork",
            "corn": "sweet corn", "green bean": "string beans", "porridge": "congee", "salad": "salad",
            "chicken": "chicken breast", "braised": "red-braised", "spicy": "hot", "pancake": "crepe"}
STAPLES = ("rice", "egg", "cooking oil", "scallion", "soy sauce", "salt", "garlic", "ginger", "sugar",
           "cornstarch", "sesame oil", "vinegar", "chili", "cooking wine", "water", "pepper")
PROTEINS = ("beef", "chicken", "pork", "shrimp", "tofu", "lamb", "fish", "duck", "pork belly", "squid", "salmon",
            "chicken thigh", "ground pork", "pork rib", "crab", "scallop")
TAIL_CHARS = "乙丙戊己庚辛壬癸丑寅卯辰巳午未申酉戌亥鑫淼犇"  # no lexicon term uses these


def _lexicon() -> dict[str, dict[str, Any]]:
    """{concept: {"kind", "en": first English form, "zh": first Chinese form}} from construct/lexicon.py."""
    from construct.lexicon import TERMS

    out = {}
    for line in TERMS.strip().splitlines():
        concept, kind, en, zh, _ = (p.strip() for p in line.split("|"))
        forms = [f.strip() for f in en.split(";") if f.strip()]
        out[concept] = {"kind": kind, "en": concept if concept in forms else forms[0],
                        "zh": zh.split(";")[0].strip()}
    return out


def _word(k: int) -> str:
    """A made-up ingredient word: 0 -> 'ba', 1 -> 'be', ... (letters only: quantities are digits)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    out = ""
    while True:
        out += consonants[k % 14] + vowels[(k // 14) % 5]
        k //= 70
        if not k:
            return out


def realistic_menus(n: int, seed: int = 0) -> tuple[list[Any], dict[frozenset[str], str], list[list[str]], dict[str, str]]:
    """`n` dishes (construct.raw.Dish), the planted pairs {pair: kind} (twin kinds and "near_miss"), each
    dish's concepts (for made-up embeddings) and {Chinese name: English name} of the `language` twins.

    20 dishes a merchant; each 3 to 5 staples and seasonings, 2 to 4 of the lexicon's ~100 mains
    (construct/lexicon.py) and one of a long tail of specific ingredients that grows with the menus (as real
    vocabularies do); its name a cooking method, one or two of its mains and a dish word. Twins, 1% of dishes per
    kind, are another merchant's copy of an earlier dish: `marketing` (a prefix such as "Signature"), `synonym`
    (green onion for scallion ...), `reordered` ("Noodle Soup with Beef"), `ingredients` (one dropped, a seasoning
    added), `language` (name and ingredients in Chinese; the tail ingredient in characters the lexicon does not
    know). `near_miss` (3%): another merchant's dish with its main protein swapped: alike, not twins."""
    from construct.raw import Dish

    rng = np.random.default_rng(seed)
    lex = _lexicon()
    mains = [c for c, v in lex.items() if v["kind"] == "i" and c not in PROTEINS]
    dish_words = [c for c, v in lex.items() if v["kind"] == "d" and c != "fried rice"]
    methods = [c for c, v in lex.items() if v["kind"] == "c" and c not in ("shredded", "diced", "sliced", "minced")]
    tail = max(200, int(6 * n ** 0.8))  # specific ingredients: the vocabulary grows with the menus
    dishes: list[Dish] = []
    recipes: list[dict[str, Any]] = []
    planted: dict[frozenset[str], str] = {}
    glossary: dict[str, str] = {}

    def en(c: str) -> str:
        return lex[c]["en"] if c in lex else c

    def zh(c: str) -> str:
        if c in lex:
            return lex[c]["zh"]
        k = int(hashlib.blake2b(c.encode(), digest_size=4).hexdigest(), 16)
        return TAIL_CHARS[k % 22] + TAIL_CHARS[(k // 22) % 22] + TAIL_CHARS[(k // 484) % 22]

    def render(r: dict[str, Any], merchant: str, did: str, kind: str = "") -> Dish:
        words = r["title"]
        lines = [(c, g) for c, g in r["ingredients"]]
        if kind in ("marketing", "reordered", "synonym", "ingredients", "language", "near_miss"):
            lines = [lines[i] for i in rng.permutation(len(lines))]
        if kind == "language":
            prefix = MARKETING_ZH[int(rng.integers(len(MARKETING_ZH)))] if rng.random() < 0.3 else ""
            name = prefix + "".join(zh(c) for c in words)
            glossary[name] = " ".join(en(c).title() for c in words)
            glossary.update({zh(c): c for c, _ in lines if c not in lex})  # what the lexicon cannot read
            return Dish(did, merchant, name, "", "", tuple(f"{zh(c)} {g}克" for c, g in lines), r["portion"])
        form = (lambda c: SYNONYMS.get(c, en(c))) if kind == "synonym" else en
        title = [form(c).title() for c in words]
        if kind == "reordered":  # "Beef Noodle Soup" -> "Noodle Soup with Beef"
            title = title[2:] + ["with"] + title[:2] if len(title) > 2 else title[::-1]
        if kind == "marketing":
            title = [MARKETING[int(rng.integers(len(MARKETING)))]] + title
        return Dish(did, merchant, " ".join(title), "", "", tuple(f"{form(c)} {g} g" for c, g in lines), r["portion"])

    k = 0
    while k < n:
        merchant = f"m{k // PER_MERCHANT:05d}"
        did = f"{merchant}-d{k % PER_MERCHANT:02d}"
        draw = rng.random()
        earlier = [i for i in range(max(0, k - 4000), k)
                   if dishes[i].merchant_id != merchant and not recipes[i].get("zh")] if k > 40 else []
        if earlier and draw < TWIN_SHARE * len(KINDS):
            kind = KINDS[int(draw / TWIN_SHARE)]
            src = earlier[int(rng.integers(len(earlier)))]
            r = dict(recipes[src])
            if kind == "ingredients":
                lines = list(r["ingredients"])
                drop = next(i for i in range(len(lines) - 1, -1, -1) if lines[i][0] not in r["title"])
                extra = next(s for s in rng.permutation(STAPLES) if s not in dict(lines))
                r["ingredients"] = lines[:drop] + lines[drop + 1:] + [(str(extra), int(rng.integers(3, 15)))]
            dishes.append(render(r, merchant, did, kind))
            recipes.append({**r, "zh": kind == "language"})
            planted[frozenset((dishes[src].dish_id, did))] = kind
        elif earlier and draw < TWIN_SHARE * len(KINDS) + NEAR_MISS_SHARE:
            src = earlier[int(rng.integers(len(earlier)))]
            r = dict(recipes[src])
            old = next((c for c, _ in r["ingredients"] if c in PROTEINS), None)
            if old is None:
                continue
            new = next(str(p) for p in rng.permutation(PROTEINS) if p not in dict(r["ingredients"]))
            r["ingredients"] = [(new if c == old else c, g) for c, g in r["ingredients"]]
            r["title"] = [new if c == old else c for c in r["title"]]
            dishes.append(render(r, merchant, did, "near_miss"))
            recipes.append(r)
            planted[frozenset((dishes[src].dish_id, did))] = "near_miss"
        else:
            protein = str(rng.choice(PROTEINS))
            picked = [protein, *(str(m) for m in rng.choice(mains, int(rng.integers(1, 4)), replace=False))]
            special = _word(int(rng.integers(tail)))
            staples = [str(s) for s in rng.choice(STAPLES, int(rng.integers(3, 6)), replace=False)]
            title = [str(rng.choice(methods))] + picked[:int(rng.integers(1, 3))] + [str(rng.choice(dish_words))]
            ingredients = [(c, int(rng.integers(20, 250))) for c in [*picked, special]] + \
                          [(s, int(rng.integers(2, 30))) for s in staples]
            r = {"title": title, "ingredients": ingredients, "portion": f"about {int(rng.integers(250, 800))} g"}
            dishes.append(render(r, merchant, did))
            recipes.append(r)
        k += 1
    concepts = [[c for c, _ in r["ingredients"]] + list(r["title"]) for r in recipes]
    return dishes, planted, concepts, glossary


def made_up_vectors(concepts: list[list[str]], dim: int = 64, noise: float = 0.35, seed: int = 1) -> np.ndarray:
    """A vector per dish: the sum of its concepts' random directions plus noise, the same in both languages, so
    the embeddings row measures the nearest-neighbour search, its floor and its bound per dish, not any model."""
    rng = np.random.default_rng(seed)
    direction: dict[str, np.ndarray] = {}
    rows = []
    for cs in concepts:
        v = sum(direction.setdefault(c, rng.standard_normal(dim)) for c in dict.fromkeys(cs))
        v = v / np.linalg.norm(v)
        rows.append(v + noise * rng.standard_normal(dim) / np.sqrt(dim))
    return np.array(rows)


def blocked(dishes: list[Any], vectors: np.ndarray | None = None,
            glossary: dict[str, str] | None = None) -> tuple[float, list[tuple[str, str]]]:
    """Blocking as the dishes stage runs it (concepts, weights, prefix filtering, the K best earlier partners
    per dish): its CPU seconds and candidate pairs."""
    from construct.dish_dedupe import dish_candidates

    start = time.process_time()
    found = dish_candidates(dishes, vectors, glossary=glossary)
    seconds = time.process_time() - start
    return seconds, [(dishes[i].dish_id, dishes[j].dish_id) for i, j in found.pairs()]


def recall(found: list[tuple[str, str]], planted: dict[frozenset[str], str]) -> dict[str, float]:
    """{kind: share of its planted pairs among `found`}."""
    hit = Counter(planted[p] for p in map(frozenset, found) if p in planted)
    total = Counter(planted.values())
    return {kind: hit[kind] / total[kind] for kind in total}


def wrongly_dropped(dishes: list[Any], found: list[tuple[str, str]], planted: dict[frozenset[str], str],
                    wrong: float = 0.05) -> tuple[int, int]:
    """(dishes dropped as the twin of a dish they do not repeat, dishes dropped) under a judge that confirms
    every planted twin and says "same" for `wrong` of the other candidates (by a hash of the pair)."""
    from construct.dedupe import resolve

    def says_same(a: str, b: str) -> bool:
        if planted.get(frozenset((a, b)), "near_miss") != "near_miss":
            return True
        return int(hashlib.blake2b(f"{a}|{b}".encode(), digest_size=8).hexdigest(), 16) % 10_000 < wrong * 10_000

    merchant = {d.dish_id: d.merchant_id for d in dishes}
    dropped = resolve([d.dish_id for d in dishes], [p for p in found if says_same(*p)],
                      allowed=lambda a, b: merchant[a] != merchant[b])
    bad = sum(planted.get(frozenset((d, kept)), "near_miss") == "near_miss" for d, kept in dropped.items())
    return bad, len(dropped)


def all_pairs(dishes: list[Any], threshold: float = 0.9) -> tuple[float, int]:
    """The former rule: each dish against every kept dish of another merchant, ingredient-name Jaccard."""
    from construct.rules import ingredient_name

    start = time.process_time()
    sets = [{ingredient_name(i) for i in d.ingredients} for d in dishes]
    survivors: list[int] = []
    for k, d in enumerate(dishes):
        if not any(dishes[t].merchant_id != d.merchant_id
                   and len(sets[t] & sets[k]) / len(sets[t] | sets[k]) >= threshold for t in survivors):
            survivors.append(k)
    return time.process_time() - start, len(dishes) - len(survivors)


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of log(ys) on log(xs): the exponent of growth."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def run(sizes: tuple[int, ...] = (2_000, 8_000, 32_000), all_pairs_up_to: int = 2_000,
        repeats: int = 3) -> list[dict[str, Any]]:
    rows, seconds, pairs = [], [], []
    other_seconds, other_pairs = [], []
    for n in sizes:
        dishes, planted, concepts, glossary = realistic_menus(n)
        blocked(dishes[: min(n, 500)])  # warm numpy and the lexicon once
        t, found, got, with_glossary, calls, bad, dropped = measured(dishes, planted, glossary, "language", repeats)
        seconds.append(t)
        pairs.append(max(1, len(found)))
        same_language = min(got[k] for k in KINDS if k != "language")
        reference, note_ref = None, "all pairs not timed at this size"
        if n <= all_pairs_up_to:
            reference, caught = all_pairs(dishes)
            note_ref = f"all pairs {reference:.2f} s"
        kinds = ", ".join(f"{k} {got[k]:.0%}" for k in KINDS)
        note = (f"{n:,} dishes: {len(found):,} candidate pairs ({len(found) / n:.2f} per dish, {calls / n:.2f} judge "
                f"questions per dish); recall {kinds} (language with the name glossary {with_glossary:.0%}); near "
                f"misses among the candidates {got.get('near_miss', 0):.0%}; a 5%-wrong judge drops {bad} dishes "
                f"wrongly ({bad / n:.2%}) of {dropped} dropped; {note_ref}")
        rows.append(result(f"dedupe blocking, {n:,} dishes", t, reference, note=note, dishes=n, pairs=len(found),
                           pairs_per_dish=len(found) / n, questions_per_dish=calls / n, recall=got,
                           recall_language_glossary=with_glossary, recall_same_language=same_language,
                           wrongly_dropped=bad / n))
        vt, vfound = blocked(dishes, made_up_vectors(concepts))
        vgot = recall(vfound, planted)
        rows.append(result(f"dedupe with made-up embeddings, {n:,} dishes", vt, None,
                           note=f"{len(vfound) / n:.2f} pairs per dish; recall "
                                + ", ".join(f"{k} {vgot[k]:.0%}" for k in KINDS),
                           dishes=n, pairs_per_dish=len(vfound) / n, recall=vgot))
        row = standard_row(n, repeats)
        other_seconds.append(row["measured"])
        other_pairs.append(max(1, row["pairs"]))
        rows.append(row)
    if len(sizes) > 1:
        rows.append(result("dedupe blocking on standard menus: exponent of time in dishes",
                           slope(list(sizes), other_seconds), None, unit="",
                           note=f"pairs grow with exponent {slope(list(sizes), other_pairs):.2f}"))
        rows.append(result("dedupe blocking: exponent of time in dishes", slope(list(sizes), seconds), None, unit="",
                           note=f"pairs grow with exponent {slope(list(sizes), pairs):.2f} (1 = linear; all pairs: 2)"))
    return rows


def measured(dishes: list[Any], planted: dict[frozenset[str], str], glossary: dict[str, str], translated: str,
             repeats: int) -> tuple[float, list[tuple[str, str]], dict[str, float], float, int, int, int]:
    """Blocking's fastest time of `repeats` and its candidates; recall by kind, and of the `translated` kind with
    the glossary (the dish names in English, which the build asks the model for; here the generator's own); the
    judge's questions (construct/dish_dedupe.py:judge_groups); what a 5%-wrong judge drops wrongly, of all it
    drops."""
    from construct.dish_dedupe import judge_groups

    runs = [blocked(dishes) for _ in range(repeats)]
    t, found = min(r[0] for r in runs), runs[0][1]
    with_glossary = recall(blocked(dishes, glossary=glossary)[1], planted)[translated]
    at = {d.dish_id: k for k, d in enumerate(dishes)}
    calls = len(judge_groups([(at[a], at[b]) for a, b in found]))
    return t, found, recall(found, planted), with_glossary, calls, *wrongly_dropped(dishes, found, planted)


def standard_row(n: int, repeats: int) -> dict[str, Any]:
    """The same measures on the second generator's menus (bench/dedupe_menus.py)."""
    from bench import dedupe_menus

    dishes, planted, _, glossary = dedupe_menus.standard_menus(n)
    t, found, got, with_glossary, calls, bad, dropped = measured(dishes, planted, glossary, "english", repeats)
    kinds = ", ".join(f"{k} {got[k]:.0%}" for k in dedupe_menus.KINDS)
    return result(f"dedupe blocking on standard menus, {n:,} dishes", t, None,
                  note=f"{len(found) / n:.2f} pairs and {calls / n:.2f} judge questions per dish; recall {kinds} "
                       f"(english with the glossary {with_glossary:.0%}); near misses among the candidates "
                       f"{got.get('near_miss', 0):.0%}; a 5%-wrong judge drops {bad} of {dropped} wrongly",
                  dishes=n, pairs=len(found), pairs_per_dish=len(found) / n, questions_per_dish=calls / n,
                  recall=got, recall_english_glossary=with_glossary,
                  recall_same_language=min(got[k] for k in dedupe_menus.KINDS if k != "english"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.construct_dedupe", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,8000,32000", help="dish counts (default 2000,8000,32000)")
    parser.add_argument("--all-pairs-up-to", type=int, default=2_000,
                        help="time the all-pairs rule at sizes up to this (default 2,000)")
    parser.add_argument("--repeats", type=int, default=3, help="time blocking this many times, keep the fastest")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    sizes = tuple(int(x) for x in args.sizes.split(",") if x.strip())
    rows = run(sizes, args.all_pairs_up_to, args.repeats)
    print(table(rows))
    write_json(args.json, {"machine": machine(), "results": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
