"""Submissions through the launched Space, as an API user makes them, with a fake Hub behind it.

One fake Hub (a real HTTP server on 127.0.0.1, reached through HF_ENDPOINT) holds the operator's
private dataset, where people's runs and submissions are kept, and visitors' public repos. The
Space is started, takes submissions, pushes them; a second Space started on an empty results
folder reads submissions and people's runs back.
"""

from __future__ import annotations

import re
import shutil
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from helpers_dataset import FakeHub
from helpers_space import launched_space, write_baseline_run
from test_space_submit import CARD, edited_copy, gigabyte_bomb, zip_folder

from space.diningspace.catalog import Catalog
from space.diningspace.human import HumanRuns, start

pytestmark = pytest.mark.slow
OPERATOR_REPO = "operator/diningbench-space"
DATASET_ID = "us/diningbench"
TOKEN = "hf_operator_0123456789abcdef"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_run(tmp_path_factory.mktemp("runs"), "demo", "all", "baseline:category-mean")


def _person(results: Path) -> Path:
    """A cook's sitting of two classification items, saved as the Take the test tab saves it."""
    catalog = Catalog()
    sitting = start("classification", catalog.filter_ids("classification"), 2, group="cook", name="Mei",
                    lang="zh", seed=3, consent=True)
    for letter in "AB":
        sitting.answers.append({"id": sitting.current, "raw": letter, "n_images": 2, "seconds": 9.0})  # a person's pace
    folder, _ = HumanRuns(results).save(sitting, {i: catalog.row("classification", i) for i in sitting.ids})
    return folder


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, demo_run: Path) -> Iterator[FakeHub]:
    with FakeHub() as fake:
        operator = f"datasets/{OPERATOR_REPO}"
        fake.private.add(operator)
        person = _person(tmp_path_factory.mktemp("earlier"))  # pushed by an earlier Space
        fake.repos[operator] = {f"humans/{person.name}/{name}": (person / name).read_bytes()
                                for name in ("run.json", "predictions.jsonl")}
        fake.repos["datasets/visitor/demo-run"] = {f"demo/{p.name}": p.read_bytes() for p in demo_run.iterdir()
                                                   if p.suffix in (".json", ".jsonl")}
        fake.repos["models/acme/acme-vl-7b"] = {"README.md": (CARD % (DATASET_ID, DATASET_ID)).encode()}
        zipped = zip_folder(demo_run, tmp_path_factory.mktemp("zips") / "run.zip")
        fake.repos["models/visitor/zipped"] = {"README.md": b"# no results here\n", "run.zip": zipped.read_bytes()}
        fake.repos["datasets/visitor/huge"] = {"run.zip": b"\0" * (21 << 20)}  # over the 20 MB default
        yield fake


def _env(hub: FakeHub, results: Path, home: Path) -> dict[str, str]:
    return {"DININGBENCH_SPACE_RESULTS": str(results), "DININGBENCH_SPACE_SUBMIT_REPO": OPERATOR_REPO,
            "DININGBENCH_SPACE_HUMAN_REPO": OPERATOR_REPO, "DININGBENCH_SPACE_DATASET_ID": DATASET_ID,
            "DININGBENCH_SPACE_SUBMITS_PER_HOUR": "50", "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN,
            "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "5",
            "HF_HUB_OFFLINE": "0"}  # online, to the fake Hub only (HF_DATASETS_OFFLINE stays on)


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory, hub: FakeHub) -> Iterator[tuple[Client, Path, list[str]]]:
    results = tmp_path_factory.mktemp("results")
    with launched_space(_env(hub, results, tmp_path_factory.mktemp("hf"))) as (url, log):
        yield Client(url, verbose=False, download_files=False), results, log


def _board(client: Client) -> list[dict]:
    table = client.predict(api_name="/leaderboard")
    return [dict(zip(table["headers"], row, strict=True)) for row in table["data"]]


