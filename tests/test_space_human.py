"""Take the test: a person's answers become a `human:` run, scored like a model's and pooled on the Leaderboard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_space import (
    chromium_browser,
    launched_space,
    open_tab,
    page_width,
    tiny_dataset,
    write_baseline_run,
)

from eval import tasks
from space.diningspace.catalog import Catalog
from space.diningspace.human import HumanRuns, Sitting, answer_text, clean_name, pick_items, start
from space.diningspace.leaderboard import humans_rows, leaderboard_table


def _sit(catalog: Catalog, runs: HumanRuns, task: str, group: str, answers: list[str], seed: int = 1) -> Path:
    sitting = start(task, catalog.filter_ids(task), len(answers), group=group, name="Mei Chen", lang="en",
                    seed=seed, consent=True)
    for raw in answers:
        sitting.answers.append({"id": sitting.current, "raw": raw, "n_images": 2, "seconds": 8.0})
    folder, _ = runs.save(sitting, {i: catalog.row(task, i) for i in sitting.ids})
    return folder


def test_answers_become_an_ordinary_scored_run_with_only_what_is_needed(tmp_path: Path) -> None:
    catalog = Catalog(loader=tiny_dataset)
    runs = HumanRuns(tmp_path / "results")
    sitting = start("classification", catalog.filter_ids("classification"), 3, group="cook", name="Mei Chen",
                    lang="en", seed=7, consent=True)
    assert sitting.ids == pick_items(["cla-1", "cla-2", "cla-3"], 3, 7)  # seeded order, reproducible
    answers = {"cla-1": "A", "cla-2": "A", "cla-3": "C"}  # references: A, B, C
    for _ in range(3):
        sitting.answers.append({"id": sitting.current, "raw": answers[sitting.current], "n_images": 2, "seconds": 8.0})
    folder, figures = runs.save(sitting, {i: catalog.row("classification", i) for i in sitting.ids})
    assert folder.parent == tmp_path / "results" / "humans"
    assert figures["n"] == 3 and figures["accuracy"] == pytest.approx(2 / 3)
    info = json.loads((folder / "run.json").read_text())
    assert info["model"] == "human:Mei-Chen" and info["human"] == {"group": "cook", "person": sitting.token}
    predictions = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    assert [p["parsed"] for p in predictions] == [answers[i] for i in sitting.ids]
    assert len({p["request_hash"] for p in predictions}) == 3
    assert (folder / "scores.jsonl").is_file() and (folder / "report.md").is_file()
    text = json.dumps(info)
    assert "127.0.0.1" not in text and "session" not in text  # no address, no browser id


def test_the_leaderboard_has_one_humans_row_per_group_with_a_people_and_merchant_interval(tmp_path: Path) -> None:
    catalog = Catalog(loader=tiny_dataset)
    runs = HumanRuns(tmp_path / "results")
    for seed, answers in ((1, ["A", "B", "C"]), (2, ["A", "A", "A"]), (3, ["B", "B", "C"])):
        _sit(catalog, runs, "classification", "cook", answers, seed)
    _sit(catalog, runs, "nutrition", "dietitian", [answer_text("nutrition", [500, 20, 60, 15])] * 3)
    rows = {r["Model"]: r for r in humans_rows(tmp_path / "results", n_boot=200)}
    assert set(rows) == {"humans (cook)", "humans (dietitian)"}
    cook = rows["humans (cook)"]
    assert cook["Items"] == "Cls 9" and cook["Source"] == "Take the test: 3 people"
    assert cook["Cls 95% CI"] is not None  # person × merchant clusters: more than one, so an interval
    assert rows["humans (dietitian)"]["Avg MAPE %"] is not None
    table = leaderboard_table(None, tmp_path / "results")
    assert "human:Mei-Chen" not in set(table["Model"])  # people appear only pooled


def test_answers_are_checked_and_the_name_is_optional() -> None:
    from space.diningspace.human import HumanError

    assert answer_text("classification", " b ") == "B"
    assert answer_text("vqa", "  less   oil ") == "less oil"
    with pytest.raises(HumanError, match="four numbers"):
        answer_text("nutrition", [500, None, 60, 15])
    with pytest.raises(HumanError, match="consent"):
        start("classification", ["a"], 1, group="cook", name="", lang="en", seed=0, consent=False)
    assert clean_name(None) == "anonymous" and clean_name("<script>") == "script"
    assert Sitting.from_state(Sitting("nutrition", ["x"], "cook").to_state()).ids == ["x"]


def test_the_hub_scheduler_is_made_lazily_for_the_folder_of_peoples_runs(tmp_path: Path, monkeypatch) -> None:
    import huggingface_hub

    made: list[dict] = []

    class FakeScheduler:
        def __init__(self, **kwargs) -> None:
            import threading

            made.append(kwargs)
            self.lock = threading.Lock()

    monkeypatch.setattr(huggingface_hub, "CommitScheduler", FakeScheduler)
    runs = HumanRuns(tmp_path / "results", hub_repo="someone/diningbench-humans")
    assert made == []  # nothing is made (no network) until a person finishes
    _sit(Catalog(loader=tiny_dataset), runs, "classification", "layperson", ["A"])
    assert len(made) == 1
    assert made[0]["repo_id"] == "someone/diningbench-humans" and made[0]["repo_type"] == "dataset"
    assert Path(made[0]["folder_path"]) == tmp_path / "results" / "humans"
    _sit(Catalog(loader=tiny_dataset), runs, "classification", "layperson", ["B"], seed=2)
    assert len(made) == 1  # one scheduler for the Space
    assert HumanRuns(tmp_path / "r2").scheduler() is None  # no repo named: nothing pushed


# ---------------------------------------------------------------- in a browser
@pytest.fixture(scope="module")
def human_space(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    results = tmp_path_factory.mktemp("results")
    write_baseline_run(results, "first-cls", "classification", "baseline:first")  # the models in the recap
    # A browser driven by a script answers in milliseconds: the check for scripted sittings is off
    # here (it has its own tests below), so that this sitting reaches the Leaderboard.
    with launched_space({"DININGBENCH_SPACE_RESULTS": str(results),
                         "DININGBENCH_SPACE_MIN_ANSWER_SECONDS": "0"}) as (url, _):
        yield url, results


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("width", [390, 1280])
def test_take_the_test_in_a_browser_and_see_the_run_on_the_leaderboard(human_space, width: int,
                                                                        tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, results = human_space
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(url)
        open_tab(page, "Take the test")
        page.locator("#db-human-n input[type=number]").fill("2")
        page.locator("#db-human-n input[type=number]").press("Enter")
        page.locator("#db-human-group").get_by_label("cook").check()
        page.locator("#db-human-name").locator("input, textarea").fill(f"tester{width}")
        page.get_by_role("button", name="Start the test").click()
        expect(page.get_by_text("consent box")).to_be_visible()  # refused without consent
        page.locator(".toast-close").first.click()  # the refusal's toast covers the box on a phone
        page.locator("#db-human-consent").get_by_role("checkbox").check()
        page.get_by_role("button", name="Start the test").click()
        where = page.locator("#db-human-where")
        expect(where).to_contain_text("Which dish is this? · item 1 of 2", timeout=30_000)
        expect(page.locator("#db-human-prompt")).to_contain_text("A.")
        expect(page.locator("#db-human-reveal .db-card")).to_have_count(0)  # no reference before answering
        thumbs = page.locator("#db-human-gallery .db-view img")
        expect(thumbs.first).to_be_visible()
        boxes = [thumbs.nth(i).bounding_box() for i in range(thumbs.count())]
        columns = len({round(b["x"]) for b in boxes})
        assert columns == (2 if width < 500 else min(4, len(boxes)))  # two by two on a phone
        assert min(b["width"] for b in boxes) >= (140 if width < 500 else 200)  # not thumbnails of 90 px
        assert {thumbs.nth(i).evaluate("e => getComputedStyle(e).objectFit") for i in range(len(boxes))} == {
            "contain"}  # each photo whole
        page.screenshot(path=tmp_path / f"question_{width}.png", full_page=True)
        assert page_width(page) <= width
        thumbs.first.click()  # a tap shows the photo large, across the strip
        enlarged = page.locator("#db-human-gallery .db-view-large img").first
        expect(enlarged).to_be_visible()
        assert enlarged.bounding_box()["width"] > boxes[0]["width"]
        page.screenshot(path=tmp_path / f"zoom_{width}.png", full_page=True)
        enlarged.click()  # and a tap puts it back
        expect(page.locator("#db-human-gallery .db-view-large")).to_have_count(0)
        # Finish now before any answer: a warning, and the question stays (no blank panel, no error).
        page.get_by_role("button", name="Finish now (save what I answered)").click()
        expect(page.get_by_text("Answer at least one item first")).to_be_visible()
        expect(page.locator("#db-human-prompt")).to_contain_text("A.")
        expect(page.locator(".error, .toast-body.error")).to_have_count(0)
        page.screenshot(path=tmp_path / f"finish_early_{width}.png", full_page=True)
        page.locator(".toast-close").first.click()
        for item in (1, 2):
            page.locator("#db-human-letter").get_by_label("B", exact=True).check()
            page.get_by_role("button", name="Submit answer").click()
            expect(page.locator("#db-human-reveal .db-correct")).to_have_count(1)  # the reference, after
            expect(page.locator("#db-human-reveal .db-feedback")).to_contain_text("You chose B (")
            assert "{" not in page.locator("#db-human-reveal .db-feedback").inner_text()
            if item == 1:
                page.screenshot(path=tmp_path / f"reveal_{width}.png", full_page=True)
                page.get_by_role("button", name="Next item").click()
                expect(page.locator("#db-human-where")).to_contain_text("item 2 of 2")
                expect(page.locator("#db-human-reveal .db-card")).to_have_count(0)
        page.get_by_role("button", name="Finish and save").click()
        expect(page.locator("#db-human-done")).to_contain_text("human:tester", timeout=30_000)
        recap_box = page.locator("#db-human-recap")
        expect(recap_box.locator(".db-recap-item")).to_have_count(2)
        expect(recap_box.locator(".db-recap-tally")).to_contain_text("baseline:first")
        expect(recap_box.locator(".db-recap-item").first).to_contain_text("baseline:first")
        page.screenshot(path=tmp_path / f"recap_{width}.png", full_page=True)
        assert page_width(page) <= width
        open_tab(page, "Leaderboard")
        page.get_by_role("button", name="Refresh").click()
        expect(page.locator("#db-board tr.db-humans")).to_contain_text("humans (cook)")
        page.screenshot(path=tmp_path / f"leaderboard_humans_{width}.png", full_page=True)
        assert page_width(page) <= width
    folders = list((results / "humans").glob("human-cook-*"))
    assert folders and all((f / "metrics.json").is_file() for f in folders)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("width", [390, 1280])
def test_estimate_the_nutrition_in_a_browser_told_back_in_sentences(human_space, width: int, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, _ = human_space
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(url)
        open_tab(page, "Take the test")
        page.locator("#db-human-task").get_by_label("Estimate the nutrition").check()
        page.locator("#db-human-n input[type=number]").fill("1")
        page.locator("#db-human-n input[type=number]").press("Enter")
        page.locator("#db-human-consent").get_by_role("checkbox").check()
        page.get_by_role("button", name="Start the test").click()
        expect(page.locator("#db-human-where")).to_contain_text("Estimate the nutrition · item 1 of 1", timeout=30_000)
        for box, value in (("kcal", "600"), ("protein", "25"), ("carbs", "70"), ("fat", "20")):
            page.locator(f"#db-human-{box} input").fill(value)
        page.get_by_role("button", name="Submit answer").click()
        feedback = page.locator("#db-human-reveal .db-feedback")
        expect(feedback).to_contain_text("You estimated 600 kcal, 25 g protein, 70 g carbohydrates and 20 g fat.")
        expect(feedback).to_contain_text("You were off by")
        assert "{" not in feedback.inner_text()
        page.screenshot(path=tmp_path / f"nutrition_reveal_{width}.png", full_page=True)
        assert page_width(page) <= width
        page.get_by_role("button", name="Finish and save").click()
        card = page.locator("#db-human-recap .db-recap-item")
        expect(card).to_have_count(1, timeout=30_000)
        expect(card).to_contain_text("You: 600 kcal, 25 g protein, 70 g carbohydrates and 20 g fat")
        expect(card).to_contain_text("No model run here answered this item.")
        page.screenshot(path=tmp_path / f"nutrition_recap_{width}.png", full_page=True)
        assert page_width(page) <= width


# ---------------------------------------------------------------- floods and scripts
class _Clock:
    """The server's clock, played forward by the test (no sleeping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Request:
    """What Gradio passes a handler about the caller: a session and the connection's address."""

    def __init__(self, session: str, address: str) -> None:
        import types

        self.session_hash, self.client, self.headers = session, types.SimpleNamespace(host=address), {}


