"""Breakdowns across runs that differ: the union of every run's cells, each with its own n."""

from __future__ import annotations

from helpers_report import cls_item, table_rows, write_run

from eval.report import report


def test_runs_with_different_views_and_disjoint_categories_each_show_their_cells(tmp_path):
    # Run A sent 2 views, categories noodles and soups; run B sent 3, 4 and 5 views, categories rice.
    a_items = [cls_item("c1", "m1", True, n_images=2), cls_item("c2", "m1", False, n_images=2),
               cls_item("c3", "m2", True, n_images=2, category="soups")]
    b_items = [cls_item("c1", "m1", True, n_images=3, category="rice"),
               cls_item("c2", "m1", True, n_images=4, category="rice"),
               cls_item("c3", "m2", False, n_images=5, category="rice"),
               cls_item("c4", "m2", False, n_images=5, category="rice")]
    a = report.load_run(write_run(tmp_path / "a", "openai:model-a", a_items, images=2))
    b = report.load_run(write_run(tmp_path / "b", "openai:model-b", b_items))
    text = report.breakdown_tables([a, b])
    views = text.split("by images sent")[1].split("###")[0]
    # hand-computed: A 2 views 2/3 correct; B 3 views 1/1, 4 views 1/1, 5 views 0/2
    assert table_rows(views, "2")[0][1:] == ["66.67 (n=3) †", "– (n=0)"]
    assert table_rows(views, "3")[0][1:] == ["– (n=0)", "100.00 (n=1) †"]
    assert table_rows(views, "4")[0][1:] == ["– (n=0)", "100.00 (n=1) †"]
    assert table_rows(views, "5")[0][1:] == ["– (n=0)", "0.00 (n=2) †"]
    categories = text.split("by menu category")[1].split("###")[0]
    assert table_rows(categories, "rice")[0][1:] == ["– (n=0)", "50.00 (n=4) †"]
    assert table_rows(categories, "noodles")[0][1:] == ["50.00 (n=2) †", "– (n=0)"]
    assert table_rows(categories, "soups")[0][1:] == ["100.00 (n=1) †", "– (n=0)"]
    # rows ordered by the union's sizes: rice (4) before noodles (2) before soups (1)
    order = [line.split(" | ")[0].strip("| ") for line in categories.splitlines() if line.startswith("| ")][1:]
    assert order == ["rice", "noodles", "soups"]


def test_the_report_counts_unparsed_truncated_and_failed_answers_per_task(tmp_path):
    items = [cls_item("c1", "m1", True), cls_item("c2", "m1", False, parsed=None),
             {**cls_item("c3", "m2", False, parsed=None), "truncated": True, "finish_reason": "length"},
             {**cls_item("c4", "m2", False, parsed=None), "error": "HTTP 500"}]
    run = report.load_run(write_run(tmp_path / "a", "openai:o4-mini", items))
    text = report.build_report([run], reported=False, n_boot=20)
    section = text.split("## Answers that did not count")[1]
    # c2 unparsed; c3 cut off by the limit (unparsed too, counted as truncated); c4 failed
    assert table_rows(section, "openai:o4-mini")[0][1:] == ["classification", "4", "2", "1", "1"]
    assert "--max-tokens" in section
    clean = report.load_run(write_run(tmp_path / "b", "openai:gpt-4o", [cls_item("c1", "m1", True)]))
    assert "did not count" not in report.build_report([clean], reported=False, n_boot=20)
