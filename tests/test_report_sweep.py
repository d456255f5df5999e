"""Sweep tables and plots from sweep folders, and the chance reference in tables and plots."""

from pathlib import Path

import pytest
from helpers_report import cls_item, nut_item, report_args, table_rows, write_run

from eval import numbers
from eval.backends import baseline
from eval.report import report
from eval.types import ConfigError
from tests.helpers_backends import opts

REF = {"calories": 500.0, "protein": 25.0, "carbohydrates": 60.0, "fat": 20.0}


def sweep_folder(root: Path) -> Path:
    """Two models x views 1..4 (classification) and CoT off/on at 4 views (nutrition).

    Model A gets one more item right per extra view (4, 5, 6, 7 of 8); model B stays at 4 of 8.
    Nutrition: without CoT every estimate is 10% high; with CoT 30% high (A) or 20% high (B).
    """
    for model, gains in (("openai:model-a", 1), ("openai:model-b", 0)):
        name = model.split(":")[1]
        for views in (1, 2, 3, 4):
            right = 4 + gains * (views - 1)
            items = [cls_item(f"c{i}", f"m{i % 4}", i < right, n_images=views) for i in range(8)]
            write_run(root / f"{name}-classification-img{views}", model, items, images=views)
        for cot, error in ((False, 0.1), (True, 0.3 if gains else 0.2)):
            items = [nut_item(f"n{i}", f"m{i % 4}", {k: v * (1 + error) for k, v in REF.items()}, REF)
                     for i in range(8)]
            write_run(root / f"{name}-nutrition-img4{'-cot' if cot else ''}", model, items, images=4, cot=cot)
    return root


def test_views_table_matches_hand_counts(tmp_path):
    runs = [report.load_run(p) for p in report.expand_run_dirs([sweep_folder(tmp_path / "sweep")])]
    text = report.build_report(runs, reported=False, n_boot=100)
    row = table_rows(text.split("by number of views")[1], "openai:model-a")[0]
    assert [cell.split(" ")[0] for cell in row[1:]] == ["50.00", "62.50", "75.00", "87.50"]
    row = table_rows(text.split("by number of views")[1], "openai:model-b")[0]
    assert [cell.split(" ")[0] for cell in row[1:]] == ["50.00"] * 4


def test_cot_table_gives_paired_differences(tmp_path):
    runs = [report.load_run(p) for p in report.expand_run_dirs([sweep_folder(tmp_path / "sweep")])]
    text = report.build_report(runs, reported=False, n_boot=100)
    section = text.split("with and without chain of thought")[1]
    row_a = table_rows(section, "openai:model-a · 4 views")[0]
    assert row_a[1].startswith("10.00 ") and row_a[2].startswith("30.00 ")
    assert row_a[3] == "+20.00 [+20.00, +20.00]"  # every item 20 points worse: no spread
    assert table_rows(section, "openai:model-b · 4 views")[0][3] == "+10.00 [+10.00, +10.00]"


def test_report_over_a_sweep_folder_draws_the_plots(tmp_path, capsys):
    folder = sweep_folder(tmp_path / "sweep")
    assert report.main(report_args(str(folder), "--n-boot", "100")) == 0
    out = capsys.readouterr().out
    for name in ("views_classification.png", "cot_nutrition.png"):
        png = folder / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
        assert f"]({name})" in out
    assert not (folder / "views_nutrition.png").exists()  # nutrition was not swept over views


def test_table2_has_a_computed_chance_row_below_which_median_can_fall(tmp_path):
    # a balanced sample: answers A..H once each; baseline:median answers the most common letter of
    # the *other* items, never the item's own, and scores 0 of 8
    median = write_run(tmp_path / "median", "baseline:median",
                       [cls_item(f"c{i}", f"m{i}", False) for i in range(8)])
    text = report.build_report([report.load_run(median)], reported=False, n_boot=50)
    [row] = table_rows(text, "chance")
    assert row[1] == "computed (mean of 1/options)"
    assert row[2] == "12.50"  # 1/8, exactly: no interval, nothing sampled
    assert set(row[3:-1]) == {"–"}  # nutrition and VQA have no chance level
    assert table_rows(text, "baseline:median")[0][2].startswith("0.00")


def test_no_chance_row_without_classification(tmp_path):
    nut = write_run(tmp_path / "n", "openai:model-a", [nut_item("n0", "m0", REF, REF)])
    assert table_rows(report.build_report([report.load_run(nut)], reported=False, n_boot=20), "chance") == []


def test_baseline_chance_spec_points_to_the_computed_row():
    with pytest.raises(ConfigError, match="computed, not sampled"):
        baseline.make("chance", opts(dataset_items={}))
    assert numbers.chance_accuracy([{"n_options": 8}, {"n_options": 4}]) == 0.1875


def test_classification_plots_carry_the_chance_line(tmp_path, monkeypatch):
    drawn = {}
    monkeypatch.setattr("eval.report.sweeps.plot_views", lambda path, title, panels, **kw: drawn.update(
        {path.name: panels}) or path)
    monkeypatch.setattr("eval.report.sweeps.plot_cot", lambda path, title, ylabel, bars, **kw: drawn.update(
        {path.name: kw}) or path)
    runs = [report.load_run(p) for p in report.expand_run_dirs([sweep_folder(tmp_path / "sweep")])]
    report.build_report(runs, reported=False, n_boot=20, plot_dir=tmp_path)
    assert drawn["views_classification.png"][0].chance == 12.5
    assert drawn["cot_nutrition.png"]["chance"] is None  # no chance level for an error
