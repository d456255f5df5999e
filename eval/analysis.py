"""Error analysis across run folders (`python -m eval analyze RUN [RUN ...]`): which items are hard
for every model, which wrong dishes models pick, which way nutrition estimates err, which answers
were cut off or looped, and what thinking buys over the instruct model of the same family."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from diningbench import portion_grams
from eval import tasks
from eval.numbers import headline, paired_difference
from eval.report.plots import DPI, MAX_WIDTH_IN, STYLE, _pyplot, series_style
from eval.report.runs import RunData, load_run
from eval.report.tables import as_text, md_table, pct, read_differently, resampled_units
from eval.scoring import ScoringError, load_rows
from eval.settings import N_BOOT
from eval.store import PREDICTIONS, read_predictions
from eval.types import LETTERS, NUTRIENTS, ScoreRecord

ANALYSIS_MD = "analysis.md"
TOP = 10
# Share of runs that got an item right -> bin; the ends are exact (no run, every run).
DIFFICULTY_BINS = (("no run right", 0.0, 0.0), ("hard (<⅓)", 0.0, 1 / 3), ("medium", 1 / 3, 2 / 3),
                   ("easy (≥⅔)", 2 / 3, 1.0), ("every run right", 1.0, 1.0))
CALORIE_BINS = ((0, 300), (300, 600), (600, 900), (900, float("inf")))
_MODE_RE = re.compile(r"[-_ ]?(thinking|instruct)(?=$|[-_ /])", re.IGNORECASE)
# Loop detection: the tail of an answer, and how much of it one repeated phrase must cover.
LOOP_TAIL = 1200
LOOP_COVER = 0.6
LOOP_MAX_PERIOD = 200
LOOP_MIN_REPEATS = 4


# ---------------------------------------------------------------- pure pieces
def loops(text: str | None) -> bool:
    """True when the answer's tail is one phrase repeated: some period p such that the last
    characters repeat every p characters over most of the tail, at least LOOP_MIN_REPEATS times.

    Characters, not words: Chinese answers have no spaces, and a period of a few characters is a
    looping word as much as a period of a hundred is a looping sentence.

    >>> loops("The dish is noodles. " + "I think so. " * 80)
    True
    >>> loops("好吃" * 3 + "这是一碗牛肉面，汤底清澈，面条劲道。")
    False
    """
    tail = (text or "")[-LOOP_TAIL:]
    if (n := len(tail)) < 40:
        return False
    for period in range(1, min(LOOP_MAX_PERIOD, n // LOOP_MIN_REPEATS) + 1):
        run = 0
        for i in range(n - 1, period - 1, -1):
            if tail[i] != tail[i - period]:
                break
            run += 1
        stretch = run + period  # the periodic suffix, its first copy included
        if stretch >= LOOP_COVER * n and stretch >= LOOP_MIN_REPEATS * period:
            return True
    return False


def difficulty_bin(share: float) -> str:
    """The DIFFICULTY_BINS label of a share of runs correct.

    >>> difficulty_bin(0.0), difficulty_bin(0.25), difficulty_bin(0.5), difficulty_bin(0.8), difficulty_bin(1.0)
    ('no run right', 'hard (<⅓)', 'medium', 'easy (≥⅔)', 'every run right')
    """
    if share <= 0:
        return DIFFICULTY_BINS[0][0]
    if share >= 1:
        return DIFFICULTY_BINS[-1][0]
    return next((label for label, low, high in DIFFICULTY_BINS[1:-1] if low <= share < high), DIFFICULTY_BINS[-2][0])


def mode_pair_key(model: str) -> tuple[str, str] | None:
    """(family, "thinking" | "instruct") of a model name carrying one of the markers, else None.

    >>> mode_pair_key("vllm:Qwen/Qwen3-VL-8B-Thinking"), mode_pair_key("openai:gpt-4o")
    (('vllm:Qwen/Qwen3-VL-8B', 'thinking'), None)
    """
    match = _MODE_RE.search(model)
    return (model[:match.start()] + model[match.end():], match.group(1).lower()) if match else None


def signed_errors(row: ScoreRecord) -> dict[str, float]:
    """(prediction - reference) / reference per nutrient of a parsed nutrition item (reference 0 left out).

    >>> signed_errors({"parsed": {"calories": 550, "protein": 10}, "reference": {"calories": 500, "protein": 20}})
    {'calories': 0.1, 'protein': -0.5}
    """
    parsed, reference = row.get("parsed"), row.get("reference")
    if not isinstance(parsed, dict) or not isinstance(reference, dict) or row.get("error"):
        return {}
    out = {}
    for nutrient in NUTRIENTS:
        value, truth = parsed.get(nutrient), reference.get(nutrient)
        if isinstance(value, int | float) and isinstance(truth, int | float) and truth > 0:
            out[nutrient] = (float(value) - float(truth)) / float(truth)
    return out


# ---------------------------------------------------------------- sections
def _first_epoch(rows: Sequence[ScoreRecord]) -> list[ScoreRecord]:
    return [r for r in rows if not r.get("epoch")]


def read_rows(run: RunData, task: tasks.Task) -> list[ScoreRecord]:
    """A task's items as the run's protocol's headline reads them (`Protocol.read_rows`: ours as scored, the
    authors' right/wrong and percentage errors where their figure leads), so each figure below follows the
    run's protocol."""
    rows = run.scores.get(task.name, [])
    return run.protocol.read_rows(task, rows) if rows else list(rows)