def _tab(tmp_path: Path, clock: _Clock, **env: str):
    from space.diningspace.human_tab import HumanTab
    from space.diningspace.settings import SpaceSettings

    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_RESULTS": str(tmp_path / "results"), **env},
                                      repo_root=tmp_path)
    return HumanTab(Catalog(loader=tiny_dataset), settings, clock=clock)


def _sitting(tab, clock: _Clock, request: _Request, seconds_per_item: float, n: int = 3) -> str | None:
    """One sitting through the tab's handlers, as the page (or a script on the queue) calls them;
    the run folder's name, or None when the start was refused."""
    import asyncio

    shown = tab.begin("classification", n, 1, "cook", "bot", "en", True, request)
    state = shown[0]
    if not isinstance(state, dict) or "__type__" in state:  # refused: every output skipped
        return None
    for i in range(n):
        clock.now += seconds_per_item
        state = tab.submit(state, "A", None, None, None, None, "")[0]
        if i < n - 1:
            state = tab.next_item(state)[0]
    done = asyncio.run(tab.finish(state))[3]
    return done.split("Saved as the run `", 1)[1].split("`", 1)[0]


@pytest.mark.slow
def test_a_flood_of_40_scripted_sittings_leaves_the_humans_row_unchanged(tmp_path: Path) -> None:
    clock = _Clock()
    tab = _tab(tmp_path, clock)  # defaults: 3 sittings a session, 10 an address, 120 the Space, per hour
    results = tmp_path / "results"
    # One address, a new session each time: the address's cap refuses all but 10.
    saved = [_sitting(tab, clock, _Request(f"s{i}", "203.0.113.9"), 0.05) for i in range(40)]
    assert sum(name is not None for name in saved) == 10
    # 40 addresses (a botnet, or a proxy the operator did not declare): all start, none counts.
    saved += [_sitting(tab, clock, _Request(f"t{i}", f"198.51.100.{i}"), 0.05) for i in range(40)]
    folders = sorted((results / "humans").iterdir())
    assert len(folders) == 50  # every sitting kept...
    marks = {json.loads((f / "run.json").read_text())["human"].get("automated") for f in folders}
    assert marks == {"answer 1 came 0.1 s after its item was shown (under 2 s)"}
    assert humans_rows(results, n_boot=50) == []  # ...and none of them makes a humans row

    # A person, at a person's pace, is counted; the row says how many sittings were left out.
    _sitting(tab, clock, _Request("person", "192.0.2.1"), 12.0)
    [row] = humans_rows(results, n_boot=50)
    assert row["Source"] == "Take the test: 1 person; 50 scripted sittings left out" and row["Items"] == "Cls 3"


