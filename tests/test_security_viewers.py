"""Hostile text in viewers and reports: what came from a model, a server, a run folder or a release
is shown as text (one helper, `eval.report.tables.as_text`), a malformed line never stops a viewer,
and visitors never see the operator's absolute paths."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
import yaml
from helpers_report import cls_item, write_run
from markdown_it import MarkdownIt

from eval import tasks
from eval.report.items import item_detail, run_items
from eval.report.model_card import render_model_card
from eval.report.report import build_report
from eval.report.runs import ReportError, load_run
from eval.report.tables import as_text, md_table

HOSTILE = ["![](http://tracker/x.png)", "[Click to re-authenticate](http://evil/login)",
           "<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "`code` and ``more``",
           "a | b || c", "line one\nline two\r\n# heading\n- item", "**bold** _em_ ~~gone~~", "&lt;already&gt; &amp;",
           "<http://auto.link/x>", "[ref]: http://defined/x", "a]\\(http://pre.escaped)",
           "- item", "+ item", "1. first", "12) twelfth", "===", "---", "2026. a year"]
RENDER = MarkdownIt("commonmark").enable("table")  # raw HTML is live in CommonMark, as in the Space's Markdown


def rendered(markdown: str) -> str:
    return RENDER.render(markdown)


def assert_only_text(markdown: str, original: str) -> None:
    """The Markdown renders to its original characters (newlines as spaces) and to no element."""
    out = rendered(markdown)
    assert not re.search(r"<(a|img|script|code|em|strong|s|del|h\d|ul|ol|li|hr|table|blockquote)\b", out), out
    text = html.unescape(re.sub(r"<[^>]+>", "", out))
    assert " ".join(text.split()) == " ".join(original.split()), (markdown, out)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_as_text_shows_hostile_text_as_the_characters_it_is(hostile: str) -> None:
    assert_only_text(as_text(hostile), hostile)
    assert_only_text("a paragraph  \n" + as_text(hostile), "a paragraph " + hostile)  # on a line of its own
    assert "\n" not in as_text(hostile)
    # The same text is valid HTML (an HTML card, an error toast): it reads back as the characters it was.
    assert html.unescape(as_text(hostile, lines=True)) == hostile
    assert_only_text(as_text(hostile, lines=True), hostile)  # kept line breaks start no block either


def test_bare_addresses_lose_what_turns_them_into_links() -> None:
    # GitHub-flavoured Markdown links `http://...` and `www....` by themselves (linkify).
    assert as_text("see http://tracker/x or www.evil.example") == "see http&#58;//tracker/x or www&#46;evil.example"


def test_a_table_cell_with_pipes_and_newlines_stays_one_cell() -> None:
    hostile = "x | y\n| injected | row |"
    out = rendered(md_table(["model", "value"], [[hostile, "1.00"]]))
    assert out.count("<tr>") == 2 and out.count("<td>") == 2
    assert html.unescape(re.search(r"<td>(.*?)</td>", out)[1]) == " ".join(hostile.split())


NAME = "<script>alert(1)</script>\n| x | ![](http://tracker/x)"


def test_a_hostile_model_name_is_text_in_the_model_card_and_the_report(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "run", NAME, [cls_item(f"c{i}", f"m{i}", i % 2 == 0) for i in range(4)]))
    card = render_model_card([run], allow_partial=True, n_boot=20)
    _, header, body = card.split("---\n", 2)
    assert yaml.safe_load(header)["model-index"][0]["name"] == NAME  # the metadata keeps the name exactly
    heading = body.strip().splitlines()[0]
    assert heading.startswith("# ") and "\n" not in heading
    assert_only_text(heading[2:], NAME + " on DiningBench")
    out = rendered(body)
    assert "<script" not in out and "<img" not in out and out.count("<tr>") == 2  # header + one row
    report = build_report([run], reported=False, n_boot=20)
    out = rendered(report)
    assert "<script" not in out and "<img" not in out and "<a " not in out
    table2 = next(t for t in re.findall(r"<table>.*?</table>", out, re.S) if "Cls Acc" in t)
    assert len(re.findall(r"<tr>", table2)) == 1 + 2  # header, the run, the chance row
    assert html.unescape(re.findall(r"<td>(.*?)</td>", table2)[0]) == " ".join(NAME.split())


# ---------------------------------------------------------------- the Runs tab and `eval view`
SERVER_ERROR = ("HTTP 401: ![](http://tracker/pixel.png) session expired, "
                "[Click to re-authenticate](http://evil/login) <img src=x onerror=alert(1)>")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    items = [cls_item("c1", "m1", True), {**cls_item("c2", "m1", False), "error": SERVER_ERROR, "parsed": None}]
    folder = write_run(tmp_path / "results" / "openai-x", "openai:x", items)
    lines = (folder / "scores.jsonl").read_text().splitlines()
    lines[1:1] = ['{"task": "classification", "id": "c9"', json.dumps({**cls_item("c8", "m1", True), "epoch": "x"}),
                  json.dumps({**cls_item("c7", "m1", True), "task": ["classification"]})]
    (folder / "scores.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "predictions.jsonl").write_text('{"task": "classification", "id": 5}\nnot json\n')
    return tmp_path / "results"


def test_a_malformed_line_is_left_out_and_named_while_the_rest_is_shown(results: Path) -> None:
    folder = results / "openai-x"
    with pytest.raises(ReportError, match="scores.jsonl line 2: invalid JSON"):  # the CLI: one line, as before
        load_run(folder)
    problems: list[str] = []
    assert [r["id"] for r in run_items(folder, problems=problems)] == ["c1", "c2"]
    assert problems == ["scores.jsonl:2: invalid JSON (Expecting ',' delimiter, column 1)",
                        "scores.jsonl:3: has `epoch` 'x', not a whole number",
                        "scores.jsonl:4: has an `id` or `task` that is not text"]
    problems = []
    found = item_detail(folder, "classification", "c2", problems=problems)
    assert found.error == SERVER_ERROR and found.raw is None
    assert "predictions.jsonl:1: not a prediction line (its fields' types); skipped" in problems
    assert "predictions.jsonl:2: invalid JSON (Expecting value, column 1)" in problems


def test_the_runs_tab_shows_server_text_as_text_bad_lines_by_name_and_no_absolute_path(results: Path) -> None:
    gr = pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    view = runs_tab.RunsView(results)
    assert list(runs_tab.folder_names(results)) == ["openai-x"]  # relative to the results folder
    picker = view.load(None)[0]
    assert [name for _, name in picker["choices"]] == ["openai-x"] and picker["value"] == "openai-x"
    head, rows, keys, _page, _pager, current, *shown = view.refresh("openai-x", "all", "all", "all")
    assert keys == ["classification/c1", "classification/c2"] and current == "classification/c1"
    assert "<img" not in rows and "<a " not in rows  # the table is escaped text
    summary = shown[-1]
    assert "scores.jsonl:2" in summary and "scores.jsonl:3" in summary and str(results) not in summary
    assert str(results) not in head
    with pytest.raises(gr.Error, match="unknown run folder"):
        view.refresh(str(results / "openai-x"), "all", "all", "all")  # an absolute path is not a choice
    with pytest.raises(gr.Error, match="unknown run folder"):
        view.refresh("../openai-x", "all", "all", "all")

    *_, note = runs_tab.detail(str(results / "openai-x"), "classification/c2", results)
    assert "Click to re-authenticate" in note and str(results) not in note
    out = rendered(note)
    assert "<img" not in out and "<a " not in out and "tracker/pixel.png" in html.unescape(out)
    *_, note = runs_tab.detail(str(results / "openai-x"), "classification/nope", results)
    assert note.startswith("openai-x: no scored classification item") and str(results) not in note


def test_no_usable_scores_is_a_line_on_the_page_not_an_error(results: Path) -> None:
    pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab

    (results / "openai-x" / "scores.jsonl").write_text("not json\n")
    head, rows, keys, _page, _pager, current, *shown = runs_tab.RunsView(results).refresh("openai-x", "all", "all",
                                                                                           "all")
    assert "No item matches" in rows and keys == [] and current is None and head == ""
    assert "no scored items" in shown[-1] and "scores.jsonl:1" in shown[-1] and str(results) not in shown[-1]


def test_hide_paths_keeps_urls_and_relative_names() -> None:
    from eval.report.viewer import hide_paths

    assert hide_paths("cannot load /home/op/data/release: C:\\Users\\op\\x.json at https://h/a/b") == (
        "cannot load …/release: …/x.json at https://h/a/b")
    assert hide_paths("/srv/results/humans/h-1/run.json bad", Path("/srv/results")) == "humans/h-1/run.json bad"


def test_the_evaluate_and_take_the_test_summary_line_shows_a_model_spec_as_text() -> None:
    from space.diningspace.results_view import summary_line

    spec = "openai:[Click](http://evil/x)_<b>"
    line = summary_line(tasks.get("classification"), spec, {"accuracy": 0.5, "accuracy_ci95": [0.25, 0.75], "n": 4})
    out = rendered(line)
    assert "<a " not in out and "<b>" not in out and "<strong>" in out  # only the line's own bold
    text = html.unescape(re.sub(r"<[^>]+>", "", out)).strip()
    assert text.startswith(spec + " — accuracy (%) 50.00 [25.00, 75.00]")


def test_a_model_name_with_dollar_signs_is_drawn_as_text_in_the_sweep_plots(tmp_path: Path) -> None:
    name = "evil $\\invalid{$ [x](http://t)"
    runs = [load_run(write_run(tmp_path / f"v{n}", name, [cls_item(f"c{i}", f"m{i}", i % n == 0) for i in range(4)],
                               images=n)) for n in (1, 2)]
    report = build_report(runs, reported=False, n_boot=20, plot_dir=tmp_path / "plots")  # matplotlib parsed `$..$`
    assert (tmp_path / "plots" / "views_classification.png").is_file()
    sweep = report.split("### Classification accuracy by number of views", 1)[1]
    assert "<a " not in rendered(sweep.split("![", 1)[0]) and as_text(name) in sweep


DEEP = "[" * 50_000 + "]" * 50_000


@pytest.fixture
def hostile_runs(tmp_path: Path) -> Path:
    """Beside a good run: run.json with a wrong type (`images: "x"`), run.json and metrics.json nested
    50,000 levels deep, settings that are a list, a metrics entry that is a string."""
    items = [cls_item(f"c{i}", "m1", i % 2 == 0) for i in range(4)]
    results = tmp_path / "results"
    good = write_run(results / "good", "openai:good", items)
    (good / "metrics.json").write_text(json.dumps({"classification": {"n": 4, "accuracy": 0.5}}))
    for name, run_json, metrics in (
            ("wrong-type", None, {"classification": {"n": 4, "accuracy": 0.5}}),
            ("deep-run", DEEP, {"classification": {"n": 4, "accuracy": 0.5}}),
            ("deep-metrics", None, DEEP),
            ("list-settings", json.dumps({"settings": ["model", "x"]}), {"classification": "fast"})):
        folder = write_run(results / name, f"openai:{name}", items, images="x")
        if run_json is not None:
            (folder / "run.json").write_text(run_json)
        (folder / "metrics.json").write_text(metrics if isinstance(metrics, str) else json.dumps(metrics))
    return results


def test_hostile_run_files_are_named_and_skipped_by_every_viewer(hostile_runs: Path, capsys) -> None:
    from eval.cli import main as cli_main
    from space.diningspace.leaderboard import local_rows

    rows = local_rows(hostile_runs)  # the Leaderboard: the good run and what could be read, no exception
    assert any(r["Model"].startswith("openai:good") for r in rows)
    problems: list[str] = []
    for name in ("wrong-type", "deep-run", "deep-metrics", "list-settings"):
        run = load_run(hostile_runs / name, problems)  # the Runs tab's and `eval view`'s reader
        assert run.label  # a label whatever the settings hold
    assert any("deep-run" in p or "nested deeper" in p for p in problems), problems
    with pytest.raises(ReportError, match="nested deeper than"):
        load_run(hostile_runs / "deep-run")  # the CLI: one line
    for name in ("wrong-type", "deep-run", "deep-metrics", "list-settings"):
        code = cli_main(["report", str(hostile_runs / name), "--allow-partial"])
        err = capsys.readouterr().err
        assert "Traceback" not in err and code in (0, 2), (name, err[-400:])


def test_the_leaderboard_page_and_the_runs_tab_name_hostile_run_files(hostile_runs: Path) -> None:
    pytest.importorskip("gradio")
    from eval.report import viewer as runs_tab
    from space.diningspace.leaderboard_tab import LeaderboardTab
    from space.diningspace.settings import SpaceSettings

    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_RESULTS": str(hostile_runs)}, repo_root=hostile_runs.parent)
    page = LeaderboardTab(settings).page("Cls acc %")
    assert "openai:good" in page and "Left out 2 run folder(s) that cannot be read" in page
    assert "deep-run/run.json: nested deeper than 32 levels" in page and "deep-metrics/metrics.json" in page
    view = runs_tab.RunsView(hostile_runs)
    for name in ("wrong-type", "deep-run", "deep-metrics", "list-settings"):
        head, rows, keys, *_ , summary = view.refresh(name, "all", "all", "all")
        assert len(keys) == 4 and rows.count("<tr data-key=") == 4  # the scored items, whatever run.json holds
    assert "nested deeper than 32 levels" in view.refresh("deep-run", "all", "all", "all")[-1]


def test_a_link_to_a_run_that_is_not_there_opens_none_and_says_so(results: Path) -> None:
    pytest.importorskip("gradio")
    from types import SimpleNamespace

    from eval.report import viewer as runs_tab

    view = runs_tab.RunsView(results)
    picker, *_, head = view.load(SimpleNamespace(query_params={"run": "nope"}))[:8]
    assert picker["value"] is None and [name for _, name in picker["choices"]] == ["openai-x"]
    assert head.startswith("No run folder named nope here")
    picker = view.load(SimpleNamespace(query_params={"run": "openai-x"}))[0]
    assert picker["value"] == "openai-x"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_runs_tab_shows_a_hostile_answer_and_reference_as_the_characters_they_are(hostile: str) -> None:
    """Parsed, reference and score are one HTML block: every character from the run folder is escaped."""
    pytest.importorskip("gradio")
    from eval.report.viewer import facts_html

    block = facts_html(hostile, {"answer": hostile}, {"verdict": hostile})
    assert not re.search(r"<(a|img|script)\b", block)
    shown = [html.unescape(text) for text in re.findall(r"<pre>(.*?)</pre>", block, re.S)]
    assert json.loads(shown[0]) == hostile and json.loads(shown[1]) == {"answer": hostile}
    assert json.loads(shown[2]) == {"verdict": hostile}
