"""The Review tab over a construction work folder built by the construction tests' fixture (fake models)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from construct.review import get_item, list_items, released_rows
from construct.work import Stage
from space.diningspace.review_tab import ReviewTab
from space.diningspace.settings import SpaceSettings
from tests.test_construct_pipeline import built, monkeypatch_module  # noqa: F401 - the module's fixtures

pytestmark = pytest.mark.slow


@pytest.fixture
def work(built, tmp_path: Path) -> Path:  # noqa: F811 - the imported fixture
    copy = tmp_path / "work"
    shutil.copytree(built.work, copy)
    return copy


def test_the_tab_shows_an_items_photos_and_fields_and_records_decisions(work: Path) -> None:
    tab = ReviewTab(work)
    ids = tab.ids("vqa", "all")
    assert ids == [i.item_id for i in list_items(work, task="vqa")]
    first = ids[0]
    views, card, note = tab.show(first)
    assert views and all(caption.split(" · ")[0] in ("reference", "user") for _, caption in views)
    assert first in card and "merchant" in card and get_item(work, first).dish_id in card

    update, *_, where = tab.decide("reject", "vqa", "all", first, "answer too vague")
    assert get_item(work, first).decision == "reject" and get_item(work, first).note == "answer too vague"
    assert first not in {r["id"] for r in released_rows(work)}
    assert "reject" in where and update["value"] != first  # moves on to the next item
    assert tab.ids("vqa", "reject") == [first]
    tab.decide("approve", "vqa", "all", first, "")
    assert get_item(work, first).decision == "approve"


def test_the_tab_reviews_the_base_dishes_too(work: Path) -> None:
    tab = ReviewTab(work)
    ids = tab.ids("all", "all", "dishes")
    assert ids == [i.item_id for i in list_items(work, stage="dishes")] and "merchant-01-d0" in ids
    views, card, _ = tab.show("merchant-01-d0", "dishes")
    assert [caption.split(" · ")[0] for _, caption in views][0] == "reference" and "merchant-01" in card
    tab.decide("reject", "all", "all", "merchant-01-d0", "not a dish we want", "dishes")
    assert get_item(work, "merchant-01-d0", stage="dishes").decision == "reject"
    verdict = {d["item"]: d for d in Stage(work, "dish_review").decisions()}["merchant-01-d0"]
    assert verdict["verdict"] == "dropped" and verdict["reason"] == "rejected_in_review"
    assert "merchant-01-d0" not in {d["dish_id"] for d in Stage(work, "dish_review").items()}


def test_the_tab_is_offered_only_when_the_operator_names_a_work_folder(tmp_path: Path) -> None:
    assert SpaceSettings.from_env({}, repo_root=tmp_path).review_work is None
    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_REVIEW_WORK": str(tmp_path / "work")}, repo_root=tmp_path)
    assert settings.review_work == tmp_path / "work"
