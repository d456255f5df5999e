"""Stage 3, classification items: 7 look-alike distractors from the same merchant's same menu category,
picked by a model that standardises names (Table 7), two filter models dropping ambiguous and too-easy
items (Table 10), answer letters balanced over A-H."""

from __future__ import annotations

import hashlib

import numpy as np

from construct.context import Context
from construct.models import Answer, Ask, parse_json_object
from construct.raw import Dish
from construct.stages import CLASSIFICATION as NAME
from construct.stages import DISH_REVIEW, prompt, shown_photos, task_item
from construct.work import MODEL_UNPARSED, Decision, Stage, dropped, inputs_key, kept, screen, triage
from diningbench import LETTERS

TASK = NAME
PROMPT_VERSION = "classification-v1"
FILTER_VERDICTS = ("pass", "ambiguous", "too_easy", "label_error")
SELECT_PROMPT = prompt("classification.select", """Task: hard-negative selection.
Target dish: {target}
Other items on the same merchant's menu, in the same menu category ({category}):
{candidates}

1. Standardise every name to a universal dish name: drop marketing modifiers such as 招牌, 秘制,
   外婆, 特色, "Signature", "Secret", "Grandma's".
2. Exclude every item whose standard name equals the target's standard name (same_as_target).
3. Exclude items that look obviously, hugely different from the target (obviously_different), e.g. a drink.
4. From the rest, select exactly 7 items that are visually or semantically most similar to the target,
   with 7 different standard names. If fewer than 7 remain, select all that remain.
Reply with one JSON object and nothing else:
{{"target_standard_name": "...", "candidates": [{{"dish_id": "...", "standard_name": "...",
"excluded": null or "same_as_target" or "obviously_different"}}], "selected": ["dish_id", ...]}}""")
FILTER_PROMPT = prompt("classification.audit", """Task: classification item audit.
The photos show one dish. A benchmark asks which of these names it is:
{options}
The ground truth is {letter}. Pass the item only if all hold: the photos are clear with a distinct
subject; the ground truth correctly names the food; every other option is a wrong name (no second
correct answer); and the item is hard: the other options are close look-alikes, not trivially different.
Reply with one JSON object and nothing else: {{"verdict": "pass" or "ambiguous" (the photos cannot tell
the ground truth from an option) or "too_easy" or "label_error", "reason": "<a few words>"}}""")


def _rng(seed: int, *parts: str) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256("|".join((str(seed), *parts)).encode()).hexdigest()[:15], 16))


def check_selection(answer: dict | None, candidates: set[str]) -> tuple[str | None, dict]:
    """(why the selection is unusable or None, {dish_id: standard name} of target and the 7 picks)."""
    if not answer or not isinstance(answer.get("selected"), list) or not isinstance(answer.get("candidates"), list):
        return MODEL_UNPARSED, {}
    target_name = str(answer.get("target_standard_name") or "").strip()
    names = {str(c.get("dish_id")): str(c.get("standard_name") or "").strip()
             for c in answer["candidates"] if isinstance(c, dict)}
    excluded = {str(c.get("dish_id")) for c in answer["candidates"] if isinstance(c, dict) and c.get("excluded")}
    picks = [str(p) for p in answer["selected"]]
    if len(picks) < 7:
        return "too_few_candidates", {}
    picks = picks[:7]
    std = [names.get(p, "") for p in picks]
    if (len(set(picks)) != 7 or not set(picks) <= candidates or set(picks) & excluded or not all(std)
            or len(set(std)) != 7 or target_name in std or not target_name):
        return "bad_selection", {}
    return None, {"target": target_name, **dict(zip(picks, std, strict=True))}


