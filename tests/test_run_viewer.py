"""The run viewer (`python -m eval view DIR`, the Space's Runs tab): filters and one item whole."""

from __future__ import annotations

import json

import pytest

from eval import api, cli
from eval.report.items import item_detail, run_items, status_of
from eval.settings import RunSettings
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import make_release, model_oracle


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    release = make_release(tmp_path_factory.mktemp("release") / "diningbench")
    settings = RunSettings(task="all", model="openai:fake-vlm", dataset=str(release), images=2,
                           out=tmp_path_factory.mktemp("runs") / "run", n_boot=20, max_attempts=1)
    with FakeOpenAIServer() as server, FakeOpenAIServer(oracle=lambda r: "Agrees.\nGRADE: C") as judge:
        settings.base_url, settings.judge = server.base_url, "openai:judge"
        settings.judge_base_url = judge.base_url
        server.oracle = model_oracle(release, settings, wrong={"c2"},
                                     overrides={"c3": "maybe A or B", "v1": "<think>fried?</think>Final answer: yes"})
        return api.run(settings, progress=False)


def test_filters_find_each_kind_of_item(run_dir):
    everything = run_items(run_dir)
    assert len(everything) == 6 + 4 + 3
    assert [r["id"] for r in run_items(run_dir, task="classification", status="unparsed")] == ["c3"]
    assert {r["id"] for r in run_items(run_dir, task="classification", status="wrong")} == {"c2", "c3"}
    assert {r["status"] for r in run_items(run_dir, task="nutrition")} == {"scored"}
    assert all(r["cuisine"] == "chinese" for r in run_items(run_dir, cuisine="chinese"))
    assert status_of({"task": "classification", "error": "HTTP 500", "parsed": None}) == "failed"


def test_one_item_whole_with_the_exact_prompt_sent(run_dir):
    found = item_detail(run_dir, "classification", "c3")
    assert found.prompt_verified and found.prompt.startswith("请仔细观察图片中的菜品")
    assert len(found.views) == 2 and [v.role for v in found.views] == ["reference", "user"]
    assert (found.raw, found.parsed, found.reference, found.status) == ("maybe A or B", None, "A", "unparsed")
    vqa = item_detail(run_dir, "vqa", "v1")
    assert vqa.raw.startswith("<think>") and vqa.parsed == "yes"
    assert vqa.score["verdict"] in ("C", "I")
    if vqa.score["decided_by"] == "judge":
        assert vqa.judge_reply == "Agrees.\nGRADE: C"


def test_the_viewer_app_builds_and_a_bad_folder_is_one_line(run_dir, tmp_path, capsys):
    gr = pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    assert isinstance(runs_tab.app(run_dir.parent), gr.Blocks)
    rows, keys = runs_tab.table(str(run_dir), "classification", "wrong", "all")
    assert sorted(keys) == ["classification/c2", "classification/c3"] and len(rows) == 2
    gallery, prompt, raw, *_ , note = runs_tab.detail(str(run_dir), "classification/c2")
    assert len(gallery) == 2 and prompt and "verified" in note
    assert cli.main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_the_run_summary_counts_each_outcome(run_dir):
    from eval.report.items import run_summary

    found = run_summary(run_dir)
    assert found["model"] == "openai:fake-vlm" and found["settings"]["images"] == 2
    cls = found["tasks"]["classification"]
    assert cls["n"] == 6 and cls["counts"] == {"correct": 4, "wrong": 1, "unparsed": 1}
    assert cls["headline"] == pytest.approx(4 / 6)
    assert found["tasks"]["nutrition"]["counts"] == {"scored": 4}
    assert sum(found["tasks"]["vqa"]["counts"].values()) == 3
    pytest.importorskip("gradio")  # the Space's module needs it
    from eval.report import viewer as runs_tab

    line = runs_tab.summary(str(run_dir))
    assert "classification: 6 items, accuracy 66.67% (4 correct, 1 wrong, 1 unparsed)" in line
    assert "nutrition: 4 items, Average MAPE" in line and "images 2" in line


