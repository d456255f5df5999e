"""The funnel report: kept and dropped per stage, reason and task, tokens and cost per stage, as markdown
(WORK/funnel.md, and in the release card) and a plot laid out as the paper's Figure 2 (base data on the left,
the three task pipelines on the right)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from construct.models import usage_table
from construct.stages import names
from construct.work import BuildSettings, Stage, read_json
from diningbench import CONFIGS
from eval.report.tables import as_text


def counts(work: Path) -> dict[str, dict[str | None, dict[str, Any]]]:
    """stage -> task (None for shared stages) -> {"kept": n, "dropped": n, "reasons": Counter}."""
    out: dict[str, dict[str | None, dict[str, Any]]] = {}
    for stage in names():
        for d in Stage(work, stage).decisions():
            cell = out.setdefault(stage, {}).setdefault(d.get("task"), {"kept": 0, "dropped": 0, "reasons": Counter()})
            cell[d["verdict"]] += 1
            if d["verdict"] == "dropped":
                cell["reasons"][d["reason"]] += 1
    return out


def markdown(work: Path, settings: BuildSettings) -> str:
    table = counts(work)
    lines = ["| stage | task | in | kept | dropped | dropped by reason |", "|---|---|---:|---:|---:|---|"]
    for stage in names():
        for task, cell in sorted(table.get(stage, {}).items(), key=lambda kv: str(kv[0])):
            reasons = ", ".join(f"{r} {n}" for r, n in cell["reasons"].most_common()) or "-"
            lines.append(f"| {stage} | {task or 'all'} | {cell['kept'] + cell['dropped']} | {cell['kept']} | "
                         f"{cell['dropped']} | {reasons} |")
    lines += ["", usage_markdown(work, settings)]
    return "\n".join(lines) + "\n"


def usage_markdown(work: Path, settings: BuildSettings) -> str:
    """Model calls, failures, tokens, cost (when priced) and model time, per stage and per model, then
    per model alone and in all. Time is the calls' own seconds added up (concurrent calls overlap)."""
    table = usage_table(work, names())
    head = "| calls | failed | prompt tokens | completion tokens | cost (USD) | model time (s) |"

    def row(label: str, cell: dict[str, Any]) -> str:
        price = settings.price_per_mtok
        cost = (cell["prompt_tokens"] * price[0] + cell["completion_tokens"] * price[1]) / 1e6 if price else None
        return (f"{label} | {cell['calls']} | {cell['failed']} | {cell['prompt_tokens']:,} | "
                f"{cell['completion_tokens']:,} | {'n/a' if cost is None else f'{cost:.4f}'} | {cell['seconds']:.1f} |")

    walls = read_json(work / "stage_seconds.json")
    lines = []
    if walls:
        lines += ["Wall time per stage (its last run that asked a model): " + ", ".join(
            f"{stage} {walls[stage]:.1f} s" for stage in names() if stage in walls) + ".", ""]
    lines += ["| stage | model " + head, "|---|---|---:|---:|---:|---:|---:|---:|"]
    per_model: dict[str, Counter[str]] = {}
    total: Counter[str] = Counter()  # a count no call added reads 0
    for (stage, model), cell in sorted(table.items(), key=lambda kv: (names().index(kv[0][0]), kv[0][1])):
        lines.append(row(f"| {stage} | {as_text(model)}", cell))
        per_model.setdefault(model, Counter()).update(cell)
        total.update(cell)
    lines += ["", "| model " + head, "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [row(f"| {as_text(model)}", cell) for model, cell in sorted(per_model.items())]
    lines.append(row("| **all**", total))
    if not settings.price_per_mtok:
        lines.append("\nCost: pass `--price-per-mtok PROMPT,COMPLETION` (USD per million tokens) to `run`.")
    return "\n".join(lines)


def plot(work: Path, path: Path) -> Path:
    """Left: photos and dishes through the base-data filters; right: items per task through its stages."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = counts(work)

    def seen(stage: str, task: str | None) -> tuple[int, int]:
        cell = table.get(stage, {}).get(task, {"kept": 0, "dropped": 0})
        return cell["kept"] + cell["dropped"], cell["kept"]

    labels = ("raw photos", "photos kept", "raw dishes", "dishes kept")
    values = (*seen("photos", None), *seen("dishes", None))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 1.4]})
    bars = left.barh(range(len(values))[::-1], values, color=["#9aa7b8", "#4c72b0", "#c9b49a", "#dd8452"])
    left.set_yticks(range(len(values))[::-1], labels)
    left.bar_label(bars, padding=3)
    left.set_title("Base data")
    left.set_xlim(0, max(values + (1,)) * 1.25)
    steps = ("generated", "after filters", "after translation", "after review")
    width = 0.25
    for k, task in enumerate(CONFIGS):
        series = [*seen(task, task), seen("translate", task)[1], seen("review", task)[1]]
        b = right.bar([i + (k - 1) * width for i in range(len(steps))], series, width, label=task)
        right.bar_label(b, padding=2, fontsize=8)
    right.set_xticks(range(len(steps)), steps)
    right.set_title("Task pipelines")
    right.legend(frameon=False)
    fig.suptitle("Construction funnel")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write(work: Path, settings: BuildSettings) -> tuple[Path, Path]:
    md = work / "funnel.md"
    md.write_text("# Construction funnel\n\n" + markdown(work, settings), encoding="utf-8")
    return md, plot(work, work / "funnel.png")