def test_one_slow_start_then_a_burst_of_answers_is_left_out_of_the_humans_row(tmp_path: Path) -> None:
    """Wait 2.5 s once, then send every answer at once (no item shown between them): each answer is
    timed from its own item's showing on the server, so the burst carries no time and is left out."""
    import asyncio

    clock = _Clock()
    tab = _tab(tmp_path, clock)
    results = tmp_path / "results"
    for k in range(3):
        state = tab.begin("classification", 3, 1, "cook", f"bot{k}", "en", True, _Request(f"b{k}", f"203.0.113.{k}"))[0]
        clock.now += 2.5
        for _ in range(3):  # the same state every time: answers sent together, none after a showing
            state = tab.submit(state, "A", None, None, None, None, "")[0]
        asyncio.run(tab.finish(state))
    marks = [json.loads((f / "run.json").read_text())["human"].get("automated")
             for f in sorted((results / "humans").iterdir())]
    assert marks == ["answer 2 was sent without its item being shown"] * 3
    assert humans_rows(results, n_boot=50) == []
    # One fast answer among slow ones is enough to leave a sitting out.
    state = tab.begin("classification", 3, 1, "cook", "mixed", "en", True, _Request("m", "192.0.2.7"))[0]
    for k, wait in enumerate((9.0, 0.3, 9.0)):
        clock.now += wait
        state = tab.submit(state, "A", None, None, None, None, "")[0]
        if k < 2:
            state = tab.next_item(state)[0]
    asyncio.run(tab.finish(state))
    assert humans_rows(results, n_boot=50) == []


