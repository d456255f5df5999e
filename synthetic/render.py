"""Renders a synthetic dish (a list of 3-D food primitives) from a camera view with PIL + numpy."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageEnhance, ImageFilter

from synthetic import portable

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class View:
    """One photograph of a dish: camera elevation/zoom/offset, lighting, table and lens blur. A view moves
    only these, never the food, so the views of one dish show the same food and complement each other."""

    elevation: float = 60.0  # degrees; 90 = straight down, ~25 = side view where pile height shows
    zoom: float = 1.0  # 1.0 frames the whole vessel; > 1 crops in
    offset: tuple[float, float] = (0.0, 0.0)  # shift of the vessel centre, fraction of image size
    yaw: float = 0.0  # degrees the dish is turned on the table
    brightness: float = 1.0
    warmth: float = 0.0  # -1 cool daylight .. +1 warm tungsten
    blur: float = 0.0  # gaussian radius in px at 512 px
    table: str = "marble"  # marble | wood | slate | cloth
    noise: float = 0.0  # sensor noise std (0-255 scale) for dim phone shots
    saturation: float = 1.0  # merchant shots are punchier, phone shots flatter


@dataclass
class Prim:
    """A drawable piece of food: `points` in world space, drawn as polygon, line or ellipse."""

    kind: str  # poly | line | blob
    points: np.ndarray  # (n, 3)
    fill: RGB
    outline: RGB | None = None
    width: float = 0.0  # world units (lines) or radius (blobs)
    aspect: float = 1.0  # blob height/width
    highlight: bool = False
    lift: float = 0.0  # depth-sort bias for things that sit on top of their neighbours


@dataclass
class DishScene:
    """Everything needed to draw one dish: vessel and food primitives in world coordinates (plate radius 1,
    z up), laid out once, so every view shows the same food."""

    vessel: str  # plate | bowl
    vessel_colour: RGB
    prims: list[Prim] = field(default_factory=list)
    props: list[Prim] = field(default_factory=list)  # things lying on the table: napkin, cutlery
    bowl_height: float = 0.55
    rim_pattern: RGB | None = None


TABLES: dict[str, tuple[RGB, RGB]] = {
    "marble": ((232, 230, 226), (205, 203, 200)),
    "wood": ((150, 104, 66), (118, 78, 46)),
    "slate": ((62, 64, 68), (44, 46, 50)),
    "cloth": ((226, 214, 196), (190, 150, 120)),
}


def _project(points: np.ndarray, view: View, cx: float, cy: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """World -> screen; also returns depth (larger = nearer the camera) for painter's ordering."""
    yaw = math.radians(view.yaw)
    e = math.radians(view.elevation)
    x = points[:, 0] * math.cos(yaw) - points[:, 1] * math.sin(yaw)
    y = points[:, 0] * math.sin(yaw) + points[:, 1] * math.cos(yaw)
    z = points[:, 2]
    sx = cx + scale * x
    sy = cy - scale * (y * math.sin(e) + z * math.cos(e))
    depth = -y * math.cos(e) + z * math.sin(e)
    return np.stack([sx, sy], axis=1), depth


@lru_cache(maxsize=16)
def _texture(table: str, size: int) -> Image.Image:
    """Table texture (cached per table and size: it is the slowest part of a render). Its sines and powers are
    `portable`'s: NumPy's own differ in their last bits from CPU to CPU, and 8-bit pixels show them."""
    rng = np.random.default_rng(len(table))
    a, b = (np.array(c, dtype=np.float32) for c in TABLES[table])
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    if table == "wood":
        grain = portable.sin((yy * 18 + portable.sin(xx * 3 + 1.3) * 0.6) * math.pi * 2) * 0.5 + 0.5
        t = portable.power(grain, 3) * 0.6 + rng.normal(0, 0.05, (size, size)).astype(np.float32)
    elif table == "cloth":
        weave = (portable.sin(xx * size * 0.9) * portable.sin(yy * size * 0.9)) * 0.08
        t = (((np.floor(xx * 6) + np.floor(yy * 6)) % 2) * 0.35 + weave).astype(np.float32)
    elif table == "marble":
        veins = np.abs(portable.sin((xx * 3 + yy * 1.5 + portable.sin(yy * 7 + xx * 5) * 0.5) * math.pi * 2))
        t = portable.power(1 - veins, 24) * 0.5 + rng.normal(0, 0.02, (size, size)).astype(np.float32)
    else:
        t = rng.normal(0.4, 0.08, (size, size)).astype(np.float32)
    img = a[None, None, :] * (1 - t[..., None]) + b[None, None, :] * t[..., None]
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


