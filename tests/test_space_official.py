"""The Space on the authors' release: Browse shows its rows and photos, Evaluate scores a subset under their
protocol, the Leaderboard marks runs made on it with its fingerprint and their figures.

The release here is the stand-in `python diningbench.py sample --layout official` writes (the synthetic
sample in the authors' layout), built once for the module.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from space.diningspace.browse_tab import NO_FACETS, BrowseTab
from space.diningspace.catalog import Catalog
from space.diningspace.render import item_card

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("official") / "release"
    subprocess.run([sys.executable, "diningbench.py", "sample", "--layout", "official", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def catalog(release: Path) -> Catalog:
    return Catalog(source=str(release))


def test_browse_lists_the_release_rows_in_the_language_chosen(catalog: Catalog, release: Path) -> None:
    assert catalog.by_language
    ids = catalog.filter_ids("classification")
    assert ids[:3] == ["1", "2", "3"] and len(ids) == sum(1 for line in (release / "classification.jsonl").open()
                                                          if line.strip())
    zh, en = catalog.row("classification", "1"), catalog.row("classification", "1", "en")
    assert "请根据图片" in zh["prompt"] and "请根据图片" not in en["prompt"]
    assert zh["ground_truth"] == zh["answer"] and len(zh["options"]) == 8


def test_browse_shows_the_photos_their_paths_name(catalog: Catalog) -> None:
    views = catalog.view_files("nutrition", "1")
    assert [role for _, role in views][:2] == ["reference", "user"]
    assert all(Path(path).is_file() and Path(path).read_bytes()[:2] == b"\xff\xd8" for path, _ in views)
    assert len(catalog.images("vqa", "1")) >= 1


def test_rows_without_merchant_cuisine_or_category_hide_those_filters_and_say_so(catalog: Catalog) -> None:
    for config in ("classification", "nutrition", "vqa"):
        assert catalog.facets(config, "cuisine") == catalog.facets(config, "category") == []
    cuisine, category, vqa_category, note, item, strip, card, fields, where = BrowseTab(catalog).on_config(
        "vqa", "zh", False)
    assert not cuisine["visible"] and not category["visible"] and not vqa_category["visible"]
    assert note["visible"] and note["value"] == NO_FACETS
    assert item["value"] == "1" and where == "Item 1 of 16" and "<img" in strip
    assert "merchant" not in card and "None" not in card


def test_the_card_shows_their_prompt_and_the_ground_truth_as_published(catalog: Catalog) -> None:
    row = catalog.row("nutrition", "2")
    card = item_card("nutrition", row, n_images=2, show_answer=True)
    assert "Prompt sent to the model" in card and "Ground truth (as published)" in card
    assert "the authors&#x27; ground truth" in card or "the authors' ground truth" in card
    hidden = item_card("nutrition", row, n_images=2, show_answer=False)
    assert "Ground truth (as published)" not in hidden