def test_search_finds_items_by_raw_answer_and_by_prompt(run_dir):
    assert [r["id"] for r in run_items(run_dir, search="MAYBE a or")] == ["c3"]  # any case, spaces folded
    assert [r["id"] for r in run_items(run_dir, search="<think>fried")] == ["v1"]
    # Every classification prompt starts so; no nutrition or VQA prompt has these words.
    assert {r["id"] for r in run_items(run_dir, search="请仔细观察图片中的菜品")} >= {f"c{i}" for i in range(1, 7)}
    assert run_items(run_dir, search="no answer holds this") == []
    assert [r["id"] for r in run_items(run_dir, task="classification", status="wrong", search="maybe")] == ["c3"]


def test_a_click_on_a_row_opens_its_item_and_previous_next_step_through_the_list(run_dir):
    gr = pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    view = runs_tab.RunsView(run_dir.parent)
    head, rows, keys, current, where, *_ = view.refresh("run", "classification", "all", "all")
    assert keys == [f"classification/c{i}" for i in range(1, 7)] and current == "classification/c1"
    assert where == "Item 1 of 6" and "openai:fake-vlm" in head
    # Rows as shown, possibly sorted by a column: the row's own task and id say which item it is.
    event = gr.SelectData(None, {"index": [4, 2], "value": "wrong", "row_value": rows[1]})
    key, where, gallery, prompt, raw, parsed, reference, score, judge, note = view.open_row("run", keys, event)
    assert (key, where, raw["visible"], parsed["value"], reference["value"]) == (
        "classification/c2", "Item 2 of 6", True, json.dumps(rows[1][4]), json.dumps(rows[1][5]))
    assert len(gallery["value"]) == 2 and gallery["visible"] and prompt["value"].startswith("请仔细观察")
    assert judge["visible"] is False  # no judge on a classification item: no empty box
    assert view.step(1, "run", keys, key)[0] == "classification/c3"
    assert view.step(-1, "run", keys, key)[0] == "classification/c1"
    assert view.step(1, "run", keys, keys[-1])[:2] == (keys[-1], "Item 6 of 6")  # stays at the end
    assert view.step(-1, "run", keys, keys[0])[0] == keys[0]
    vqa = view.refresh("run", "vqa", "all", "all", "", "vqa/v1")
    assert vqa[3] == "vqa/v1" and vqa[4] == "Item 1 of 3"


def test_a_link_opens_the_same_view_and_new_runs_appear_on_reload(run_dir, tmp_path):
    pytest.importorskip("gradio")
    import shutil
    import types

    from eval.report import viewer as runs_tab

    root = tmp_path / "results"
    shutil.copytree(run_dir, root / "sweep" / "a")
    view = runs_tab.RunsView(root)
    request = types.SimpleNamespace(query_params={"tab": "runs", "run": "sweep/a", "task": "classification",
                                                  "status": "wrong", "q": "maybe", "item": "classification/c3"})
    picker, task, status, cuisine, search, head, rows, keys, current, where, *_ = view.load(request)
    assert picker["value"] == "sweep/a" and (task, status, cuisine, search) == ("classification", "wrong", "all", "maybe")
    assert keys == ["classification/c3"] and current == "classification/c3" and where == "Item 1 of 1"
    odd = types.SimpleNamespace(query_params={"run": "/etc", "status": "<b>", "item": "x/../y"})
    picker, task, status, cuisine, search, head, *_ = view.load(odd)  # naming no listed folder: none opened
    assert picker["value"] is None and status == "all" and head.startswith("No run folder named")
    assert runs_tab.RunsView(tmp_path / "empty").load(None)[5].startswith("No run folder here yet.")
    shutil.copytree(run_dir, root / "later")
    assert view.reload("sweep/a") == {"__type__": "update", "choices": ["later", "sweep/a"], "value": "sweep/a"}
    assert view.refresh("later", "all", "all", "all")[3] == "classification/c1"


def test_the_judges_reply_shows_only_on_an_item_the_judge_decided(run_dir):
    pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    view = runs_tab.RunsView(run_dir.parent)
    decided = {r["id"]: r.get("decided_by") for r in run_items(run_dir, task="vqa")}
    for item_id, by in decided.items():
        judge = view.refresh("run", "vqa", "all", "all", "", f"vqa/{item_id}")[-2]
        assert judge["visible"] is (by == "judge"), (item_id, by)
        if by == "judge":
            assert judge["value"] == "Agrees.\nGRADE: C"
    assert "judge" in decided.values()  # the fixture's judge decided at least one item
