"""The Space on the authors' release: Browse shows its rows and photos, Evaluate scores a subset under their
protocol, the Leaderboard marks runs made on it with its fingerprint and their figures.

The release here is the stand-in `python diningbench.py sample --layout official` writes (the synthetic
sample in the authors' layout), built once for the module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eval import tasks
from space.diningspace.browse_tab import NO_FACETS, BrowseTab
from space.diningspace.catalog import Catalog
from space.diningspace.render import item_card

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("official") / "release"
    subprocess.run([sys.executable, "diningbench.py", "sample", "--layout", "official", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def catalog(release: Path) -> Catalog:
    return Catalog(source=str(release))


def test_browse_lists_the_release_rows_in_the_language_chosen(catalog: Catalog, release: Path) -> None:
    assert catalog.by_language
    ids = catalog.filter_ids("classification")
    assert ids[:3] == ["1", "2", "3"] and len(ids) == sum(1 for line in (release / "classification.jsonl").open()
                                                          if line.strip())
    zh, en = catalog.row("classification", "1"), catalog.row("classification", "1", "en")
    assert "请根据图片" in zh["prompt"] and "请根据图片" not in en["prompt"]
    assert zh["ground_truth"] == zh["answer"] and len(zh["options"]) == 8


def test_browse_shows_the_photos_their_paths_name(catalog: Catalog) -> None:
    views = catalog.view_files("nutrition", "1")
    assert [role for _, role in views][:2] == ["reference", "user"]
    assert all(Path(path).is_file() and Path(path).read_bytes()[:2] == b"\xff\xd8" for path, _ in views)
    assert len(catalog.images("vqa", "1")) >= 1


def test_rows_without_merchant_cuisine_or_category_hide_those_filters_and_say_so(catalog: Catalog) -> None:
    for config in ("classification", "nutrition", "vqa"):
        assert catalog.facets(config, "cuisine") == catalog.facets(config, "category") == []
    cuisine, category, vqa_category, note, item, strip, card, fields, where = BrowseTab(catalog).on_config(
        "vqa", "zh", False)
    assert not cuisine["visible"] and not category["visible"] and not vqa_category["visible"]
    assert note["visible"] and note["value"] == NO_FACETS
    assert item["value"] == "1" and where == "Item 1 of 16" and "<img" in strip
    assert "merchant" not in card and "None" not in card


def test_the_card_shows_their_prompt_and_the_ground_truth_as_published(catalog: Catalog) -> None:
    row = catalog.row("nutrition", "2")
    card = item_card("nutrition", row, n_images=2, show_answer=True)
    assert "Prompt sent to the model" in card and "Ground truth (as published)" in card
    assert "the authors&#x27; ground truth" in card or "the authors' ground truth" in card
    hidden = item_card("nutrition", row, n_images=2, show_answer=False)
    assert "Ground truth (as published)" not in hidden


# ---------------------------------------------------------------- Evaluate
def _finished(task: str, release: Path, model: str = "baseline:first", n_items: int = 6, **kw):
    from space.diningspace.evaluation import EvalRequest, stream_evaluation
    from space.diningspace.settings import SpaceSettings

    settings = SpaceSettings(dataset=str(release), **kw)
    updates = list(stream_evaluation(EvalRequest(task=task, model=model, n_items=n_items), settings))
    assert updates[-1].metrics is not None
    return updates[-1]


def test_evaluate_on_their_release_reports_their_figure_first_and_ours_beside_it(release: Path) -> None:
    from eval import official
    from space.diningspace.results_view import metrics_table, summary_line

    done = _finished("classification", release)
    metrics = done.metrics
    assert metrics["protocol"] == "official" and len(done.results) == 6
    # baseline:first answers A: their figure is the share of these six items whose published answer is A
    truth = [official.classification_gt(json_row) for json_row in _published_rows(release, "classification")[:6]]
    assert metrics["official"]["acc"] == pytest.approx(truth.count("A") / 6) == metrics["official_headline"][1]
    assert metrics["official"]["total_eval"] == 6 and metrics["accuracy"] == pytest.approx(truth.count("A") / 6)
    line = summary_line(tasks.get("classification"), done.spec, metrics)
    assert line.index("official accuracy") < line.index("ours: accuracy")
    table = metrics_table(tasks.get("classification"), metrics)
    assert table.index("official accuracy") < table.index("ours: accuracy")


def test_nutrition_headline_is_their_avg_mape_in_percent(release: Path) -> None:
    from space.diningspace.results_view import summary_line

    metrics = _finished("nutrition", release, n_items=4).metrics
    figures = metrics["official"]
    assert figures["total_eval"] == 4 and set(figures) >= {"avg_mape", "avg_mae", "avg_rmse", "calories"}
    assert metrics["official_headline"] == ["avg_mape", pytest.approx(figures["avg_mape"] / 100)]
    assert f"official Average MAPE (%) **{figures['avg_mape']:.2f}**" in summary_line(tasks.get("nutrition"), "m", metrics)


def _published_rows(release: Path, config: str) -> list[dict]:
    import json

    return [json.loads(line) for line in (release / f"{config}.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def test_vqa_is_judged_with_their_prompt_and_read_by_their_keywords_and_ours(release: Path, monkeypatch) -> None:
    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(lambda request: "是的") as server:  # their keywords read 是的 as right; ours, strict, cannot tell
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-operator-judge-key")
        done = _finished("vqa", release, model="openai:vlm", n_items=3, judge="openai:judge",
                         models=("openai:vlm",))
        judge_prompts = [r for r in server.requests if "标准答案" in r.prompt]
    assert len(judge_prompts) == 3  # one judge call per answer, with their Chinese prompt
    assert all(r.body["max_tokens"] == 100 and r.body["temperature"] == 0.0 for r in judge_prompts)
    metrics = done.metrics
    assert metrics["official"]["model_evaluate_accuracy"] == 1.0 and metrics["official_headline"][1] == 1.0
    assert metrics["unscored"] == 3 and metrics["official_disagreements"] == 0


def test_the_papers_rows_are_the_authors_full_table_with_their_error_columns() -> None:
    import csv

    from space.diningspace.leaderboard import reported_rows

    table = ROOT / "eval" / "data" / "table2_reported.csv"
    with table.open(encoding="utf-8") as fh:
        published = list(csv.DictReader(fh))
    rows = reported_rows(table)
    assert len(rows) == len(published) >= 29
    first, rec = rows[0], published[0]
    assert (first["Model"], first["Data"], first["Protocol"]) == (rec["model"], "paper", "official")
    assert first["Cls acc %"] == float(rec["classification_acc"]) and first["VQA acc %"] == float(rec["vqa_acc"])
    assert (first["Avg MAE"], first["Avg RMSE"]) == (float(rec["avg_mae"]), float(rec["avg_rmse"]))


def test_a_run_on_the_sample_in_their_layout_is_synthetic_and_shows_their_figures(release: Path, tmp_path: Path
                                                                                  ) -> None:
    from eval.api import run
    from eval.settings import RunSettings
    from space.diningspace.leaderboard import group_of, leaderboard_html, leaderboard_rows, local_rows

    results = tmp_path / "results"
    for task in ("classification", "nutrition"):
        run(RunSettings(task=task, model="baseline:first", dataset=str(release), out=results / task), progress=False)
    metrics = {t: json.loads((results / t / "metrics.json").read_text())[t] for t in ("classification", "nutrition")}
    rows = {r["Run"]: r for r in local_rows(results)}
    cls, nutr = rows["classification"], rows["nutrition"]
    assert cls["Data"] == nutr["Data"] == "synthetic"  # the sample in their layout: never the benchmark's
    assert cls["Protocol"] == "official" and group_of(cls)[1] is False  # not ranked
    assert cls["Cls acc %"] == round(metrics["classification"]["official"]["acc"] * 100, 2)
    assert nutr["Avg MAPE %"] == round(metrics["nutrition"]["official"]["avg_mape"], 2)  # theirs is in percent
    assert nutr["Avg MAE"] == round(metrics["nutrition"]["official"]["avg_mae"], 2)
    low, high = metrics["classification"]["official_ci95"]  # their figure's own interval, resampling items
    assert metrics["classification"]["official"]["total_eval"] >= 20  # enough items: no ‡
    assert cls["Cls 95% CI"] == f"[{100 * low:.2f}, {100 * high:.2f}]"
    ours = metrics["classification"]["accuracy"]
    assert cls["_beside"]["Cls acc %"].startswith(f"the figure of the authors' protocol; ours' reading of the same "
                                                  f"answers: {100 * ours:.2f} [")
    assert cls["_asked"] == "the authors' protocol, image indices 0"
    prints = json.loads((results / "classification" / "run.json").read_text())["dataset"]["fingerprints"]
    assert prints["classification"][:16] in cls["_data_source"]
    page = leaderboard_html(leaderboard_rows(None, results), "Cls acc %")
    assert ">Protocol<" in page and "fingerprints classification" in page


def test_a_run_on_the_published_release_is_ranked_among_runs_of_their_protocol(tmp_path: Path) -> None:
    from eval.report.runs import RunData
    from space.diningspace.leaderboard import data_kind, leaderboard_rows

    results = tmp_path / "results"

    def write(name: str, metrics: dict, model: str) -> None:
        folder = results / name
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(metrics))
        (folder / "scores.jsonl").write_text("")
        protocol = "official" if any("official" in entry for entry in metrics.values()) else "ours"  # as a run records it
        (folder / "run.json").write_text(json.dumps({
            "model": model, "settings": {"model": model, "lang": "zh", "dataset": "meituan/DiningBench",
                                         "protocol": protocol},
            "dataset": {"source": "meituan/DiningBench", "fingerprints": {"classification": "0123456789abcdef"}}}))

    theirs = {"classification": {"accuracy": 0.5, "n": 2884, "official": {"acc": 0.61, "test_count": 2884,
                                                                          "total_eval": 2884}}}
    write("theirs", theirs, "openai:a")
    write("ours", {"classification": {"accuracy": 0.7, "n": 40}}, "openai:b")
    write("cut", {"classification": {"accuracy": 0.7, "official": {"acc": 0.7, "test_count": 100}}}, "openai:c")
    rows = {r["Run"]: r for r in leaderboard_rows(None, results)}
    assert rows["theirs"]["Group"] == "full release · zh · official protocol" and rows["theirs"]["#"] == 1
    assert rows["theirs"]["Cls acc %"] == 61.0 and rows["theirs"]["Items"] == "Cls 2884"
    assert rows["ours"]["Group"] == "full release · zh" and rows["ours"]["Protocol"] == "ours"
    assert rows["cut"]["Data"] == "partial"  # a file that is not the published size is not the benchmark
    assert data_kind(RunData(results / "theirs", {"dataset": {"source": "x"}}), theirs) == "full release"


def test_the_hub_id_of_their_release_names_the_repository_model_cards_cite() -> None:
    from space.diningspace.settings import SpaceSettings

    settings = SpaceSettings.from_env({"DININGBENCH_SOURCE": "meituan/DiningBench@main"}, repo_root=ROOT)
    assert settings.dataset == "meituan/DiningBench@main" and settings.dataset_id == "meituan/DiningBench"
    assert not settings.is_synthetic_sample
