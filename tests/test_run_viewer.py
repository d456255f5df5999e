"""The run viewer (`python -m eval view DIR`, the Space's Runs tab): filters and one item whole."""

from __future__ import annotations

import html
import re
import types
from pathlib import Path
from urllib.parse import unquote

import pytest

from eval import api, cli, tasks
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
    assert status_of({"task": "classification", "error": "HTTP 500", "parsed": None}, tasks.get("classification")) == "failed"


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
    # The views as JPEG files written once: the next event (another visitor's) links the same files.
    assert all(Path(path).is_file() and caption.startswith("view ") for path, caption in gallery)
    assert runs_tab.detail(str(run_dir), "classification/c2")[0] == gallery
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
    head, shown, keys, page, pager, current, where, *_ = view.refresh("run", "classification", "all", "all")
    assert keys == [f"classification/c{i}" for i in range(1, 7)] and current == "classification/c1"
    assert where == "Item 1 of 6" and "openai:fake-vlm" in head and (page, pager) == (0, "Rows 1–6 of 6")
    assert re.findall(r"data-key='([^']+)'", shown) == keys and "class='db-open'" in shown
    rows, _ = runs_tab.table(str(run_dir), "classification", "all", "all")
    # A click on a row sends its key (the page's script): that item opens, the list stays as it is.
    filters = ("run", "classification", "all", "all", "", "list order", False)
    out = view.clicked(types.SimpleNamespace(_data={"key": keys[1]}), *filters, keys, current)
    assert out[:6] == (gr.skip(),) * 6
    key, where, panel = out[6:]
    assert (key, where) == ("classification/c2", "Item 2 of 6")
    # The item as one block, in this order: the note, the views, the prompt, the raw answer, the facts.
    sections = re.findall(r"id='(db-runs-[a-z]+)'", panel)
    assert sections == ["db-runs-note", "db-runs-gallery", "db-runs-prompt", "db-runs-raw", "db-runs-facts"]
    # Parsed, reference and score side by side as JSON text: the letters quoted, as the run wrote them.
    shown_facts = re.findall(r"<div class='db-fact-label'>(\w+)</div><pre>(.*?)</pre>",
                             panel.split("id='db-runs-facts'")[1], re.S)
    assert [label for label, _ in shown_facts] == ["Parsed", "Reference", "Score"]
    assert [text for _, text in shown_facts[:2]] == [f'"{rows[1][4]}"', f'"{rows[1][5]}"']
    # The views as a strip of pictures, each linking its file where Gradio serves it.
    files = re.findall(r"<img src='gradio_api/file=([^']+)'", panel)
    assert len(files) == 2 and all(Path(unquote(f)).is_file() for f in files)
    prompt = re.search(r"id='db-runs-prompt'.*?<pre[^>]*>(.*?)</pre>", panel, re.S).group(1)
    assert prompt.startswith("请仔细观察")
    assert "db-runs-judge" not in panel  # no judge on a classification item: no empty box
    listing = ("run", "classification", "all", "all", "", "list order", False)
    assert view.step(1, *listing, keys, key, 0)[0] == "classification/c3"
    assert view.step(-1, *listing, keys, key, 0)[0] == "classification/c1"
    assert view.step(1, *listing, keys, keys[-1], 0)[:2] == (keys[-1], "Item 6 of 6")  # stays at the end
    assert view.step(-1, *listing, keys, keys[0], 0)[0] == keys[0]
    # A key the list does not hold, or a click on nothing, changes nothing.
    assert view.clicked(types.SimpleNamespace(_data={"key": "classification/../x"}), *filters, keys, key) == (
        (gr.skip(),) * 9)
    # A click on a header sorts the whole list by it, a second click reverses; the open item stays open.
    sort, descending, shown, keys_now, *_rest = view.clicked(types.SimpleNamespace(_data={"sort": "score"}), *filters,
                                                             keys, key)
    assert (sort, descending) == ("score", False) and sorted(keys_now) == sorted(keys) and _rest[2] == key
    again = view.clicked(types.SimpleNamespace(_data={"sort": "score"}), *filters[:5], "score", False, keys_now, key)
    by_score, _ = runs_tab.table(str(run_dir), "classification", "all", "all", sort="score", descending=True)
    assert again[:2] == ("score", True) and again[3] == [f"{r[0]}/{r[1]}" for r in by_score] != keys_now
    vqa = view.refresh("run", "vqa", "all", "all", "", "vqa/v1")
    assert vqa[5] == "vqa/v1" and vqa[6] == "Item 1 of 3"


