"""VQA items for synthetic dishes, one builder per category, each answer derived from the recipe: a dish known
exactly (what is on it, how many grams) makes answers and rationales facts, not opinions."""

from __future__ import annotations

import numpy as np

from synthetic.dish import Dish
from synthetic.nutrients import ingredient, nutrition_of

# What the photo shows that gives the cooking technique away, per plating layout.
CUES = {
    "fried_rice": ("米粒粒分明、表面油亮，蛋碎和小丁配料均匀分布，带有翻炒留下的焦黄色", "separate, glossy rice grains with evenly scattered egg bits and diced toppings and some browning from tossing"),
    "noodle_soup": ("面条浸在汤中，汤面有油光，配料铺在面上，没有煎炸的焦壳", "noodles sit in broth with a sheen of oil, toppings are laid on top and nothing has a fried crust"),
    "salad": ("生菜叶片鲜绿挺括、没有萎蔫，说明叶菜没有加热；配料切块后直接铺放", "crisp, bright lettuce with no wilting, so the leaves were never heated; toppings are cut and placed on top"),
    "curry": ("酱汁浓稠、表面油亮，配料被酱汁包裹，米饭单独盛放", "a thick glossy sauce coats the pieces, and the rice is served separately"),
    "rice_bowl": ("米饭呈白色颗粒状，配料整齐铺在米饭上，米饭本身未经炒制", "white, unseasoned rice grains with toppings arranged over them; the rice itself is not fried"),
    "pasta": ("面条表面均匀裹着酱汁，配料与面条混在一起", "the pasta is evenly coated in sauce with the toppings tossed through it"),
    "burrito_bowl": ("米饭、豆子和配料分区摆放，肉类有烤制的颜色", "rice, beans and toppings sit in separate sections and the protein shows grilled colour"),
}

Item = dict[str, str]


def cuisine_technique(dish: Dish, rng: np.random.Generator) -> Item:
    cue_zh, cue_en = CUES[dish.style.layout]
    return {
        "question": "根据图片，这道菜的主要烹饪方式是什么？",
        "question_en": "Judging from the photo, what is the main cooking technique of this dish?",
        "answer": f"{dish.style.technique_zh}。",
        "answer_en": f"{dish.style.technique_en[0].upper()}{dish.style.technique_en[1:]}.",
        "rationale": f"观察：{cue_zh}。这些特征对应{dish.style.technique_zh}。",
        "rationale_en": f"Observation: {cue_en}. These features point to {dish.style.technique_en}.",
    }


def dietary_suggestion(dish: Dish, rng: np.random.Generator) -> Item:
    """One of three closed-form questions: vegetarian, seafood allergy, low-carb (< 50 g carbs); the answer
    starts with its verdict (可以/不可以, Yes/No)."""
    kind = ("vegetarian", "seafood", "low_carb")[int(rng.integers(3))]
    opts = dish.options
    if kind == "vegetarian":
        animal = [o for o in opts.values() if {"meat", "seafood"} & o.tags]
        ok = not animal
        q = ("一位不吃肉和海鲜的素食者（可以吃蛋奶）能吃这道菜吗？",
             "Can a vegetarian who eats no meat or seafood (eggs and dairy are fine) eat this dish?")
        why = ((f"可见的{animal[0].zh}属于{'海鲜' if 'seafood' in animal[0].tags else '肉类'}", f"the visible {animal[0].en.lower()} is {'seafood' if 'seafood' in animal[0].tags else 'meat'}")
               if animal else ("图中的蛋白质来源不是肉类或海鲜", "the protein seen in the photo is neither meat nor seafood"))
    elif kind == "seafood":
        sea = [o for o in opts.values() if "seafood" in o.tags]
        ok = not sea
        q = ("对海鲜过敏的人可以吃这道菜吗？", "Is this dish safe for someone with a seafood allergy?")
        why = ((f"图中可以看到{sea[0].zh}", f"{sea[0].en.lower()} is visible in the photo") if sea
               else ("图中没有虾、鱼等海鲜", "no shrimp, fish or other seafood is visible"))
    else:
        carbs = dish.nutrition.carbohydrates
        ok = carbs < 50
        q = ("这道菜适合每餐碳水不超过50克的低碳水饮食吗？",
             "Does this dish fit a low-carb diet that allows at most 50 g of carbohydrates per meal?")
        starch = next((k for k in ("rice", "egg_noodles", "pasta") if k in dish.grams), None)
        base = (f"{ingredient(starch).name_zh}约{dish.grams[starch]:.0f}克", f"about {dish.grams[starch]:.0f} g of {ingredient(starch).name_en}") if starch else ("", "")
        why = (f"{base[0]}，整份约含{carbs:.0f}克碳水", f"{base[1]}; the serving holds about {carbs:.0f} g of carbohydrates")
    verdict_zh, verdict_en = ("可以", "Yes") if ok else ("不可以", "No")
    return {
        "question": q[0], "question_en": q[1],
        "answer": f"{verdict_zh}。{why[0]}。", "answer_en": f"{verdict_en}. {why[1][0].upper()}{why[1][1:]}.",
        "rationale": f"识别配料：{dish.name_zh}。{why[0]}，因此答案是{verdict_zh}。",
        "rationale_en": f"Ingredients identified: {dish.name_en}. {why[1][0].upper()}{why[1][1:]}, so the answer is {verdict_en.lower()}.",
    }


