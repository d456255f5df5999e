"""`python -m eval report`: Table 2 figures, reported rows, baselines, comparisons, breakdowns, CLI."""

from pathlib import Path

import pytest
from helpers_report import cls_item, nut_item, report_args, table_rows, vqa_item, write_run

from eval import tasks
from eval.report import report

REF = {"calories": 400.0, "protein": 20.0, "carbohydrates": 50.0, "fat": 10.0}


def classification_run(folder: Path, pattern: str, model: str = "openai:model-a", *, blocks: bool = False,
                       **settings) -> Path:
    """One item per character: 'x' correct, '.' wrong; two cuisines. Merchants m0..m3 in turn, or
    with `blocks` one merchant per 4 consecutive items."""
    items = [cls_item(f"c{i}", f"m{i // 4 if blocks else i % 4}", ch == "x", cuisine="chinese" if i % 2 else "western",
                      n_images=1 + i % 3) for i, ch in enumerate(pattern)]
    return write_run(folder, model, items, **settings)


def test_classification_accuracy_and_interval_in_table2(tmp_path):
    run = report.load_run(classification_run(tmp_path / "a", "xxx." * 10))  # 30 / 40 correct
    text = report.table2([run], reported=False, n_boot=200)
    row = table_rows(text, "openai:model-a")[0]
    value, interval = row[2].split(" ", 1)
    assert value == "75.00" and interval.endswith("‡")  # the classification_run's few merchants: marked
    assert "‡ fewer than 20 merchants" in report.build_report([run], n_boot=50)
    low, high = (float(x) for x in interval.rstrip("‡").strip("[]").split(", "))
    assert low <= 75.0 <= high
    assert row[-1] == "40/–/–"


def test_unparsed_and_failed_items_count_as_wrong(tmp_path):
    items = [cls_item("c0", "m0", True), cls_item("c1", "m1", False, parsed=None),
             {**cls_item("c2", "m2", False, parsed=None), "error": "HTTP 500"}, cls_item("c3", "m3", True)]
    run = report.load_run(write_run(tmp_path / "a", "openai:m", items))
    assert report.headline(tasks.get("classification"), run.scores["classification"]) == 0.5


def test_reported_rows_are_marked_and_never_mixed_with_runs(tmp_path):
    run = report.load_run(classification_run(tmp_path / "a", "x."))
    text = report.table2([run], n_boot=50)
    gemini = table_rows(text, "Gemini-3-Pro-Preview")[0]
    assert gemini[1] == "reported (paper)"
    assert gemini[2] == "81.55" and gemini[-3] == "24.45" and gemini[-2] == "90.42"
    assert table_rows(text, "openai:model-a")[0][1] == "measured (a; all views)"
    assert not table_rows(text, "Gemini-3-Pro-Preview (en)")  # only the languages of the runs


def test_english_runs_bring_the_english_reported_rows(tmp_path):
    run = report.load_run(classification_run(tmp_path / "a", "x.", lang="en"))
    text = report.table2([run], n_boot=50)
    assert table_rows(text, "GPT-4o (en)")[0][2] == "62.38"
    assert table_rows(text, "openai:model-a (en)")


def test_baselines_get_their_own_labelled_rows_after_models(tmp_path):
    model = report.load_run(classification_run(tmp_path / "model", "xx.."))
    first = report.load_run(classification_run(tmp_path / "first", "x...", model="baseline:first"))
    text = report.table2([first, model], reported=False, n_boot=50)
    lines = [line for line in text.splitlines() if line.startswith("| ") and "Model" not in line]
    assert lines[0].startswith("| openai:model-a")
    assert lines[1].startswith("| baseline:first | baseline, no skill (first; all views) | 25.00")


def test_tasks_from_separate_folders_share_one_row(tmp_path):
    cls = classification_run(tmp_path / "cls", "x.")
    vqa = write_run(tmp_path / "vqa", "openai:model-a", [vqa_item("v0", "m0", "C"), vqa_item("v1", "m1", "I"),
                                                          vqa_item("v2", "m1", None), vqa_item("v3", "m2", "C")])
    text = report.table2([report.load_run(cls), report.load_run(vqa)], reported=False, n_boot=50)
    row = table_rows(text, "openai:model-a")
    assert len(row) == 1
    assert row[0][-2].startswith("50.00 ")  # 2 C of 4; the unscored one counts as not correct
    assert row[0][-1] == "2/–/4"