def test_sittings_are_capped_per_session_address_and_space_for_an_hour(tmp_path: Path) -> None:
    clock = _Clock()
    tab = _tab(tmp_path, clock, DININGBENCH_SPACE_SITTINGS_PER_HOUR="5")
    person = _Request("one-session", "192.0.2.1")
    assert [_sitting(tab, clock, person, 5.0, n=1) is not None for _ in range(4)] == [True, True, True, False]
    assert _sitting(tab, clock, _Request("other", "192.0.2.2"), 5.0, n=1) is not None
    assert _sitting(tab, clock, _Request("third", "192.0.2.3"), 5.0, n=1) is not None
    with pytest.warns(UserWarning, match=r"this Space already started 5 test\(s\) in the last hour"):
        assert _sitting(tab, clock, _Request("fourth", "192.0.2.4"), 5.0, n=1) is None  # the visitor reads why
    clock.now += 3600
    assert _sitting(tab, clock, person, 5.0, n=1) is not None  # an hour later


def test_answers_are_bounded_in_size() -> None:
    from space.diningspace.human import HumanError

    assert answer_text("vqa", "y" * 2000) == "y" * 2000
    with pytest.raises(HumanError, match="your answer is 2,001 characters; at most 2,000"):
        answer_text("vqa", "y" * 2001)
    with pytest.raises(HumanError, match="your answer is 1,000,000 characters"):
        answer_text("vqa", "y" * 1_000_000)
    for numbers in ([float("inf"), 1, 1, 1], [float("nan"), 1, 1, 1], [1e9, 1, 1, 1], [1, 1, 1, 1, 1], ["x", 1, 1, 1]):
        with pytest.raises(HumanError, match="four numbers"):
            answer_text("nutrition", numbers)
    assert clean_name("x" * 10_000) == "x" * 32


