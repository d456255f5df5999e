"""Sweep tables and plots from sweep folders, and the model-card block."""

from pathlib import Path

import yaml
from helpers_report import cls_item, nut_item, report_args, table_rows, write_run
from huggingface_hub.repocard_data import eval_results_to_model_index, model_index_to_eval_results

from eval.report import model_card, report

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


def test_model_card_yaml_parses_and_round_trips(tmp_path, capsys):
    a = write_run(tmp_path / "a", "openai:model-a", [cls_item("c0", "m0", True), cls_item("c1", "m1", False),
                                                     cls_item("c2", "m1", True), cls_item("c3", "m2", True)])
    n = write_run(tmp_path / "n", "openai:model-a",
                  [nut_item(f"n{i}", f"m{i}", {k: v * 1.25 for k, v in REF.items()}, REF) for i in range(3)])
    assert report.main(report_args(str(a), str(n), "--model-card", "--n-boot", "50")) == 0
    text = capsys.readouterr().out
    block = text.split("```yaml\n")[1].split("```")[0]
    data = yaml.safe_load(block)
    [entry] = data["model-index"]
    assert entry["name"] == "model-a"
    cls, nut = entry["results"]
    assert cls["dataset"] == {"name": "DiningBench", "type": model_card.DATASET_ID, "config": "classification",
                              "split": "test", "args": {"lang": "zh", "images": "all", "cot": False}}
    assert cls["metrics"] == [{"type": "accuracy", "name": "Accuracy (%)", "value": 75.0}]
    assert nut["metrics"][0] == {"type": "mape", "name": "Average MAPE (%)", "value": 25.0}
    assert yaml.safe_load(yaml.safe_dump(data, sort_keys=False, allow_unicode=True)) == data
    # the Hub's own parser reads it back to the same block
    name, results = model_index_to_eval_results(data["model-index"])
    assert eval_results_to_model_index(name, results) == data["model-index"]
    assert "| model-a | Fine-grained dish classification | zh, all views, no CoT | Accuracy (%) | 75.00 |" in text