def item_difficulty(runs: Sequence[RunData], task: tasks.Task) -> dict[str, float]:
    """Item id -> share of the runs (that have the item scored) that got it right, each run read by its
    protocol."""
    right: dict[str, list[bool]] = {}
    for run in runs:
        for row in _first_epoch(read_rows(run, task)):
            if row.get("correct") is not None:
                right.setdefault(str(row["id"]), []).append(row["correct"] is True)
    return {item: sum(v) / len(v) for item, v in right.items()}


def _bin_counts(by_item: dict[str, float]) -> Counter[str]:
    """How many items fall in each DIFFICULTY_BINS label."""
    return Counter(difficulty_bin(s) for s in by_item.values())


def difficulty_section(runs: Sequence[RunData]) -> tuple[str, dict[str, dict[str, float]]]:
    shares = {t.name: item_difficulty(runs, t) for t in tasks.all_tasks() if t.measure == "correct"}
    rows = []
    for task, by_item in shares.items():
        if not by_item:
            continue
        counts = _bin_counts(by_item)
        rows.append([task, str(len(by_item)), *(str(counts.get(label, 0)) for label, _, _ in DIFFICULTY_BINS)])
    if not rows:
        return "", shares
    hardest = [f"{as_text(item)} ({pct(share)}%)" for task, by_item in shares.items()
               for item, share in sorted(by_item.items(), key=lambda kv: kv[1])[:5]]
    text = (md_table(["Task", "Items", *(label for label, _, _ in DIFFICULTY_BINS)], rows)
            + f"\n\nDifficulty = share of the {len(runs)} runs that answered the item correctly (epoch 0). "
            f"Hardest: {', '.join(hardest)}.")
    return text, shares


def distractor_section(runs: Sequence[RunData], options: dict[str, list[str]]) -> str:
    """The wrong options chosen most often, and the (correct dish -> chosen dish) pairs."""
    chosen: Counter[str] = Counter()
    confused: Counter[tuple[str, str]] = Counter()
    for run in runs:
        for row in _first_epoch([r for t in tasks.all_tasks() if t.has_options for r in run.scores.get(t.name, [])]):
            pick, answer = row.get("parsed"), row.get("reference")
            texts = options.get(str(row["id"]))
            if row.get("correct") or not isinstance(pick, str) or not texts or pick == answer:
                continue
            if LETTERS.find(pick) >= len(texts) or LETTERS.find(str(answer)) >= len(texts):
                continue
            wrong, right = texts[LETTERS.index(pick)], texts[LETTERS.index(str(answer))]
            chosen[wrong] += 1
            confused[(right, wrong)] += 1
    if not chosen:
        return ""
    return ("Most-chosen wrong options:\n\n" + md_table(["Option chosen", "Times"], [[k, str(v)] for k, v in
                                                                                     chosen.most_common(TOP)])
            + "\n\nDish pairs most often confused:\n\n"
            + md_table(["Correct dish", "Chosen instead", "Times"],
                       [[a, b, str(v)] for (a, b), v in confused.most_common(TOP)]))