def test_a_vqa_sitting_is_judged_inside_the_spaces_request_slots(tmp_path: Path, monkeypatch) -> None:
    import asyncio

    from space.diningspace.human_tab import HumanTab
    from space.diningspace.limits import RequestSlots
    from space.diningspace.settings import SpaceSettings
    from tests.fakes.openai_server import FakeOpenAIServer

    slots = RequestSlots(1)
    in_flight_when_asked: list[int] = []

    def judge(request: dict) -> str:
        in_flight_when_asked.append(slots.in_flight)
        return "The answer matches.\nGRADE: C"

    clock = _Clock()
    with FakeOpenAIServer(oracle=judge) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge")
        settings = SpaceSettings.from_env({"DININGBENCH_SPACE_RESULTS": str(tmp_path / "results"),
                                           "DININGBENCH_SPACE_JUDGE": "openai:judge"}, repo_root=tmp_path)
        tab = HumanTab(Catalog(loader=tiny_dataset), settings, slots, clock=clock)
        state = tab.begin("vqa", 2, 1, "dietitian", "", "en", True, _Request("s", "192.0.2.1"))[0]
        for i in range(2):
            clock.now += 30
            state = tab.submit(state, None, None, None, None, None, f"a considered answer number {i}")[0]
            if i == 0:
                state = tab.next_item(state)[0]
        asyncio.run(tab.finish(state))
    assert in_flight_when_asked == [1, 1]  # each judge call held a Space-wide slot (and was alone in it)
    [folder] = (tmp_path / "results" / "humans").iterdir()
    scores = [json.loads(line) for line in (folder / "scores.jsonl").read_text().splitlines()]
    assert [s["verdict"] for s in scores] == ["C", "C"]


def test_a_run_pushed_from_the_space_names_its_data_without_the_operators_path(tmp_path: Path) -> None:
    from space.diningspace.human import dataset_label

    release = tmp_path / "operator" / "private" / "diningbench-release"
    assert dataset_label(str(release)) == "diningbench-release"
    assert dataset_label("someone/diningbench") == "someone/diningbench" and dataset_label(None) is None
    runs = HumanRuns(tmp_path / "results", dataset=str(release))
    folder = _sit(Catalog(loader=tiny_dataset), runs, "classification", "cook", ["A"])
    text = (folder / "run.json").read_text()
    assert str(tmp_path) not in text and json.loads(text)["dataset"]["source"] == "diningbench-release"