OWNER: dict[str, str] = {}  # the owner secret the first submission was given: later ones replace its row


def _submit(client: Client, path: Path | None = None, repo: str = "", kind: str = "model") -> tuple[str, dict]:
    text, record = client.predict(handle_file(str(path)) if path else None, repo, kind, OWNER.get("secret", ""),
                                  api_name="/submit")
    if record.get("owner_secret"):
        OWNER.setdefault("secret", record["owner_secret"])
    return text, record


def test_people_kept_on_the_hub_are_back_at_start(space) -> None:
    client, results, log = space
    assert any("restored 2 file(s) of people's runs" in line and "1 run(s) scored" in line for line in log), "".join(log)[-3000:]
    humans = [r for r in _board(client) if r["Model"] == "humans (cook)"]
    assert len(humans) == 1 and humans[0]["Items"] == "Cls 2" and humans[0]["#"] is None


def test_the_demo_run_is_verified_and_on_the_leaderboard(space, demo_run: Path, tmp_path: Path) -> None:
    client, _, _ = space
    text, record = _submit(client, zip_folder(demo_run, tmp_path / "demo.zip"))
    assert record["status"] == "verified" and record["mismatch"] is False
    assert "Accepted and verified" in text and "| Cls acc % | 40 / 40 |" in text
    cls = next(t for t in record["tasks"] if t["task"] == "classification")
    (row,) = [r for r in _board(client) if r["Source"] == "submitted: zip upload"]
    assert row["Status"] == "verified" and row["Cls acc %"] == round(cls["rescored"] * 100, 2)
    assert row["Run"] == f"submissions/{record['key']}"


def test_an_edited_scores_file_is_flagged_and_the_rescored_figure_shown(space, demo_run: Path, tmp_path: Path) -> None:
    client, _, _ = space

    def flip(rows: list[dict]) -> list[dict]:
        for r in [r for r in rows if r["task"] == "classification" and not r["correct"]][:4]:
            r["correct"] = True
        return rows

    folder = edited_copy(demo_run, tmp_path / "edited", "scores.jsonl", flip)
    text, record = _submit(client, zip_folder(folder, tmp_path / "edited.zip"))
    cls = next(t for t in record["tasks"] if t["task"] == "classification")
    assert cls["mismatch"] and cls["differing_items"] == 4
    assert cls["claimed"] == pytest.approx(cls["rescored"] + 4 / 40)
    # metrics.json still states the old figure; the edited scores.jsonl gives another: both claims shown
    claims = f"{cls['claimed_metrics'] * 100:.2f} (metrics.json) · {cls['claimed'] * 100:.2f} (scores.jsonl)"
    assert "claims differ" in text and f"| {claims} | {cls['rescored'] * 100:.2f} | **mismatch** (4 item(s) differ) |" in text
    (row,) = [r for r in _board(client) if r["Source"] == "submitted: zip upload"]  # the newer one replaced it
    assert row["Status"] == "verified · claims differ" and row["Cls acc %"] == round(cls["rescored"] * 100, 2)


@pytest.mark.parametrize("kind", ["dotdot", "bomb"])
def test_hostile_zips_are_refused_in_one_line(space, demo_run: Path, tmp_path: Path, kind: str) -> None:
    client, _, _ = space
    if kind == "dotdot":
        path = tmp_path / "dotdot.zip"
        with zipfile.ZipFile(path, "w") as archive:
            for p in demo_run.iterdir():
                archive.write(p, f"demo/{p.name}")
            archive.writestr("demo/../../../../tmp/owned.txt", "x")
        reason = r"^refused: 'demo/\.\./\.\./\.\./\.\./tmp/owned\.txt' leaves the folder \(`\.\.`\)$"
    else:
        path, reason = gigabyte_bomb(tmp_path / "bomb.zip"), r"^refused: 'run/predictions\.jsonl' unpacks to 1024\.0 MB"
    with pytest.raises(AppError) as refused:
        _submit(client, path)
    assert "\n" not in str(refused.value)
    assert re.search(reason, str(refused.value)), str(refused.value)
    assert not Path("/tmp/owned.txt").exists()


