"""The run viewer (`python -m eval view DIR`, the Space's Runs tab): filters and one item whole."""

from __future__ import annotations

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
    from space.diningspace import runs_tab

    assert isinstance(runs_tab.app(run_dir.parent), gr.Blocks)
    rows, keys = runs_tab.table(str(run_dir), "classification", "wrong", "all")
    assert sorted(keys) == ["classification/c2", "classification/c3"] and len(rows) == 2
    gallery, prompt, raw, *_ , note = runs_tab.detail(str(run_dir), "classification/c2")
    assert len(gallery) == 2 and prompt and "verified" in note
    assert cli.main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
