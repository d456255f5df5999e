"""Menus of the synthetic restaurants: menu categories, the visible choices that tell dishes apart,
and the gram weights that make each dish's nutrition exact."""

from __future__ import annotations

from dataclasses import dataclass

from synthetic.render import RGB


@dataclass(frozen=True)
class Piece:
    """How an ingredient looks on the plate: a shape `kind` (see food.topping), colour, count, size."""

    kind: str
    colour: RGB
    count: int
    size: float


@dataclass(frozen=True)
class Option:
    """One choice for a slot: name fragments, gram weights, and its look."""

    key: str
    zh: str
    en: str
    grams: tuple[tuple[str, float], ...]
    pieces: tuple[Piece, ...] = ()
    tint: RGB | None = None  # recolours the base (soy-sauce rice) or the liquid (tomato broth)
    tags: frozenset[str] = frozenset()  # facts the VQA items reason about: meat, seafood, fried...


@dataclass(frozen=True)
class Style:
    """A menu category and how its dishes are plated: a few slots (sauce, protein, side...), each dish picking
    one option per slot and named from those choices, so two dishes of one category differ exactly in what can
    be seen on the plate (the hard negatives of the classification task)."""

    key: str
    category_zh: str
    category_en: str
    layout: str  # fried_rice | noodle_soup | salad | curry | rice_bowl | pasta | burrito_bowl
    vessel: str  # plate | bowl
    base: tuple[tuple[str, float], ...]
    base_zh: str
    base_en: str
    slots: tuple[tuple[str, tuple[Option, ...]], ...]
    name_zh: str
    name_en: str
    technique_zh: str
    technique_en: str


def _o(key: str, zh: str, en: str, grams: dict[str, float], *pieces: Piece, tint: RGB | None = None,
       tags: str = "") -> Option:
    return Option(key, zh, en, tuple(grams.items()), tuple(pieces), tint, frozenset(tags.split()))


SHRIMP = Piece("shrimp", (242, 140, 110), 7, 0.07)
TOFU_CUBE = Piece("cube", (240, 228, 196), 8, 0.08)
BROCCOLI = Piece("floret", (62, 124, 48), 5, 0.07)

