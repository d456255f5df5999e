"""Views shown in a page are decoded and encoded once: the next visitor's gallery gets the same file."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest
from PIL import Image

from eval.report.shown_views import ShownViews


def _jpeg(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="JPEG")
    return out.getvalue()


def _decoder(data: bytes, calls: list[int]):
    def decode() -> Image.Image:
        calls.append(1)
        return Image.open(io.BytesIO(data)).convert("RGB")

    return decode


def test_a_view_is_decoded_once_and_the_same_file_is_given_again(tmp_path: Path) -> None:
    shown = ShownViews(tmp_path)
    data, calls = _jpeg((200, 30, 30)), []
    first = shown.path(data, 1600, _decoder(data, calls))
    second = shown.path(data, 1600, _decoder(data, calls))
    assert first == second and calls == [1]
    with Image.open(first) as picture:  # a real JPEG of the view, in the folder given
        assert picture.format == "JPEG" and picture.size == (64, 48)
    assert Path(first).parent == tmp_path
    # Another side is another file (a view may be shown bounded differently elsewhere).
    assert shown.path(data, 800, _decoder(data, calls)) != first and calls == [1, 1]


def test_the_files_kept_are_bounded_the_least_recently_shown_going_first(tmp_path: Path) -> None:
    shown = ShownViews(tmp_path, max_files=3)
    views = [_jpeg((i * 40, 10, 10)) for i in range(5)]
    paths = [shown.path(v, 100, _decoder(v, [])) for v in views[:3]]
    shown.path(views[0], 100, _decoder(views[0], []))  # shown again: the newest now
    shown.path(views[3], 100, _decoder(views[3], []))
    assert len(shown) == 3 and len(list(tmp_path.glob("*.jpg"))) == 3
    assert Path(paths[0]).is_file() and not Path(paths[1]).exists()  # views[1] was the least recent
    calls: list[int] = []
    shown.path(views[1], 100, _decoder(views[1], calls))
    assert calls == [1]  # removed, so decoded again


def test_a_view_that_cannot_be_decoded_keeps_nothing(tmp_path: Path) -> None:
    shown = ShownViews(tmp_path)

    def broken() -> Image.Image:
        raise ValueError("image 0 cannot be decoded")

    with pytest.raises(ValueError, match="cannot be decoded"):
        shown.path(b"not an image", 100, broken)
    assert len(shown) == 0 and list(tmp_path.iterdir()) == []


def test_concurrent_events_showing_one_view_get_one_whole_file(tmp_path: Path) -> None:
    shown = ShownViews(tmp_path)
    data = _jpeg((10, 120, 10), (400, 300))
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(shown.path(data, 1600, _decoder(data, []))))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(got)) == 1 and [p.name for p in tmp_path.iterdir()] == [Path(got[0]).name]
    with Image.open(got[0]) as picture:
        picture.load()  # whole: no reader saw half a file


def test_the_space_catalog_hands_galleries_files_the_same_on_a_second_visit() -> None:
    """The Browse and Take the test galleries get JPEG paths: the second visitor's event only links them."""
    from space.diningspace.catalog import Catalog

    catalog = Catalog()  # the embedded sample
    config = "classification"
    item = catalog.filter_ids(config)[0]
    views = catalog.view_files(config, item)
    assert views and all(Path(path).is_file() and role in {"reference", "user"} for path, role in views)
    assert catalog.view_files(config, item) == views
    assert [role for _, role in views] == [role for _, role in catalog.images(config, item)]  # the model's views


def test_the_space_and_the_runs_viewer_share_one_set_of_shown_views() -> None:
    from eval.report import shown_views

    assert shown_views.shared() is shown_views.shared()
