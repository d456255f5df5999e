"""The Space at a phone's width (390 px) and a desktop's (1280 px), in a real headless Chromium.

Nothing may make the page scroll sideways; wide tables scroll inside their own box. Screenshots of
every tab are kept in the test's tmp_path (pytest prints where on failure).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_space import chromium_browser, launched_space, open_tab, page_width, write_baseline_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]
WIDTHS = {"phone": 390, "desktop": 1280}


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium_browser() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def space_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    results = tmp_path_factory.mktemp("results")
    write_baseline_run(results, "first-cls", "classification", "baseline:first")
    write_baseline_run(results / "sweep", "median-nut", "nutrition", "baseline:median", "--limit", "6")
    with launched_space({"DININGBENCH_SPACE_RESULTS": str(results), "DININGBENCH_SPACE_MAX_ITEMS": "10"}) as (url, _):
        yield url


@pytest.fixture(params=list(WIDTHS), ids=list(WIDTHS))
def page(request: pytest.FixtureRequest, browser, space_url: str):
    width = WIDTHS[request.param]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(space_url)
    yield page
    context.close()


def _fits(page, shots: Path, name: str) -> None:
    width = page.viewport_size["width"]
    page.screenshot(path=shots / f"{name}_{width}.png", full_page=True)
    assert page_width(page) <= width, f"{name} is {page_width(page)} px wide at a {width} px viewport"


def test_every_tab_fits_the_screen(page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#db-card .db-option")).to_have_count(8, timeout=30_000)
    expect(page.locator("#db-gallery img").first).to_be_visible()
    _fits(page, tmp_path, "browse")

    open_tab(page, "Evaluate")
    page.locator("#db-eval-task").get_by_label("nutrition").check()
    page.get_by_role("button", name="Run evaluation").click()
    expect(page.locator("#db-eval-status")).to_contain_text("Average MAPE", timeout=60_000)
    expect(page.locator("#db-results table.db-metrics")).to_contain_text("Calories")
    _fits(page, tmp_path, "evaluate")

    open_tab(page, "Leaderboard")
    board = page.locator("#db-board-scroll")
    expect(board).to_contain_text("reported (paper)")
    _fits(page, tmp_path, "leaderboard")
    assert board.evaluate("e => getComputedStyle(e).overflowX") == "auto"
    if page.viewport_size["width"] < 500:  # a phone: rank, model (wrapping) and the ranked figure, no sideways scroll
        assert board.evaluate("e => e.scrollWidth <= e.clientWidth")
        expect(page.locator("#db-board th.db-opt").first).to_be_hidden()
        expect(page.locator("#db-board th.db-ranked")).to_be_visible()
        model = page.locator("#db-board td.db-model").first
        assert model.evaluate("e => e.scrollWidth <= e.clientWidth")  # the name whole, never cut
    expect(page.locator("footer")).not_to_contain_text("·", use_inner_text=True)  # no dangling divider

    open_tab(page, "Runs")  # a run's items, one whole: its views and the exact prompt sent
    expect(page.get_by_label("Prompt sent").locator("pre")).not_to_have_text("", timeout=30_000)
    expect(page.get_by_label("Raw answer").locator("pre")).not_to_have_text("")
    _fits(page, tmp_path, "runs")


def test_every_tab_is_in_the_bar_and_one_click_opens_it(page) -> None:
    """No tab hides under a "More tabs" menu, on a phone either: the bar wraps, and one click on a tab,
    even while the page is still loading, opens it."""
    from playwright.sync_api import expect

    names = ["Browse", "Evaluate", "Leaderboard", "Submit", "Take the test", "Runs"]
    for name in reversed(names):  # at once, the page just loaded: Runs first, Browse last
        tab = page.get_by_role("tab", name=name, exact=True)
        expect(tab).to_be_visible(timeout=30_000)
        tab.click()
        expect(tab).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("button", name="More tabs")).to_have_count(0)
    bar = page.get_by_role("tablist").first
    assert bar.evaluate("e => e.scrollWidth <= e.clientWidth + 1")  # nothing sideways either
    expect(page.locator("#db-card .db-option").first).to_be_visible(timeout=30_000)  # Browse loaded on its click


def test_captions_are_whole_and_the_enlarged_view_is_bigger_than_its_thumbnail(page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    thumb = page.locator("#db-gallery .db-view img").first
    expect(thumb).to_be_visible(timeout=30_000)
    expect(thumb).to_have_js_property("complete", True)
    assert thumb.evaluate("e => e.naturalWidth") > 0  # the file is served, not a broken picture
    captions = page.locator("#db-gallery figcaption")
    assert captions.count() >= 2
    for i in range(captions.count()):
        assert captions.nth(i).evaluate("e => e.scrollWidth <= e.clientWidth"), captions.nth(i).inner_text()
    thumb_box = thumb.bounding_box()
    thumb.click()  # a press shows the view large, first in the strip, across it
    enlarged = page.locator("#db-gallery .db-view-large img")
    expect(enlarged).to_be_visible()
    page.screenshot(path=tmp_path / f"preview_{page.viewport_size['width']}.png", full_page=True)
    large_box = enlarged.bounding_box()
    assert large_box["height"] >= thumb_box["height"] and large_box["width"] > thumb_box["width"]
    assert large_box["width"] >= page.locator("#db-gallery .db-views").bounding_box()["width"] - 4
    enlarged.click()  # again: back in the strip
    expect(page.locator("#db-gallery .db-view-large")).to_have_count(0)
    # Its link opens the file itself, served as a JPEG picture.
    link = page.locator("#db-gallery .db-view a").first
    response = page.request.get(page.url.split("?")[0].rstrip("/") + "/" + link.get_attribute("href"))
    assert response.status == 200 and response.headers["content-type"] == "image/jpeg"


def test_the_leaderboard_ranks_by_the_chosen_metric_with_blanks_last(page) -> None:
    from playwright.sync_api import expect

    open_tab(page, "Leaderboard")
    page.locator("#db-rank-by input").click()
    page.get_by_role("option", name="Avg MAPE %").click()
    ranked = page.locator("#db-board th.db-ranked")
    expect(ranked).to_have_attribute("data-sort", "Avg MAPE %")
    # Baselines are a group of their own, not ranked, but ordered by the metric all the same.
    expect(page.locator("#db-board tr.db-group:has-text('baselines') + tr")).to_contain_text("baseline:median")
    assert ranked.get_attribute("title").startswith("Nutrition: average")
    last = page.locator("#db-board tbody tr").last.locator("td").first
    assert last.inner_text().strip() == ""  # a row without a nutrition figure: unranked, at the end
    # A click on a header ranks by that column (the Rank by menu follows); on another column it orders each
    # group by it, a second click reversing. On a phone only the ranked figure's column is shown.
    if page.viewport_size["width"] >= 500:
        page.locator("#db-board th[data-sort='Cls acc %']").click()
        expect(ranked).to_have_attribute("data-sort", "Cls acc %")
        expect(page.locator("#db-rank-by input")).to_have_value("Cls acc %")
        page.locator("#db-board th[data-sort='Model']").click()
        expect(page.locator("#db-board th[data-sort='Model']")).to_have_attribute("aria-sort", "ascending")
        page.locator("#db-board th[data-sort='Model']").click()
        expect(page.locator("#db-board th[data-sort='Model']")).to_have_attribute("aria-sort", "descending")