def nutrition_direction(rows: Sequence[ScoreRecord]) -> dict[str, dict[str, float | int | None]]:
    """Per nutrient: n, share over- and under-estimated, median signed error (a fraction).

    >>> rows = [{"parsed": {"calories": 600}, "reference": {"calories": 500}},
    ...         {"parsed": {"calories": 400}, "reference": {"calories": 500}},
    ...         {"parsed": {"calories": 800}, "reference": {"calories": 500}}]
    >>> nutrition_direction(rows)["calories"]
    {'n': 3, 'over': 0.6666666666666666, 'under': 0.3333333333333333, 'median_signed': 0.2}
    """
    out: dict[str, dict[str, float | int | None]] = {}
    for nutrient in NUTRIENTS:
        errors = [e[nutrient] for e in map(signed_errors, rows) if nutrient in e]
        out[nutrient] = {"n": len(errors), "over": sum(e > 0 for e in errors) / len(errors) if errors else None,
                         "under": sum(e < 0 for e in errors) / len(errors) if errors else None,
                         "median_signed": statistics.median(errors) if errors else None}
    return out


def portion_bins(rows: Sequence[ScoreRecord], portions: dict[str, str | None]
                 ) -> tuple[str, list[tuple[str, list[ScoreRecord]]]]:
    """Items grouped by portion size: grams quartiles when most portions state grams, else
    reference-calorie bins. Returns (what the bins are, [(label, rows)])."""
    grams = {item: portion_grams(text) for item, text in portions.items()}
    stated = [g for g in grams.values() if g is not None]
    if len(stated) >= max(4, 0.8 * len(grams)):
        edges = [0.0, *statistics.quantiles(stated, n=4), float("inf")]
        groups: list[tuple[str, list[ScoreRecord]]] = []
        for low, high in zip(edges, edges[1:], strict=False):
            label = f"{low:.0f}–{high:.0f} g" if high != float("inf") else f"≥{low:.0f} g"
            groups.append((label, [r for r in rows if (g := grams.get(str(r["id"]))) is not None and low <= g < high]))
        return "portion (grams stated in the portion text, quartiles)", groups
    groups = []
    for low, high in CALORIE_BINS:
        label = f"{low}–{high} kcal" if high != float("inf") else f"≥{low} kcal"
        groups.append((label, [r for r in rows if low <= float((r.get("reference") or {}).get("calories", -1)) < high]))
    return "reference calories (portion text gives no grams)", groups


def _ape_task_rows(run: RunData) -> tuple[tasks.Task | None, list[ScoreRecord]]:
    """The first task of the run measured by percentage errors (nutrition), and its items."""
    for t in tasks.all_tasks():
        if t.measure == "ape" and run.scores.get(t.name):
            return t, run.scores[t.name]
    return None, []


def _signed(value: float | int | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}"


def nutrition_section(runs: Sequence[RunData], portions: dict[str, str | None]) -> str:
    lines, portion_rows, measure = [], [], ""
    for run in runs:
        task, rows = _ape_task_rows(run)
        rows = _first_epoch(rows)
        if task is None or not rows:
            continue
        lines.append([run.label, *(f"{pct(d['over'])} / {pct(d['under'])} / {_signed(d['median_signed'])}"
                                   for d in nutrition_direction(rows).values())])
        measure, groups = portion_bins(rows, portions)
        for label, subset in groups:
            if subset:
                errors = [abs(e["calories"]) for e in map(signed_errors, subset) if "calories" in e]
                portion_rows.append([run.label, label, str(len(subset)),
                                     pct(statistics.median(errors)) if errors else "–",
                                     pct(headline(task, run.protocol.read_rows(task, subset)))])
    if not lines:
        return ""
    return (md_table(["Model", *(f"{n}: over / under (%) / median signed error (%)" for n in NUTRIENTS)], lines)
            + "\n\nSigned error = (estimate − reference) / reference, parsed items with a reference above 0."
            + f"\n\nError against portion size, by {measure}:\n\n"
            + md_table(["Model", "Portion", "n", "Median calorie APE (%)", "Avg MAPE (%)"], portion_rows))