def test_vqa_without_any_verdict_says_not_scored(tmp_path):
    run = write_run(tmp_path / "v", "baseline:first", [vqa_item("v0", "m0", None), vqa_item("v1", "m1", None)])
    text = report.build_report([report.load_run(run)], reported=False, n_boot=50)
    assert table_rows(text, "baseline:first")[0][-2] == "not scored"
    assert "--judge" in text


def test_two_runs_get_a_paired_difference(tmp_path):
    # ten merchants of four items; on each, A is right 3 times and B twice
    a = report.load_run(classification_run(tmp_path / "a", "xxx." * 10, blocks=True))  # 75%
    b = report.load_run(classification_run(tmp_path / "b", "xx.." * 10, model="openai:model-b", blocks=True))
    text = report.comparison([a, b], n_boot=300)
    row = table_rows(text, "classification")[0]
    assert row[2:6] == ["openai:model-a", "openai:model-b", "40 (10 merchants)", "+25.00"]
    low, high = (float(x) for x in row[6].rstrip("‡").strip("[]").split(", "))
    # every merchant gains exactly the same in this construction, so the interval is a point
    assert low == high == 25.0 and row[6].endswith("‡")  # 10 merchants: marked
    # the exact permutation test over 2**10 merchant swaps: only no swap and all swaps reach +25
    assert row[7] == f"{2 / 1024:.3f}" and row[8] == "A better at the 5% level"


def test_identical_runs_differ_by_exactly_zero(tmp_path):
    a = report.load_run(classification_run(tmp_path / "a", "x.x..xx.xx"))
    b = report.load_run(classification_run(tmp_path / "b", "x.x..xx.xx", model="openai:model-b"))
    row = table_rows(report.comparison([a, b], n_boot=100), "classification")[0]
    assert row[5:9] == ["+0.00", "[+0.00, +0.00]‡", "1.000", "no significant difference at the 5% level"]


def test_three_runs_are_compared_only_when_asked(tmp_path):
    runs = [report.load_run(classification_run(tmp_path / n, "x.", model=f"openai:{n}")) for n in "abc"]
    assert report.comparison(runs, n_boot=20) == ""
    rows = table_rows(report.comparison(runs, against_first=True, n_boot=20), "classification")
    assert [(r[2], r[3]) for r in rows] == [("openai:a", "openai:b"), ("openai:a", "openai:c")]


def test_breakdown_counts_add_up_and_small_cells_are_flagged(tmp_path):
    run = report.load_run(classification_run(tmp_path / "a", "xxx." * 7))  # 28 items
    text = report.breakdown_tables([run])
    counts = {}
    for dimension in ("cuisine", "menu category", "images sent"):
        section = text.split(f"### classification by {dimension}")[1].split("###")[0]
        cells = [line.split(" | ")[1] for line in section.splitlines() if line.startswith("| ")][1:]
        counts[dimension] = sum(int(c.split("(n=")[1].split(")")[0]) for c in cells)
    assert counts == {"cuisine": 28, "menu category": 28, "images sent": 28}
    # 28 items over image counts 1,2,3 -> 10, 9, 9: the two 9s are flagged
    section = text.split("### classification by images sent")[1]
    assert section.count("(n=9) †") == 2 and "(n=10) †" not in section


def test_breakdown_figures_match_hand_counts(tmp_path):
    # western items are the even positions: 'x.x.' -> positions 0, 2 correct -> western 100%, chinese 0%
    run = report.load_run(classification_run(tmp_path / "a", "x.x." * 3))
    text = report.breakdown_tables([run])
    assert table_rows(text, "western")[0][1] == "100.00 (n=6) †"
    assert table_rows(text, "chinese")[0][1] == "0.00 (n=6) †"


