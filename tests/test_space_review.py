"""The Review tab over a construction work folder built by the construction tests' fixture (fake models)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gradio as gr
import pytest

from construct.review import get_item, list_items, released_rows
from construct.work import Stage
from space.diningspace.review_tab import ReviewAccess, ReviewTab
from space.diningspace.settings import SpaceSettings
from tests.helpers_space import strip_views
from tests.test_construct_pipeline import built, monkeypatch_module  # noqa: F401 - the module's fixtures

pytestmark = pytest.mark.slow


@pytest.fixture
def work(built, tmp_path: Path) -> Path:  # noqa: F811 - the imported fixture
    copy = tmp_path / "work"
    shutil.copytree(built.work, copy)
    return copy


TOKEN = "operator-token-0123456789"


@pytest.fixture
def fresh(work: Path) -> Path:
    """The work folder with no decision yet (the fixture's build approved everything)."""
    (work / "review" / "log.jsonl").unlink(missing_ok=True)
    return work


def _log(work: Path) -> list[dict]:
    path = work / "review" / "log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_tab_shows_an_items_photos_and_fields_and_records_decisions(fresh: Path) -> None:
    work = fresh
    tab = ReviewTab(work, ReviewAccess(token=TOKEN))
    ids = tab.ids("vqa", "all")
    assert ids == [i.item_id for i in list_items(work, task="vqa")]
    first = ids[0]
    strip, card, note = tab.show(first, token=TOKEN)
    views = strip_views(strip)
    assert views and all(Path(file).is_file() for file, _ in views) and all(caption.split(" · ")[0] in ("reference", "user") for _, caption in views)
    assert first in card and "merchant" in card and get_item(work, first).dish_id in card

    update, *_, where = tab.decide("reject", "vqa", "all", first, "answer too vague", token=TOKEN)
    assert get_item(work, first).decision == "reject" and get_item(work, first).note == "answer too vague"
    assert first not in {r["id"] for r in released_rows(work)}
    assert "reject" in where and "by operator" in where and update["value"] != first  # moves on
    assert tab.ids("vqa", "reject") == [first]
    tab.approve("vqa", "all", first, "", token=TOKEN)
    assert get_item(work, first).decision == "approve"
    assert [entry["reviewer"] for entry in _log(work)] == ["operator", "operator"]  # every decision says who


def test_a_photo_that_cannot_be_shown_is_left_out_and_the_others_still_are(fresh: Path, monkeypatch) -> None:
    """A broken file, a file past the byte cap, or one declaring more pixels than a decode may afford (refused
    before decoding) is left out of the item's strip; its other photos still show."""
    import struct
    import zlib

    from space.diningspace import review_tab

    tab = ReviewTab(fresh, ReviewAccess(token=TOKEN))
    first = next(i for i in tab.ids("all", "all") if len(get_item(fresh, i).photos) >= 4)
    photos = [Path(path) for path, _ in get_item(fresh, first).photos]
    shown = len(strip_views(tab.show(first, token=TOKEN)[0]))
    assert shown == len(photos)
    kept = [photo.read_bytes() for photo in photos]  # the photos belong to the module's shared raw export
    try:
        photos[0].write_bytes(b"not an image at all")
        # A PNG header declaring 20,000 x 20,000 pixels (400M, over the decode limit): refused before decoding.
        header = struct.pack(">IIBBBBB", 20_000, 20_000, 8, 2, 0, 0, 0)
        chunk = b"IHDR" + header
        photos[1].write_bytes(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(header)) + chunk
                              + struct.pack(">I", zlib.crc32(chunk)))
        # The third: a good photo grown past the byte cap (padding after its end), every other one under it.
        cap = max(len(data) for data in kept)
        photos[2].write_bytes(kept[2] + b"\0" * (cap + 1 - len(kept[2])))
        monkeypatch.setattr(review_tab, "MAX_PHOTO_BYTES", cap)
        left = strip_views(tab.show(first, token=TOKEN)[0])
        assert len(left) == len(photos) - 3 and all(Path(file).is_file() for file, _ in left)
    finally:
        for photo, data in zip(photos, kept, strict=True):
            photo.write_bytes(data)