def output_section(runs: Sequence[RunData]) -> str:
    """Truncated and looping answers per run (the raw text from predictions.jsonl)."""
    rows = []
    for run in runs:
        predictions = read_predictions(run.path / PREDICTIONS) if (run.path / PREDICTIONS).exists() else {}
        for task in tasks.names():
            mine = [p for p in predictions.values() if p.task == task and not p.rotation]
            if not mine:
                continue
            looping = [loops(p.raw) for p in mine]
            rows.append([run.label, task, str(len(mine)), str(sum(p.truncated for p in mine)), str(sum(looping)),
                         str(sum(p.truncated and looped for p, looped in zip(mine, looping, strict=True)))])
    if not rows:
        return ""
    return (md_table(["Model", "Task", "Answers", "Truncated", "Looping", "Both"], rows)
            + "\n\nLooping: the last characters of the answer are one phrase repeated over most of its tail.")


def mode_pairs_section(runs: Sequence[RunData], *, n_boot: int = N_BOOT) -> str:
    """Thinking minus instruct, per task, for runs whose models differ only by that marker."""
    by_family: dict[tuple[str, str], dict[str, RunData]] = {}
    named: dict[str, tasks.Task] = {}
    for run in runs:
        if (key := mode_pair_key(run.model)) is None:
            continue
        for spec, _ in run.scored_tasks():
            named[spec.name] = spec
            by_family.setdefault((key[0], spec.name), {})[key[1]] = run
    rows, paired = [], []
    for (family, task), modes in sorted(by_family.items()):
        if set(modes) != {"thinking", "instruct"}:
            continue
        spec = named[task]
        thinking, instruct = read_rows(modes["thinking"], spec), read_rows(modes["instruct"], spec)
        found = paired_difference(spec, thinking, instruct, n_boot=n_boot)
        if found is None:
            continue
        low, high = found["ci95"]
        paired += [modes["thinking"], modes["instruct"]]
        rows.append([family, task, str(found["n"]), pct(headline(spec, thinking)),
                     pct(headline(spec, instruct)), f"{100 * found['diff']:+.2f}",
                     f"[{100 * low:+.2f}, {100 * high:+.2f}]"])
    if not rows:
        return ""
    return (md_table(["Family", "Task", "Shared items", "Thinking (%)", "Instruct (%)", "Thinking − instruct (pp)",
                      "95% CI (pp)"], rows)
            + f"\n\nAccuracy, or Avg MAPE for nutrition (lower is better); paired {_bootstrap_unit(paired)} bootstrap.")


def _bootstrap_unit(runs: Sequence[RunData]) -> str:
    """What the paired intervals resampled, in the runs' own record (`resampled`): merchants, or items
    where the release names none."""
    units = resampled_units(runs)
    if units <= {"merchants"}:
        return "merchant"
    return "item" if units == {"items"} else "merchant (item, where the release names no merchant)"


def protocol_lines(runs: Sequence[RunData]) -> str:
    """For each run whose protocol's figure leads (the authors' on their release): how it asked (protocol,
    image indices), the release it read (fingerprint or revision) and, per task, the protocol's headline
    with ours beside and the items the two readings read differently. Empty when every run is ours."""
    lines = []
    for run in runs:
        led = [(spec, found) for spec in tasks.all_tasks() if spec.name in run.scores
               and (found := run.headline(spec)) is not None]
        if not led:
            continue
        prints, revisions = run.fingerprints, run.revisions
        figures = []
        for spec, (name, value, interval) in led:
            entry = run.entry(spec.name)
            release = (f"revision {revisions[spec.name][:12]}" if spec.name in revisions
                       else f"fingerprint {prints[spec.name][:16]}" if spec.name in prints else "release not recorded")
            shown = "–" if value is None else pct(value)
            if interval is not None:
                shown += (f" [{pct(interval[0])}, {pct(interval[1])}] (95% CI resampling "
                          f"{entry.get('official_resampled') or 'items'})")
            figures.append(f"{spec.name} {name} {shown} (ours {pct(headline(spec, run.scores[spec.name]))}; "
                           f"{read_differently(entry)} read differently; release {release})")
        lines.append(f"- {as_text(run.label)}: {as_text(run.question())}: " + "; ".join(as_text(f) for f in figures))
    if not lines:
        return ""
    return ("Runs whose protocol's figures lead: item difficulty, the Avg MAPE by portion and thinking vs instruct "
            "read their answers as that protocol does; distractors and the direction of nutrition errors read "
            "ours' parse of the same answers.\n\n" + "\n".join(lines))


