"""Bootstrap confidence intervals clustered by restaurant (`merchant_id`): items from one merchant share
photographers, lighting and menus, so whole merchants are resampled, not items."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from eval.settings import N_BOOT

Statistic = Callable[[np.ndarray], float]


class _ClusterIndex:
    """Item indices grouped by cluster, laid out so a resample is built with a few vector operations."""

    def __init__(self, n_items: int, clusters: Sequence[str] | None) -> None:
        if n_items <= 0:
            raise ValueError(f"n_items must be positive, got {n_items}")
        if clusters is None:  # every item is its own cluster: the ordinary (iid) bootstrap
            clusters = [str(i) for i in range(n_items)]
        if len(clusters) != n_items:
            raise ValueError(f"clusters has {len(clusters)} entries but n_items is {n_items}")
        _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
        self.order = np.argsort(codes, kind="stable")  # item indices, cluster by cluster
        self.sizes = np.bincount(codes)
        self.starts = np.concatenate(([0], np.cumsum(self.sizes)[:-1]))
        self.codes = codes
        self.n_clusters = len(self.sizes)

    def draws(self, n_boot: int, seed: int) -> np.ndarray:
        """(n_boot, n_clusters) cluster numbers drawn with replacement; the same for a given seed."""
        return np.random.default_rng(seed).integers(0, self.n_clusters, size=(n_boot, self.n_clusters))

    def indices(self, drawn: np.ndarray) -> np.ndarray:
        """Concatenate the item indices of the drawn clusters (a cluster drawn twice appears twice)."""
        lengths = self.sizes[drawn]
        ends = np.cumsum(lengths)
        # position p inside the output belongs to drawn cluster j = searchsorted; its offset within
        # the cluster is p - (ends[j] - lengths[j]); vectorised via repeat.
        shift = np.repeat(self.starts[drawn] - (ends - lengths), lengths)
        return self.order[np.arange(int(lengths.sum())) + shift]

    def counts(self, drawn: np.ndarray) -> np.ndarray:
        """(n_boot, n_clusters) how often each cluster was drawn in each resample."""
        n_boot = drawn.shape[0]
        # One bincount over (resample, cluster) cells: the same counts as np.add.at, 4x faster.
        cells = (np.arange(n_boot)[:, None] * self.n_clusters + drawn).ravel()
        return np.bincount(cells, minlength=n_boot * self.n_clusters).reshape(n_boot, self.n_clusters)


def _check(n_boot: int, level: float) -> None:
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level}")


def _interval(estimates: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile interval; resamples whose statistic is undefined (NaN) are left out."""
    finite = estimates[np.isfinite(estimates)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return (float(low), float(high))


def can_resample(n_items: int, clusters: Sequence[str] | None) -> bool:
    """Whether a bootstrap interval means anything: at least two clusters (two items item-level). With every
    item from one merchant, resampling merchants always redraws the same items and the "interval" collapses to
    the point estimate, which reads as certainty where there is none.

    >>> can_resample(8, ["m1"] * 8), can_resample(8, ["m1"] * 7 + ["m2"]), can_resample(1, None)
    (False, True, False)
    """
    return n_items >= 2 and (clusters is None or len(set(clusters)) >= 2)


def cluster_bootstrap_ci(n_items: int, clusters: Sequence[str] | None, statistic: Statistic, *,
                         n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of `statistic(indices)` over cluster resamples. `statistic` receives the item
    indices of one resample (cluster members concatenated, repeats kept) and returns a number; NaN results are
    skipped. Pass `clusters=None` for an item-level bootstrap.

    >>> values = np.array([1.0, 0.0, 1.0, 1.0])
    >>> low, high = cluster_bootstrap_ci(4, ["m1", "m1", "m2", "m3"], lambda i: values[i].mean())
    >>> 0.0 <= low <= 0.75 <= high <= 1.0
    True
    """
    _check(n_boot, level)
    index = _ClusterIndex(n_items, clusters)
    estimates = np.array([statistic(index.indices(d)) for d in index.draws(n_boot, seed)], dtype=float)
    return _interval(estimates, level)


def mean_of_column_means(matrix: np.ndarray) -> Statistic:
    """Statistic: the mean over columns of each column's mean, NaN entries not counted; NaN when a
    column has no entry in the resample. Average MAPE from an items x components APE matrix, in
    vector operations instead of re-running the metric on every resample (the same numbers in the
    same order, so the same figure as the metric's own `avg_mape`).

    >>> ape = np.array([[0.1, np.nan], [0.3, 0.5]])
    >>> round(mean_of_column_means(ape)(np.array([0, 1, 1])), 4)  # ((0.1+0.3+0.3)/3 + 0.5) / 2
    0.3667
    """
    values = np.asarray(matrix, dtype=float)

    def statistic(indices: np.ndarray) -> float:
        means = []
        for column in values[indices].T:
            kept = column[~np.isnan(column)]
            if kept.size == 0:
                return float("nan")
            means.append(kept.mean())
        return float(np.mean(means))

    return statistic


def cluster_bootstrap_column_means_ci(matrix: np.ndarray, clusters: Sequence[str] | None, *, n_boot: int = N_BOOT,
                                      seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Interval for `mean_of_column_means(matrix)` (items x columns, NaN = not counted): the same
    resamples as `cluster_bootstrap_ci` with that statistic and seed, hence the same interval (up to
    the order of float additions), from per-cluster sums in one matrix product per run instead of
    one statistic call per resample.

    >>> ape = np.array([[0.1, np.nan], [0.3, 0.5], [0.2, 0.4]])
    >>> slow = cluster_bootstrap_ci(3, ["a", "b", "b"], mean_of_column_means(ape), n_boot=50)
    >>> fast = cluster_bootstrap_column_means_ci(ape, ["a", "b", "b"], n_boot=50)
    >>> bool(np.allclose(slow, fast))
    True
    """
    _check(n_boot, level)
    values = np.asarray(matrix, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"matrix must be items x columns, got shape {values.shape}")
    index = _ClusterIndex(len(values), clusters)
    counts = index.counts(index.draws(n_boot, seed)).astype(float)
    valid = ~np.isnan(values)
    means = np.column_stack([_resampled_means(values[:, c], valid[:, c], index, counts)
                             for c in range(values.shape[1])])  # resamples x columns
    # A resample where some column has no entry has no figure (NaN), as with the statistic.
    return _interval(means.mean(axis=1), level)


def _resampled_means(values: np.ndarray, valid: np.ndarray, index: _ClusterIndex, counts: np.ndarray) -> np.ndarray:
    """Each resample's mean of the `valid` values (`counts`: how often each cluster was drawn), from
    per-cluster sums, without building indices; NaN where a resample holds no valid value."""
    sums = np.bincount(index.codes, weights=np.where(valid, values, 0.0), minlength=index.n_clusters)
    ns = np.bincount(index.codes, weights=valid.astype(float), minlength=index.n_clusters)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (counts @ sums) / (counts @ ns)


def cluster_bootstrap_mean_ci(values: Sequence[float] | np.ndarray, clusters: Sequence[str] | None, *,
                              n_boot: int = N_BOOT, seed: int = 0,
                              level: float = 0.95) -> tuple[float, float]:
    """Interval for the mean of per-item `values` (NaN = item not counted, e.g. an excluded APE). Same
    resamples, hence the same interval, as `cluster_bootstrap_ci` with a nan-aware mean statistic and the same
    seed, but computed from per-cluster sums in one matrix product."""
    _check(n_boot, level)
    arr = np.asarray(values, dtype=float)
    index = _ClusterIndex(len(arr), clusters)
    counts = index.counts(index.draws(n_boot, seed)).astype(float)
    return _interval(_resampled_means(arr, np.isfinite(arr), index, counts), level)


def paired_bootstrap(n_items: int, clusters: Sequence[str] | None, statistic_a: Statistic,
                     statistic_b: Statistic, *, n_boot: int = N_BOOT, seed: int = 0,
                     level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Difference `statistic_a - statistic_b` on the same items, with a paired cluster-bootstrap interval.
    Both statistics see the same resampled indices, so item-level agreement between the two runs cancels out:
    two identical runs give exactly 0 with interval (0, 0)."""
    interval = cluster_bootstrap_ci(n_items, clusters, lambda idx: statistic_a(idx) - statistic_b(idx),
                                    n_boot=n_boot, seed=seed, level=level)
    everything = np.arange(n_items)
    return float(statistic_a(everything) - statistic_b(everything)), interval