# ---------------------------------------------------------------- words for people, and the recap
def test_finish_now_with_no_answers_warns_and_keeps_the_question(tmp_path: Path) -> None:
    import asyncio

    tab = _tab(tmp_path, _Clock())
    state = tab.begin("classification", 2, 1, "cook", "", "en", True, _Request("s", "192.0.2.1"))[0]
    with pytest.warns(UserWarning, match="Answer at least one item first"):
        shown = asyncio.run(tab.finish(state))
    assert len(shown) == 5 and all(s == {"__type__": "update"} for s in shown)  # every panel as it was
    assert not (tmp_path / "results" / "humans").exists()  # nothing saved


def test_feedback_is_sentences_not_json() -> None:
    from space.diningspace.recap import feedback

    row = tiny_dataset_rows("classification")[1]  # answer B: "Dish 1 <b>"
    css, text = feedback("classification", "A", {"parsed": "A", "correct": False}, row, "en")
    assert css == "db-bad" and html_text(text) == ("You chose A (Dish 0 <b>). Not this time: the dish is B "
                                                   "(Dish 1 <b>).")
    assert "<b>" not in text.replace("<b>A</b>", "").replace("<b>B</b>", "")  # the option's markup is text
    css, text = feedback("classification", "B", {"parsed": "B", "correct": True}, row, "zh")
    assert html_text(text) == "You chose B (菜1). That is the dish: well done."
    nut = tiny_dataset_rows("nutrition")[0]  # 500 kcal, 20 g protein, 60 g carbohydrates, 15.5 g fat
    record = {"parsed": {"calories": 550.0, "protein": 20.0, "carbohydrates": 45.0, "fat": 31.0},
              "ape": {"calories": 0.1, "protein": 0.0, "carbohydrates": 0.25, "fat": 1.0}}
    _, text = feedback("nutrition", "{...}", record, nut, "en")
    assert html_text(text) == ("You estimated 550 kcal, 20 g protein, 45 g carbohydrates and 31 g fat. The reference "
                               "is 500 kcal, 20 g protein, 60 g carbohydrates and 15.5 g fat. You were off by 10% "
                               "on calories, 0% on protein, 25% on carbohydrates and 100% on fat.")
    assert "{" not in text
    _, text = feedback("vqa", "less oil\n<i>and salt</i>", {"parsed": "less oil"}, tiny_dataset_rows("vqa")[0], "en")
    assert html_text(text) == ("You answered: “less oil <i>and salt</i>”. The judge compares it with the reference "
                               "answer below when you finish the test.")
    assert "<i>" not in text


def test_the_recap_sets_your_answers_beside_the_reference_and_the_models(tmp_path: Path) -> None:
    import asyncio

    from helpers_report import cls_item, write_run

    results = tmp_path / "results"
    # A model run on the same items: cla-1 right (A), cla-2 wrong (A; the answer is B); cla-3 not asked.
    write_run(results / "openai-x", "openai:x", [{**cls_item("cla-1", "m1", True), "parsed": "A", "reference": "A"},
                                                 {**cls_item("cla-2", "m1", False), "parsed": "A", "reference": "B"}])
    write_run(results / "other-task", "openai:y", [{**cls_item("zzz", "m1", True)}])  # none of these items
    write_run(results / "hostile", "openai:<img src=x onerror=alert(1)>", [{**cls_item("cla-3", "m1", True),
                                                                           "parsed": "<script>x</script>"}])
    clock = _Clock()
    tab = _tab(tmp_path, clock)
    _sitting(tab, clock, _Request("earlier", "192.0.2.9"), 5.0)  # an earlier person: never among "models"
    answers = {"cla-1": "A", "cla-2": "A", "cla-3": "C"}
    state = tab.begin("classification", 3, 1, "cook", "", "en", True, _Request("s", "192.0.2.1"))[0]
    for i in range(3):
        clock.now += 5
        state = tab.submit(state, answers[Sitting.from_state(state).current], None, None, None, None, "")[0]
        if i < 2:
            state = tab.next_item(state)[0]
    shown = asyncio.run(tab.finish(state))
    text = html_text(shown[4])
    assert "You: 2 of 3 right" in text and "openai:x: 1 of 2 right on the same items" in text
    assert "openai:y" not in text and "human:" not in text
    cards = {c.split(" ", 1)[0]: c for c in (html_text(c) for c in shown[4].split("<div class='db-recap-item'>")[1:])}
    assert cards["cla-2"] == ("cla-2 You: A (Dish 0 <b>) wrong ✗ Reference: B (Dish 1 <b>) Models on the same item "
                              "openai:x: A (Dish 0 <b>) wrong ✗")
    assert cards["cla-1"].endswith("openai:x: A (Dish 0 <b>) right ✓")
    assert cards["cla-3"] == ("cla-3 You: C (Dish 2 <b>) right ✓ Reference: C (Dish 2 <b>) Models on the same item "
                              "openai:<img src=x onerror=alert(1)>: <script>x</script> right ✓")
    assert "<b>)" not in shown[4]  # the dataset's markup is shown as text, and a run folder's too:
    assert "<img" not in shown[4] and "<script" not in shown[4] and "openai:<img src=x onerror=alert(1)>" in text


