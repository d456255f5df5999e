"""Is run A better than run B? A paired test per task on the items both runs answered.

The headline difference with its paired clustered bootstrap interval, a clustered paired permutation p-value
and, for accuracy, McNemar's exact test beside it; runs on different releases or protocols are refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from eval import protocols, tasks
from eval.numbers import clusters, paired_difference, resampled_unit
from eval.report.runs import ReportError, RunData
from eval.report.tables import SMALL_SAMPLE
from eval.settings import N_BOOT
from eval.types import NUTRIENTS, ScoreRecord

N_PERM = 9_999  # random merchant swaps (the p-value's resolution is 1 / (N_PERM + 1))
EXACT_UP_TO = 14  # merchants: up to 2**14 swap patterns are enumerated (an exact test)


@dataclass
class Comparison:
    """One task's paired comparison of A and B."""

    task: str
    n: int  # shared items (an item per id and epoch)
    merchants: int
    only_a: int
    only_b: int
    diff: float  # A − B in the headline's unit (a share; Avg MAPE as a fraction)
    ci95: tuple[float, float]
    p_value: float
    permutations: int  # swap patterns used (2**merchants when exact)
    exact: bool
    mcnemar: dict[str, Any] | None  # accuracy: {"b": A right B wrong, "c": A wrong B right, "p_value"}
    lower_is_better: bool  # the task's headline is an error (Avg MAPE), not an accuracy
    unit: str = "merchants"  # what is resampled and swapped: merchants, or items where the release names none

    @property
    def better(self) -> str | None:
        """"A" or "B" when the difference is significant at 5%, else None."""
        if self.p_value >= 0.05 or self.diff == 0:
            return None
        return "A" if (self.diff < 0) == self.lower_is_better else "B"

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "n": self.n,  # a count of merchants only where the rows name them
                "merchants": self.merchants if self.unit == "merchants" else None, "only_a": self.only_a,
                "only_b": self.only_b, "diff": self.diff, "ci95": list(self.ci95), "p_value": self.p_value,
                "permutations": self.permutations, "exact": self.exact, "mcnemar": self.mcnemar,
                "better": self.better, "resampled": self.unit}


def _key(row: ScoreRecord) -> tuple[str, int]:
    return str(row["id"]), int(row.get("epoch") or 0)


def _values(task: tasks.Task, rows: Sequence[ScoreRecord]) -> np.ndarray:
    """Per item, the columns the headline averages: correct (1/0) for accuracy, each nutrient's APE
    (NaN where the metric leaves it out) for Avg MAPE."""
    if task.measure == "ape":
        return np.array([[_ape(r, c) for c in NUTRIENTS] for r in rows], dtype=float).reshape(len(rows), len(NUTRIENTS))
    return np.array([[float(r.get("correct") is True)] for r in rows], dtype=float)


def _ape(row: ScoreRecord, nutrient: str) -> float:
    """One nutrient's APE of an item, NaN where the metric leaves it out (or the item has none)."""
    ape = row.get("ape")
    value = ape.get(nutrient) if isinstance(ape, dict) else None
    return np.nan if value is None else float(value)