def test_a_link_opens_the_same_view_and_new_runs_appear_on_reload(run_dir, tmp_path):
    pytest.importorskip("gradio")
    import shutil

    from eval.report import viewer as runs_tab

    root = tmp_path / "results"
    shutil.copytree(run_dir, root / "sweep" / "a")
    view = runs_tab.RunsView(root)
    request = types.SimpleNamespace(query_params={"tab": "runs", "run": "sweep/a", "task": "classification",
                                                  "status": "wrong", "q": "maybe", "item": "classification/c3"})
    picker, task, status, cuisine, search, sort, desc, head, rows, keys, page, pager, current, where, *_ = view.load(
        request)
    assert picker["value"] == "sweep/a" and (task, status, cuisine, search) == ("classification", "wrong", "all", "maybe")
    assert keys == ["classification/c3"] and current == "classification/c3" and where == "Item 1 of 1"
    odd = types.SimpleNamespace(query_params={"run": "/etc", "status": "<b>", "item": "x/../y"})
    picker, task, status, cuisine, search, _sort, _desc, head, *_ = view.load(odd)  # naming no listed folder: none opened
    assert picker["value"] is None and status == "all" and head.startswith("No run folder named")
    assert runs_tab.RunsView(tmp_path / "empty").load(None)[7].startswith("No run folder here yet.")
    shutil.copytree(run_dir, root / "later")
    found = view.reload("sweep/a")
    assert [name for _, name in found["choices"]] == ["later", "sweep/a"] and found["value"] == "sweep/a"
    assert view.refresh("later", "all", "all", "all")[5] == "classification/c1"


def test_the_judges_reply_shows_only_on_an_item_the_judge_decided(run_dir):
    pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    view = runs_tab.RunsView(run_dir.parent)
    decided = {r["id"]: r.get("decided_by") for r in run_items(run_dir, task="vqa")}
    for item_id, by in decided.items():
        panel = view.refresh("run", "vqa", "all", "all", "", f"vqa/{item_id}")[-1]
        judge = re.search(r"id='db-runs-judge'.*?<pre[^>]*>(.*?)</pre>", panel, re.S)
        assert (judge is not None) is (by == "judge"), (item_id, by)
        if by == "judge":
            assert judge.group(1) == "Agrees.\nGRADE: C"  # its lines kept
    assert "judge" in decided.values()  # the fixture's judge decided at least one item


def test_the_list_is_paged_and_sorted_on_the_server_with_readable_references(run_dir, monkeypatch):
    pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    monkeypatch.setattr(runs_tab, "PAGE_ROWS", 4)
    view = runs_tab.RunsView(run_dir.parent)
    head, shown, keys, page, pager, current, *_ = view.refresh("run", "all", "all", "all")
    assert len(keys) == 13 and shown.count("<tr data-key=") == 4 and (page, pager) == (0, "Rows 1–4 of 13")
    later, page, pager = view.turn(1, "run", "all", "all", "all", "", "list order", False, 0)
    assert re.findall(r"data-key='([^']+)'", later) == keys[4:8] and (page, pager) == (1, "Rows 5–8 of 13")
    assert view.turn(9, "run", "all", "all", "all", "", "list order", False, 0)[1:] == (3, "Rows 13–13 of 13")
    # Next from the last row of a page turns the rows to the item's page; within a page it leaves them.
    stepped = view.step(1, "run", "all", "all", "all", "", "list order", False, keys, keys[3], 0)
    assert stepped[0] == keys[4] and stepped[-2:] == (1, "Rows 5–8 of 13")
    assert view.step(1, "run", "all", "all", "all", "", "list order", False, keys, keys[0], 0)[-1] == "Rows 1–4 of 13"
    # The item's page opens when a link names an item further down.
    assert view.refresh("run", "all", "all", "all", "", keys[9])[3:5] == (2, "Rows 9–12 of 13")
    # Nutrition references read as nutrients, not as a Python dict; the answer's facts have their own columns.
    nutrition, _ = runs_tab.table(str(run_dir), "nutrition", "all", "all")
    assert all(" kcal · P " in row[5] and "{" not in row[5] for row in nutrition)
    columns = dict(zip(runs_tab.COLUMNS, nutrition[0], strict=True))
    assert columns["attempts"] == "1" and float(columns["latency s"]) >= 0 and columns["finish"] == "stop"
    # Sorting the whole list: scores by their number, both ways, blanks last either way.
    for descending in (False, True):
        ordered, _ = runs_tab.table(str(run_dir), "all", "all", "all", sort="score", descending=descending)
        apes = [float(r[6].split()[2].rstrip("%")) for r in ordered if r[6].startswith("mean APE")]
        assert apes == sorted(apes, reverse=descending) and len(apes) == 4
        assert ordered[:4] == [r for r in ordered if r[6].startswith("mean APE")]
        by_id, _ = runs_tab.table(str(run_dir), "classification", "all", "all", sort="id", descending=descending)
        assert [r[1] for r in by_id] == sorted((r[1] for r in by_id), reverse=descending)