def test_the_tab_reviews_the_base_dishes_too(work: Path) -> None:
    tab = ReviewTab(work, ReviewAccess(token=TOKEN))
    ids = tab.ids("all", "all", "dishes")
    assert ids == [i.item_id for i in list_items(work, stage="dishes")] and "merchant-01-d0" in ids
    strip, card, _ = tab.show("merchant-01-d0", "dishes", token=TOKEN)
    views = strip_views(strip)
    assert [caption.split(" · ")[0] for _, caption in views][0] == "reference" and "merchant-01" in card
    tab.decide("reject", "all", "all", "merchant-01-d0", "not a dish we want", "dishes", token=TOKEN)
    assert get_item(work, "merchant-01-d0", stage="dishes").decision == "reject"
    assert get_item(work, "merchant-01-d0", stage="dishes").reviewer == "operator"
    verdict = {d["item"]: d for d in Stage(work, "dish_review").decisions()}["merchant-01-d0"]
    assert verdict["verdict"] == "dropped" and verdict["reason"] == "rejected_in_review"
    assert "merchant-01-d0" not in {d["dish_id"] for d in Stage(work, "dish_review").items()}
    with pytest.raises(gr.Error, match="operator and named reviewers only"):  # this pass is guarded too
        tab.decide("approve", "all", "all", "merchant-01-d0", "", "dishes")


def _profile(username: str) -> gr.OAuthProfile:
    return gr.OAuthProfile({"name": username, "preferred_username": username, "profile": "", "picture": ""})


def test_only_the_operator_and_named_reviewers_may_review_and_notes_are_bounded(fresh: Path) -> None:
    work = fresh
    tab = ReviewTab(work, ReviewAccess(["Mei"], TOKEN, on_space=True))
    first = tab.ids("vqa", "all")[0]
    # An anonymous visitor (a page, or a script calling the handler with no sign-in and no token).
    update, gallery, card, _, where = tab.filter("all", "pending", token="", profile=None)
    assert update["choices"] == [] and gallery == "" and "operator and named reviewers only" in card
    assert "sign in with Hugging Face" in where and "review token" in where  # the visitor sees why
    for token, profile, why in (("", None, "operator and named reviewers only"),
                                ("guess-guess-guess-guess", None, "not the operator's review token"),
                                ("", _profile("mallory"), "signed in as mallory, who is not one of")):
        with pytest.raises(gr.Error, match=why):
            tab.approve("vqa", "all", first, "fine", token=token, profile=profile)
        with pytest.raises(gr.Error, match=why):
            tab.show(first, token=token, profile=profile)
    assert _log(work) == []

    with pytest.raises(gr.Error, match="the note is 2,001 characters; at most 2,000"):
        tab.approve("vqa", "all", first, "x" * 2001, profile=_profile("mei"))
    assert _log(work) == []
    tab.approve("vqa", "all", first, "y" * 2000, profile=_profile("mei"))
    assert _log(work)[-1]["reviewer"] == "hf:mei" and len(_log(work)[-1]["note"]) == 2000

    # Off a Space, Gradio's sign-in is a local mock that signs in the machine's own Hugging Face
    # user: a profile grants nothing there, whatever its name.
    local = ReviewTab(work, ReviewAccess(["mei"], TOKEN, on_space=False))
    with pytest.raises(gr.Error, match="operator and named reviewers only"):
        local.reject("vqa", "all", first, "", profile=_profile("mei"))
    with pytest.raises(gr.Error, match="not enabled"):
        ReviewTab(work, ReviewAccess()).approve("vqa", "all", first, "", token=TOKEN, profile=_profile("mei"))
    assert len(_log(work)) == 1