def run(ctx: Context) -> None:
    """The menus, the hard-negative selection, the two filter passes, then the answer letters placed."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    dishes = Stage(ctx.work, DISH_REVIEW)
    filters = s.filter_pair()
    inputs = inputs_key(NAME, PROMPT_VERSION, dishes.items_hash(), s.model, filters, s.seed)
    if stage.is_done(inputs):
        return
    decisions: dict[str, Decision] = {}
    menus = check_menus(ctx, dishes.items(), decisions)
    selections = ctx.models.ask(NAME, s.model, PROMPT_VERSION, selection_asks(menus))
    drafts = check_selections(menus, selections, s.seed, decisions)
    for n, spec in enumerate(filters, 1):
        verdicts = ctx.models.ask(NAME, spec, f"{PROMPT_VERSION}-filter{n}", filter_asks(ctx, drafts))
        drafts = check_filter(drafts, verdicts, n, spec, decisions)
    items = place_answers(drafts, s.seed, decisions)
    stage.finish_task(decisions, items, inputs)


def check_menus(ctx: Context, targets: list[dict], decisions: dict[str, Decision]) -> list[tuple[dict, list[Dish]]]:
    """(dish, the other dishes of its merchant's menu category) for each dish with at least 7 of them
    (a drop decision for the others)."""
    menus = []
    for t in targets:
        menu = [d for d in ctx.raw.menu(t["merchant_id"], t["menu_category"]) if d.dish_id != t["dish_id"]]
        if len(menu) < 7:
            decisions[t["dish_id"]] = dropped(t["dish_id"], "too_few_candidates", TASK, menu_size=len(menu))
        else:
            menus.append((t, menu))
    return menus


def selection_asks(menus: list[tuple[dict, list[Dish]]]) -> list[Ask]:
    """Ask: the hard-negative selection for each dish with a menu."""
    return [Ask(t["dish_id"], SELECT_PROMPT.format(
                target=t["name"], category=t["menu_category"],
                candidates="\n".join(f"- {d.dish_id}: {d.name}" + (f" ({d.description})" if d.description else "")
                                     for d in menu)))
            for t, menu in menus]


def check_selections(menus: list[tuple[dict, list[Dish]]], selections: dict[str, Answer], seed: int,
                     decisions: dict[str, Decision]) -> dict[str, dict]:
    """{dish: its draft item, the 8 options in a seeded order}: each selection parsed and checked
    (`check_selection`); a drop decision for the unusable ones."""
    drafts: dict[str, dict] = {}
    for t, menu in menus:
        did = t["dish_id"]
        answer = selections[did]
        if failed := triage(did, answer.error, True, TASK):  # an unreadable selection is check_selection's
            decisions[did] = failed
            continue
        why, names = check_selection(parse_json_object(answer.text), {d.dish_id for d in menu})
        if why:
            decisions[did] = dropped(did, why, TASK)
            continue
        picks = [k for k in names if k != "target"]
        order = _rng(seed, did, "draft").permutation(8)
        ids = [did, *picks]
        drafts[did] = {"target": t, "option_dish_ids": [ids[i] for i in order],
                       "options": [names["target"] if ids[i] == did else names[ids[i]] for i in order]}
    return drafts


def filter_asks(ctx: Context, drafts: dict[str, dict]) -> list[Ask]:
    """Ask: one filter question per draft."""
    asks = []
    for did, draft in drafts.items():
        letter = LETTERS[draft["option_dish_ids"].index(did)]
        options = "\n".join(f"{LETTERS[i]}. {name}" for i, name in enumerate(draft["options"]))
        asks.append(Ask(did, FILTER_PROMPT.format(options=options, letter=letter),
                        photos=ctx.raw.photo_refs(shown_photos(draft["target"]))))
    return asks


def parse_filter(text: str | None) -> tuple[str | None, str]:
    """Parse: (the filter's verdict, None unless one of FILTER_VERDICTS; its reason).

    >>> parse_filter('```json\\n{"verdict": "too_easy", "reason": "a drink among noodles"}\\n```')
    ('too_easy', 'a drink among noodles')
    >>> parse_filter('{"verdict": "fine"}')
    (None, '')
    """
    answer = parse_json_object(text) or {}
    verdict = answer.get("verdict")
    return (verdict if verdict in FILTER_VERDICTS else None), str(answer.get("reason", ""))


def check_filter(drafts: dict[str, dict], verdicts: dict[str, Answer], n: int, spec: str,
                 decisions: dict[str, Decision]) -> dict[str, dict]:
    """Filter pass n: the drafts it passes; a drop decision for the others."""
    def own(did: str, verdict: str, reason: str) -> Decision | None:
        return None if verdict == "pass" else dropped(did, verdict, TASK, filter_pass=n, filter_model=spec,
                                                      model_reason=reason)
    return {did: drafts[did] for did in screen(drafts, verdicts, parse_filter, own, decisions, TASK, filter_pass=n)}


def place_answers(drafts: dict[str, dict], seed: int, decisions: dict[str, Decision]) -> list[dict]:
    """The items, their answer letters as uniform over A-H as the count allows and shuffled with the seed
    (validate checks the spread); a kept decision for each."""
    positions = np.resize(np.arange(8), len(drafts))
    _rng(seed, "letters").shuffle(positions)
    items = []
    for (did, draft), pos in zip(sorted(drafts.items()), positions, strict=True):
        target_name = draft["options"][draft["option_dish_ids"].index(did)]
        others = [(i, n) for i, n in zip(draft["option_dish_ids"], draft["options"], strict=True) if i != did]
        others = [others[k] for k in _rng(seed, did, "order").permutation(7)]
        others.insert(int(pos), (did, target_name))
        items.append(task_item(f"classification-{did}", draft["target"], options=[n for _, n in others],
                               option_dish_ids=[i for i, _ in others], answer=LETTERS[int(pos)]))
        decisions[did] = kept(did, TASK, answer=LETTERS[int(pos)])
    return items