def test_the_run_picker_names_task_model_headline_items_and_date(run_dir, tmp_path):
    pytest.importorskip("gradio")
    import shutil

    from eval.report import viewer as runs_tab

    root = tmp_path / "results"
    shutil.copytree(run_dir, root / "a")
    (label, name), = runs_tab.run_choices(root)
    assert name == "a" and label.startswith("a · openai:fake-vlm · classification 66.67 · nutrition MAPE ")
    assert "vqa " in label and "13 items" in label and re.search(r"· \d{4}-\d{2}-\d{2}$", label)
    # A metrics.json that is not JSON leaves the figures out, never the run.
    (root / "a" / "metrics.json").write_text("{not json", encoding="utf-8")
    (label, _), = runs_tab.run_choices(root)
    assert label.startswith("a · openai:fake-vlm · ") and "66.67" not in label


def test_a_run_read_once_is_read_again_when_its_files_change(run_dir, tmp_path):
    import shutil

    from eval.report import items

    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    first = run_items(folder, problems=[])
    assert run_items(folder, problems=[]) == first and items._entry(folder) is items._entry(folder)
    scores = folder / "scores.jsonl"
    lines = scores.read_text(encoding="utf-8").splitlines()
    scores.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    assert len(run_items(folder, problems=[])) == len(first) - 1


def test_the_item_block_shows_run_text_as_text_and_says_what_it_left_out() -> None:
    pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    hostile = "<img src=x onerror=alert(1)> **bold** [link](http://t/x)\nline two"
    panel = runs_tab.item_html([], "prompt <b>here</b>", hostile, {"a": "<script>"}, "B", None, "GRADE: <i>C</i>",
                               "**c1**: wrong  \nleft out: x")
    assert "<img src=x" not in panel and "<script>" not in panel and "<b>here</b>" not in panel
    assert "<i>C</i>" not in panel and "](http" not in panel
    raw = re.search(r"id='db-runs-raw'.*?<pre[^>]*>(.*?)</pre>", panel, re.S).group(1)
    assert html.unescape(raw) == hostile  # every character shown as it is, lines kept
    assert re.search(r"<div id='db-runs-note'><b>c1</b>: wrong<br>left out: x</div>", panel)
    assert "db-runs-gallery" not in panel  # no views: no empty strip
    # A long answer: its first 100,000 characters, and how many there were.
    long_panel = runs_tab.item_html([], "p", "x" * 150_000, None, "A", None, "", "")
    shown = re.search(r"id='db-runs-raw'.*?<pre[^>]*>(.*?)</pre>", long_panel, re.S).group(1)
    assert len(shown) == runs_tab.MAX_TEXT_SHOWN and "the first 100,000 of 150,000 characters" in long_panel


def test_a_judge_cache_from_elsewhere_gives_no_reply_through_a_link_or_of_another_type(run_dir, tmp_path):
    """The item view shows the judge's reply from the folder's own judge cache only: a cache linked out of the
    folder is not read, and a reply that is not text is not shown."""
    import json
    import shutil

    judged = [r["id"] for r in run_items(run_dir, task="vqa") if r.get("decided_by") == "judge"]
    assert judged
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    assert item_detail(folder, "vqa", judged[0]).judge_reply == "Agrees.\nGRADE: C"
    cache = folder / "judge_cache" / "verdicts.jsonl"
    lines = [json.loads(line) for line in cache.read_text().splitlines()]
    outside = tmp_path / "elsewhere.jsonl"
    shutil.move(cache, outside)
    cache.symlink_to(outside)
    assert item_detail(folder, "vqa", judged[0]).judge_reply is None
    cache.unlink()
    cache.write_text("".join(json.dumps({**line, "raw": {"html": "<b>"}}) + "\n" for line in lines))
    assert item_detail(folder, "vqa", judged[0]).judge_reply is None
