"""Stage 2, dish selection: enough kept user photos and a kept reference photo, a detailed ingredient
list, near-duplicate dishes across merchants removed, cuisines capped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from construct.context import Context
from construct.dedupe import resolve
from construct.dish_dedupe import dish_candidates, judge_groups
from construct.errors import StageFailed
from construct.lexicon import QUANTITY, terms
from construct.models import Answer, Ask, parse_json_object
from construct.neighbours import embed_texts
from construct.raw import Dish
from construct.rules import free_dish_rule, ingredient_name, is_detailed
from construct.stages import DISHES as NAME
from construct.stages import GLOSSARY_FILE, PHOTOS, RULED_OUT, prompt
from construct.work import Decision, Stage, dropped, inputs_key, kept, read_jsonl, write_json, write_jsonl

PAIR_VERSION = "same-dish-v1"
GLOSSARY_VERSION = "dedupe-glossary-v1"
BLOCKING_VERSION = "concepts-keys-v4"  # construct/dish_dedupe.py's candidates and questions: a new version reruns the stage
GLOSSARY_CHUNK = 80  # names per glossary call
GLOSSARY_MAX_CHARS = 120
MAX_UNREADABLE = 0.03  # of the pairs: more verdicts that cannot be read stop the stage
GLOSSARY_PROMPT = prompt("dishes.glossary", """Task: dedupe glossary.
Give the plain English name of each of these dish names and ingredient names from one restaurant menu
(as an English menu would name them; keep names that differ different).
{names}
Reply with one JSON object and nothing else, mapping each name exactly as given to its English name.""")
PAIR_PROMPT = prompt("dishes.same_dish", """Task: same dish check.
Two dishes from the menus of two different restaurants. Are they one and the same dish under another
name (the same recipe: the same main ingredients, cooked the same way, about the same portion), not
merely two dishes of one kind?
Dish A ({a_id}): {a}
Dish B ({b_id}): {b}
Reply with one JSON object and nothing else: {{"same_dish": true or false, "reason": "..."}}""")
GROUP_PROMPT = prompt("dishes.same_dish", """Task: same dish check.
Dishes from the menus of different restaurants. For each dish B below, is it one and the same dish as
Dish A under another name (the same recipe: the same main ingredients, cooked the same way, about the same
portion), not merely a dish of the same kind? Judge each B against A alone.
Dish A ({a_id}): {a}
{others}
Reply with one JSON object and nothing else, one entry per dish B by its id:
{{"<id of a dish B>": {{"same_dish": true or false, "reason": "..."}}, ...}}""")


def _card(d: Dish) -> str:
    return json.dumps({"name": d.name, "menu_category": d.menu_category, "ingredients": list(d.ingredients),
                       "portion": d.portion}, ensure_ascii=False)


def pair_prompt(a: Dish, b: Dish) -> str:
    """The question put to the model for one candidate pair (ids let a reader of calls.jsonl find them)."""
    return PAIR_PROMPT.format(a_id=a.dish_id, a=_card(a), b_id=b.dish_id, b=_card(b))


def group_prompt(a: Dish, others: list[Dish]) -> str:
    """The question for one dish and the dishes it is compared with (construct/dish_dedupe.py:judge_groups)."""
    return GROUP_PROMPT.format(a_id=a.dish_id, a=_card(a),
                               others="\n".join(f"Dish B{k} ({d.dish_id}): {_card(d)}" for k, d in enumerate(others, 1)))


def needs_glossary(text: str) -> bool:
    """Whether a name or an ingredient entry holds words the lexicon cannot read into concepts of
    another language (Chinese characters it does not know).

    >>> needs_glossary("红烧牛肉面"), needs_glossary("干炒牛河"), needs_glossary("Beef Chow Fun")
    (False, True, False)
    """
    return any(kind == "h" for _, kind in terms(text))


def glossary_asks(survivors: list[Dish]) -> list[Ask]:
    """Ask: per merchant, English for the dish names and ingredient names the lexicon cannot read (dedupe
    then compares a dish named in Chinese with one named in English), GLOSSARY_CHUNK names at a time."""
    names: dict[str, set[str]] = {}
    for d in survivors:
        wanted = {d.name.strip(), *(" ".join(QUANTITY.sub(" ", e).split()) for e in d.ingredients)}
        names.setdefault(d.merchant_id, set()).update(t for t in wanted if t and needs_glossary(t))
    asks = []
    for merchant, found in sorted(names.items()):
        ordered = sorted(found)
        for k in range(0, len(ordered), GLOSSARY_CHUNK):
            chunk = ordered[k:k + GLOSSARY_CHUNK]
            asks.append(Ask(f"{merchant}#{k // GLOSSARY_CHUNK}", GLOSSARY_PROMPT.format(
                names=json.dumps(chunk, ensure_ascii=False))))
    return asks


def parse_glossary(text: str | None, asked: set[str]) -> dict[str, str]:
    """Parse: {name: English} of the names asked whose English is short plain text (a reply naming
    anything else, or prose, adds nothing).

    >>> parse_glossary('{"干炒牛河": "Dry-Fried Beef Ho Fun", "x": "y", "鱼": ""}', {"干炒牛河", "鱼"})
    {'干炒牛河': 'Dry-Fried Beef Ho Fun'}
    """
    parsed = parse_json_object(text) or {}
    return {k: v.strip() for k, v in parsed.items()
            if k in asked and isinstance(v, str) and 0 < len(v.strip()) <= GLOSSARY_MAX_CHARS}


def pair_asks(survivors: list[Dish], groups: list[tuple[int, tuple[int, ...]]]) -> Iterator[Ask]:
    """Ask: one same-dish question per judge group (construct/dish_dedupe.py:judge_groups), made as the calls
    go: a lone pair as "dish_a|dish_b", a dish and several others as "dish_a|dish_b1|dish_b2|..."."""
    for a, others in groups:
        ids = "|".join(survivors[x].dish_id for x in (a, *others))
        yield Ask(ids, pair_prompt(survivors[a], survivors[others[0]]) if len(others) == 1
                  else group_prompt(survivors[a], [survivors[x] for x in others]))


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


def parse_group(text: str | None, others: list[str]) -> dict[str, tuple[bool | None, Any]]:
    """Parse: {dish B: (its same_dish verdict, None unless a boolean; its reason)} of a group question; a
    dish B the reply leaves out or answers in another shape has no verdict.

    >>> parse_group('{"b1": {"same_dish": true, "reason": "r"}, "b2": {"same_dish": "no"}}', ["b1", "b2", "b3"])
    {'b1': (True, 'r'), 'b2': (None, None), 'b3': (None, None)}
    """
    answer = parse_json_object(text) or {}
    entries = {other: entry if isinstance(entry := answer.get(other), dict) else {} for other in others}
    return {other: (e["same_dish"], e.get("reason")) if isinstance(e.get("same_dish"), bool) else (None, None)
            for other, e in entries.items()}


def find_twins(ctx: Context, survivors: list[Dish]) -> tuple[dict[str, str], dict[tuple[str, str], dict[str, Any]],
                                                         Iterator[dict[str, Any]], bool, dict[str, Any]]:
    """({dropped dish: the dish it repeats}, the confirmed pairs' rows, every checked pair's row (made as
    WORK/dishes/pairs.jsonl is written), complete, a summary for the card: how dishes were compared and what
    the verdicts were). The model judges each candidate pair (`dish_candidates`, given a glossary it is asked
    for and --embed-model's vectors); each answer is kept as its verdict and reason only; a verdict that
    cannot be read counts as a failure (MAX_UNREADABLE)."""
    s = ctx.settings
    asks = glossary_asks(survivors)
    glossary: dict[str, str] = {}
    if asks:
        answers = ctx.models.ask(NAME, s.model, GLOSSARY_VERSION, asks)
        for ask in asks:
            asked = set(json.loads(next(line for line in ask.prompt.splitlines() if line.startswith("["))))
            glossary.update(parse_glossary(answers[ask.item].text, asked))
    vectors = embed_texts(s, [f"{glossary.get(d.name, d.name)}: {', '.join(ingredient_name(i) for i in d.ingredients)}"
                              for d in survivors])
    found = dish_candidates(survivors, vectors, glossary=glossary)
    pairs = found.pairs()
    groups = judge_groups(pairs)
    verdicts: dict[str, tuple[bool | None, Any, str | None]] = {}
    rank = {d.dish_id: k for k, d in enumerate(survivors)}

    def record(answer: Answer) -> None:
        a, *others = answer.item.split("|")
        if len(others) == 1:
            verdicts[answer.item] = (*parse_pair(answer.text), answer.error)
            return
        for other, (verdict, reason) in parse_group(answer.text, others).items():
            pair = (a, other) if rank[a] < rank[other] else (other, a)  # a pair's key: earlier|later
            verdicts["|".join(pair)] = (verdict, reason, answer.error)

    if pairs:
        ctx.models.ask_each(NAME, s.model, PAIR_VERSION, pair_asks(survivors, groups), record)
    unreadable = [item for item, (verdict, _, error) in verdicts.items() if verdict is None and error is None]
    if len(unreadable) > max(MAX_UNREADABLE * len(pairs), 2):
        raise StageFailed(f"stage {NAME}: {len(unreadable)} of {len(pairs)} same-dish verdicts could not be read "
                          f"(e.g. pair {unreadable[0]}); the model must reply {{\"same_dish\": true or false}}: fix the "
                          f"model or its server and run the same command again")

    ids = [(survivors[i].dish_id, survivors[j].dish_id, found.via[(i, j)], found.score[(i, j)]) for i, j in pairs]

    def row(a: str, b: str, via: Any, score: Any) -> dict[str, Any]:
        verdict, reason, error = verdicts[f"{a}|{b}"]
        if verdict is None and error is None:
            error = "unreadable verdict"
        return {"pair": [a, b], "via": via, "similarity": score, "model": s.model, "same_dish": verdict,
                "reason": reason, "error": error}

    same = {(a, b): row(a, b, via, score) for a, b, via, score in ids if verdicts[f"{a}|{b}"][0] is True}
    merchant = {d.dish_id: d.merchant_id for d in survivors}
    twins = resolve([d.dish_id for d in survivors], list(same), allowed=lambda a, b: merchant[a] != merchant[b])
    complete = all(v[2] is None for v in verdicts.values())
    summary = {"compared_on": "concepts (construct/lexicon.py)" + (f", a model glossary of {len(glossary)} name(s)"
                                                                    if glossary else "")
                              + (f", embeddings from {s.embed_model}" if vectors is not None else ""),
               "dishes": len(survivors), "pairs": len(pairs), "questions": len(groups), "same": len(same), "unreadable": len(unreadable),
               "failed": sum(v[2] is not None for v in verdicts.values()), "dropped": len(twins), "glossary": glossary}
    return twins, same, (row(*pair) for pair in ids), complete, summary


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
    """The free rules, then the same-dish pairs the model judges, then the cuisine caps."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    photos = Stage(ctx.work, PHOTOS)
    caps = s.cuisine_caps
    inputs = inputs_key(NAME, photos.items_hash(), photos.file_hash(RULED_OUT), s.min_user_photos, caps, s.cuisine_ratio,
                        s.model, PAIR_VERSION, GLOSSARY_VERSION, BLOCKING_VERSION, s.embed_model)
    if stage.is_done(inputs):
        return
    reference, users = kept_photos(photos.iter_items())
    decisions: dict[str, Decision] = {}
    survivors = check_rules(ctx, reference, users, ruled_out(photos), decisions)
    twins, same, checked, complete, summary = find_twins(ctx, survivors)
    check_twins(ctx, survivors, twins, same, decisions)
    check_caps(ctx, survivors, users, caps, decisions)
    ordered = [decisions[d] for d in sorted(decisions)]
    items = [{"dish_id": d.dish_id, "merchant_id": d.merchant_id, "cuisine": ctx.raw.cuisine_of(d.dish_id),
              "name": d.name, "menu_category": d.menu_category, "reference": reference[d.dish_id],
              "user_photos": sorted(users[d.dish_id])}
             for d in sorted(survivors, key=lambda d: d.dish_id) if decisions[d.dish_id].verdict == "kept"]
    write_jsonl(stage.dir / "pairs.jsonl", checked)
    glossary = summary.pop("glossary")
    write_json(stage.dir / GLOSSARY_FILE, glossary)
    (stage.dir / "dedupe.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    stage.finish(ordered, items, inputs, complete=complete)


def kept_photos(photos: Iterable[dict[str, Any]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The photo filters' items as ({dish: its reference photo}, {dish: its user photos})."""
    reference: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    for item in photos:
        if item["role"] == "reference":
            reference[item["dish_id"]] = item["photo_id"]
        else:
            users.setdefault(item["dish_id"], []).append(item["photo_id"])
    return reference, users


def ruled_out(photos: Stage) -> dict[str, dict[str, Any]]:
    """{dish: {"reason", ...}} of the dishes the photo stage ruled out by a free rule (no call was made
    for their photos)."""
    return {row["dish_id"]: row for row in read_jsonl(photos.dir / RULED_OUT)}


def check_rules(ctx: Context, reference: dict[str, str], users: dict[str, list[str]],
                out: dict[str, dict[str, Any]], decisions: dict[str, Decision]) -> list[Dish]:
    """The rules before any model question, dishes in (merchant, id) order: the dishes that pass; a drop
    decision for the others. A dish the photo stage ruled out keeps its reason; the others meet
    `construct.rules.free_dish_rule`."""
    raw_refs = ctx.raw.photos.dishes_with("reference")
    survivors = []
    for dish in sorted(ctx.raw.dishes.values(), key=lambda d: (d.merchant_id, d.dish_id)):
        n_users = len(users.get(dish.dish_id, []))
        if dish.dish_id in out:
            row = out[dish.dish_id]
            decisions[dish.dish_id] = dropped(dish.dish_id, row["reason"],
                                              **{k: v for k, v in row.items() if k not in ("dish_id", "reason")})
            continue
        why = free_dish_rule(dish.dish_id in raw_refs, dish.dish_id in reference, n_users, dish.ingredients,
                             ctx.settings.min_user_photos)
        if why == "too_few_user_photos":
            decisions[dish.dish_id] = dropped(dish.dish_id, why, kept_user_photos=n_users)
        elif why == "vague_ingredients":
            decisions[dish.dish_id] = dropped(dish.dish_id, why, why=is_detailed(dish.ingredients)[1])
        elif why:
            decisions[dish.dish_id] = dropped(dish.dish_id, why)
        else:
            survivors.append(dish)
    return survivors


def check_twins(ctx: Context, survivors: list[Dish], twins: dict[str, str], same: dict[tuple[str, str], dict[str, Any]],
                decisions: dict[str, Decision]) -> None:
    """Drop (from `survivors` too) each dish the model found to repeat another, naming the twin and the verdict."""
    verdict_of = {tuple(sorted(pair)): c for pair, c in same.items()}
    for dish in survivors:
        twin = twins.get(dish.dish_id)
        if twin is not None:
            pair = verdict_of[tuple(sorted((twin, dish.dish_id)))]
            decisions[dish.dish_id] = dropped(dish.dish_id, "near_duplicate_dish", of=twin,
                                              names=[ctx.raw.dishes[twin].name, dish.name], via=pair["via"],
                                              model=pair["model"], model_reason=pair["reason"])
    survivors[:] = [d for d in survivors if d.dish_id not in twins]


def check_caps(ctx: Context, survivors: list[Dish], users: dict[str, list[str]], caps: dict[str, int],
               decisions: dict[str, Decision]) -> None:
    """The cuisine caps: the dishes with most user photos stay (more views, better items); a kept or
    cuisine_cap decision for every survivor."""
    s = ctx.settings
    limits = cuisine_caps(Counter(ctx.raw.cuisine_of(d.dish_id) for d in survivors), caps, s.cuisine_ratio)
    per_cuisine: Counter[str] = Counter()
    for dish in sorted(survivors, key=lambda d: (-len(users[d.dish_id]), d.dish_id)):
        cuisine = ctx.raw.cuisine_of(dish.dish_id)
        cap, rule = limits.get(cuisine, (None, ""))
        if cap is not None and per_cuisine[cuisine] >= cap:
            decisions[dish.dish_id] = dropped(dish.dish_id, "cuisine_cap", cuisine=cuisine, cap=cap, rule=rule)
            continue
        per_cuisine[cuisine] += 1
        decisions[dish.dish_id] = kept(dish.dish_id, cuisine=cuisine)
