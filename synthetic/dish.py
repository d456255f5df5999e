"""A synthetic dish: its choices, exact nutrition from gram weights, and its 3-D plating."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synthetic import food, portable
from synthetic.nutrients import Nutrition, ingredient, nutrition_of
from synthetic.recipes import Option, Style
from synthetic.render import DishScene, View

NOODLE = (238, 206, 128)
RICE = (250, 248, 240)
VESSELS = [(250, 250, 247), (236, 232, 222), (60, 62, 68), (222, 232, 238), (246, 240, 226)]
RIMS = [None, (40, 70, 140), (160, 40, 36), None, (70, 110, 80)]


@dataclass(frozen=True)
class Dish:
    """One menu item of one merchant. `size` scales every gram (and the height of the pile)."""

    dish_id: str
    merchant_id: str
    cuisine: str
    style: Style
    choices: tuple[tuple[str, Option], ...]
    size: float
    seed: int
    vessel_index: int = 0

    @property
    def options(self) -> dict[str, Option]:
        return dict(self.choices)

    @property
    def name_zh(self) -> str:
        return self.style.name_zh.format(**{slot: o.zh for slot, o in self.choices})

    @property
    def name_en(self) -> str:
        return self.style.name_en.format(**{slot: o.en for slot, o in self.choices})

    @cached_property
    def grams(self) -> dict[str, float]:
        """Ingredient -> grams in one serving, rounded to whole grams as a kitchen scale would."""
        total: dict[str, float] = {}
        for key, g in self.style.base + tuple(kv for _, o in self.choices for kv in o.grams):
            total[key] = total.get(key, 0.0) + g
        return {k: float(round(v * self.size)) for k, v in total.items()}

    @property
    def nutrition(self) -> Nutrition:
        return nutrition_of(self.grams)

    @property
    def tags(self) -> frozenset[str]:
        return frozenset(t for _, o in self.choices for t in o.tags)

    def ingredient_lines(self) -> list[str]:
        """Bilingual ingredient list with grams, e.g. '虾仁 shrimp 80 g'."""
        return [f"{ingredient(k).name_zh} {ingredient(k).name_en} {g:g} g" for k, g in self.grams.items()]

    def portion(self) -> str:
        weight = sum(self.grams.values())
        unit_zh, unit_en = ("1碗", "1 bowl") if self.style.vessel == "bowl" else ("1份", "1 plate")
        soup = self.style.layout == "noodle_soup"
        liquid, liquid_en = ("（不含汤）", " (solids, broth not counted)") if soup else ("", "")
        return f"{unit_zh}，约{weight:.0f}克{liquid} / {unit_en}, about {weight:.0f} g{liquid_en}"


def _sector(rng: np.random.Generator, a0: float, a1: float, r0: float, r1: float):
    def place() -> tuple[float, float]:
        a = rng.uniform(a0, a1)
        r = math.sqrt(rng.uniform(r0 ** 2, r1 ** 2))
        return r * math.cos(a), r * math.sin(a)

    return place


def plate(dish: Dish, shrink: float = 1.0, drop: str | None = None, detail: float = 1.0) -> DishScene:
    """Build the dish's primitives for its layout (see recipes.Style.layout), once and seeded by the dish, so
    the merchant photo and every customer photo show the same dish. `shrink` < 1 and `drop` (a slot) give the
    'reality' of a disappointing order; `detail` < 1 draws fewer rice grains (small images, where single
    grains are barely visible)."""
    rng = np.random.default_rng(dish.seed)
    size = dish.size * shrink
    style, opts = dish.style, dish.options
    vi = dish.vessel_index % len(VESSELS)
    scene = DishScene(style.vessel, VESSELS[vi], rim_pattern=RIMS[vi])
    table_setting(scene, dish.cuisine, rng)
    pieces = [(slot, p) for slot, o in dish.choices if slot != drop for p in o.pieces]
    tint = next((o.tint for o in opts.values() if o.tint), None)
    r_pile = 0.62 * size ** (1 / 3)
    h_pile = 0.38 * size ** 0.9

    def scatter(slot_pieces, place, surface) -> None:
        for _, p in slot_pieces:
            food.topping(scene, p.kind, p.colour, max(1, round(p.count * size)), p.size, rng, place, surface)

    layout = style.layout
    if layout in ("fried_rice", "pasta", "salad"):
        mound = food.Mound(0.0, 0.0, r_pile * (1.1 if layout == "salad" else 1.0), h_pile * (0.75 if layout == "salad" else 1))
        if layout == "fried_rice":
            specks = [((250, 214, 92), 0.12), ((255, 236, 150), 0.05)]
            food.grains(scene, mound, tint or RICE, rng, int(1100 * size * detail), specks)
            food.topping(scene, "ring", (96, 170, 70), int(14 * size), 0.022, rng, lambda: mound.sample(rng), mound)
        elif layout == "pasta":
            food.sauce_pool(scene, tint or NOODLE, 0, 0, r_pile * 1.05, 0.035, rng)
            colour = tuple(int(0.55 * a + 0.45 * b) for a, b in zip(NOODLE, tint or NOODLE, strict=True))
            food.noodles(scene, mound, colour, rng, int(70 * size), r_pile * 0.95, width=0.024)
        else:
            greens = [(86, 150, 52), (120, 176, 66), (64, 122, 44), (150, 190, 84)]
            food.leaves(scene, mound, greens, rng, int(150 * size), size=0.19)
        scatter(pieces, lambda: mound.sample(rng, 0.8), mound)
    elif layout == "curry":
        mound = food.Mound(-0.38, 0.12, 0.44 * size ** (1 / 3), 0.24 * size ** 0.9)
        food.grains(scene, mound, RICE, rng, int(700 * size * detail))
        pool = food.Mound(0.34, -0.1, 0.5 * size ** (1 / 3), 0.04, floor=0.05)
        food.sauce_pool(scene, tint or (200, 120, 50), pool.x, pool.y, pool.radius, 0.05, rng)
        scatter(pieces, lambda: pool.sample(rng, 0.8), pool)
        if "dairy" in dish.tags:  # a swirl of cream on top
            t = np.linspace(0, 3 * math.pi, 30)
            pts = np.stack([pool.x + 0.05 * t * portable.cos(t) / 3, pool.y + 0.05 * t * portable.sin(t) / 3,
                            np.full_like(t, 0.07)], axis=1)
            scene.prims.append(food.Prim("line", pts, (248, 240, 226), width=0.018, lift=0.2))
    else:  # bowls
        h = scene.bowl_height
        if layout == "noodle_soup":
            surface = food.Mound(0, 0, 0.62 * size ** (1 / 3), 0.08 * size, floor=h * 0.78)
            food.sauce_pool(scene, tint or (196, 146, 84), 0, 0, 0.93, h * 0.78, rng)
            food.noodles(scene, surface, NOODLE, rng, int(55 * size), 0.6, width=0.026)
            scatter([p for p in pieces if p[0] != "extra"], _sector(rng, -1.3, 0.9, 0.25, 0.7), surface)
            scatter([p for p in pieces if p[0] == "extra"], _sector(rng, 1.9, 3.8, 0.25, 0.65), surface)
            food.topping(scene, "ring", (96, 170, 70), int(16 * size), 0.022, rng, _sector(rng, 0, 6.3, 0, 0.3), surface)
        else:
            rice = food.Mound(0, 0, 0.93, 0.22 * size, floor=h * (0.75 + 0.15 * size))
            food.grains(scene, rice, RICE, rng, int(1900 * size * detail))
            if layout == "burrito_bowl":
                food.topping(scene, "ball", (46, 34, 40), int(40 * size), 0.03, rng, _sector(rng, 2.4, 3.6, 0.3, 0.8), rice)
                scatter([p for p in pieces if p[0] == "protein"], _sector(rng, -0.9, 0.9, 0.2, 0.75), rice)
                scatter([p for p in pieces if p[0] != "protein"], _sector(rng, 3.8, 5.2, 0.2, 0.75), rice)
            else:
                scatter([p for p in pieces if p[0] == "topping"], _sector(rng, -1.4, 1.6, 0.15, 0.75), rice)
                scatter([p for p in pieces if p[0] != "topping"], _sector(rng, 2.0, 4.2, 0.2, 0.7), rice)
                food.topping(scene, "seed", (246, 236, 206), 40, 0.01, rng, _sector(rng, 0, 6.3, 0, 0.8), rice)
    return scene


NAPKINS = [(236, 230, 216), (196, 214, 226), (222, 200, 170), (214, 224, 204)]


def _along(x: float, y0: float, y1: float, z: float = 0.01) -> np.ndarray:
    """A straight piece of cutlery lying on the table, from y0 to y1 at x."""
    return np.array([[x, y0, z], [x, y1, z]])


def table_setting(scene: DishScene, cuisine: str, rng: np.random.Generator) -> None:
    """A napkin and the cutlery the cuisine is eaten with, to the right of the vessel: cues that a
    photo shows a meal, and a fixed landmark that moves consistently between camera angles."""
    x0 = 1.3
    napkin = rng.choice(len(NAPKINS))
    corners = np.array([[x0 - 0.22, -0.95, 0.0], [x0 + 0.28, -0.9, 0.0], [x0 + 0.26, 0.95, 0.0], [x0 - 0.2, 0.9, 0.0]])
    scene.props.append(food.Prim("poly", corners, NAPKINS[int(napkin)], outline=(180, 172, 160), lift=-10))
    if cuisine in ("chinese", "japanese", "asian"):
        wood = (96, 58, 34) if cuisine == "chinese" else (150, 104, 62)
        for dx in (-0.05, 0.07):
            scene.props.append(food.Prim("line", _along(x0 + dx, -0.8, 0.85), wood, outline=(60, 36, 20), width=0.022))
    else:
        steel = (196, 198, 204)
        scene.props.append(food.Prim("line", _along(x0 - 0.02, -0.85, 0.25), steel, outline=(120, 122, 128), width=0.03))
        if cuisine == "indian":  # a spoon: handle and an oval bowl
            bowl = np.array([[x0 - 0.02 + 0.09 * portable.cos(t), 0.42 + 0.17 * portable.sin(t), 0.012]
                             for t in np.linspace(0, 2 * np.pi, 20, endpoint=False)])
            scene.props.append(food.Prim("poly", bowl, steel, outline=(120, 122, 128)))
        else:  # a fork: handle and four tines
            for dx in (-0.06, -0.02, 0.02, 0.06):
                scene.props.append(food.Prim("line", _along(x0 - 0.02 + dx, 0.25, 0.55), steel, width=0.012))
            head = np.array([[x0 - 0.09, 0.22, 0.01], [x0 + 0.05, 0.22, 0.01], [x0 + 0.05, 0.32, 0.01],
                             [x0 - 0.09, 0.32, 0.01]])
            scene.props.append(food.Prim("poly", head, steel))
    # Turn the setting into the lower-right corner, the part of a square photo the round vessel leaves empty.
    turn = np.radians(-42)
    rot = np.array([[portable.cos(turn), -portable.sin(turn), 0], [portable.sin(turn), portable.cos(turn), 0], [0, 0, 1]])
    for prop in scene.props:
        prop.points = prop.points @ rot.T


def reference_view(dish: Dish) -> View:
    """The merchant's photo: clean light, whole dish, plain studio table, three-quarter angle."""
    table = ("marble", "slate", "wood")[int(dish.merchant_id[-1], 16) % 3] if dish.merchant_id else "marble"
    return View(elevation=62, zoom=1.02, brightness=1.06, warmth=0.1, table=table, saturation=1.15)