STYLES: dict[str, Style] = {
    "fried_rice": Style(
        "fried_rice", "炒饭", "fried rice", "fried_rice", "plate",
        (("rice", 260), ("egg", 50), ("cooking_oil", 12), ("scallion", 5)), "炒饭", "Fried Rice",
        (
            ("sauce", (
                _o("golden", "黄金", "Golden", {}, tint=(238, 206, 118), tags="egg"),
                _o("soy", "酱油", "Soy Sauce", {"soy_sauce": 15}, tint=(178, 118, 60), tags="egg soy"),
            )),
            ("protein", (
                _o("shrimp", "虾仁", "Shrimp", {"shrimp": 80}, SHRIMP, tags="seafood"),
                _o("chicken", "鸡丁", "Diced Chicken", {"chicken": 90}, Piece("cube", (236, 212, 176), 9, 0.07),
                   tags="meat"),
                _o("beef", "牛肉", "Beef", {"beef": 80}, Piece("slice", (122, 68, 46), 7, 0.11), tags="meat"),
                _o("tofu", "豆腐", "Tofu", {"tofu": 100}, TOFU_CUBE, tags="soy"),
            )),
            ("veg", (
                _o("peas", "青豆", "Peas", {"peas": 40}, Piece("ball", (112, 172, 62), 26, 0.024)),
                _o("carrot", "胡萝卜", "Carrot", {"carrot": 40}, Piece("cube", (236, 120, 40), 16, 0.028)),
                _o("broccoli", "西兰花", "Broccoli", {"broccoli": 60}, BROCCOLI),
            )),
        ),
        "{protein}{veg}{sauce}炒饭", "{sauce} Fried Rice with {protein} and {veg}",
        "大火快炒（锅气）", "high-heat wok stir-frying",
    ),
    "noodle_soup": Style(
        "noodle_soup", "汤面", "noodle soups", "noodle_soup", "bowl",
        (("egg_noodles", 260), ("sesame_oil", 5), ("scallion", 6)), "汤面", "Noodle Soup",
        (
            ("broth", (
                _o("clear", "清汤", "Clear Soy Broth", {"soy_sauce": 20}, tint=(196, 146, 84), tags="soy"),
                _o("tomato", "番茄", "Tomato Broth", {"tomato_puree": 120, "tomato": 60},
                   Piece("wedge", (214, 52, 40), 4, 0.09), tint=(214, 96, 52)),
            )),
            ("protein", (
                _o("beef", "牛肉", "Beef", {"beef": 100}, Piece("slice", (126, 70, 48), 5, 0.14), tags="meat"),
                _o("chicken", "鸡肉", "Chicken", {"chicken": 100}, Piece("slice", (232, 206, 170), 5, 0.13),
                   tags="meat"),
                _o("shrimp", "虾仁", "Shrimp", {"shrimp": 90}, Piece("shrimp", (242, 140, 110), 6, 0.08),
                   tags="seafood"),
                _o("tofu", "豆腐", "Tofu", {"tofu": 120}, Piece("cube", (240, 228, 196), 6, 0.09), tags="soy"),
            )),
            ("extra", (
                _o("egg", "溏心蛋", "Soft Egg", {"egg": 50}, Piece("egg_half", (242, 150, 36), 2, 0.11), tags="egg"),
                _o("greens", "菠菜", "Spinach", {"spinach": 60}, Piece("leaf", (46, 118, 42), 5, 0.1)),
                _o("mushroom", "蘑菇", "Mushrooms", {"mushroom": 60}, Piece("mushroom", (150, 116, 84), 5, 0.14)),
            )),
        ),
        "{broth}{protein}{extra}面", "{protein} Noodle Soup in {broth} with {extra}",
        "煮制（面条与汤底分开煮）", "boiling (noodles and broth cooked separately)",
    ),
    "salad": Style(
        "salad", "沙拉", "salads", "salad", "plate",
        (("lettuce", 120), ("olive_oil", 12)), "沙拉", "Salad",
        (
            ("protein", (
                _o("salmon", "三文鱼", "Salmon", {"salmon": 90}, Piece("slice", (242, 132, 96), 4, 0.13),
                   tags="seafood"),
                _o("chicken", "烤鸡胸", "Grilled Chicken", {"chicken": 100},
                   Piece("slice", (214, 172, 122), 5, 0.12), tags="meat"),
                _o("egg", "鸡蛋", "Egg", {"egg": 100}, Piece("egg_half", (250, 196, 60), 4, 0.1), tags="egg"),
                _o("chickpea", "鹰嘴豆", "Chickpea", {"chickpeas": 80}, Piece("ball", (214, 174, 104), 22, 0.035)),
            )),
            ("extra", (
                _o("avocado", "牛油果", "Avocado", {"avocado": 60}, Piece("wedge", (156, 192, 70), 5, 0.15)),
                _o("tomato", "番茄", "Tomato", {"tomato": 80}, Piece("wedge", (218, 48, 38), 6, 0.12)),
                _o("cucumber", "黄瓜", "Cucumber", {"cucumber": 70}, Piece("chunk", (176, 206, 120), 8, 0.05)),
                _o("parmesan", "帕玛森", "Parmesan", {"parmesan": 15}, Piece("shaving", (246, 234, 196), 10, 0.07),
                   tags="dairy"),
            )),
        ),
        "{extra}{protein}沙拉", "{protein} and {extra} Salad",
        "冷拌组装（生菜不加热，配料冷放）", "cold assembly: raw leaves dressed with oil, toppings added cold",
    ),
    "curry": Style(
        "curry", "咖喱饭", "curries", "curry", "plate",
        (("rice", 200), ("cooking_oil", 10)), "咖喱饭", "Curry with Rice",
        (
            ("sauce", (
                _o("masala", "奶油番茄", "Tomato-Cream", {"tomato_puree": 120, "heavy_cream": 30, "butter": 10},
                   tint=(212, 104, 46), tags="dairy"),
                _o("saag", "菠菜", "Spinach", {"spinach": 120, "heavy_cream": 20}, tint=(74, 112, 40), tags="dairy"),
                _o("korma", "酸奶", "Yogurt", {"yogurt": 100, "heavy_cream": 30}, tint=(228, 196, 124), tags="dairy"),
            )),
            ("protein", (
                _o("chicken", "鸡肉", "Chicken", {"chicken": 120}, Piece("chunk", (222, 150, 92), 7, 0.075),
                   tags="meat"),
                _o("chickpea", "鹰嘴豆", "Chickpea", {"chickpeas": 120}, Piece("ball", (212, 166, 92), 20, 0.036)),
                _o("potato", "土豆", "Potato", {"potato": 150}, Piece("cube", (232, 202, 112), 7, 0.065)),
                _o("cauliflower", "花菜", "Cauliflower", {"cauliflower": 120},
                   Piece("floret", (240, 234, 212), 5, 0.07)),
            )),
        ),
        "{sauce}{protein}咖喱饭", "{protein} {sauce} Curry with Rice",
        "慢火炖煮（酱汁收浓）", "slow simmering until the sauce thickens",
    ),
    "rice_bowl": Style(
        "rice_bowl", "丼饭", "rice bowls", "rice_bowl", "bowl",
        (("rice", 250), ("sesame_seeds", 3)), "丼", "Rice Bowl",
        (
            ("topping", (
                _o("salmon", "三文鱼", "Salmon", {"salmon": 100}, Piece("slice", (246, 128, 88), 6, 0.14),
                   tags="seafood raw"),
                _o("beef", "肥牛", "Beef", {"beef": 100, "soy_sauce": 10}, Piece("slice", (120, 70, 46), 7, 0.14),
                   tags="meat soy"),
                _o("teriyaki", "照烧鸡", "Teriyaki Chicken", {"chicken_thigh": 110, "soy_sauce": 10},
                   Piece("slice", (166, 96, 46), 6, 0.13), tags="meat soy"),
                _o("tofu", "豆腐", "Tofu", {"tofu": 120}, Piece("cube", (240, 228, 196), 9, 0.095), tags="soy"),
            )),
            ("side", (
                _o("egg", "温泉蛋", "Soft Egg", {"egg": 50}, Piece("egg_half", (244, 160, 40), 2, 0.11), tags="egg"),
                _o("avocado", "牛油果", "Avocado", {"avocado": 60}, Piece("wedge", (156, 192, 70), 4, 0.15)),
                _o("scallion", "葱花", "Scallion", {"scallion": 12}, Piece("ring", (96, 170, 70), 30, 0.024)),
                _o("cucumber", "黄瓜", "Cucumber", {"cucumber": 60}, Piece("chunk", (176, 206, 120), 7, 0.05)),
            )),
        ),
        "{topping}{side}丼", "{topping} Rice Bowl with {side}",
        "米饭蒸熟后铺放配料", "steamed rice topped with prepared toppings",
    ),
    "pasta": Style(
        "pasta", "意面", "pasta", "pasta", "plate",
        (("pasta", 100), ("olive_oil", 10)), "意面", "Pasta",
        (
            ("sauce", (
                _o("tomato", "番茄", "Tomato", {"tomato_puree": 120}, tint=(222, 112, 62)),
                _o("cream", "奶油", "Cream", {"heavy_cream": 50, "parmesan": 10}, tint=(240, 222, 170), tags="dairy"),
            )),
            ("protein", (
                _o("shrimp", "鲜虾", "Shrimp", {"shrimp": 90}, SHRIMP, tags="seafood"),
                _o("chicken", "鸡肉", "Chicken", {"chicken": 100}, Piece("slice", (226, 196, 150), 5, 0.1), tags="meat"),
                _o("beef", "牛肉末", "Ground Beef", {"beef_mince": 90}, Piece("ball", (110, 64, 40), 30, 0.03),
                   tags="meat"),
                _o("mushroom", "蘑菇", "Mushroom", {"mushroom": 80}, Piece("mushroom", (150, 116, 84), 7, 0.14)),
            )),
            ("green", (
                _o("spinach", "菠菜", "Spinach", {"spinach": 40}, Piece("leaf", (46, 118, 42), 6, 0.08)),
                _o("broccoli", "西兰花", "Broccoli", {"broccoli": 60}, BROCCOLI),
                _o("pepper", "红椒", "Red Pepper", {"red_pepper": 50}, Piece("strip", (214, 40, 34), 10, 0.08)),
            )),
        ),
        "{protein}{green}{sauce}意面", "{sauce} Pasta with {protein} and {green}",
        "煮面后与酱汁翻拌", "boiled pasta tossed with a pan sauce",
    ),
    "burrito_bowl": Style(
        "burrito_bowl", "墨西哥饭碗", "burrito bowls", "burrito_bowl", "bowl",
        (("rice", 180), ("black_beans", 80), ("olive_oil", 8)), "墨西哥饭碗", "Burrito Bowl",
        (
            ("protein", (
                _o("chicken", "烤鸡", "Grilled Chicken", {"chicken": 110}, Piece("cube", (214, 160, 100), 8, 0.06),
                   tags="meat"),
                _o("beef", "牛肉", "Beef", {"beef": 100}, Piece("slice", (120, 70, 46), 6, 0.11), tags="meat"),
                _o("shrimp", "鲜虾", "Shrimp", {"shrimp": 90}, SHRIMP, tags="seafood"),
                _o("tofu", "豆腐", "Tofu", {"tofu": 110}, TOFU_CUBE, tags="soy"),
            )),
            ("topping", (
                _o("avocado", "牛油果", "Avocado", {"avocado": 60}, Piece("wedge", (156, 192, 70), 5, 0.14)),
                _o("tomato", "番茄", "Tomato", {"tomato": 70}, Piece("chunk", (218, 48, 38), 10, 0.045)),
                _o("pepper", "红椒", "Red Pepper", {"red_pepper": 60}, Piece("strip", (214, 40, 34), 10, 0.08)),
            )),
        ),
        "{protein}{topping}墨西哥饭碗", "{protein} Burrito Bowl with {topping}",
        "烤制配料铺在米饭和豆子上", "grilled toppings over rice and beans",
    ),
}

# Which menu categories a merchant of each cuisine serves (the paper's cuisine labels).
CUISINE_STYLES: dict[str, tuple[str, ...]] = {
    "chinese": ("fried_rice", "noodle_soup"),
    "western": ("salad", "pasta"),
    "worldwide": ("pasta", "salad"),
    "asian": ("rice_bowl", "noodle_soup"),
    "japanese": ("rice_bowl", "noodle_soup"),
    "latin_american": ("burrito_bowl",),
    "indian": ("curry",),
}