def test_a_nutrition_answer_is_told_back_in_sentences_from_the_real_score(tmp_path: Path) -> None:
    clock = _Clock()
    tab = _tab(tmp_path, clock)
    state = tab.begin("nutrition", 1, 1, "cook", "", "en", True, _Request("s", "192.0.2.1"))[0]
    assert tab._question(Sitting.from_state(state))[3].startswith("**Estimate the nutrition** · item 1 of 1")
    item = tiny_dataset_rows("nutrition")[int(Sitting.from_state(state).current[-1]) - 1]
    kcal = item["calories"] * 1.1  # 10% over; the rest exact but fat, twice the reference
    reveal = tab.submit(state, None, kcal, item["protein"], item["carbohydrates"], item["fat"] * 2, "")[4]
    text = html_text(reveal.split("<p><b>Reference</b>")[0])
    assert text.endswith("You were off by 10% on calories, 0% on protein, 0% on carbohydrates and 100% on fat.")
    assert text.startswith(f"You estimated {kcal:,.1f} kcal, 20 g protein, 60 g carbohydrates and 31 g fat.")


def tiny_dataset_rows(config: str) -> list[dict]:
    from helpers_space import tiny_rows

    return tiny_rows(config)


def html_text(fragment: str) -> str:
    import html
    import re

    inline = re.sub(r"</?(b|span)\b[^>]*>", "", fragment)  # the rest (cells, items, paragraphs) part words
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", inline)).split())


def test_people_read_instructions_for_people_never_the_models_reply_format() -> None:
    from space.diningspace.human_tab import people_text

    cls = {"options": ["宫保鸡丁", "鱼香肉丝"], "options_en": ["Kung pao chicken", "Fish-fragrant pork"]}
    text = people_text("classification", cls, "en")
    assert text.splitlines()[1:] == ["A. Kung pao chicken", "B. Fish-fragrant pork"]
    nutrition = people_text("nutrition", {}, "en")
    assert "ONE serving" in nutrition and "JSON" not in nutrition and "Output" not in nutrition
    assert "JSON" not in people_text("nutrition", {}, "zh")
    assert people_text("vqa", {"question": "这道菜辣吗？", "question_en": "Is it spicy?"}, "en").endswith("Is it spicy?")


def test_the_recap_lists_each_model_once_its_newest_run(tmp_path: Path) -> None:
    import os
    import shutil

    from helpers_space import write_baseline_run

    from space.diningspace.recap import model_answers

    first = write_baseline_run(tmp_path / "results", "a", "classification", "baseline:first")
    copy = tmp_path / "results" / "b"
    shutil.copytree(first, copy)  # the same model and settings in a second results folder
    os.utime(copy / "scores.jsonl", (2_000_000_000, 2_000_000_000))
    ids = [json.loads(line)["id"] for line in (first / "scores.jsonl").read_text().splitlines()][:3]
    found = model_answers(tmp_path / "results", tasks.get("classification"), ids)
    assert [label for label, _ in found] == ["baseline:first"]
