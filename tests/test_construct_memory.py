"""Construction's memory does not grow with the photos: the same menu with 10x the photos, built through
the photo checks and dish selection in a fresh process each, peaks within 1.25x of the 1x build.

The photos are distinct noise JPEGs at the minimum side (cheap to make and decode, each its own dHash);
the model is an in-process fake that passes every photo. (The 40-merchant synthetic export at 10x and
50x, on both engines and against the stand-in: bench/construct_ray.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
DISHES = 150
INGREDIENTS = ["rice 200 g", "egg 50 g", "scallion 10 g", "soy sauce 5 g"]


def write_export(root: Path, photos_per_dish: int) -> int:
    """A menu of DISHES dishes at DISHES // 5 merchants, each dish a reference and user photos."""
    rng = np.random.default_rng(photos_per_dish)
    (root / "images").mkdir(parents=True)
    merchants = [{"merchant_id": f"m{k}", "name": f"Shop {k}", "cuisine": "chinese"} for k in range(DISHES // 5)]
    dishes, photos = [], []
    for d in range(DISHES):
        dish_id = f"m{d % len(merchants)}-d{d}"
        dishes.append({"dish_id": dish_id, "merchant_id": f"m{d % len(merchants)}", "name": f"Dish number {d} {d * 7919}",
                       "menu_category": "mains", "description": "", "ingredients": INGREDIENTS, "portion": "1 bowl, 300 g"})
        for p in range(photos_per_dish):
            pid = f"{dish_id}-p{p}"
            Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype="uint8")).resize((128, 128)).save(
                root / "images" / f"{pid}.jpg", quality=70)
            photos.append({"photo_id": pid, "dish_id": dish_id, "role": "reference" if p == 0 else "user",
                           "path": f"images/{pid}.jpg"})
    for name, rows in (("merchants", merchants), ("dishes", dishes), ("photos", photos)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(photos)


BUILD = """
import asyncio, json, sys
from pathlib import Path
from construct import pipeline
from construct.models import Models
from construct.work import BuildSettings
from eval.types import Response

class Passes:
    spec = "openai:fake"
    async def generate(self, request):
        text = request.messages[0].content[-1]
        verdict = {"quality": "good"} if "quality check" in text else {"same_dish": "reference matching" in text}
        if "For each dish B below" in text:  # a group question: a verdict per dish B, by its id
            import re
            verdict = {b: {"same_dish": False} for b in re.findall(r"Dish B\\d+ \\(([^)]+)\\)", text)}
        return Response(text=json.dumps(verdict), usage={"prompt_tokens": 1, "completion_tokens": 1})
    def describe(self):
        return {}

raw, work = sys.argv[1], Path(sys.argv[2])
settings = BuildSettings(raw=raw, model="openai:fake", concurrency=16)
pipeline.run(work, settings, models=Models(settings, work, factory=lambda spec, options: Passes()))
with open('/proc/self/status') as fh:
    print('PEAK_KB', next(int(line.split()[1]) for line in fh if line.startswith('VmHWM:')))
"""


def peak_mib(raw: Path, work: Path) -> float:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(BUILD), str(raw), str(work)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.rsplit("PEAK_KB", 1)[1].split()[0]) / 1024


@pytest.mark.slow
def test_ten_times_the_photos_peak_within_a_quarter_more_memory(tmp_path):
    small = write_export(tmp_path / "raw1", 6)
    large = write_export(tmp_path / "raw10", 60)
    assert large == 10 * small
    one = peak_mib(tmp_path / "raw1", tmp_path / "work1")
    ten = peak_mib(tmp_path / "raw10", tmp_path / "work10")
    kept = sum(1 for line in (tmp_path / "work10" / "photos" / "items.jsonl").read_text().splitlines() if line)
    assert kept == large  # every photo went through both checks and was kept: the 10x build did its work
    calls = sum(1 for _ in (tmp_path / "work10" / "photos" / "calls.jsonl").open())
    assert calls == large + (large - DISHES)  # a quality check each, a match for each user photo
    assert ten <= 1.25 * one, (one, ten)
