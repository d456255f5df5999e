"""Food pieces in world space (rice mounds, noodles, leaves, sauce pools, toppings), shaped and coloured to
read as food at a glance, placed by the dish's own random generator, so every camera sees the same dish."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from synthetic import portable
from synthetic.render import RGB, DishScene, Prim, _shade

Height = Callable[[float, float], float]


@dataclass(frozen=True)
class Mound:
    """A dome of food: centre, radius and height (world units). Height grows with the portion."""

    x: float
    y: float
    radius: float
    height: float
    floor: float = 0.03

    def __call__(self, x: float, y: float) -> float:
        d2 = ((x - self.x) ** 2 + (y - self.y) ** 2) / self.radius ** 2
        return self.floor + (self.height * (1 - d2) ** 0.8 if d2 < 1 else 0.0)

    def shade(self, x: float, y: float) -> float:
        """Lambert-ish factor: the side facing the upper-left light is brighter."""
        dx, dy = (x - self.x) / self.radius, (y - self.y) / self.radius
        return 0.88 + 0.22 * (-dx * 0.6 + dy * 0.6) * min(1.0, self.height * 3)

    def sample(self, rng: np.random.Generator, frac: float = 0.85) -> tuple[float, float]:
        r = self.radius * frac * math.sqrt(rng.uniform())
        a = rng.uniform(0, 2 * math.pi)
        return self.x + r * math.cos(a), self.y + r * math.sin(a)


def _jitter(colour: RGB, rng: np.random.Generator, amount: float = 0.08) -> RGB:
    return _shade(colour, 1 + rng.uniform(-amount, amount))


def _flat_shape(cx: float, cy: float, z: float, rx: float, ry: float, angle: float, n: int = 12,
                pinch: float = 0.0, surface: Height | None = None) -> np.ndarray:
    """Outline of a flat piece lying on the food (ellipse; `pinch` > 0 gives pointed leaf tips)."""
    t = np.linspace(0, 2 * math.pi, n, endpoint=False)
    px = rx * portable.cos(t)
    py = ry * portable.sin(t) * (1 - pinch * np.abs(portable.cos(t)) ** 2)
    ca, sa = math.cos(angle), math.sin(angle)
    xs = cx + px * ca - py * sa
    ys = cy + px * sa + py * ca
    zs = np.array([surface(x, y) if surface else z for x, y in zip(xs, ys, strict=True)]) + (z if surface else 0)
    return np.stack([xs, ys, zs], axis=1)


def _blob(x: float, y: float, z: float, fill: RGB, width: float, **style: Any) -> Prim:
    """A round piece (a grain, a pea, a bud) centred at (x, y, z), `width` its radius."""
    return Prim("blob", np.array([[x, y, z]]), fill, width=width, **style)


def sauce_pool(scene: DishScene, colour: RGB, cx: float, cy: float, radius: float, z: float,
               rng: np.random.Generator) -> None:
    """A glossy pool of sauce or broth with an irregular edge and a light reflection."""
    t = np.linspace(0, 2 * math.pi, 40, endpoint=False)
    r = radius * (1 + 0.06 * portable.sin(t * 3 + rng.uniform(0, 6)) + 0.03 * portable.sin(t * 7))
    pts = np.stack([cx + r * portable.cos(t), cy + r * portable.sin(t), np.full_like(t, z)], axis=1)
    scene.prims.append(Prim("poly", pts, colour, outline=_shade(colour, 0.8), lift=-5))
    glare = _flat_shape(cx - radius * 0.3, cy + radius * 0.35, z + 0.001, radius * 0.22, radius * 0.07, 0.3)
    scene.prims.append(Prim("poly", glare, _shade(colour, 1.25), lift=-4.9))


def grains(scene: DishScene, mound: Mound, colour: RGB, rng: np.random.Generator, count: int,
           specks: list[tuple[RGB, float]] = ()) -> None:
    """Rice: a shaded underlay plus hundreds of small grains; `specks` tints some grains (egg, soy).
    Positions, heights and colours are drawn for all grains at once (numpy): a plate holds ~1,000."""
    base = np.array(colour, dtype=float)
    # The body of the pile: stacked discs shrinking with height, a smooth dome from any camera, so no
    # plate shows through between grains and the side view has a clean silhouette.
    layers = 7
    for k in range(layers):
        h = mound.height * k / layers
        r = mound.radius * 0.97 * math.sqrt(max(0.0, 1 - (k / layers) ** (1 / 0.8)))
        ring = _flat_shape(mound.x, mound.y, mound.floor + h, r, r, 0.0, n=36)
        shade = tuple(int(v) for v in np.clip(base * (0.86 + 0.1 * k / layers), 0, 255))
        scene.prims.append(Prim("poly", ring, shade, lift=-1.0 + k * 0.01))
    dist = mound.radius * 0.97 * np.sqrt(rng.uniform(size=count))
    a = rng.uniform(0, 2 * math.pi, count)
    x, y = mound.x + dist * portable.cos(a), mound.y + dist * portable.sin(a)
    d2 = ((x - mound.x) ** 2 + (y - mound.y) ** 2) / mound.radius ** 2
    z = mound.floor + mound.height * portable.power(np.clip(1 - d2, 0, None), 0.8)
    light = 0.88 + 0.22 * (-(x - mound.x) * 0.6 + (y - mound.y) * 0.6) / mound.radius * min(1.0, mound.height * 3)
    colours = np.tile(base, (count, 1))
    roll = rng.uniform(size=count)
    threshold = 0.0
    for speck, p in specks:
        hit = (roll >= threshold) & (roll < threshold + p)
        colours[hit] = speck
        threshold += p
    colours *= (light * rng.uniform(0.93, 1.07, count))[:, None]
    colours = np.clip(colours, 0, 255).astype(int)
    outlines = (colours * 0.93).astype(int)
    widths = rng.uniform(0.02, 0.027, count)
    aspects = rng.uniform(0.45, 0.65, count)
    points = np.stack([x, y, z], axis=1)[:, None, :]
    for i in range(count):
        scene.prims.append(Prim("blob", points[i], tuple(colours[i].tolist()), outline=tuple(outlines[i].tolist()),
                                width=float(widths[i]), aspect=float(aspects[i])))


def noodles(scene: DishScene, surface: Height, colour: RGB, rng: np.random.Generator, count: int,
            radius: float, width: float = 0.028, cx: float = 0.0, cy: float = 0.0) -> None:
    """Long curving strands that follow the surface (egg noodles in broth, pasta on a plate)."""
    for _ in range(count):
        a = rng.uniform(0, 2 * math.pi)
        r0 = radius * math.sqrt(rng.uniform()) * 0.9
        x, y = cx + r0 * math.cos(a), cy + r0 * math.sin(a)
        heading = rng.uniform(0, 2 * math.pi)
        turn = rng.normal(0, 0.35)
        pts = []
        for _ in range(14):
            pts.append((x, y, surface(x, y) + 0.012))
            heading += turn + rng.normal(0, 0.25)
            x += 0.06 * math.cos(heading)
            y += 0.06 * math.sin(heading)
            if (x - cx) ** 2 + (y - cy) ** 2 > radius ** 2:
                heading += math.pi * 0.8
        c = _jitter(colour, rng, 0.08)
        scene.prims.append(Prim("line", np.array(pts), c, outline=_shade(c, 0.75), width=width))


def leaves(scene: DishScene, mound: Mound, colours: list[RGB], rng: np.random.Generator, count: int,
           size: float = 0.16) -> None:
    """Torn salad leaves: pointed ellipses in several greens with a pale midrib."""
    for _ in range(count):
        x, y = mound.sample(rng, 0.95)
        c = _shade(_jitter(colours[int(rng.integers(len(colours)))], rng, 0.1), mound.shade(x, y))
        ang = rng.uniform(0, math.pi)
        rx = size * rng.uniform(0.7, 1.2)
        pts = _flat_shape(x, y, mound(x, y), rx, rx * 0.45, ang, n=14, pinch=0.6)
        scene.prims.append(Prim("poly", pts, c, outline=_shade(c, 0.7)))
        rib = np.array([[x - rx * 0.8 * math.cos(ang), y - rx * 0.8 * math.sin(ang), pts[0, 2]],
                        [x + rx * 0.8 * math.cos(ang), y + rx * 0.8 * math.sin(ang), pts[0, 2]]])
        scene.prims.append(Prim("line", rib, _shade(c, 1.3), width=0.006, lift=0.001))


def topping(scene: DishScene, kind: str, colour: RGB, count: int, size: float, rng: np.random.Generator,
            place: Callable[[], tuple[float, float]], surface: Height) -> None:
    """Scatter `count` pieces of one ingredient; `kind` picks a shape that reads as that food. Pieces get a
    depth bias (`lift`) over the rice, leaves or noodles they rest on: they sit on top, and a topping buried
    under its own base would make two look-alike dishes indistinguishable."""
    start = len(scene.prims)
    add = scene.prims.append
    for _ in range(count):
        x, y = place()
        z = surface(x, y)
        c = _jitter(colour, rng)
        s = size * rng.uniform(0.8, 1.2)
        ang = rng.uniform(0, math.pi)
        if kind == "slice":  # meat or fish slice: a wide flat piece with a darker edge
            add(Prim("poly", _flat_shape(x, y, z + 0.02, s, s * 0.55, ang, n=14), c, outline=_shade(c, 0.65), lift=0.05))
            add(Prim("poly", _flat_shape(x, y, z + 0.021, s * 0.8, s * 0.08, ang, n=8), _shade(c, 1.18), lift=0.051))
        elif kind == "cube":  # diced chicken, tofu: a top face and a darker visible side
            top = _flat_shape(x, y, z + s * 0.8, s * 0.75, s * 0.75, ang, n=4)
            base = top.copy()
            base[:, 2] = z
            for i in range(4):
                j = (i + 1) % 4
                side = np.array([top[i], top[j], base[j], base[i]])
                add(Prim("poly", side, _shade(c, 0.7), outline=_shade(c, 0.55), lift=0.02))
            add(Prim("poly", top, c, outline=_shade(c, 0.75), lift=0.06))
        elif kind == "shrimp":  # a pink C-shaped curl with white bands
            t = np.linspace(0.2, 1.75 * math.pi * 0.6, 9)
            pts = np.stack([x + s * portable.cos(t + ang), y + s * portable.sin(t + ang), np.full_like(t, z + 0.03)], axis=1)
            add(Prim("line", pts, c, outline=_shade(c, 0.7), width=s * 0.7, lift=0.05))
            add(Prim("line", pts[::2], (250, 226, 210), width=s * 0.15, lift=0.06))
        elif kind == "ball":  # peas, chickpeas, beans
            add(_blob(x, y, z + s, c, s, outline=_shade(c, 0.7), highlight=True, lift=0.03))
        elif kind == "floret":  # broccoli / cauliflower: a stem and a cluster of buds
            add(Prim("line", np.array([[x, y, z], [x, y, z + s * 1.2]]), _shade(c, 1.3), width=s * 0.5, lift=0.02))
            for k in range(5):
                a = k * 2 * math.pi / 5 + ang
                bx, by = x + s * 0.55 * math.cos(a), y + s * 0.55 * math.sin(a)
                add(_blob(bx, by, z + s * 1.4, _jitter(c, rng, 0.12), s * 0.6, outline=_shade(c, 0.6), lift=0.08))
            add(_blob(x, y, z + s * 1.7, c, s * 0.6, outline=_shade(c, 0.6), highlight=True, lift=0.09))
        elif kind == "wedge":  # tomato / avocado / egg wedge: half-moon with a paler core
            pts = _flat_shape(x, y, z + 0.03, s, s * 0.45, ang, n=12)
            pts[6:, :2] = pts[6:, :2] * 0.3 + np.array([x, y]) * 0.7
            add(Prim("poly", pts, c, outline=_shade(c, 0.7), lift=0.05))
            add(Prim("poly", _flat_shape(x, y, z + 0.031, s * 0.55, s * 0.18, ang, n=8), _shade(c, 1.25), lift=0.051))
        elif kind == "egg_half":  # soft-boiled egg half: white oval, orange yolk
            add(_blob(x, y, z + 0.03, (246, 242, 232), s, outline=(210, 200, 186), aspect=0.75, lift=0.06))
            add(_blob(x, y, z + 0.04, c, s * 0.5, aspect=0.75, highlight=True, lift=0.07))
        elif kind == "ring":  # scallion rings
            add(_blob(x, y, z + 0.02, c, s, outline=_shade(c, 0.6), aspect=0.6, lift=0.1))
            add(_blob(x, y, z + 0.021, _shade(c, 1.4), s * 0.45, aspect=0.6, lift=0.11))
        elif kind == "seed":  # sesame seeds: tiny pale ovals
            add(_blob(x, y, z + 0.02, c, s, aspect=0.5, lift=0.12))
        elif kind == "strip":  # pepper / carrot strips
            dx, dy = s * math.cos(ang), s * math.sin(ang)
            pts = np.array([[x - dx, y - dy, z + 0.02], [x + dx, y + dy, z + 0.03]])
            add(Prim("line", pts, c, outline=_shade(c, 0.7), width=s * 0.3, lift=0.04))
        elif kind == "leaf":  # spinach / bok choy leaves lying on top
            pts = _flat_shape(x, y, z + 0.02, s, s * 0.5, ang, n=14, pinch=0.5)
            add(Prim("poly", pts, c, outline=_shade(c, 0.65), lift=0.03))
        elif kind == "shaving":  # cheese shavings: thin pale irregular flakes
            add(Prim("poly", _flat_shape(x, y, z + 0.03, s, s * 0.3, ang, n=6), c, outline=_shade(c, 0.85), lift=0.1))
        elif kind == "mushroom":  # sliced mushroom: pale stem under a brown cap (a half disc)
            stem = _flat_shape(x, y - s * 0.25, z + 0.025, s * 0.22, s * 0.35, 0.0, n=8)
            add(Prim("poly", stem, (232, 222, 202), outline=(190, 176, 150), lift=0.05))
            t = np.linspace(0, math.pi, 10)
            cap = np.stack([x + s * 0.6 * portable.cos(t), y + s * 0.45 * portable.sin(t), np.full_like(t, z + 0.026)], axis=1)
            add(Prim("poly", cap, c, outline=_shade(c, 0.7), lift=0.051))
        elif kind == "chunk":  # stew pieces half sunk in sauce: rounded irregular blobs
            add(_blob(x, y, z + s * 0.4, c, s, outline=_shade(c, 0.6), aspect=0.8, highlight=True, lift=0.03))
        else:
            raise ValueError(f"unknown topping kind {kind!r}")
    for prim in scene.prims[start:]:
        prim.lift += 0.06