def _cluster_sums(values: np.ndarray, cluster: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per merchant and column: the sum of the values and how many there are (NaN left out)."""
    valid = ~np.isnan(values)
    sums = np.zeros((k, values.shape[1]))
    counts = np.zeros((k, values.shape[1]))
    np.add.at(sums, cluster, np.where(valid, values, 0.0))
    np.add.at(counts, cluster, valid.astype(float))
    return sums, counts


def _headline_diffs(flips: np.ndarray, sa: np.ndarray, na: np.ndarray, sb: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """Headline(A') − headline(B') for each row of `flips` (1: that merchant's answers swapped)."""
    keep = 1.0 - flips
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_a = (keep @ sa + flips @ sb) / (keep @ na + flips @ nb)
        mean_b = (keep @ sb + flips @ sa) / (keep @ nb + flips @ na)
    return np.nanmean(mean_a, axis=1) - np.nanmean(mean_b, axis=1)


def permutation_p_value(task: tasks.Task, rows_a: Sequence[ScoreRecord], rows_b: Sequence[ScoreRecord],
                        merchants: Sequence[str], *, n_perm: int = N_PERM, seed: int = 0) -> tuple[float, int, bool]:
    """(two-sided p-value, swap patterns used, exact) of the clustered paired permutation test on
    aligned rows (row k of A and of B are one item). Under "A and B are interchangeable", swapping A's and
    B's answers for every item of a merchant leaves the distribution unchanged, so the headline difference
    is recomputed under swaps of whole merchants (sign flips; a merchant's items are not independent):
    every pattern up to EXACT_UP_TO merchants (an exact test), else `n_perm` random ones."""
    labels, cluster = np.unique(np.asarray(merchants, dtype=str), return_inverse=True)
    k = len(labels)
    sa, na = _cluster_sums(_values(task, rows_a), cluster, k)
    sb, nb = _cluster_sums(_values(task, rows_b), cluster, k)
    observed = _headline_diffs(np.zeros((1, k)), sa, na, sb, nb)[0]
    if k <= EXACT_UP_TO:
        patterns = ((np.arange(2 ** k)[:, None] >> np.arange(k)[None, :]) & 1).astype(float)
        stats = _headline_diffs(patterns, sa, na, sb, nb)
        extreme = np.sum(np.abs(stats) >= abs(observed) - 1e-12)
        return float(extreme / len(patterns)), len(patterns), True
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, n_perm, 2048):
        flips = rng.integers(0, 2, size=(min(2048, n_perm - start), k)).astype(float)
        extreme += int(np.sum(np.abs(_headline_diffs(flips, sa, na, sb, nb)) >= abs(observed) - 1e-12))
    return (1 + extreme) / (1 + n_perm), n_perm, False


def mcnemar_exact(rows_a: Sequence[ScoreRecord], rows_b: Sequence[ScoreRecord]) -> dict[str, Any]:
    """McNemar's exact test on aligned accuracy rows: b = A right and B wrong, c = the reverse; the
    two-sided binomial p-value of min(b, c) among b + c at one half. The item-level check beside the
    permutation test, whose p-value is the one to read: McNemar treats items as independent, so it is too
    confident when merchants differ.

    >>> mcnemar_exact([{"correct": True}] * 9 + [{"correct": False}], [{"correct": False}] * 9 + [{"correct": True}])
    {'b': 9, 'c': 1, 'p_value': 0.021484375}
    """
    b = sum(a.get("correct") is True and r.get("correct") is not True for a, r in zip(rows_a, rows_b, strict=True))
    c = sum(a.get("correct") is not True and r.get("correct") is True for a, r in zip(rows_a, rows_b, strict=True))
    n = b + c
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n if n else 1.0
    return {"b": b, "c": c, "p_value": min(1.0, 2 * tail)}


# Settings that change the question a model is shown (its prompt and views), beside the prompt version.
QUESTION_SETTINGS = ("lang", "cot", "images", "image_order", "max_image_side", "protocol", "image_indices")


def asked_differently(a: RunData, b: RunData, shared: Sequence[str]) -> list[str]:
    """How B's questions were asked differently from A's (empty when alike): prompt version and the
    settings that change a prompt or its views, each as `name: A's vs B's`. A ReportError of one line when
    the runs were made on different releases: a task both ran has other fingerprints in each."""
    fa, fb = a.fingerprints, b.fingerprints
    for task in shared:
        if task in fa and task in fb and fa[task] != fb[task]:
            raise ReportError(f"{a.path.name} and {b.path.name} were made on different releases ({task}: fingerprint "
                              f"{fa[task][:12]} vs {fb[task][:12]}): their items are not the same questions; not compared")
    same_protocol(a, b)
    found = []
    version_a, version_b = a.info.get("prompt_version"), b.info.get("prompt_version")
    if version_a is not None and version_b is not None and version_a != version_b:
        found.append(f"prompt version {str(version_a)[:20]} vs {str(version_b)[:20]}")
    names = [*QUESTION_SETTINGS, *(("seed",) if "random" in (a.setting("image_order"), b.setting("image_order")) else ())]
    for name in names:
        value_a, value_b = _asked(a, name), _asked(b, name)
        if value_a != value_b:
            found.append(f"{name} {str(value_a)[:40]} vs {str(value_b)[:40]}")
    return found


def _asked(run: RunData, name: str) -> Any:
    """A question setting as it was asked: a setting run.json leaves out had the harness's default."""
    from eval.settings import RunSettings

    default = RunSettings.__dataclass_fields__[name].default
    settings = run.info.get("settings")
    if name == "protocol":  # runs made before there was a choice were asked our way
        return protocols.of(settings if isinstance(settings, dict) else None).name
    if not isinstance(settings, dict) or name not in settings:
        return default
    value = settings[name]
    return default if value is None and name != "images" else value


def different_references(task: tasks.Task, pairs: Sequence[tuple[ScoreRecord, ScoreRecord]]) -> str | None:
    """A one-line reason when an id's reference differs between the runs (they were made on different
    releases, or one was edited), None when every shared item's reference is the same."""
    differing = [(a, b) for a, b in pairs if a.get("reference") != b.get("reference")]
    if not differing:
        return None
    a, b = differing[0]
    return (f"{task.name}: {len(differing)} of {len(pairs)} shared items have another reference in each run "
            f"(e.g. {str(a['id'])[:60]!r}: {str(a.get('reference'))[:40]!r} vs {str(b.get('reference'))[:40]!r}): "
            "they were made on different releases; not compared")


def compare_task(task: tasks.Task, rows_a: Sequence[ScoreRecord], rows_b: Sequence[ScoreRecord], *,
                 n_boot: int = N_BOOT, n_perm: int = N_PERM, seed: int = 0) -> Comparison | None:
    """A's and B's scored items of one task, paired by id and epoch; None when none is shared or a
    headline cannot be computed (VQA without a judge). A ReportError when an id's reference differs
    between them (not the same question)."""
    by_b = {_key(r): r for r in rows_b}
    keys_a = {_key(r) for r in rows_a}
    pairs = [(a, by_b[_key(a)]) for a in rows_a if _key(a) in by_b]
    if not pairs:
        return None
    if (refused := different_references(task, pairs)) is not None:
        raise ReportError(refused)
    a_rows, b_rows = [a for a, _ in pairs], [b for _, b in pairs]
    found = paired_difference(task, a_rows, b_rows, n_boot=n_boot, seed=seed)
    if found is None:
        return None
    merchants = clusters(a_rows)  # merchants, or items where the release names none
    p_value, used, exact = permutation_p_value(task, a_rows, b_rows, merchants, n_perm=n_perm, seed=seed)
    return Comparison(task=task.name, n=len(pairs), merchants=len(set(merchants)), unit=resampled_unit(a_rows), only_a=len(keys_a - set(by_b)),
                      only_b=len(set(by_b) - keys_a), diff=found["diff"], ci95=tuple(found["ci95"]),
                      p_value=p_value, permutations=used, exact=exact,
                      mcnemar=mcnemar_exact(a_rows, b_rows) if task.measure != "ape" else None,
                      lower_is_better=task.lower_is_better)


def describe(c: Comparison, label_a: str = "A", label_b: str = "B", *, reading: str | None = None,
             ours: Comparison | None = None) -> str:
    """One paragraph: the difference, its interval and p-value, McNemar, what was left out. `reading`: the
    protocol whose reading `c` is (its title), when it is not ours; `ours`: ours' reading of the same
    answers, said beside it."""
    figure = "Avg MAPE" if c.lower_is_better else "accuracy"
    lines = [f"{c.task}: {figure}{f' ({reading})' if reading else ''} {label_a} − {label_b} = {_difference(c)} "
             f"({_test(c)}): {_verdict(c, label_a, label_b)}."]
    if reading:
        lines.append(f"  Ours' reading of the same answers: {figure} {label_a} − {label_b} = "
                     + (f"{_difference(ours)} ({ours.n} items both read; {_verdict(ours, label_a, label_b)})."
                        if ours else "none (no item both runs' answers ours can read)."))
    if c.mcnemar:
        m = c.mcnemar
        lines.append(f"  McNemar exact (items as independent): {m['b']} items only {label_a} got right, {m['c']} only "
                     f"{label_b}, p = {_p(m['p_value'])}.")
    lines.append(f"  {c.n} items both answered; left out: {c.only_a} only in {label_a}, {c.only_b} only in {label_b}.")
    if c.merchants < SMALL_SAMPLE:
        least = 2 / 2 ** c.merchants
        floor = (f"; with {c.merchants} {c.unit} no p-value can be below "
                 f"{f'{least:.3f}' if least >= 0.001 else f'{least:.2g}'}" if c.exact else "")
        measured = " (0.84 measured at 5 merchants)" if c.unit == "merchants" else ""
        lines.append(f"  Fewer than {SMALL_SAMPLE} {c.unit}: the interval covers less than 95%{measured}; "
                     f"read it as rough{floor}.")
    return "\n".join(lines)


def _difference(c: Comparison) -> str:
    """`+8.33 pp, 95% CI [-4.17, +20.83] (paired merchant bootstrap), p = 0.500`."""
    low, high = c.ci95
    return (f"{100 * c.diff:+.2f} pp, 95% CI [{100 * low:+.2f}, {100 * high:+.2f}] "
            f"(paired {c.unit.removesuffix('s')} bootstrap), p = {_p(c.p_value)}")


def _test(c: Comparison) -> str:
    one = c.unit.removesuffix("s")  # merchant, or item where the release names no merchant
    swaps = f"exact over all {c.permutations:,} {one} swaps" if c.exact else f"{c.permutations:,} random {one} swaps"
    return f"clustered paired permutation, {swaps}, {c.merchants} {c.unit}"


def _verdict(c: Comparison, label_a: str, label_b: str) -> str:
    return (f"{label_a if c.better == 'A' else label_b} is better at the 5% level" if c.better
            else "no significant difference at the 5% level")


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


@dataclass
class TaskComparison:
    """One task of A against B: on the runs' protocol's headline reading, and, when that protocol reads
    answers its own way (the authors' on their release), ours' reading of the same answers beside it."""

    task: str
    headline: Comparison | None  # None: no shared scored item (VQA without a judge's verdicts)
    ours: Comparison | None = None
    reading: str | None = None  # the protocol's title when its reading is not ours
    # Items of each run without a record in its scores.jsonl (ours cannot read their reference: metrics.json
    # `ours_left_out`): no paired test reads them, though the protocol's figure counts those it can read.
    unrecorded: tuple[int, int] = (0, 0)

    def describe(self, label_a: str = "A", label_b: str = "B") -> str | None:
        if self.headline is None:
            return None
        text = describe(self.headline, label_a, label_b, reading=self.reading, ours=self.ours)
        if any(self.unrecorded):
            text += (f"\n  Left out of both readings here: {self.unrecorded[0]} items of {label_a} and "
                     f"{self.unrecorded[1]} of {label_b} whose reference ours cannot read (scores.jsonl holds no "
                     f"record of them); the figure of {self.reading} counts those its rules can read.")
        return text

    def to_json(self) -> dict[str, Any]:
        """The headline comparison's JSON; under a protocol of its own, which one and ours beside it."""
        found: dict[str, Any] = self.headline.to_json() if self.headline else {"task": self.task}
        if self.reading:
            found.update(reading=self.reading, ours=self.ours.to_json() if self.ours else None,
                         unrecorded={"a": self.unrecorded[0], "b": self.unrecorded[1]})
        return found


def same_protocol(a: RunData, b: RunData) -> None:
    """A ReportError of one line when A and B were scored under different protocols: each run's headline
    is its own protocol's figure, so a difference between them would mix two readings."""
    if a.protocol.name != b.protocol.name:
        raise ReportError(f"{a.path.name} was scored under {a.protocol.title} and {b.path.name} under "
                          f"{b.protocol.title}: their headlines are not the same figure; not compared "
                          "(compare runs of one protocol)")


def reads_its_own_way(runs: Sequence[RunData], task: tasks.Task) -> bool:
    """Whether the runs' protocol reports its own headline for `task` (not ours' reading)."""
    return any(run.headline(task) is not None for run in runs)


def compare_runs_task(a: RunData, b: RunData, task: tasks.Task, *, n_boot: int = N_BOOT, n_perm: int = N_PERM,
                      seed: int = 0) -> TaskComparison:
    """A against B on one task both scored, on their protocol's reading (ours beside it when the protocol
    reads its own way). A ReportError when they were scored under different protocols or an id's
    reference differs."""
    same_protocol(a, b)
    rows_a, rows_b = a.scores[task.name], b.scores[task.name]
    paired = partial(compare_task, task, n_boot=n_boot, n_perm=n_perm, seed=seed)
    if not reads_its_own_way((a, b), task):
        return TaskComparison(task.name, paired(rows_a, rows_b))
    theirs = paired(a.protocol.read_rows(task, rows_a), b.protocol.read_rows(task, rows_b))
    return TaskComparison(task.name, theirs, paired(rows_a, rows_b), a.protocol.title,
                          (_unrecorded(a, task.name), _unrecorded(b, task.name)))


def _unrecorded(run: RunData, task: str) -> int:
    found = run.entry(task).get("ours_left_out")
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


def release(run: RunData, width: int = 12) -> str:
    """The release a run read, with its fingerprints (their first `width` characters) and, for a Hub release,
    its revision."""
    text = run.source or "embedded sample"
    if run.fingerprints:
        text += " (fingerprints " + ", ".join(f"{k} {v[:width]}" for k, v in sorted(run.fingerprints.items())) + ")"
    if run.revisions:
        text += " (revision " + ", ".join(sorted({v[:12] for v in run.revisions.values()})) + ")"
    return text


def protocol_line(a: RunData, b: RunData, shared: Sequence[tasks.Task],
                  release_of: Callable[[RunData], str] = release) -> str | None:
    """The line that names the protocol whose reading the figures are, the image indices sent and the
    release, when that protocol reads answers its own way; None under ours (its lines stay as they were)."""
    if not any(reads_its_own_way((a, b), task) for task in shared):
        return None
    asked = a.question() if a.question() == b.question() else f"{a.question()} (A), {b.question()} (B)"
    data = release_of(a) if release_of(a) == release_of(b) else f"{release_of(a)} (A), {release_of(b)} (B)"
    return (f"Protocol: {a.protocol.title}, whose reading gives the headline figures; ours' reading of "
            f"the same answers beside them. Asked: {asked}. Release: {data}.")


def compare_runs(dirs: Sequence[Any], *, n_perm: int = N_PERM, n_boot: int = N_BOOT) -> tuple[str, list[dict[str, Any]]]:
    """`python -m eval compare`: the second and later run folders each against the first, every task both
    scored; (the text printed, the comparisons as JSON). Runs asked differently are named on the first lines;
    runs made on different releases or scored under different protocols are refused (ReportError)."""
    from eval.report.runs import load_run
    from eval.settings import UsageError

    if len(dirs) < 2:
        raise UsageError("eval compare needs two run folders (or more: each later one against the first)")
    if n_perm < 99:
        raise UsageError(f"--permutations {n_perm}: at least 99")
    runs = [load_run(d) for d in dirs]
    first = runs[0]
    notes, out, found = [], [], []
    for other in runs[1:]:
        label_a, label_b = f"A = {first.label} ({first.path.name})", f"B = {other.label} ({other.path.name})"
        out += [label_a, label_b]
        both = [t for t in tasks.all_tasks() if t.name in first.scores and t.name in other.scores]
        shared = [t.name for t in both]
        if not shared:
            raise ReportError(f"{first.path} and {other.path} share no task")
        if differences := asked_differently(first, other, shared):
            notes.append(asked_note(differences, other.path.name))
        if (named := protocol_line(first, other, both)) is not None:
            out.append(named)
        for task in both:
            c = compare_runs_task(first, other, task, n_boot=n_boot, n_perm=n_perm)
            if c.headline is None:
                out.append(f"{task.name}: no shared scored items (VQA needs a judge's verdicts in both runs)")
                continue
            out.append(str(c.describe()))
            found.append({"a": str(first.path), "b": str(other.path), **c.to_json(),
                          "asked_differently": differences,
                          **({"protocol": first.protocol.name, "asked": {"a": first.question(), "b": other.question()},
                              "release": {"a": release(first), "b": release(other)}} if c.reading else {})})
        out.append("")
    return "\n".join([*notes, *out]).rstrip() + "\n", found


def asked_note(differences: Sequence[str], name: str = "B") -> str:
    """The line that says two runs were asked differently, so their difference includes that."""
    return (f"note: A and {name} were not asked the same questions ({'; '.join(differences)}): "
            "the difference below includes that")