# ---------------------------------------------------------------- plots
def _plots(out: Path, shares: dict[str, dict[str, float]], runs: Sequence[RunData]) -> list[str]:
    plt = _pyplot()

    def bars(name: str, ticks: list[str], series: Sequence[tuple[str, Sequence[float]]], ylabel: str, title: str, *,
             zero_line: bool = False, legend: Mapping[str, Any] | None = None, **xticks: Any) -> None:
        """One plot of grouped bars: a bar per series at each tick."""
        fig, ax = plt.subplots(figsize=(MAX_WIDTH_IN * 0.7, 3.2))
        width = 0.8 / len(series)
        for k, (label, values) in enumerate(series):
            ax.bar([i + k * width for i in range(len(ticks))], values, width=width, color=series_style(k)[0],
                   label=label)
        if zero_line:
            ax.axhline(0, color="0.3", linewidth=0.8)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(ticks))], ticks, **xticks)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(**(legend or {}))
        fig.tight_layout()
        fig.savefig(out / name, dpi=DPI)
        plt.close(fig)
        written.append(name)

    written: list[str] = []
    with plt.rc_context(cast(Any, STYLE)):  # matplotlib types its keys as literals
        labels = [label for label, _, _ in DIFFICULTY_BINS]
        if tasks_with := [(task, [_bin_counts(by_item).get(lbl, 0) for lbl in labels])
                          for task, by_item in shares.items() if by_item]:
            bars("analysis_difficulty.png", labels, tasks_with, "items", "Item difficulty (share of runs right)",
                 rotation=15)
        if nutrition := [(run.label, [100 * (direction[n]["median_signed"] or 0.0) for n in NUTRIENTS])
                         for run in runs if (rows := _ape_task_rows(run)[1])
                         for direction in [nutrition_direction(_first_epoch(rows))]]:
            bars("analysis_nutrition_direction.png", list(NUTRIENTS), nutrition, "median signed error (%)",
                 "Nutrition: over (+) or under (−) estimated", zero_line=True, legend={"fontsize": 7})
    return written


# ---------------------------------------------------------------- the analysis
def _dataset_fields(runs: Sequence[RunData]) -> tuple[dict[str, list[str]], dict[str, str | None]]:
    """Option texts (classification, in the run's language) and portion texts (nutrition) by id."""
    options: dict[str, list[str]] = {}
    portions: dict[str, str | None] = {}
    for run in runs:
        source, lang = run.setting("dataset"), run.setting("lang") or "zh"
        try:
            for task in (t for t in tasks.all_tasks() if t.name in run.scores):
                if task.has_options and not options:
                    for item, row in load_rows(task, source).items():
                        options[item] = tasks.options_of(row, lang) if row.get("options") else []
                if task.measure == "ape" and not portions:
                    portions = {item: row.get("portion") for item, row in load_rows(task, source).items()}
        except ScoringError:
            continue  # a run made on a release not at hand: its items still count, without text
    return options, portions


def analyze(dirs: Sequence[Path | str], *, out: Path | None = None, n_boot: int = N_BOOT) -> str:
    """The markdown analysis of these run folders; with `out`, also analysis.md and PNG plots there."""
    runs = [load_run(path) for path in dirs]
    options, portions = _dataset_fields(runs)
    difficulty, shares = difficulty_section(runs)
    sections = [("Item difficulty", difficulty), ("Classification: distractors", distractor_section(runs, options)),
                ("Nutrition: error direction and portion size", nutrition_section(runs, portions)),
                ("Truncated and looping outputs", output_section(runs)),
                ("Thinking vs instruct", mode_pairs_section(runs, n_boot=n_boot))]
    parts = [f"# DiningBench error analysis ({len(runs)} runs)"]
    if (asked := protocol_lines(runs)):
        parts.append(asked)
    parts += [f"## {title}\n\n{body}" for title, body in sections if body]
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        parts += [f"![{name}]({name})" for name in _plots(out, shares, runs)]
    text = "\n\n".join(parts) + "\n"
    if out is not None:
        (out / ANALYSIS_MD).write_text(text, encoding="utf-8")
    return text
