"""`python -m eval compare`: the paired difference, its interval and a p-value per task, calibrated
(a clustered paired permutation test rejects a true null about 5% of the time at 30 and 100 merchants,
where the interval rule and McNemar do not), McNemar beside it, left-out items counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from eval import tasks
from eval.cli import main as cli_main
from eval.compare import compare_task, mcnemar_exact, permutation_p_value


def _null_accuracy(rng: np.random.Generator, merchants: int, per: int = 8) -> tuple[list[dict], list[dict], list[str]]:
    """A and B interchangeable: each merchant has its own difficulty and each item its own, shared by A
    and B (so their answers are correlated within items and merchants), answers drawn independently."""
    rows_a, rows_b, labels = [], [], []
    for m in range(merchants):
        base = rng.normal(0, 1.0)
        for i in range(per):
            p = 1 / (1 + np.exp(-(base + rng.normal(0, 1.0))))
            labels.append(f"m{m}")
            rows_a.append({"id": f"{m}-{i}", "merchant_id": f"m{m}", "correct": bool(rng.random() < p)})
            rows_b.append({"id": f"{m}-{i}", "merchant_id": f"m{m}", "correct": bool(rng.random() < p)})
    return rows_a, rows_b, labels


@pytest.mark.parametrize("merchants", [30, 100])
def test_the_permutation_test_rejects_a_true_null_about_five_percent_of_the_time(merchants: int) -> None:
    rng = np.random.default_rng(merchants)
    sims = 800
    rejected = 0
    for k in range(sims):
        a, b, labels = _null_accuracy(rng, merchants)
        p, used, exact = permutation_p_value(tasks.get("classification"), a, b, labels, n_perm=499, seed=k)
        rejected += p < 0.05
    rate = rejected / sims
    assert 0.03 <= rate <= 0.07, rate  # 5% +- 2 points


def test_a_real_difference_is_found_and_the_direction_named() -> None:
    rng = np.random.default_rng(7)
    a, b, _ = _null_accuracy(rng, 40)
    for row in a[::3]:
        row["correct"] = True  # A right on a third more items
    c = compare_task(tasks.get("classification"), a, b, n_boot=200, n_perm=999)
    assert c is not None and c.p_value < 0.01 and c.diff > 0 and c.better == "A"
    assert c.ci95[0] > 0 and c.merchants == 40 and c.n == 320


def test_nutrition_is_compared_on_avg_mape_where_lower_is_better() -> None:
    rng = np.random.default_rng(3)
    nutrients = ("calories", "protein", "carbohydrates", "fat")

    def row(m: int, i: int, ape: dict[str, float]) -> dict:
        reference = {"calories": 500.0, "protein": 20.0, "carbohydrates": 60.0, "fat": 18.0}
        return {"id": f"{m}-{i}", "merchant_id": f"m{m}", "ape": ape, "reference": reference,
                "parsed": {n: reference[n] * (1 + ape[n]) for n in nutrients},
                "abs_error": {n: reference[n] * ape[n] for n in nutrients}}

    rows_a, rows_b = [], []
    for m in range(30):
        for i in range(6):
            ape = {n: float(rng.uniform(0.1, 0.5)) for n in nutrients}
            rows_a.append(row(m, i, {n: v * 0.5 for n, v in ape.items()}))
            rows_b.append(row(m, i, ape))
    c = compare_task(tasks.get("nutrition"), rows_a, rows_b, n_boot=200, n_perm=999)
    assert c is not None and c.diff < 0 and c.better == "A" and c.mcnemar is None


def test_items_only_one_run_answered_are_left_out_and_counted() -> None:
    a = [{"id": f"i{k}", "merchant_id": f"m{k % 5}", "correct": k % 2 == 0} for k in range(40)]
    b = [{"id": f"i{k}", "merchant_id": f"m{k % 5}", "correct": k % 3 == 0} for k in range(3, 45)]
    c = compare_task(tasks.get("classification"), a, b, n_boot=100)
    assert (c.n, c.only_a, c.only_b) == (37, 3, 5)
    assert c.exact and c.permutations == 2 ** 5  # 5 merchants: every swap pattern


def test_mcnemar_exact_matches_a_hand_computed_binomial() -> None:
    # b = 6, c = 1: P(X <= 1 | n = 7, 1/2) = (1 + 7) / 128; two-sided 16 / 128 = 0.125
    a = [{"correct": True}] * 6 + [{"correct": False}] + [{"correct": True}] * 3
    b = [{"correct": False}] * 6 + [{"correct": True}] + [{"correct": True}] * 3
    assert mcnemar_exact(a, b) == {"b": 6, "c": 1, "p_value": 0.125}


def test_eval_compare_prints_a_difference_an_interval_and_a_p_value_for_two_sample_runs(tmp_path: Path, capsys) -> None:
    for name, model in (("a", "baseline:random"), ("b", "baseline:category-mean")):
        assert cli_main(["run", "--task", "classification", "--model", model, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert cli_main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "classification: accuracy A − B = " in out and "95% CI [" in out and ", p = " in out
    assert "McNemar exact" in out and "40 items both answered; left out: 0 only in A, 0 only in B." in out
    assert "Fewer than 20 merchants" in out and "no p-value can be below 0.062" in out
    assert cli_main(["compare", str(tmp_path / "a")]) == 2  # one run: a one-line usage error


def test_all_right_or_all_wrong_gets_a_one_sided_bound_never_a_zero_width_interval() -> None:
    from eval.numbers import headline_ci

    right = [{"id": f"i{k}", "merchant_id": f"m{k % 30}", "correct": True} for k in range(120)]
    wrong = [{**r, "correct": False} for r in right]
    low, high = headline_ci(tasks.get("classification"), right, n_boot=200)
    assert high == 1.0 and low == pytest.approx(0.05 ** (1 / 30)) and low < 1.0
    low, high = headline_ci(tasks.get("classification"), wrong, n_boot=200)
    assert low == 0.0 and high == pytest.approx(1 - 0.05 ** (1 / 30)) and high > 0.0


def test_small_samples_are_marked_and_the_evaluate_summary_says_why(tmp_path: Path) -> None:
    from eval.report.tables import with_ci
    from space.diningspace.leaderboard import _interval
    from space.diningspace.results_view import summary_line

    assert with_ci(0.5, (0.3, 0.7), merchants=5).endswith("‡") and not with_ci(0.5, (0.3, 0.7), merchants=20).endswith("‡")
    assert _interval([0.3, 0.7], 5) == "[30.00, 70.00]‡" and _interval([0.3, 0.7], 120) == "[30.00, 70.00]"
    line = summary_line(tasks.get("classification"), "openai:m", {"accuracy": 0.5, "accuracy_ci95": [0.3, 0.7], "n": 8,
                                                       "merchants": 2})
    assert "‡" in line and "fewer than 20 merchants" in line and "0.84 measured at 5 merchants" in line
    line = summary_line(tasks.get("classification"), "openai:m", {"accuracy": 0.5, "accuracy_ci95": None, "n": 3, "merchants": 1})
    assert "no interval: one merchant" in line


def test_metrics_json_counts_merchants_and_the_model_card_compares_settings(tmp_path: Path) -> None:
    from eval.report.model_card import render_model_card
    from eval.report.runs import load_run

    for name, lang in (("zh", "zh"), ("en", "en")):
        assert cli_main(["run", "--task", "classification", "--model", "baseline:random", "--lang", lang,
                         "--out", str(tmp_path / name)]) == 0
    metrics = json.loads((tmp_path / "zh" / "metrics.json").read_text())
    assert metrics["classification"]["merchants"] == 5
    card = render_model_card([load_run(tmp_path / "zh"), load_run(tmp_path / "en")], allow_partial=True)
    assert "## Settings compared" in card and "‡ fewer than 20 merchants" in card


def test_the_leaderboards_compare_view_shows_the_paired_test_and_ranks_read_as_ranges(tmp_path: Path) -> None:
    gr = pytest.importorskip("gradio")
    from space.diningspace.leaderboard import leaderboard_rows
    from space.diningspace.leaderboard_tab import LeaderboardTab
    from space.diningspace.settings import SpaceSettings

    results = tmp_path / "results"
    for name, model in (("a", "baseline:random"), ("b", "baseline:category-mean")):
        assert cli_main(["run", "--task", "classification", "--model", model, "--out", str(results / name)]) == 0
    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_RESULTS": str(results)}, repo_root=tmp_path)
    tab = LeaderboardTab(settings)
    assert tab.runs() == ["a", "b"]
    out = tab.compare("a", "b")
    assert "classification: accuracy A − B" in out and "p = " in out and "McNemar" in out
    with pytest.raises(gr.Error, match="choose two rows"):
        tab.compare("a", "../etc")
    assert all(r["#"] is None for r in leaderboard_rows(None, results, "Cls acc %"))  # baselines: not ranked


def test_rows_whose_intervals_overlap_share_a_rank_range_on_the_board() -> None:
    from space.diningspace.leaderboard import leaderboard_html, rank

    def row(model: str, value: float, half: float) -> dict:
        return {"Model": model, "Data": "full release", "Lang": "zh", "Status": "verified", "Cls acc %": value,
                "Cls 95% CI": f"[{value - half:.2f}, {value + half:.2f}]"}

    ranked = rank([row("a", 70.0, 3.0), row("b", 68.0, 3.0), row("c", 66.0, 3.0), row("d", 40.0, 3.0)], "Cls acc %")
    assert [(r["Model"], r["#"]) for r in ranked] == [("a", "1–3"), ("b", "1–3"), ("c", "1–3"), ("d", 4)]
    assert "1–3" in leaderboard_html(ranked, "Cls acc %", None)
    tight = rank([row("a", 70.0, 0.5), row("b", 68.0, 0.5)], "Cls acc %")
    assert [r["#"] for r in tight] == [1, 2]  # intervals apart: a clear order