def test_cli_writes_the_report_and_run_report(tmp_path, capsys):
    folder = classification_run(tmp_path / "a", "xx.")
    out = tmp_path / "out" / "report.md"
    assert report.main(report_args(str(folder), "--out", str(out), "--n-boot", "50")) == 0
    assert "| openai:model-a | measured (a; all views) | 66.67 [" in out.read_text()
    report.write_run_report(folder)
    assert "## Breakdowns" in (folder / "report.md").read_text()


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p / "missing", "not a folder"),
    (lambda p: p, "neither a run folder"),
])
def test_cli_bad_folder_is_one_line_error(tmp_path, capsys, make, message):
    assert report.main(report_args(str(make(tmp_path)))) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_malformed_scores_line_names_the_file_and_line(tmp_path, capsys):
    folder = classification_run(tmp_path / "a", "x.")
    with (folder / "scores.jsonl").open("a") as handle:
        handle.write("{not json\n")
    assert report.main(report_args(str(folder))) == 2
    assert "scores.jsonl line 3: invalid JSON" in capsys.readouterr().err


def test_nutrition_columns_come_from_the_metric(tmp_path):
    # two items, one merchant each. Calories: |440-400|/400 = 0.10 and |300-400|/400 = 0.25
    # protein: 0.0 and 0.5; carbohydrates: 0.2 and 0.0; fat: 0.1 and 0.3
    # MAPE: calories 17.50, protein 25.00, carbs 10.00, fat 20.00 -> Average MAPE 18.125 -> 18.12/18.13
    items = [nut_item("n0", "m0", {"calories": 440.0, "protein": 20.0, "carbohydrates": 60.0, "fat": 11.0}, REF),
             nut_item("n1", "m1", {"calories": 300.0, "protein": 30.0, "carbohydrates": 50.0, "fat": 7.0}, REF)]
    run = report.load_run(write_run(tmp_path / "n", "openai:m", items))
    row = table_rows(report.table2([run], reported=False, n_boot=50), "openai:m")[0]
    calories = row[3:6]
    assert calories == ["70.00", f"{(40**2 / 2 + 100**2 / 2) ** 0.5:.2f}", "17.50"]  # MAE (40+100)/2
    assert [row[8], row[11], row[14]] == ["25.00", "10.00", "20.00"]
    assert row[15].split(" ")[0] in ("18.12", "18.13")
    assert report.headline(tasks.get("nutrition"), run.scores["nutrition"]) == pytest.approx(0.18125)


def test_unparsed_nutrition_counts_as_100_percent_error(tmp_path):
    items = [nut_item("n0", "m0", None, REF), nut_item("n1", "m1", dict(REF), REF)]
    run = report.load_run(write_run(tmp_path / "n", "openai:m", items))
    assert report.headline(tasks.get("nutrition"), run.scores["nutrition"]) == pytest.approx(0.5)


def test_vqa_breakdown_by_category_counts_unscored_as_not_correct(tmp_path):
    items = [vqa_item("v0", "m0", "C", vqa_category="cuisine_technique"),
             vqa_item("v1", "m1", "I", vqa_category="cuisine_technique"),
             vqa_item("v2", "m1", None, vqa_category="multi_image_analysis"),
             vqa_item("v3", "m2", "C", vqa_category="multi_image_analysis"),
             vqa_item("v4", "m2", "C", vqa_category="multi_image_analysis")]
    text = report.breakdown_tables([report.load_run(write_run(tmp_path / "v", "openai:m", items))])
    section = text.split("### vqa by VQA category")[1]
    assert table_rows(section, "multi_image_analysis")[0][1] == "66.67 (n=3) †"  # 2 C of 3
    assert table_rows(section, "cuisine_technique")[0][1] == "50.00 (n=2) †"


def test_unscored_vqa_has_no_breakdown_tables(tmp_path):
    run = write_run(tmp_path / "v", "baseline:first", [vqa_item("v0", "m0", None)])
    text = report.breakdown_tables([report.load_run(run)])
    assert "### vqa" not in text and "once VQA is scored" in text
