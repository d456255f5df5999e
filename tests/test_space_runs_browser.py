"""The Runs tab in a real headless Chromium at a phone's width (390 px) and a desktop's (1280 px):
a link opens a view, a click on a row opens its item, Previous / Next, search, the address keeps
the view, new runs appear on Refresh, views are shown whole. Screenshots stay in tmp_path."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers_space import chromium_browser, launched_space, page_width, write_baseline_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    results = tmp_path_factory.mktemp("results")
    write_baseline_run(results / "sweep", "first-cls", "classification", "baseline:first", "--limit", "8")
    write_baseline_run(results, "one-view", "classification", "baseline:first", "--limit", "2", "--images", "1")
    with launched_space({"DININGBENCH_SPACE_RESULTS": str(results)}) as (url, _):
        yield url, results


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium_browser() as chromium:
        yield chromium


def _query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def _shot(page, folder: Path, name: str) -> None:
    # Every event done (Gradio hides a component's status tracker when it is idle), then the picture.
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=status-tracker]')]"
                           ".every(e => e.classList.contains('hide'))")
    width = page.viewport_size["width"]
    page.screenshot(path=folder / f"{name}_{width}.png", full_page=True)
    assert page_width(page) <= width, f"{name} is {page_width(page)} px wide at a {width} px viewport"


@pytest.mark.parametrize("width", [390, 1280])
def test_a_link_opens_a_run_and_a_click_on_a_row_opens_its_item(space, browser, width: int, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, results = space
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    # The link the Leaderboard gives a run: the Runs tab opens on it, with the filters it names.
    page.goto(url + "?tab=runs&run=sweep/first-cls&task=classification")
    where = page.locator("#db-runs-where")
    expect(where).to_have_text("Item 1 of 8", timeout=30_000)
    expect(page.locator("#db-runs-summary")).to_contain_text("classification: 8 items, accuracy")
    expect(page.locator("#db-runs-judge")).to_be_hidden()  # a classification item has no judge
    rows = page.locator("#db-runs-items tr[data-key]")  # one page of rows, drawn by the server
    expect(rows).to_have_count(8)
    expect(page.locator("#db-runs-pager")).to_have_text("Rows 1–8 of 8")
    third = rows.nth(2).locator("td").nth(1)
    third_id = third.inner_text().strip()
    third.click()
    expect(rows.nth(2)).to_have_class("db-open")
    expect(where).to_have_text("Item 3 of 8")
    expect(page.locator("#db-runs-note")).to_contain_text(f"classification {third_id}")
    expect(page.locator("#db-runs-prompt pre")).not_to_have_text("")
    # Views shown whole: never cropped.
    thumbs = page.locator("#db-runs-gallery .db-view img")
    expect(thumbs.first).to_be_visible()
    assert {thumbs.nth(i).evaluate("e => getComputedStyle(e).objectFit") for i in range(thumbs.count())} == {"contain"}
    # What was parsed, the reference and the score, side by side as text.
    facts = page.locator("#db-runs-facts .db-fact")
    expect(facts).to_have_count(3)
    assert [facts.nth(i).locator(".db-fact-label").inner_text() for i in range(3)] == ["Parsed", "Reference", "Score"]
    expect(facts.nth(1).locator("pre")).to_have_text(re.compile(r'^"[A-H]"$'))
    _shot(page, tmp_path, "runs_item")
    page.wait_for_function("() => location.search.includes('item=')")
    assert _query(page) == {"tab": "runs", "run": "sweep/first-cls", "task": "classification",
                            "item": f"classification/{third_id}"}

    page.get_by_role("button", name="Next →").click()
    expect(where).to_have_text("Item 4 of 8")
    page.get_by_role("button", name="← Previous").click()
    expect(where).to_have_text("Item 3 of 8")
    page.get_by_role("button", name="← Previous").click()
    expect(where).to_have_text("Item 2 of 8")
    second = _query(page)["item"]

    # The address is the view: opened again, it shows the same item.
    page.goto(page.url)
    expect(where).to_have_text("Item 2 of 8", timeout=30_000)
    expect(page.locator("#db-runs-note")).to_contain_text(second.replace("/", " "))

    # Search: nothing holds this text, so no item (and no empty panels).
    box = page.locator("#db-runs-search textarea, #db-runs-search input").first
    box.fill("no answer or prompt holds this")
    box.press("Enter")
    expect(where).to_have_text("No item matches.")
    expect(page.locator("#db-runs-prompt")).to_be_hidden()
    page.wait_for_function("() => location.search.includes('q=')")
    box.fill("")
    box.press("Enter")
    expect(where).to_have_text("Item 1 of 8")

    # A click on a header sorts the whole list by that column (the server sorts, the address keeps it);
    # a second click reverses it.
    ids = lambda: [r.locator("td").nth(1).inner_text().strip() for r in rows.all()]  # noqa: E731
    listed = ids()
    page.locator("#db-runs-items th[data-sort='id']").click()
    page.wait_for_function("() => location.search.includes('sort=id')")
    expect(page.locator("#db-runs-items th[data-sort='id']")).to_have_attribute("aria-sort", "ascending")
    assert ids() == sorted(listed)
    page.locator("#db-runs-items th[data-sort='id']").click()
    expect(page.locator("#db-runs-items th[data-sort='id']")).to_have_attribute("aria-sort", "descending")
    assert ids() == sorted(listed, reverse=True)
    assert page_width(page) <= width
    context.close()


def test_new_runs_appear_on_refresh_and_views_are_two_by_two_on_a_phone(space, browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, results = space
    context = browser.new_context(viewport={"width": 390, "height": 900})
    page = context.new_page()
    page.goto(url + "?tab=runs")  # no run named: the first listed
    expect(page.locator("#db-runs-where")).to_have_text("Item 1 of 2", timeout=30_000)
    shutil.copytree(results / "sweep" / "first-cls", results / "added-later")
    page.get_by_role("button", name="↻ Refresh list").click()
    page.locator("#db-runs-run input").click()
    expect(page.get_by_role("option", name="added-later")).to_be_visible()
    page.get_by_role("option", name="added-later").click()
    page.wait_for_function("() => location.search.includes('run=added-later')")
    thumbs = page.locator("#db-runs-gallery .db-view img")
    expect(thumbs.first).to_be_visible()
    lefts = {round(thumbs.nth(i).bounding_box()["x"]) for i in range(thumbs.count())}
    assert len(lefts) == min(2, thumbs.count())  # two columns at a phone's width
    _shot(page, tmp_path, "runs_refreshed")
    context.close()


@pytest.fixture(scope="module")
def eval_view(space) -> Iterator[str]:
    """`python -m eval view RESULTS` serving the same run folders."""
    import subprocess
    import sys
    import time
    import urllib.request

    from helpers_space import ROOT, free_port

    _, results = space
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "eval", "view", str(results), "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, "eval view exited at start"
            try:
                with urllib.request.urlopen(url + "config", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "eval view did not start in time"
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("width", [390, 1280])
def test_eval_view_opens_an_item_by_its_row_and_keeps_it_in_the_address(eval_view, browser, width: int,
                                                                         tmp_path: Path) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(eval_view + "?run=sweep/first-cls&status=correct")
    where = page.locator("#db-runs-where")
    expect(where).to_have_text("Item 1 of 1", timeout=30_000)  # baseline:first gets one of the 8 right
    page.locator("#db-runs-run input").click()
    page.get_by_role("option", name="sweep/first-cls").click()
    first = page.locator("#db-runs-items tr[data-key]").first
    expect(first.locator("td").nth(2)).to_have_text("correct")
    first.locator("td").nth(1).click()
    page.wait_for_function("() => location.search.includes('item=')")
    assert _query(page)["status"] == "correct" and _query(page)["run"] == "sweep/first-cls"
    thumbs = page.locator("#db-runs-gallery .db-view img")
    expect(thumbs.first).to_be_visible()
    columns = len({round(thumbs.nth(i).bounding_box()["x"]) for i in range(thumbs.count())})
    assert columns == (2 if width < 500 else min(4, thumbs.count()))  # the Space's CSS serves eval view too
    expect(page.locator("#db-runs-prompt pre")).not_to_have_text("")
    _shot(page, tmp_path, "eval_view")
    context.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_a_single_photo_item_is_shown_whole(space, browser, width: int, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, _ = space
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(url + "?tab=runs&run=one-view")
    expect(page.locator("#db-runs-where")).to_have_text("Item 1 of 2", timeout=30_000)
    thumbs = page.locator("#db-runs-gallery .db-view img")
    expect(thumbs).to_have_count(1)
    img = thumbs.first
    assert img.evaluate("e => getComputedStyle(e).objectFit") == "contain"  # scaled to fit, never cut
    assert img.bounding_box()["width"] >= 140  # a view, not a stamp
    _shot(page, tmp_path, "runs_one_view")
    context.close()


def test_the_compare_panel_lists_the_runs_when_opened_and_runs_the_paired_test(space, browser) -> None:
    from playwright.sync_api import expect

    url, _ = space
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url + "?tab=leaderboard")
    expect(page.locator("#db-board table.db-board")).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="Compare two rows (a paired").click()
    expect(page.locator("#db-compare-a input")).to_have_value("one-view", timeout=30_000)
    expect(page.locator("#db-compare-b input")).to_have_value("sweep/first-cls")
    page.locator("#db-compare-a input").click()
    expect(page.get_by_role("option")).to_have_count(2)
    page.keyboard.press("Escape")
    page.locator("#db-compare-go").click()
    expect(page.locator("#db-compare-out")).to_contain_text("classification", timeout=30_000)
    context.close()