def user_views(dish: Dish, n: int, rng: np.random.Generator) -> list[View]:
    """Customer photos: a side view (pile height), a top-down or cropped shot, dim or warm light, blur,
    another table. The first is always the side view, because it carries information the
    reference shot lacks (how high the food is piled)."""
    views = []
    tables = ["wood", "cloth", "slate", "marble"]
    for i in range(n):
        if i == 0:
            elev, zoom, off = rng.uniform(22, 30), rng.uniform(0.95, 1.1), (0.0, rng.uniform(0.0, 0.08))
        elif i % 3 == 1:
            elev, zoom, off = rng.uniform(82, 90), rng.uniform(1.0, 1.15), (rng.uniform(-0.05, 0.05), 0.0)
        else:
            elev, zoom = rng.uniform(40, 70), rng.uniform(1.3, 1.7)
            off = (rng.uniform(-0.18, 0.18), rng.uniform(-0.1, 0.12))
        views.append(View(elevation=float(elev), zoom=float(zoom), offset=(float(off[0]), float(off[1])),
                          yaw=float(rng.uniform(-60, 60)), brightness=float(rng.uniform(0.62, 0.98)),
                          warmth=float(rng.uniform(-0.3, 0.9)), blur=float(rng.choice([0, 0, 0.8, 1.6])),
                          table=tables[int(rng.integers(len(tables)))], noise=float(rng.uniform(0, 5)),
                          saturation=float(rng.uniform(0.8, 1.05))))
    return views
