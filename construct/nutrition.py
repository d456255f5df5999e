"""Stage 4, nutrition items: the merchant's values if they pass the gates (per 100 g converted with the
portion), else a model estimate from photos, ingredients and portion (Table 6); a USDA FDC cross-check;
gates (Table 11): Atwater gap over tolerance, macros over 100 g per 100 g, implausible to a second model."""

from __future__ import annotations

import json
import math
from typing import Any

from construct.context import Context
from construct.fdc import FoodData, ingredient_check, kcal_gap
from construct.fdc import load as load_fdc
from construct.models import Answer, Ask, parse_json_object
from construct.stages import DISH_REVIEW, DISHES, GLOSSARY_FILE, Prompt, prompt, shown_photos, task_item
from construct.stages import NUTRITION as NAME
from construct.work import MODEL_ERROR, Decision, Stage, dropped, inputs_key, kept, screen, triage
from diningbench import NUTRIENTS, portion_grams

TASK = NAME
PROMPT_VERSION = "nutrition-v1"
USDA_VERSION = "usda-ingredients-v1"
FDC_MIN_COVERAGE = 0.8  # the USDA check judges only when FDC foods cover most of the stated grams
ESTIMATE_PROMPT = prompt("nutrition.estimate", """Task: nutrition estimation.
Dish: {name}
Merchant's ingredient list: {ingredients}
Portion: {portion}
Estimate calories (kcal), protein, carbohydrates and fat (g) for ONE serving as sold, from the photos,
the ingredient list and the portion. Rules:
- If a value is given per 100 g, compute the total for the portion's weight.
- Merchants often under-report calories and fat or over-report protein for marketing; do not trust
  marketing figures: use the ingredients, the portion and your knowledge of food composition.
- Do not overlook decimal points.
- The values must be consistent: 4 x protein + 4 x carbohydrates + 9 x fat is close to the calories.
Also break the dish down into its ingredients with grams and the closest USDA FoodData Central food description.
Reply with one JSON object and nothing else:
{{"calories": n, "protein": n, "carbohydrates": n, "fat": n,
"ingredients": [{{"name": "...", "grams": n, "usda_description": "..."}}]}}""")
PLAUSIBILITY_PROMPT = prompt("nutrition.plausibility", """Task: nutrition plausibility check.
Dish: {name}
Ingredients: {ingredients}
Portion: {portion}
Labelled nutrition for one serving: {values}
Do these values plausibly describe the food in the photos (its kind, its visible fat, its amount)? A fatty
cut labelled almost fat-free, or a plain salad at 800 kcal, is implausible.
Reply with one JSON object and nothing else: {{"plausible": true or false, "reason": "<a few words>"}}""")


def per_serving(nutrition: dict[str, Any], portion: str) -> tuple[dict[str, float] | None, str]:
    """The merchant's values per serving (per 100 g x grams / 100), or None and why not.

    >>> per_serving({"unit": "per_100g", "calories": 150, "protein": 8, "carbohydrates": 20, "fat": 4}, "约400克")
    ({'calories': 600.0, 'protein': 32.0, 'carbohydrates': 80.0, 'fat': 16.0}, '')
    """
    values = {n: float(nutrition[n]) for n in NUTRIENTS}
    if nutrition.get("unit") == "per_100g":
        grams = portion_grams(portion)
        if grams is None:
            return None, "no_portion_grams"
        values = {n: round(v * grams / 100.0, 1) for n, v in values.items()}
    return values, ""


def gate(values: dict[str, float], grams: float | None, tolerance: float) -> tuple[str | None, dict[str, Any]]:
    """The rule gates: (the first failed gate's reason or None, what each check found).

    >>> gate({"calories": 500, "protein": 20, "carbohydrates": 60, "fat": 20}, 400, 0.10)[0] is None
    True
    >>> gate({"calories": 900, "protein": 20, "carbohydrates": 60, "fat": 20}, 400, 0.10)[0]
    'atwater_gap'
    """
    if not all(isinstance(values.get(n), int | float) and math.isfinite(values[n]) and values[n] >= 0 for n in NUTRIENTS):
        return "invalid_values", {}
    checks: dict[str, Any] = {}
    if grams:
        density = (values["protein"] + values["carbohydrates"] + values["fat"]) / grams * 100
        checks["macros_per_100g"] = round(density, 1)
        if density > 100:
            return "macro_density", checks
    atwater = 4 * values["protein"] + 4 * values["carbohydrates"] + 9 * values["fat"]
    gap = abs(values["calories"] - atwater) / values["calories"] if values["calories"] > 0 else 1.0
    checks["atwater_gap"] = round(gap, 3)
    return ("atwater_gap" if gap > tolerance else None), checks


