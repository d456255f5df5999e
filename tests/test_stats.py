"""Cluster and paired bootstrap: checked on constructed data whose answers are known."""

import time

import numpy as np
import pytest

from eval import stats
from eval.stats import (
    cluster_bootstrap_ci,
    cluster_bootstrap_mean_ci,
    paired_bootstrap,
)


def test_resample_keeps_whole_clusters():
    clusters = ["a", "a", "a", "b", "c", "c"]
    seen: list[np.ndarray] = []
    cluster_bootstrap_ci(6, clusters, lambda idx: seen.append(idx.copy()) or 0.0, n_boot=50, seed=3)
    assert len(seen) == 50
    for idx in seen:
        drawn = [clusters[i] for i in idx]
        # every cluster appears with all its members, as many times as it was drawn
        for name, size in (("a", 3), ("b", 1), ("c", 2)):
            assert drawn.count(name) % size == 0
        # three clusters drawn, so the resample holds three whole clusters
        assert sum(drawn.count(n) // s for n, s in (("a", 3), ("b", 1), ("c", 2))) == 3


def test_same_seed_same_interval_other_seed_differs():
    rng = np.random.default_rng(0)
    values = rng.random(200)
    clusters = [f"m{i % 17}" for i in range(200)]
    first = cluster_bootstrap_ci(200, clusters, lambda i: values[i].mean(), seed=5)
    assert first == cluster_bootstrap_ci(200, clusters, lambda i: values[i].mean(), seed=5)
    assert first != cluster_bootstrap_ci(200, clusters, lambda i: values[i].mean(), seed=6)


def test_fast_mean_path_equals_generic_statistic():
    rng = np.random.default_rng(1)
    values = rng.random(300)
    values[::7] = np.nan  # items not counted (e.g. zero ground truth in a MAPE)
    clusters = [f"m{i % 23}" for i in range(300)]
    generic = cluster_bootstrap_ci(300, clusters, lambda i: np.nanmean(values[i]), n_boot=300, seed=2)
    fast = cluster_bootstrap_mean_ci(values, clusters, n_boot=300, seed=2)
    assert fast == pytest.approx(generic, abs=1e-12)


def test_interval_covers_the_true_mean_at_about_the_nominal_rate():
    # 200 independent experiments: Bernoulli(0.6) correctness on 200 items in 20 merchants.
    true_p, hits, trials = 0.6, 0, 200
    for trial in range(trials):
        rng = np.random.default_rng(1000 + trial)
        correct = (rng.random(200) < true_p).astype(float)
        clusters = [f"m{i % 20}" for i in range(200)]
        low, high = cluster_bootstrap_mean_ci(correct, clusters, n_boot=400, seed=trial)
        hits += low <= true_p <= high
    # nominal 95%; percentile intervals with 20 clusters run slightly short, never far off
    assert 0.86 <= hits / trials <= 0.99


def test_clustered_interval_is_wider_when_merchants_are_correlated():
    # a merchant is either easy (all right) or hard (all wrong): 30 merchants x 10 items
    rng = np.random.default_rng(4)
    easy = rng.random(30) < 0.5
    correct = np.repeat(easy, 10).astype(float)
    clusters = [f"m{i // 10}" for i in range(300)]
    low_c, high_c = cluster_bootstrap_mean_ci(correct, clusters, seed=0)
    low_i, high_i = cluster_bootstrap_mean_ci(correct, None, seed=0)
    assert (high_c - low_c) > 2.5 * (high_i - low_i)


def test_constant_statistic_has_a_zero_width_interval():
    assert cluster_bootstrap_mean_ci([1.0] * 40, [f"m{i % 4}" for i in range(40)]) == (1.0, 1.0)


def test_paired_difference_of_identical_runs_is_exactly_zero():
    rng = np.random.default_rng(7)
    correct = (rng.random(120) < 0.5).astype(float)
    clusters = [f"m{i % 12}" for i in range(120)]
    diff, interval = paired_bootstrap(120, clusters, lambda i: correct[i].mean(), lambda i: correct[i].mean())
    assert (diff, interval) == (0.0, (0.0, 0.0))


def test_paired_difference_is_a_minus_b_and_tighter_than_unpaired():
    rng = np.random.default_rng(8)
    n = 400
    clusters = [f"m{i % 40}" for i in range(n)]
    difficulty = np.repeat(rng.random(40), 10)
    b = (rng.random(n) < difficulty).astype(float)
    a = b.copy()
    flip = rng.choice(np.flatnonzero(b == 0), size=20, replace=False)  # A fixes 20 of B's errors
    a[flip] = 1.0
    diff, (low, high) = paired_bootstrap(n, clusters, lambda i: a[i].mean(), lambda i: b[i].mean(), seed=1)
    assert diff == pytest.approx(20 / n)
    assert 0 < low < diff < high
    # the paired interval is much narrower than combining two independent intervals
    la, ha = cluster_bootstrap_mean_ci(a, clusters, seed=1)
    assert (high - low) < (ha - la) / 2


def test_paper_size_run_is_fast():
    rng = np.random.default_rng(9)
    n = 1650
    correct = (rng.random(n) < 0.6).astype(float)
    clusters = [f"m{i % 300}" for i in range(n)]
    start = time.perf_counter()
    cluster_bootstrap_ci(n, clusters, lambda i: correct[i].mean(), n_boot=1000)
    cluster_bootstrap_mean_ci(correct, clusters, n_boot=1000)
    assert time.perf_counter() - start < 3.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_items": 0, "clusters": []}, "n_items"),
        ({"n_items": 3, "clusters": ["a", "b"]}, "clusters has 2 entries"),
        ({"n_items": 2, "clusters": ["a", "b"], "level": 95}, "level"),
        ({"n_items": 2, "clusters": ["a", "b"], "n_boot": 0}, "n_boot"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cluster_bootstrap_ci(statistic=lambda i: 0.0, **kwargs)


def test_no_interval_is_claimed_from_a_single_merchant(tmp_path):
    # The first 8 classification items of the sample all come from one merchant: resampling merchants
    # would redraw the same items every time and print a zero-width "interval".
    import json

    import diningbench
    from eval.api import RunSettings, run

    first8 = diningbench.load("classification").select(range(8))
    assert len(set(first8["merchant_id"])) == 1
    one = run(RunSettings(task="classification", model="baseline:first", limit=8, out=tmp_path / "one"))
    assert json.loads((one / "metrics.json").read_text())["classification"]["accuracy_ci95"] is None
    everything = run(RunSettings(task="classification", model="baseline:first", out=tmp_path / "all"))
    low, high = json.loads((everything / "metrics.json").read_text())["classification"]["accuracy_ci95"]
    assert low < high


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_column_means_interval_equals_the_statistic_resampled_one_by_one(seed):
    rng = np.random.default_rng(seed)
    ape = rng.uniform(0, 2, size=(60, 4))
    ape[rng.random(ape.shape) < 0.15] = np.nan  # excluded APEs
    ape[:5, 3] = np.nan  # a column that some resamples never see: those have no figure
    ape[5:, 3] = np.where(rng.random(55) < 0.7, np.nan, ape[5:, 3])
    merchants = [f"m{k % 9}" for k in range(60)]
    slow = stats.cluster_bootstrap_ci(60, merchants, stats.mean_of_column_means(ape), n_boot=300, seed=seed)
    fast = stats.cluster_bootstrap_column_means_ci(ape, merchants, n_boot=300, seed=seed)
    assert np.isfinite(slow).all() and fast == pytest.approx(slow, rel=1e-12, abs=1e-12)
    item_level = stats.cluster_bootstrap_ci(60, None, stats.mean_of_column_means(ape), n_boot=300, seed=seed)
    assert stats.cluster_bootstrap_column_means_ci(ape, None, n_boot=300, seed=seed) == pytest.approx(item_level,
                                                                                                    rel=1e-12)
