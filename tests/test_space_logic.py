"""The Space's logic without a browser or server: filters, cards, leaderboard, key and URL guards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_space import tiny_dataset

from eval import tasks
from eval.redact import redact
from space.diningspace.catalog import ALL, Catalog, CatalogError
from space.diningspace.evaluation import OWN_KEY, EvalRequest, resolve
from space.diningspace.guard import REDACTED, GuardError, allowed_base_url, check_model_name
from space.diningspace.leaderboard import leaderboard_html, leaderboard_table, local_rows, reported_rows
from space.diningspace.render import gallery_caption, item_card, plain_fields
from space.diningspace.settings import SettingsError, SpaceSettings


@pytest.fixture
def catalog() -> Catalog:
    return Catalog(loader=tiny_dataset)


def test_filters_narrow_items_and_facets_list_the_values(catalog: Catalog) -> None:
    assert catalog.filter_ids("classification") == ["cla-1", "cla-2", "cla-3"]
    assert catalog.filter_ids("classification", cuisine="japanese") == ["cla-2"]
    assert catalog.filter_ids("classification", category="noodles") == ["cla-1", "cla-2"]
    assert catalog.filter_ids("classification", cuisine="western", category="noodles") == []
    assert catalog.filter_ids("vqa", vqa_category="cuisine_technique") == ["vqa-1", "vqa-3"]
    assert catalog.filter_ids("nutrition", cuisine=ALL, category=ALL) == ["nut-1", "nut-2", "nut-3"]
    assert catalog.facets("classification", "cuisine") == ["chinese", "japanese", "western"]


def test_only_the_requested_item_is_decoded(catalog: Catalog) -> None:
    calls = []

    class CountingDataset:
        """Wraps a Dataset and records which rows are read with their images."""

        def __init__(self, inner):
            self.inner, self.column_names = inner, inner.column_names

        def select_columns(self, columns):
            assert "images" not in columns  # the index never touches image bytes
            return self.inner.select_columns(columns)

        def __getitem__(self, i):
            calls.append(i)
            return self.inner[i]

    counting = Catalog(loader=lambda config: CountingDataset(tiny_dataset(config)))
    views = counting.images("nutrition", "nut-2")
    assert calls == [1]
    assert [role for _, role in views] == ["reference", "user"]
    assert views[0][0].size == (64, 48) and views[0][0].mode == "RGB"


def test_unknown_config_or_item_is_a_one_line_error(catalog: Catalog) -> None:
    with pytest.raises(CatalogError, match="unknown config 'recipes'"):
        catalog.filter_ids("recipes")
    with pytest.raises(CatalogError, match="no item 'cla-9' in the classification config"):
        catalog.row("classification", "cla-9")
    broken = Catalog(loader=lambda config: (_ for _ in ()).throw(ValueError("release folder x has no data")))
    with pytest.raises(CatalogError, match="cannot load the vqa config: release folder x has no data"):
        broken.filter_ids("vqa")


def test_card_marks_the_answer_only_when_asked_and_escapes_text(catalog: Catalog) -> None:
    row = catalog.row("classification", "cla-2")  # answer B
    hidden = item_card("classification", row, n_images=2, lang="zh", show_answer=False)
    shown = item_card("classification", row, n_images=2, lang="en", show_answer=True)
    assert "db-correct" not in hidden and "✓" not in hidden
    assert shown.count("db-correct") == 1
    assert '<span class="db-letter">B</span><span class="db-name">Dish 1 &lt;b&gt;</span>' in shown
    assert "<b>" not in shown.replace("<b>Show answer</b>", "")


def test_card_shows_vqa_in_the_chosen_language_and_nutrition_facts(catalog: Catalog) -> None:
    vqa = catalog.row("vqa", "vqa-2")
    assert "Question 1?" in item_card("vqa", vqa, n_images=2, lang="en")
    zh = item_card("vqa", vqa, n_images=2, lang="zh")
    assert "问题1" in zh and "答案1" in zh and "因为" in zh and "Dietary suggestion" in zh
    nutrition = item_card("nutrition", catalog.row("nutrition", "nut-3"), n_images=2, lang="en")
    assert "Noodles 2" in nutrition and "502.0 kcal" in nutrition and "15.5 g" in nutrition
    assert gallery_caption("reference", 0) == "reference · view 1"
    assert plain_fields({"fat": float("nan"), "n": 3, "xs": [1.5]}) == {"fat": None, "n": 3, "xs": [1.5]}


def test_redact_removes_the_key_in_every_form_it_travels() -> None:
    key = "sk-test+key/123"
    text = f"401 for {key} at https://x/v1?key=sk-test%2Bkey%2F123 or sk-test%2Bkey%2F123"
    shown = redact(text, [key], mark=REDACTED)
    assert key not in shown and "sk-test%2Bkey%2F123" not in shown and shown.count(REDACTED) == 3
    assert redact("nothing to hide", ["", None, "ab"], mark=REDACTED) == "nothing to hide"


def test_base_urls_are_refused_unless_the_host_is_allow_listed() -> None:
    assert allowed_base_url("", ["127.0.0.1"]) is None
    assert allowed_base_url("http://127.0.0.1:9000/v1", ["127.0.0.1"]) == "http://127.0.0.1:9000/v1"
    assert allowed_base_url("https://api.example.com:443/v1", ["api.example.com:443"]) == "https://api.example.com:443/v1"
    with pytest.raises(GuardError, match="does not accept custom base URLs"):
        allowed_base_url("http://127.0.0.1:9000/v1", [])
    with pytest.raises(GuardError, match="host '169.254.169.254' is not allowed"):
        allowed_base_url("http://169.254.169.254/latest/meta-data", ["127.0.0.1"])
    with pytest.raises(GuardError, match="user name or password"):
        allowed_base_url("http://u:p@127.0.0.1/v1", ["127.0.0.1"])
    with pytest.raises(GuardError, match="http:// or https://"):
        allowed_base_url("file:///etc/passwd", ["127.0.0.1"])
    with pytest.raises(GuardError, match="host '127.0.0.1' is not allowed"):
        allowed_base_url("http://127.0.0.1:8001/v1", ["127.0.0.1:8000"])
    assert check_model_name(" gpt-4o-mini ") == "gpt-4o-mini"
    with pytest.raises(GuardError, match="model name"):
        check_model_name("gpt?x=<script>")


def test_settings_come_from_the_environment_with_clear_errors(tmp_path: Path) -> None:
    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_MODELS": "openai:gpt-4o, gemini:gemini-2.5-flash",
                                       "DININGBENCH_SPACE_MAX_ITEMS": "5"}, repo_root=tmp_path)
    assert settings.models == ("openai:gpt-4o", "gemini:gemini-2.5-flash")
    assert (settings.max_items, settings.default_items) == (5, 5)
    assert settings.model_choices("classification")[:3] == ["openai:gpt-4o", "gemini:gemini-2.5-flash",
                                                            "baseline:random"]
    assert settings.tasks() == ("classification", "nutrition")  # no judge: no VQA
    assert settings.is_synthetic_sample
    with pytest.raises(SettingsError, match="DININGBENCH_SPACE_MODELS: unknown backend 'claude'"):
        SpaceSettings.from_env({"DININGBENCH_SPACE_MODELS": "claude:opus"}, repo_root=tmp_path)
    with pytest.raises(SettingsError, match="DININGBENCH_SPACE_MAX_ITEMS='many' is not a whole number"):
        SpaceSettings.from_env({"DININGBENCH_SPACE_MAX_ITEMS": "many"}, repo_root=tmp_path)


def test_requests_outside_what_the_operator_offers_are_refused(tmp_path: Path) -> None:
    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_MAX_ITEMS": "10"}, repo_root=tmp_path)
    assert resolve(EvalRequest(task="nutrition", model="baseline:zero", n_items=3), settings) == ("baseline:zero", {})
    refused = [
        (EvalRequest(task="nutrition", model="openai:gpt-4o", n_items=3), "not offered"),
        (EvalRequest(task="classification", model="baseline:oracle", n_items=3), "not offered"),
        (EvalRequest(task="vqa", model="baseline:first", n_items=3), "task: choose one of"),
        (EvalRequest(task="nutrition", model="baseline:zero", n_items=11), "between 1 and 10"),
        (EvalRequest(task="nutrition", model="baseline:zero", n_items=2, base_url="http://x/v1"), "own API key"),
        (EvalRequest(task="nutrition", model=OWN_KEY, n_items=2, provider="anthropic", api_key="k"), "provider"),
        (EvalRequest(task="nutrition", model=OWN_KEY, n_items=2, own_model="gpt-4o"), "paste your key"),
    ]
    for request, message in refused:
        with pytest.raises(GuardError, match=message):
            resolve(request, settings)


def _write_run(folder: Path, metrics: dict, run: dict) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "run.json").write_text(json.dumps(run))


def test_leaderboard_marks_reported_rows_and_reads_local_runs(tmp_path: Path) -> None:
    csv_path = tmp_path / "table2.csv"
    csv_path.write_text("model,type,lang,classification_acc,avg_mape,calories_mape,protein_mape,"
                        "carbohydrates_mape,fat_mape,vqa_acc\nGPT-4o,proprietary,zh,65.26,42.43,,,,,80.60\n")
    results = tmp_path / "results"
    _write_run(results / "first-cls", {"classification": {"accuracy": 0.125, "accuracy_ci95": [0.0, 0.3751],
                                                          "n": 8, "parse_failures": 0}},
               {"model": "baseline:first", "lang": "zh"})
    _write_run(results / "zero-nut", {"nutrition": {"avg_mape": 1.0, "avg_mape_ci95": [1.0, 1.0], "n": 4,
                                                    "calories": {"mape": 1.0}, "fat_mape": 1.0}},
               {"settings": {"model": "baseline:zero", "lang": "en", "dataset": "/data/release"}})
    (results / "broken").mkdir()
    (results / "broken" / "metrics.json").write_text("{not json")
    sweep = results / "views-sweep"
    _write_run(sweep / "cell-img1", {"classification": {"accuracy": 0.5, "n": 8}},
               {"settings": {"model": "baseline:random", "images": 1, "limit": 8, "dataset": "/data/release"},
                "dataset": {"source": "/data/release"}})
    table = leaderboard_table(csv_path, results)  # ranked by classification accuracy, blanks last
    assert list(table["Source"]) == ["reported (paper)", "local run: views-sweep/cell-img1",
                                     "local run: first-cls", "local run: zero-nut"]
    assert list(table["#"]) == [1, None, None, None]  # baselines are shown in their own group, not ranked
    assert list(table["Group"]) == ["paper · zh", "baselines", "baselines", "baselines"]
    reported, cell, first, zero = (table.iloc[i] for i in range(4))
    assert (reported["Model"], reported["Data"], reported["Cls acc %"], reported["VQA acc %"]) == (
        "GPT-4o", "paper", 65.26, 80.6)
    assert reported["Cls 95% CI"] is None and reported["kcal MAPE %"] is None
    assert (first["Model"], first["Cls acc %"], first["Cls 95% CI"]) == ("baseline:first", 12.5, "[0.00, 37.51]")
    assert first["Data"] == "synthetic" and first["Items"] == "Cls 8"
    assert (cell["Model"], cell["Data"]) == ("baseline:random (1 view)", "partial")
    assert (zero["Avg MAPE %"], zero["kcal MAPE %"], zero["Fat MAPE %"], zero["Lang"]) == (100.0, 100.0, 100.0, "en")
    assert zero["Data"] == "full release" and zero["Items"] == "Nutr 4"
    by_mape = leaderboard_table(csv_path, results, "Avg MAPE %")
    assert list(by_mape["Model"])[:2] == ["GPT-4o", "baseline:zero (en)"]  # lower is better for MAPE
    assert by_mape["#"].tolist()[2:] == [None, None]
    page = leaderboard_html(local_rows(results), "Cls acc %")  # a visitor sees the release's name, not its path
    assert "title='release'" in page and "/data/release" not in page


def test_the_leaderboard_page_fits_phones_and_names_everything_in_full(tmp_path: Path) -> None:
    from space.diningspace.leaderboard import leaderboard_html, leaderboard_rows

    csv_path = tmp_path / "table2.csv"
    csv_path.write_text("model,type,lang,classification_acc,avg_mape,calories_mape,protein_mape,"
                        "carbohydrates_mape,fat_mape,vqa_acc\nA-very-long-model-name-<i>,open,zh,65.2,,,,,,\n")
    results = tmp_path / "results"
    _write_run(results / "r", {"classification": {"accuracy": 0.2445, "accuracy_ci95": [0.201, 0.288], "n": 8}},
               {"model": "baseline:first"})
    page = leaderboard_html(leaderboard_rows(csv_path, results), "Cls acc %")
    assert page.startswith("<div class='db-scroll'")  # wide tables scroll inside their own box
    assert "24.45 <span class='db-ci'>[20.10, 28.80]</span>" in page and "65.20" in page
    assert "title='A-very-long-model-name-&lt;i&gt;'" in page and "<i>" not in page
    assert "title='Classification accuracy (%), higher is better. Click: rank by this column, best first'" in page
    assert page.index("<th") < page.index(">Data<") < page.index(">Cls acc %")
    assert reported_rows(tmp_path / "missing.csv") == [] and local_rows(tmp_path / "none") == []


def test_results_table_shows_nutrition_compactly_and_escapes_model_text() -> None:
    from space.diningspace.evaluation import SampleResult
    from space.diningspace.results_view import results_table, summary_line

    rows = [SampleResult(id="n1", raw="<script>x</script> 450 kcal", parsed={"calories": 450.0, "protein": 20.04,
                         "carbohydrates": 50.0, "fat": None}, reference={"calories": 682.4000244140625,
                         "protein": 33.2, "carbohydrates": 81.6, "fat": 23.3}, correct=None, error=None, ape=0.25),
            SampleResult(id="n2", raw=None, parsed=None, reference={}, correct=None, error="HTTP 500", ape=None)]
    html = results_table(tasks.get("nutrition"), rows, {})
    assert "450 kcal · P 20.0 g · C 50.0 g · F ? g" in html
    assert "682 kcal · P 33.2 g · C 81.6 g · F 23.3 g" in html
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert "APE 25.0%" in html and "HTTP 500" in html and "failed" in html
    line = summary_line(tasks.get("nutrition"), "baseline:zero", {"avg_mape": 1.0, "avg_mape_ci95": [1.0, 1.0], "n": 8})
    assert line == "**baseline:zero** — Average MAPE (%) **100.00 [100.00, 100.00]** · 8 items"
    line = summary_line(tasks.get("classification"), "baseline:first", {"accuracy": 0.125, "n": 8, "parse_failures": 1})
    assert line == ("**baseline:first** — accuracy (%) **12.50** · 8 items · 1 unparsed · no interval: too few "
                    "items or merchants to resample")  # the Evaluate tab says why it shows none
    assert html.startswith('<div class="db-scroll">')


def test_nutrition_figures_are_a_table_per_nutrient_not_json() -> None:
    from space.diningspace.results_view import metrics_table

    figures = {"n": 4, "avg_mape": 0.086, "avg_mape_ci95": [0.05, 0.12], "median_ape": 0.07,
               **{f"{k}_mape": v for k, v in (("calories", 0.1164), ("protein", 0.0719),
                                              ("carbohydrates", 0.0423), ("fat", 0.1135))},
               "calories_mae": 78.78, "fat_mae": 2.87}
    table = metrics_table(tasks.get("nutrition"), figures)
    for text in ("Calories</td><td class='db-num'>11.64", "Fat</td><td class='db-num'>11.35", "78.8 kcal",
                 "2.9 g", "8.60 [5.00, 12.00]"):
        assert text in table
    assert "{" not in table and metrics_table(tasks.get("nutrition"), None) == ""


def test_the_space_card_declares_the_installed_gradio_and_the_app_file() -> None:
    from importlib.metadata import version

    card = (Path(__file__).resolve().parents[1] / "space" / "README.md").read_text(encoding="utf-8")
    header = card.split("---")[1]
    assert f"sdk_version: {version('gradio')}\n" in header
    for line in ("title: DiningBench", "sdk: gradio", "app_file: app.py", 'python_version: "3.11"', "license: "):
        assert line in header


def test_a_space_process_that_ends_at_once_waits_for_its_warm_up(tmp_path: Path) -> None:
    """The warm-up thread imports the harness and reads Parquet; a process that ended under it used to
    abort in interpreter shutdown ("Fatal Python error ... finalizing", exit -6) one start in a few."""
    import subprocess
    import sys

    marker = tmp_path / "warmed"
    probe = f"""
