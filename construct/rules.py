"""The free rules a dish must pass before any model is asked about it or its photos: a reference photo, a
detailed ingredient list (not menu marketing), enough user photos. The photo stage applies them first (12.5%
of the photo calls went to dishes that fail one), the dish stage states them (construct/dishes.py)."""

from __future__ import annotations

from construct.lexicon import QUANTITY  # the one reader of amounts in an entry

# Words of menu marketing, not of a recipe: an entry made of these names no ingredient.
MARKETING = ("秘制", "精选", "美味", "可口", "独家", "招牌", "优质", "特色", "匠心", "好吃", "鲜香",
             "delicious", "secret", "signature", "special", "premium", "tasty", "homemade", "chef's")


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


def free_dish_rule(has_reference: bool, reference_ok: bool, user_photos: int, ingredients: tuple[str, ...],
                   min_user_photos: int) -> str | None:
    """Why a dish is out (or None), in this order: its reference photo rejected (without it no user photo
    can be matched), fewer than `min_user_photos` user photos, no reference photo at all, a vague
    ingredient list. The photo stage asks it before any call, with the photos the rules let through; the
    dish stage with the photos the checks kept.

    >>> free_dish_rule(True, True, 2, ("米饭 270克", "鸡蛋 52克", "虾仁 80克"), 3)
    'too_few_user_photos'
    >>> free_dish_rule(True, True, 5, ("secret sauce",), 3)
    'vague_ingredients'
    >>> free_dish_rule(True, False, 0, (), 3)
    'no_good_reference'
    """
    if has_reference and not reference_ok:
        return "no_good_reference"
    if user_photos < min_user_photos:
        return "too_few_user_photos"
    if not has_reference:
        return "no_reference_photo"
    if not is_detailed(ingredients)[0]:
        return "vague_ingredients"
    return None