def test_a_script_speaking_to_the_queue_as_a_page_does_is_refused(fresh: Path) -> None:
    """The Review events are private (absent from the API page) but a queue call still reaches them:
    the check is in the handler, so a call without the token fails and nothing is recorded, even in
    a session whose item list was filled by an earlier call that had it."""
    import httpx

    work = fresh
    tab = ReviewTab(work, ReviewAccess(["mei"], TOKEN, on_space=False))
    with gr.Blocks() as demo:
        tab.build()
    demo.queue()
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    index = {getattr(fn.fn, "__name__", ""): i for i, fn in demo.fns.items()}

    def call(http: httpx.Client, name: str, data: list) -> dict:
        http.post("/gradio_api/queue/join", json={"data": data, "fn_index": index[name], "session_hash": "script",
                                                  "event_data": None, "trigger_id": None}).raise_for_status()
        with http.stream("GET", "/gradio_api/queue/data?session_hash=script") as stream:
            return next(json.loads(line[5:]) for line in stream.iter_lines()
                        if line.startswith("data:") and '"process_completed"' in line)

    try:
        first = tab.ids("vqa", "pending")[0]
        with httpx.Client(base_url=url, timeout=30) as http:
            assert call(http, "filter", ["vqa", "pending", "items", TOKEN])["success"]  # the list, as the page loads it
            refused = call(http, "approve", ["vqa", "pending", first, "from a script", "items", ""])
            assert refused["success"] is False and "operator and named reviewers only" in json.dumps(refused)
            assert _log(work) == []
            assert call(http, "approve", ["vqa", "pending", first, "checked", "items", TOKEN])["success"]
        assert [(entry["item"], entry["reviewer"]) for entry in _log(work)] == [(first, "operator")]
    finally:
        demo.close()


def test_review_settings_read_reviewers_a_long_token_and_whether_this_is_a_space(tmp_path: Path) -> None:
    from space.diningspace.settings import SettingsError

    env = {"DININGBENCH_SPACE_REVIEWERS": "Mei, chen", "DININGBENCH_SPACE_REVIEW_TOKEN": TOKEN,
           "SYSTEM": "spaces", "SPACE_ID": "someone/diningbench"}
    with pytest.raises(SettingsError, match="add `hf_oauth: true`"):  # no sign-in without it on a Space
        SpaceSettings.from_env(env, repo_root=tmp_path)
    env["OAUTH_CLIENT_ID"] = "client-id"
    settings = SpaceSettings.from_env(env, repo_root=tmp_path)
    assert settings.reviewers == ("mei", "chen") and settings.review_token == TOKEN and settings.on_space
    assert TOKEN not in repr(settings)
    assert not SpaceSettings.from_env({"SPACE_ID": "someone/diningbench"}, repo_root=tmp_path).on_space
    with pytest.raises(SettingsError, match="at least 16 characters"):
        SpaceSettings.from_env({"DININGBENCH_SPACE_REVIEW_TOKEN": "short"}, repo_root=tmp_path)


@pytest.mark.browser
def test_the_review_tab_on_a_phone_refuses_a_visitor_and_lets_the_operator_decide(fresh: Path, tmp_path: Path) -> None:
    from helpers_space import chromium_browser, launched_space, open_tab, page_width
    from playwright.sync_api import expect

    env = {"DININGBENCH_SPACE_REVIEW_WORK": str(fresh), "DININGBENCH_SPACE_REVIEW_TOKEN": TOKEN}
    with launched_space(env) as (url, _), chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 900})
        page.goto(url)
        open_tab(page, "Review")
        expect(page.locator("#db-review-card")).to_contain_text("operator and named reviewers only", timeout=30_000)
        expect(page.locator("#db-review-where")).to_contain_text("enter the operator's review token")
        assert page.locator("#db-review-gallery img").count() == 0
        page.screenshot(path=tmp_path / "review_refused_390.png", full_page=True)
        assert page_width(page) <= 390
        page.locator("#db-review-token input").fill(TOKEN)
        page.locator("#db-review-token input").press("Enter")
        expect(page.locator("#db-review-where")).to_contain_text("reviewing as operator", timeout=30_000)
        expect(page.locator("#db-review-gallery img").first).to_be_visible()
        # On a phone the photos come first, two across at a useful size, the buttons below them.
        photo = page.locator("#db-review-gallery img").first.bounding_box()
        assert photo["y"] < page.get_by_role("button", name="Approve").bounding_box()["y"]
        assert photo["width"] >= 140, photo
        page.get_by_role("button", name="Approve").click()
        expect(page.locator("#db-review-where")).to_contain_text("recorded by operator", timeout=30_000)
        page.screenshot(path=tmp_path / "review_operator_390.png", full_page=True)
        assert page_width(page) <= 390
    assert [entry["reviewer"] for entry in _log(fresh)] == ["operator"]