@lru_cache(maxsize=4)
def _vignette(size: int) -> Image.Image:
    """Darkening towards the corners, as an RGB image to multiply with (255 = unchanged)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    v = (1 - 0.35 * ((xx - 0.45) ** 2 + (yy - 0.42) ** 2)) * 255
    return Image.fromarray(np.clip(v, 0, 255).astype(np.uint8)).convert("RGB")


@lru_cache(maxsize=16)
def _noise(size: int, std: int) -> Image.Image:
    """Sensor noise centred on 128 (added with offset -128); shifted per photo so it never repeats."""
    rng = np.random.default_rng(std)
    return Image.fromarray(np.clip(rng.normal(128, std, (size, size, 3)), 0, 255).astype(np.uint8))


def _table(size: int, view: View, rng: np.random.Generator) -> Image.Image:
    """The table (flipped at random so cached textures vary), plus a wall behind it in side views."""
    img = _texture(view.table, size)
    flips = [None, Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.FLIP_TOP_BOTTOM, Image.Transpose.ROTATE_180]
    flip = flips[int(rng.integers(len(flips)))]
    img = img.transpose(flip) if flip is not None else img.copy()
    if view.elevation < 45:
        horizon = int(size * (0.12 + (view.elevation - 20) / 100))
        wall = (np.linspace(0.55, 0.8, max(horizon, 1))[:, None, None] * np.array([214, 206, 192])).astype(np.uint8)
        img.paste(Image.fromarray(np.repeat(wall, size, axis=1)), (0, 0))
    return img


def _ellipse_pts(n: int, radius: float, z: float, wobble: float = 0.0, seed: int = 0) -> np.ndarray:
    ang = np.linspace(0, 2 * math.pi, n, endpoint=False)
    r = radius * (1 + wobble * portable.sin(ang * 3 + seed) * portable.cos(ang * 5 + seed * 2))
    return np.stack([r * portable.cos(ang), r * portable.sin(ang), np.full(n, z)], axis=1)


def _shade(colour: RGB, f: float) -> RGB:
    return tuple(int(max(0, min(255, c * f))) for c in colour)  # type: ignore[return-value]


def _draw_vessel(draw: ImageDraw.ImageDraw, scene: DishScene, view: View, cx: float, cy: float, scale: float) -> list:
    """Draw plate or bowl; returns the rim outline (screen points) so bowl contents can be clipped."""
    col = scene.vessel_colour
    n = 72 if scene.vessel == "plate" else 96

    def ring(radius: float, z: float) -> list:
        return [tuple(p) for p in _project(_ellipse_pts(n, radius, z), view, cx, cy, scale)[0]]

    def rim_band(radius: float, z: float, width: float) -> None:
        if scene.rim_pattern:
            band = ring(radius, z)
            draw.line(band + band[:1], fill=scene.rim_pattern, width=max(1, int(scale * width)))

    if scene.vessel == "plate":
        draw.polygon(ring(1.0, 0.0), fill=_shade(col, 0.78))
        draw.polygon(ring(1.0, 0.05), fill=col, outline=_shade(col, 0.86))
        rim_band(0.9, 0.05, 0.018)
        draw.polygon(ring(0.74, 0.03), fill=_shade(col, 0.95), outline=_shade(col, 0.88))
        return []
    h = scene.bowl_height
    # The body flares from a foot (radius 0.5) to the rim: draw it as stacked slices, darker below.
    for t in np.linspace(0, 1, 14):
        draw.polygon(ring(0.5 + 0.5 * float(t) ** 0.7, h * t), fill=_shade(col, 0.72 + 0.2 * t))
    draw.polygon(ring(1.0, h), fill=_shade(col, 1.0))
    inner = ring(0.94, h)
    draw.polygon(inner, fill=_shade(col, 0.82))
    rim_band(0.97, h, 0.015)
    return inner


def _draw_prims(draw: ImageDraw.ImageDraw, prims: list[Prim], view: View, cx: float, cy: float, scale: float) -> None:
    """Painter's algorithm: far primitives first, so near food covers far food in side views."""
    if not prims:
        return
    sizes = [len(p.points) for p in prims]
    screen, depth = _project(np.concatenate([p.points for p in prims]), view, cx, cy, scale)
    bounds = np.cumsum([0] + sizes)
    mean_depth = np.add.reduceat(depth, bounds[:-1]) / np.array(sizes)
    order = np.argsort(mean_depth + np.array([p.lift for p in prims]), kind="stable")
    e = math.sin(math.radians(view.elevation))
    for i in order:
        pts, prim = screen[bounds[i]:bounds[i + 1]], prims[i]
        if prim.kind == "poly":
            draw.polygon([tuple(p) for p in pts], fill=prim.fill, outline=prim.outline)
        elif prim.kind == "line":
            w = max(1, int(round(prim.width * scale)))
            joint = "curve" if w > 5 else None  # round joints cost a pie slice per vertex; thin lines don't show them
            if prim.outline:
                draw.line([tuple(p) for p in pts], fill=prim.outline, width=w + 2, joint=joint)
            draw.line([tuple(p) for p in pts], fill=prim.fill, width=w, joint=joint)
        else:  # blob: an ellipse facing the camera, squashed when it lies flat
            rx = prim.width * scale
            ry = rx * (prim.aspect * e + (1 - e) * 0.9) if prim.aspect != 1.0 else rx
            x, y = pts[0]
            draw.ellipse((x - rx, y - ry, x + rx, y + ry), fill=prim.fill, outline=prim.outline)
            if prim.highlight and rx > 1.5:
                hx, hy, hr = x - rx * 0.35, y - ry * 0.4, rx * 0.3
                draw.ellipse((hx - hr, hy - hr * 0.7, hx + hr, hy + hr * 0.7), fill=_shade(prim.fill, 1.35))


