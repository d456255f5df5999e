"""Take the test: a person's answers become a `human:` run, scored like a model's and pooled on the Leaderboard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_space import chromium_browser, launched_space, open_tab, page_width, tiny_dataset

from space.diningspace.catalog import Catalog
from space.diningspace.human import HumanRuns, Sitting, answer_text, clean_name, pick_items, start
from space.diningspace.leaderboard import humans_rows, leaderboard_table


def _sit(catalog: Catalog, runs: HumanRuns, task: str, group: str, answers: list[str], seed: int = 1) -> Path:
    sitting = start(task, catalog.filter_ids(task), len(answers), group=group, name="Mei Chen", lang="en",
                    seed=seed, consent=True)
    for raw in answers:
        sitting.answers.append({"id": sitting.current, "raw": raw, "n_images": 2})
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
        sitting.answers.append({"id": sitting.current, "raw": answers[sitting.current], "n_images": 2})
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
    with launched_space({"DININGBENCH_SPACE_RESULTS": str(results)}) as (url, _):
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
        expect(page.locator("#db-human-where")).to_contain_text("item 1 of 2", timeout=30_000)
        expect(page.locator("#db-human-prompt")).to_contain_text("A.")
        expect(page.locator("#db-human-reveal .db-card")).to_have_count(0)  # no reference before answering
        page.screenshot(path=tmp_path / f"question_{width}.png", full_page=True)
        assert page_width(page) <= width
        for item in (1, 2):
            page.locator("#db-human-letter").get_by_label("B", exact=True).check()
            page.get_by_role("button", name="Submit answer").click()
            expect(page.locator("#db-human-reveal .db-correct")).to_have_count(1)  # the reference, after
            expect(page.locator("#db-human-reveal")).to_contain_text("You answered B")
            if item == 1:
                page.screenshot(path=tmp_path / f"reveal_{width}.png", full_page=True)
                page.get_by_role("button", name="Next item").click()
                expect(page.locator("#db-human-where")).to_contain_text("item 2 of 2")
                expect(page.locator("#db-human-reveal .db-card")).to_have_count(0)
        page.get_by_role("button", name="Finish and save").click()
        expect(page.locator("#db-human-done")).to_contain_text("human:tester", timeout=30_000)
        open_tab(page, "Leaderboard")
        page.get_by_role("button", name="Refresh").click()
        expect(page.locator("#db-board tr.db-humans")).to_contain_text("humans (cook)")
        page.screenshot(path=tmp_path / f"leaderboard_humans_{width}.png", full_page=True)
        assert page_width(page) <= width
    folders = list((results / "humans").glob("human-cook-*"))
    assert folders and all((f / "metrics.json").is_file() for f in folders)
