"""The Space in a real headless Chromium: browse an item, run an evaluation, keep screenshots.

Uses Debian's /usr/bin/chromium (never a downloaded browser). Without it the test is skipped,
unless DININGBENCH_REQUIRE_BROWSER=1 (CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers_space import launched_space

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        if os.environ.get("DININGBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and DININGBENCH_REQUIRE_BROWSER=1: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def space_url():
    with launched_space({"DININGBENCH_SPACE_MAX_ITEMS": "10"}) as (url, _):
        yield url


@pytest.fixture
def page(browser, space_url: str):
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    page = context.new_page()
    # The page must work offline: anything but the Space itself is refused (and would fail the test).
    outside: list[str] = []

    def only_local(route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1" or route.request.url.startswith("data:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.goto(space_url)
    yield page
    context.close()
    assert not outside, f"the page tried to reach other hosts: {outside[:3]}"


def test_browse_an_item_and_step_through_the_sample(page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect(page).to_have_title("DiningBench")
    expect(page.get_by_text("synthetic sample")).to_be_visible()
    card = page.locator("#db-card")
    expect(card.locator(".db-option")).to_have_count(8, timeout=30_000)
    expect(page.locator("#db-gallery img").first).to_be_visible()
    expect(page.locator("#db-gallery").get_by_text(re.compile(r"reference · view 1"))).to_be_visible()
    first_id = card.locator(".db-id").inner_text()
    page.screenshot(path=tmp_path / "browse.png", full_page=True)

    page.get_by_role("button", name="Next →").click()
    expect(card.locator(".db-id")).not_to_have_text(first_id)
    expect(page.get_by_text("Item 2 of")).to_be_visible()
    page.get_by_label("Show answer").check()
    expect(card.locator(".db-correct")).to_have_count(1)

    page.get_by_label("nutrition").check()
    expect(card.locator(".db-facts")).to_be_visible(timeout=30_000)
    expect(card).to_contain_text("kcal")
    page.screenshot(path=tmp_path / "browse_nutrition.png", full_page=True)


def test_run_a_baseline_evaluation_and_see_the_results(page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Evaluate").click()
    page.get_by_role("button", name="Run evaluation").click()
    status = page.locator("#db-eval-status")
    expect(status).to_contain_text("accuracy", timeout=60_000)
    expect(status).to_contain_text("baseline:random")
    rows = page.locator("#db-results table.db-results tbody tr")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 1
    expect(rows.first.locator("img.db-thumb")).to_be_visible()
    page.screenshot(path=tmp_path / "evaluate.png", full_page=True)

    page.get_by_role("tab", name="Leaderboard").click()
    expect(page.get_by_text("reported (paper)").first).to_be_visible()
    page.screenshot(path=tmp_path / "leaderboard.png", full_page=True)


def test_own_key_fields_appear_only_when_chosen_and_the_key_box_is_masked(page) -> None:
    from playwright.sync_api import expect

    from space.diningspace.evaluation import OWN_KEY, supports_own_keys

    page.get_by_role("tab", name="Evaluate").click()
    key_box = page.locator("#db-api-key input")
    expect(key_box).to_be_hidden()
    if not supports_own_keys("openai"):
        page.locator("#db-eval-model input").click()
        expect(page.get_by_role("option", name=OWN_KEY)).to_have_count(0)
        return
    page.locator("#db-eval-model input").click()
    page.get_by_role("option", name=OWN_KEY).click()
    expect(key_box).to_be_visible()
    assert key_box.get_attribute("type") == "password"
    expect(page.locator("#db-base-url").locator("input, textarea")).to_be_hidden()  # no allow-listed hosts here


@pytest.mark.parametrize("width", [390, 1280])
def test_a_page_load_loads_only_the_tab_it_shows(browser, space_url: str, width: int) -> None:
    """The page opens on the tab its address names (Browse, the first tab, never drawn) and loads only it,
    in one event; another tab loads when first opened, and opening it again asks nothing more."""
    from helpers_space import open_tab
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    events: list[str] = []
    page.on("request", lambda r: events.append(r.post_data or "") if "/queue/join" in r.url else None)
    page.goto(space_url + "?tab=leaderboard")
    expect(page.locator("#db-board table.db-board")).to_be_visible(timeout=30_000)
    expect(page.locator("#db-card")).to_have_count(0)  # Browse never drawn, so not loaded either
    assert len(events) == 1, events  # the Leaderboard's selection, which loads it: no page-load event
    open_tab(page, "Browse")
    expect(page.locator("#db-card .db-option").first).to_be_visible(timeout=30_000)
    open_tab(page, "Leaderboard")
    board = page.locator("#db-board table.db-board").inner_html()
    open_tab(page, "Browse")
    page.wait_for_timeout(500)
    assert page.locator("#db-board table.db-board").inner_html() == board
    assert len(events) == 4, events  # each tab's selection twice (the second loads nothing), no more
    context.close()