import time
from pathlib import Path
import app
from diningspace.catalog import Catalog

class SlowCatalog(Catalog):
    def warm(self):
        time.sleep(1.0)
        Path({str(marker)!r}).write_text("done")

settings = app.settings_or_exit(app.REPO_ROOT)
app.build_app(settings, SlowCatalog(source=settings.dataset))
"""
    done = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).parents[1] / "space",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert marker.read_text() == "done"  # the process ended after the warm-up, not in the middle of it


def test_the_page_served_opens_on_the_tab_its_address_names() -> None:
    """`?tab=ID` (or `?run=NAME` alone) is the selected tab in the page's own config, so the browser draws it
    first; an unknown or malformed tab, or none, serves the shared config, which is never changed."""
    import re
    import urllib.request

    import gradio as gr
    from fastapi.middleware import Middleware

    from space.diningspace.lazy import LazyTabs, OpeningTab, TabbedBlocks

    with TabbedBlocks() as demo:
        lazy = LazyTabs()
        with gr.Tabs() as tabs:
            for tab_id in ("browse", "submit", "runs"):
                with gr.Tab(tab_id.title(), id=tab_id) as tab:
                    gr.Markdown(tab_id)
                lazy.add(tab_id, tab)
        lazy.wire(demo, tabs)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True,
                            app_kwargs={"middleware": [Middleware(OpeningTab)]})

    def selected(query: str) -> list[str]:
        with urllib.request.urlopen(url + query, timeout=30) as response:
            return re.findall(r'"selected":\s*"([^"]*)"', response.read().decode("utf-8"))

    try:
        assert selected("?tab=runs") == ["runs"]
        assert selected("?tab=submit&tab=runs") == ["submit"]  # the first value counts
        assert selected("?run=some/run&item=classification/x") == ["runs"]
        assert selected("?tab=runs&run=x") == ["runs"]
        for query in ("", "?tab=browse", "?tab=nope", "?tab=..%2Fetc", "?tab=RUNS", "?tab=" + "r" * 5000,
                      "?tab=runs" + "&x=1" * 30):
            assert selected(query) == [], query
        assert selected("config?tab=runs") == ["runs"]  # Gradio's config route answers alike
        assert selected("config") == []
        shared = next(c for c in demo.config["components"] if c["id"] == tabs._id)
        assert "selected" not in shared["props"] or shared["props"]["selected"] is None
    finally:
        demo.close()