def render(scene: DishScene, view: View, size: int = 512, seed: int = 0, supersample: int = 2) -> Image.Image:
    """Render `scene` seen from `view` as an RGB image of `size` px."""
    rng = np.random.default_rng(seed)
    big = size * supersample
    img = _table(big, view, rng)
    scale = big * 0.40 * view.zoom
    cx = big * (0.5 + view.offset[0])
    cy = big * (0.52 + view.offset[1]) + (scale * 0.25 * math.cos(math.radians(view.elevation)) if scene.vessel == "bowl" else 0)

    # Soft contact shadow, offset away from the light (upper left).
    shadow = Image.new("L", (big // 4, big // 4), 0)
    pts, _ = _project(_ellipse_pts(48, 1.06, 0.0), view, cx / 4 + scale * 0.05, cy / 4 + scale * 0.04, scale / 4)
    ImageDraw.Draw(shadow).polygon([tuple(p) for p in pts], fill=120)
    shadow = shadow.filter(ImageFilter.BoxBlur(big / 110)).resize((big, big), Image.Resampling.BILINEAR)
    img = Image.composite(Image.new("RGB", (big, big), (20, 16, 12)), img, shadow)

    draw = ImageDraw.Draw(img)
    _draw_prims(draw, scene.props, view, cx, cy, scale)
    inner = _draw_vessel(draw, scene, view, cx, cy, scale)
    if scene.vessel == "bowl":
        # Food inside a bowl is hidden by the bowl's front wall: draw it on a layer clipped to the
        # rim opening plus everything above the rim's centre line (food piled higher than the rim).
        layer = img.copy()
        _draw_prims(ImageDraw.Draw(layer), scene.prims, view, cx, cy, scale)
        mask = Image.new("L", (big, big), 0)
        md = ImageDraw.Draw(mask)
        md.polygon(inner, fill=255)
        rim_centre_y = float(np.mean([p[1] for p in inner]))
        md.rectangle((0, 0, big, rim_centre_y), fill=255)
        img = Image.composite(layer, img, mask)
    else:
        _draw_prims(draw, scene.prims, view, cx, cy, scale)

    img = img.reduce(supersample) if supersample > 1 else img
    # Light colour and exposure as per-channel lookup tables, then vignette and sensor noise as
    # uint8 image arithmetic: all of it in PIL's C loops, the bulk of a render's cost otherwise.
    gains = [view.brightness * (1 + 0.10 * view.warmth), view.brightness * (1 + 0.02 * view.warmth),
             view.brightness * (1 - 0.12 * view.warmth)]
    img = img.point([min(255, int(i * g)) for g in gains for i in range(256)])
    img = ImageChops.multiply(img, _vignette(size))
    if view.noise:
        noise = _noise(size, round(view.noise))
        dx, dy = (int(v) for v in rng.integers(0, size, 2))
        img = ImageChops.add(img, ImageChops.offset(noise, dx, dy), offset=-128)
    if view.saturation != 1.0:
        img = ImageEnhance.Color(img).enhance(view.saturation)
    if view.blur:
        img = img.filter(ImageFilter.BoxBlur(view.blur * size / 512))  # box: ~8x faster, same look here
    return img


def to_jpeg(img: Image.Image, quality: int = 85, optimize: bool = True) -> bytes:
    """Encode deterministically (no EXIF, no timestamps) so the same seed gives the same bytes."""
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality, optimize=optimize)
    return buf.getvalue()
