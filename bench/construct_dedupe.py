"""Construction dedupe at 2k, 8k and 32k dishes: blocking (MinHash LSH over ingredient names and name
n-grams, `construct.dedupe`) against comparing every pair, side by side in one run.

    python -m bench.construct_dedupe                 # 2,000 / 8,000 / 32,000 dishes
    python -m bench.construct_dedupe --sizes 1000,4000 --all-pairs-up-to 1000

The dishes: 20 dishes per merchant, each cuisine with its own pool of ingredient names, each dish 5 to 9
of them, its name 2 to 4 words of a 2,000-word vocabulary; 3% are planted twins (another merchant's dish with its ingredient list
reordered and one entry dropped, under another name). Blocking is timed as the dishes stage runs it
(`construct.dishes.dish_views` then `construct.dedupe.candidates`, cross-merchant pairs only); the
model's verdicts are not timed (one call per candidate pair: the count is printed). Times are CPU
seconds of this process (the machine may be shared), blocking the fastest of `--repeats` runs. The reference
is the rule the stage used before (every cross-merchant pair of survivors, ingredient-name Jaccard),
timed up to `--all-pairs-up-to` dishes. Exponents are least-squares slopes of log(time) and
log(pairs) on log(dishes).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import machine, result, table, write_json

PER_MERCHANT = 20
TWIN_SHARE = 0.03
WORDS = 2_000  # name words: a menu's vocabulary of dish-name words

def _letters(k: int) -> str:
    """A name without digits (the ingredient parser strips quantities): 0 -> 'a', 27 -> 'bb'."""
    out = ""
    while True:
        out = "abcdefghijklmnopqrstuvwxyz"[k % 26] + out
        k //= 26
        if not k:
            return out


def make_dishes(n: int, seed: int = 0) -> tuple[list[Any], set[frozenset[str]]]:
    """`n` dishes (construct.raw.Dish) and the planted twin pairs."""
    from construct.raw import Dish

    rng = np.random.default_rng(seed)
    words = [_letters(int(k)) for k in rng.choice(26 ** 4, WORDS, replace=False)]
    cuisines = [[f"{_letters(c)} {_letters(i)}" for i in range(400)] for c in range(12)]
    dishes: list[Dish] = []
    twins: set[frozenset[str]] = set()
    for k in range(n):
        merchant = f"m{k // PER_MERCHANT:05d}"
        did = f"{merchant}-d{k % PER_MERCHANT}"
        name = " ".join(rng.choice(words, int(rng.integers(2, 5))))
        if dishes and rng.random() < TWIN_SHARE:
            src = dishes[int(rng.integers(0, len(dishes)))]
            if src.merchant_id != merchant:
                entries = list(src.ingredients)
                rng.shuffle(entries)
                dishes.append(Dish(did, merchant, "home style " + name, "main", "", tuple(entries[:-1]), src.portion))
                twins.add(frozenset((src.dish_id, did)))
                continue
        pool = cuisines[int(rng.integers(0, len(cuisines)))]
        picked = rng.choice(len(pool), int(rng.integers(5, 10)), replace=False)
        entries = tuple(f"{pool[i]} {int(rng.integers(5, 300))}g" for i in picked)
        dishes.append(Dish(did, merchant, name, "main", "", entries, f"about {int(rng.integers(200, 800))} g"))
    return dishes, twins


def blocked(dishes: list[Any]) -> tuple[float, list[tuple[str, str]]]:
    from construct.dedupe import candidates
    from construct.dishes import VIEW_ROWS, dish_views

    start = time.process_time()
    found = candidates(dish_views(dishes), rows=VIEW_ROWS, allowed=lambda i, j: dishes[i].merchant_id != dishes[j].merchant_id)
    seconds = time.process_time() - start
    return seconds, [(dishes[i].dish_id, dishes[j].dish_id) for i, j in found.pairs()]


def all_pairs(dishes: list[Any], threshold: float = 0.9) -> tuple[float, int]:
    """The former rule: each dish against every kept dish of another merchant, ingredient-name Jaccard."""
    from construct.dishes import ingredient_name

    start = time.process_time()
    sets = [{ingredient_name(i) for i in d.ingredients} for d in dishes]
    survivors: list[int] = []
    dropped = 0
    for k, d in enumerate(dishes):
        twin = next((t for t in survivors if dishes[t].merchant_id != d.merchant_id
                     and len(sets[t] & sets[k]) / len(sets[t] | sets[k]) >= threshold), None)
        if twin is None:
            survivors.append(k)
        else:
            dropped += 1
    return time.process_time() - start, dropped


def slope(xs: list[float], ys: list[float]) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def run(sizes: tuple[int, ...] = (2_000, 8_000, 32_000), all_pairs_up_to: int = 8_000,
        repeats: int = 3) -> list[dict[str, Any]]:
    rows, seconds, pairs = [], [], []
    for n in sizes:
        dishes, twins = make_dishes(n)
        blocked(dishes[: min(n, 500)])  # warm numpy and the hash once
        runs = [blocked(dishes) for _ in range(repeats)]
        t, found = min(r[0] for r in runs), runs[0][1]  # the quietest of the runs: the machine is shared
        recall = sum(frozenset(p) in twins for p in found) / max(1, len(twins))
        seconds.append(t)
        pairs.append(max(1, len(found)))
        reference, note_ref = None, "all pairs not timed at this size"
        if n <= all_pairs_up_to:
            reference, caught = all_pairs(dishes)
            note_ref = f"all pairs {reference:.2f} s (its Jaccard rule caught {caught} of {len(twins)} twins)"
        note = (f"{n:,} dishes: {len(found):,} model-checked pairs ({len(found) / n:.2f} per dish), "
                f"{recall:.0%} of {len(twins)} planted twins among them; {note_ref}")
        rows.append(result(f"dedupe blocking, {n:,} dishes vs all pairs", t, reference, note=note,
                           dishes=n, pairs=len(found), recall=recall))
    if len(sizes) > 1:
        rows.append(result("dedupe blocking: exponent of time in dishes", slope(list(sizes), seconds), None, unit="",
                           note=f"pairs grow with exponent {slope(list(sizes), pairs):.2f} "
                                f"(1 = linear; all pairs: 2)"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.construct_dedupe", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,8000,32000", help="dish counts (default 2000,8000,32000)")
    parser.add_argument("--all-pairs-up-to", type=int, default=8_000,
                        help="time the all-pairs rule at sizes up to this (default 8,000)")
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