def test_a_hub_repo_holding_a_run_folder_is_verified(space) -> None:
    client, _, _ = space
    _, record = _submit(client, repo="visitor/demo-run", kind="dataset")
    assert record["status"] == "verified" and record["source"] == "hub:visitor/demo-run"


def test_a_hub_repo_holding_a_zip_is_verified_and_a_huge_one_refused_before_download(space, hub: FakeHub) -> None:
    client, _, _ = space
    _, record = _submit(client, repo="visitor/zipped")
    assert record["status"] == "verified" and record["source"] == "hub:visitor/zipped"
    with pytest.raises(AppError, match=r"^visitor/huge/run\.zip is 21\.0 MB; at most 20\.0 MB is accepted$"):
        _submit(client, repo="visitor/huge", kind="dataset")
    assert not [p for m, p, _ in hub.requests if m == "GET" and "visitor/huge/resolve" in p]  # never fetched


def test_a_model_card_gives_a_self_reported_row(space) -> None:
    client, _, _ = space
    text, record = _submit(client, repo="acme/acme-vl-7b")
    assert record["status"] == "self-reported" and "self-reported" in text
    (row,) = [r for r in _board(client) if r["Model"] == "Acme-VL-7B"]
    assert (row["Status"], row["Cls acc %"], row["Avg MAPE %"], row["Group"]) == (
        "self-reported", 61.25, 40.5, "self-reported · zh")


def test_a_private_repo_is_not_read_with_the_operators_token(space, hub: FakeHub) -> None:
    client, _, log = space
    with pytest.raises(AppError, match=f"{OPERATOR_REPO}: the Hub answered 401"):
        _submit(client, repo=OPERATOR_REPO, kind="dataset")
    visitor_reads = [h for m, p, h in hub.requests if m == "GET" and p.startswith(f"/api/datasets/{OPERATOR_REPO}")
                     and "Authorization" not in h]
    assert visitor_reads and TOKEN not in "".join(log)


def test_submissions_and_people_are_back_after_a_restart(space, hub: FakeHub, tmp_path: Path) -> None:
    client, results, _ = space
    kept = {p.parent.name for p in (results / "submissions").glob("*/submission.json")}
    # One folder per model + settings: the demo run (replaced by the edited zip, then by the Hub repos'
    # copies of the same run) and the model card's row.
    assert len(kept) == 2
    deadline = time.monotonic() + 60
    pushed: set[str] = set()
    while time.monotonic() < deadline:  # the Space pushes each submission right away, in the background
        pushed = {p.split("/")[1] for p in hub.repos[f"datasets/{OPERATOR_REPO}"] if p.startswith("submissions/")
                  and p.endswith("/submission.json")}
        if pushed >= kept:
            break
        time.sleep(0.5)
    assert pushed >= kept
    before = {(r["Model"], r["Status"], r["Cls acc %"]) for r in _board(client)}
    fresh = tmp_path / "fresh-results"
    with launched_space(_env(hub, fresh, tmp_path / "hf")) as (url, log):
        after = {(r["Model"], r["Status"], r["Cls acc %"]) for r in _board(Client(url, verbose=False))}
    assert before == after
    assert ("humans (cook)", "people") in {(m, s) for m, s, _ in after}
    assert {s for _, s, _ in after} >= {"verified", "self-reported", "people"}
    assert len(list((fresh / "submissions").glob("*/history/*/submission.json"))) == 3  # the replaced ones, too
    shutil.rmtree(fresh)


def test_the_space_says_where_it_runs_in_its_own_words(space) -> None:
    _, _, log = space
    line = next((x for x in log if x.startswith("DiningBench Space: open http://127.0.0.1:")), "")
    assert line and "Ctrl-C stops it" in line and "was busy" not in line