def _ask(ctx: Context, target: dict, question: Prompt, **fields: str) -> Ask:
    """Ask: `question` about one dish (name, ingredients and portion filled in), with its shown photos."""
    dish = ctx.raw.dishes[target["dish_id"]]
    return Ask(dish.dish_id, question.format(name=dish.name, ingredients="、".join(dish.ingredients),
                                             portion=dish.portion, **fields),
               photos=ctx.raw.photo_refs(shown_photos(target)))


def run(ctx: Context) -> None:
    """The merchant's values through the gates and the plausibility check; a model estimate for the rest."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    dishes = Stage(ctx.work, DISH_REVIEW)
    checker = s.filter_pair()[0]
    glossary_path = ctx.work / DISHES / GLOSSARY_FILE
    glossary = json.loads(glossary_path.read_text(encoding="utf-8")) if glossary_path.exists() else {}
    inputs = inputs_key(NAME, PROMPT_VERSION, USDA_VERSION, dishes.items_hash(), s.model, checker, s.fdc,
                        s.atwater_tolerance, s.fdc_tolerance, glossary)
    if stage.is_done(inputs):
        return
    fdc, _ = load_fdc(s.fdc)
    targets = {t["dish_id"]: t for t in dishes.items()}
    checks: dict[str, dict[str, Any]] = {d: {} for d in targets}
    values: dict[str, dict[str, float]] = {}
    source: dict[str, str] = {}
    decisions: dict[str, Decision] = {}

    # 1. Merchant values, when they pass every gate.
    merchant = check_merchant_values(ctx, targets, checks)
    rejected = check_plausibility(ctx, checker, targets, merchant, "merchant", checks)
    complete = MODEL_ERROR not in rejected.values()
    for did, why in rejected.items():
        if why:
            checks[did]["merchant_rejected"] = why
        else:
            values[did], source[did] = merchant[did], "merchant"

    # 2. A model estimate for the rest.
    rest = [did for did in targets if did not in values]
    estimates = ctx.models.ask(NAME, s.model, PROMPT_VERSION, [_ask(ctx, targets[did], ESTIMATE_PROMPT) for did in rest])
    candidates = check_estimates(ctx, rest, estimates, checks, decisions)
    rejected = check_plausibility(ctx, checker, targets, candidates, "estimate", checks)
    for did, why in rejected.items():
        if why:
            decisions[did] = dropped(did, why, TASK, values=candidates[did], checks=checks[did])
        else:
            values[did], source[did] = candidates[did], "estimated"

    if fdc is not None:
        usda_check(ctx, fdc, glossary, values, checks)
    items = write_items(ctx, targets, values, source, checks, decisions)
    # A failed call on an estimate left a model_error decision; one on merchant values, none: `complete` says so.
    stage.finish_task(decisions, items, inputs, complete=complete)


def check_merchant_values(ctx: Context, targets: dict[str, dict], checks: dict[str, dict[str, Any]]
                          ) -> dict[str, dict[str, float]]:
    """{dish: the merchant's values per serving} for each dish whose values pass the rule gates; what
    each gate found goes to `checks`."""
    merchant: dict[str, dict[str, float]] = {}
    for did in targets:
        dish = ctx.raw.dishes[did]
        if not dish.nutrition:
            continue
        v, first_why = per_serving(dish.nutrition, dish.portion)
        why, found = gate(v, portion_grams(dish.portion), ctx.settings.atwater_tolerance) if v else (first_why, {})
        checks[did]["merchant"] = {"unit": dish.nutrition["unit"], **found}
        if why or v is None:
            checks[did]["merchant_rejected"] = why
        else:
            merchant[did] = v
    return merchant


def parse_plausibility(text: str | None) -> tuple[bool | None, str]:
    """Parse: (the checker's plausible verdict, None unless a boolean; its reason, "fail" if none).

    >>> parse_plausibility('{"plausible": false, "reason": "fatty pork labelled 1 g fat"}')
    (False, 'fatty pork labelled 1 g fat')
    >>> parse_plausibility('{"plausible": "no"}')
    (None, 'fail')
    """
    answer = parse_json_object(text) or {}
    verdict = answer.get("plausible")
    return (verdict if isinstance(verdict, bool) else None), str(answer.get("reason", "fail"))


def check_plausibility(ctx: Context, checker: str, targets: dict[str, dict], candidates: dict[str, dict[str, float]],
                       label: str, checks: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    """Ask the checker model whether each dish's values fit its photos: {dish: None when plausible, else
    the reason to reject (model_error when the call failed)}."""
    asks = [_ask(ctx, targets[did], PLAUSIBILITY_PROMPT, values=json.dumps(v)) for did, v in candidates.items()]
    answers = ctx.models.ask(NAME, checker, f"{PROMPT_VERSION}-plausibility", asks)

    def own(did: str, plausible: bool, reason: str) -> Decision | None:
        checks[did][f"{label}_plausibility"] = "pass" if plausible else reason
        return None if plausible else dropped(did, "implausible")
    failed: dict[str, Decision] = {}
    screen(candidates, answers, parse_plausibility, own, failed)
    return {did: failed[did].reason if did in failed else None for did in candidates}


def parse_estimate(text: str | None) -> tuple[dict[str, float] | None, list[dict[str, Any]]]:
    """Parse: (the four values as numbers, None unless all are; the ingredient breakdown's entries).

    >>> parse_estimate('{"calories": "520", "protein": 20, "carbohydrates": 60, "fat": 20, '
    ...                '"ingredients": [{"name": "rice", "grams": 200}, "rice 200 g"]}')
    ({'calories': 520.0, 'protein': 20.0, 'carbohydrates': 60.0, 'fat': 20.0}, [{'name': 'rice', 'grams': 200}])
    >>> parse_estimate('{"calories": 520, "protein": "some"}')
    (None, [])
    """
    est = parse_json_object(text)
    try:
        values = {n: float(est[n]) for n in NUTRIENTS} if est else None
    except (TypeError, ValueError, KeyError):
        values = None
    breakdown = (est or {}).get("ingredients")
    return values, [i for i in breakdown if isinstance(i, dict)] if isinstance(breakdown, list) else []


def check_estimates(ctx: Context, rest: list[str], estimates: dict[str, Answer],
                    checks: dict[str, dict[str, Any]], decisions: dict[str, Decision]
                    ) -> dict[str, dict[str, float]]:
    """{dish: estimated values} that pass the gates; a drop decision for the others."""
    s = ctx.settings
    candidates: dict[str, dict[str, float]] = {}
    for did in rest:
        v = parse_estimate(estimates[did].text)[0]
        if failed := triage(did, estimates[did].error, v, TASK, checks=checks[did]):
            decisions[did] = failed
            continue
        assert v is not None  # triage decided every answer that did not parse
        why, found = gate(v, portion_grams(ctx.raw.dishes[did].portion), s.atwater_tolerance)
        checks[did]["estimate"] = found
        if why:
            decisions[did] = dropped(did, why, TASK, values=v, checks=checks[did])
        else:
            candidates[did] = v
    return candidates


def usda_check(ctx: Context, fdc: FoodData, glossary: dict[str, str], values: dict[str, dict[str, float]],
               checks: dict[str, dict[str, Any]]) -> None:
    """The independent USDA check of each dish with values: its per-serving values computed by code from
    the export's ingredient grams (construct/fdc.py), compared with the values released and with the
    merchant's label where there is one; when the FDC foods cover FDC_MIN_COVERAGE of the grams and the
    released calories differ by more than --fdc-tolerance, the item goes to review flagged, both figures
    shown (it is never exempt from review)."""
    for did, v in values.items():
        dish = ctx.raw.dishes[did]
        check = ingredient_check(fdc, dish.ingredients, glossary)
        label = per_serving(dish.nutrition, dish.portion)[0] if dish.nutrition else None
        check["gap"] = kcal_gap(check["computed"], v)
        check["label_gap"] = kcal_gap(check["computed"], label) if label else None
        check["judged"] = check["coverage"] >= FDC_MIN_COVERAGE and not check["unweighed"] and check["gap"] is not None
        check["flag"] = bool(check["judged"] and check["gap"] > ctx.settings.fdc_tolerance)
        checks[did]["usda"] = check


def usda_flag(check: dict[str, Any], released: dict[str, float]) -> dict[str, Any]:
    """What a reviewer sees of a flagged item: both figures, the gap and how much of the dish FDC covered."""
    return {"computed_kcal": check["computed"]["calories"], "released_kcal": released["calories"],
            "gap": check["gap"], "label_gap": check["label_gap"], "coverage": check["coverage"]}


def write_items(ctx: Context, targets: dict[str, dict], values: dict[str, dict[str, float]], source: dict[str, str],
                checks: dict[str, dict[str, Any]], decisions: dict[str, Decision]) -> list[dict[str, Any]]:
    """The items of the dishes with values, in dish order; a kept decision for each."""
    items = []
    for did in sorted(values):
        dish = ctx.raw.dishes[did]
        decisions[did] = kept(did, TASK, source=source[did], values=values[did], checks=checks[did])
        items.append(task_item(f"nutrition-{did}", targets[did], dish_name=dish.name,
                               ingredients=list(dish.ingredients), portion=dish.portion, **values[did],
                               nutrition_source=source[did],
                               **({"usda_check": usda_flag(checks[did]["usda"], values[did])}
                                  if checks[did].get("usda", {}).get("flag") else {})))
    return items
