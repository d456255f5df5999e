"""The Submit and Leaderboard tabs in a real headless Chromium, at a phone's width (390 px) and a
desktop's (1280 px): upload a zipped run, see it verified, find it on the Leaderboard, search,
pick columns, scroll with the Model column frozen, and follow a row's link to its run.

Screenshots of each step are kept in the test's tmp_path (pytest prints where on failure).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_space import chromium_browser, launched_space, open_tab, page_width, write_baseline_run
from test_space_submit import zip_folder

pytestmark = [pytest.mark.slow, pytest.mark.browser]
WIDTHS = {"phone": 390, "desktop": 1280}


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium_browser() as chromium:
        yield chromium


SUBMITTED: list[int] = []  # the submissions this module's pages made (one per width), in order


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    results = tmp_path_factory.mktemp("results")
    write_baseline_run(results, "first-cls", "classification", "baseline:first")
    write_baseline_run(results, "median-nut", "nutrition", "baseline:median", "--limit", "4")
    demo = write_baseline_run(tmp_path_factory.mktemp("runs"), "demo", "all", "baseline:category-mean")
    zipped = zip_folder(demo, tmp_path_factory.mktemp("zips") / "demo.zip")
    with launched_space({"DININGBENCH_SPACE_RESULTS": str(results),
                         "DININGBENCH_SPACE_SUBMITS_PER_HOUR": "20"}) as (url, _):
        yield url, zipped


@pytest.fixture(params=list(WIDTHS), ids=list(WIDTHS))
def page(request: pytest.FixtureRequest, browser, space):
    context = browser.new_context(viewport={"width": WIDTHS[request.param], "height": 900})
    page = context.new_page()
    page.goto(space[0])
    yield page
    context.close()


def _fits(page, shots: Path, name: str) -> None:
    width = page.viewport_size["width"]
    page.screenshot(path=shots / f"{name}_{width}.png", full_page=True)
    assert page_width(page) <= width, f"{name} is {page_width(page)} px wide at a {width} px viewport"


def test_submit_a_zip_and_find_it_verified_on_the_leaderboard(page, space, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    open_tab(page, "Submit")
    page.locator("#db-submit-zip input[type=file]").set_input_files(str(space[1]))
    # The uploaded file listed by its name. (Gradio draws the stem and the extension in two pieces: the
    # text the page shows reads "demo .zip" in some layouts, the cell's accessible name is the file name.)
    expect(page.locator("#db-submit-zip").get_by_role("cell", name="demo.zip", exact=True)).to_be_visible(
        timeout=30_000)
    _fits(page, tmp_path, "submit_ready")
    page.get_by_role("button", name="Submit", exact=True).click()
    SUBMITTED.append(page.viewport_size["width"])
    outcome = page.locator("#db-submit-outcome")
    expect(outcome).to_contain_text("Accepted and verified", timeout=60_000)
    expect(outcome.locator("table")).to_contain_text("Cls acc %")
    expect(outcome.locator("table")).to_contain_text("40 / 40")
    expect(outcome).to_contain_text("VQA not verified")
    _fits(page, tmp_path, "submit_done")

    open_tab(page, "Leaderboard")
    page.get_by_role("button", name="Refresh").click()
    board = page.locator("#db-board")
    # Each width's page is another visitor submitting the same zip: rows of different owners are never
    # merged, so the board holds one verified row per submission made so far in this module.
    expect(board.locator(".db-status-verified")).to_have_count(len(SUBMITTED), timeout=30_000)
    expect(board).to_contain_text("baseline:category-mean")
    _fits(page, tmp_path, "leaderboard")

    search = page.locator("#db-board-search textarea, #db-board-search input").first
    search.fill("category")
    search.press("Enter")
    expect(board.locator("td.db-model")).to_have_text(["baseline:category-mean"] * len(SUBMITTED), timeout=30_000)
    search.fill("")
    search.press("Enter")
    expect(board).to_contain_text("GPT-4o", timeout=30_000)


def test_the_model_column_stays_put_while_the_table_scrolls(page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    open_tab(page, "Leaderboard")
    page.locator("#db-board-filters").get_by_text("Filters and columns").click()
    page.locator("#db-board-columns").get_by_label("Source", exact=True).check()
    expect(page.locator("#db-board th", has_text="Source")).to_have_count(1, timeout=30_000)
    scroller = page.locator("#db-board-scroll")
    model = page.locator("#db-board td.db-model").first
    if page.viewport_size["width"] < 500:  # a phone: rank, model and ranked figure only, nothing to scroll to
        expect(page.locator("#db-board th", has_text="Source")).to_be_hidden()
        assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth") and model.is_visible()
        _fits(page, tmp_path, "leaderboard_phone")
        return
    figure = page.locator("#db-board tbody tr:not(.db-group) td:last-child").first
    before, figure_before = model.bounding_box()["x"], figure.bounding_box()["x"]
    scroller.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    assert scroller.evaluate("e => e.scrollLeft") > 0  # the table is wider than its box at both widths
    assert figure.bounding_box()["x"] < figure_before - 10  # the other columns moved...
    assert model.bounding_box()["x"] == pytest.approx(before, abs=1)  # ...the Model column did not
    _fits(page, tmp_path, "leaderboard_scrolled")


def test_a_rows_link_opens_its_run_in_the_runs_tab(page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    open_tab(page, "Leaderboard")
    # The Runs tab opens on the first folder (first-cls) by itself: the link must open the other one.
    link = page.locator("#db-board td.db-model a", has_text="baseline:median")
    expect(link).to_have_attribute("href", "?run=median-nut")
    link.click()
    expect(page.get_by_label("Prompt sent")).to_be_visible(timeout=30_000)  # the Runs tab is the one shown
    expect(page.get_by_label("Prompt sent").locator("pre")).not_to_have_text("", timeout=30_000)
    assert page.locator("#db-runs-run input").input_value().startswith("median-nut · baseline:median · ")
    assert page.url.endswith("?run=median-nut")
    _fits(page, tmp_path, "runs_from_link")