def counterfactual_reasoning(dish: Dish, rng: np.random.Generator) -> Item:
    """Halve the staple (rice, noodles, pasta or lettuce); the change is computed."""
    starch = next((k for k in ("rice", "egg_noodles", "pasta", "lettuce") if k in dish.grams), "rice")
    before = dish.nutrition.calories
    after = nutrition_of({**dish.grams, starch: dish.grams[starch] / 2}).calories
    name = ingredient(starch)
    delta = before - after
    return {
        "question": f"如果把这道菜里的{name.name_zh}减半，整份的热量大约会变化多少？",
        "question_en": f"If the {name.name_en} in this dish were halved, roughly how would the calories of the serving change?",
        "answer": f"减少约{delta:.0f}千卡（从约{before:.0f}千卡降到约{after:.0f}千卡）。",
        "answer_en": f"They would drop by about {delta:.0f} kcal (from about {before:.0f} to about {after:.0f} kcal).",
        "rationale": f"图中{name.name_zh}约占{dish.grams[starch]:.0f}克，每100克约{name.kcal:.0f}千卡；减半即少{dish.grams[starch] / 2:.0f}克，约{delta:.0f}千卡。",
        "rationale_en": f"The {name.name_en} is about {dish.grams[starch]:.0f} g at roughly {name.kcal:.0f} kcal per 100 g; halving removes {dish.grams[starch] / 2:.0f} g, about {delta:.0f} kcal.",
    }


def multi_image_analysis(dish: Dish, shrink: float, dropped: str) -> Item:
    """Reference (merchant) vs. reality (customer): smaller portion and a missing component."""
    opt = dish.options[dropped]
    grams = {k: g * shrink for k, g in dish.grams.items()}
    for key, g in opt.grams:
        grams[key] = max(0.0, grams.get(key, 0.0) - g * dish.size * shrink)
    before, after = dish.nutrition.calories, nutrition_of(grams).calories
    pct = round((1 - shrink) * 100)
    return {
        "question": "第一张是商家的宣传图，第二张是顾客收到的实物。两者在份量和配料上有什么差异？这对热量意味着什么？",
        "question_en": "The first image is the merchant's photo, the second what the customer received. How do portion and ingredients differ, and what does that mean for the calories?",
        "answer": f"实物份量比宣传图小约{pct}%，而且缺少了{opt.zh}；热量约从{before:.0f}千卡降到{after:.0f}千卡（少约{before - after:.0f}千卡）。",
        "answer_en": f"The delivered portion is about {pct}% smaller and the {opt.en.lower()} is missing; calories fall from about {before:.0f} to {after:.0f} kcal (about {before - after:.0f} kcal less).",
        "rationale": f"对比两图：实物堆积高度和覆盖面积都更小，{opt.zh}在第二张图中看不到。按配方计算，缩小份量并去掉{opt.zh}后热量约为{after:.0f}千卡。",
        "rationale_en": f"Comparing the two: the delivered food is lower and covers less of the vessel, and no {opt.en.lower()} is visible in the second image. From the recipe, the smaller portion without it is about {after:.0f} kcal.",
    }
