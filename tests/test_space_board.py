"""The Leaderboard's rows without a browser: groups of comparable rows, collapsing, search and
filters, the column picker, frozen columns and links to runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from eval.report.runs import RunData
from space.diningspace.leaderboard import (
    DEFAULT_SHOWN,
    all_rows,
    filter_rows,
    leaderboard_html,
    leaderboard_rows,
    model_size,
    rank,
    weights_of,
)
from space.diningspace.leaderboard_tab import LeaderboardTab
from space.diningspace.settings import SpaceSettings

PAPER = ("model,type,lang,classification_acc,avg_mape,calories_mape,protein_mape,carbohydrates_mape,fat_mape,vqa_acc\n"
         "GPT-4o,proprietary,zh,65.26,42.43,,,,,80.60\n"
         "Qwen-2.5-VL-72B-Instruct,open,zh,55.00,45.00,,,,,70.00\n"
         "Qwen-2.5-VL-3B-Instruct,open,en,30.00,60.00,,,,,50.00\n")
RELEASE = "/data/release"


def _run(results: Path, name: str, model: str, accuracy: float, *, lang: str = "zh", dataset: str | None = RELEASE,
         limit: int | None = None, scores: bool = True, **info) -> None:
    folder = results / name
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"classification": {"accuracy": accuracy, "n": 40}}))
    (folder / "run.json").write_text(json.dumps({"settings": {"model": model, "lang": lang, "limit": limit,
                                                              "dataset": dataset},
                                                 "dataset": {"source": dataset or "embedded sample"}, **info}))
    if scores:
        (folder / "scores.jsonl").write_text("")


def _results(tmp_path: Path) -> tuple[Path, Path]:
    csv_path = tmp_path / "table2.csv"
    csv_path.write_text(PAPER)
    results = tmp_path / "results"
    _run(results, "qwen7b", "vllm:Qwen/Qwen2.5-VL-7B-Instruct", 0.50)
    _run(results, "gpt", "openai:gpt-4o", 0.70)
    _run(results, "gpt-en", "openai:gpt-4o", 0.60, lang="en")
    _run(results, "gemini-few", "gemini:gemini-2.5-flash", 0.90, limit=10)  # best figure, but partial
    _run(results, "sample", "openai:gpt-4o-mini", 0.95, dataset=None)  # the synthetic sample
    for n in range(4):  # a sweep over a setting the baseline ignores: identical figures
        _run(results / "sweep", f"cell{n}", "baseline:first", 0.125, identity={"model": "baseline:first", "seed": n})
    _run(results, "submitted", "vllm:OpenGVLab/InternVL3-14B", 0.65, scores=True,
         submission={"status": "verified", "mismatch": True, "source": "zip upload"})
    return csv_path, results


def test_only_comparable_rows_are_ranked_together(tmp_path: Path) -> None:
    csv_path, results = _results(tmp_path)
    rows = leaderboard_rows(csv_path, results)
    table = [(r["Group"], r["#"], r["Model"]) for r in rows]
    assert table == [
        ("full release · zh", 1, "openai:gpt-4o"),
        ("full release · zh", 2, "vllm:OpenGVLab/InternVL3-14B"),
        ("full release · zh", 3, "vllm:Qwen/Qwen2.5-VL-7B-Instruct"),
        ("full release · en", 1, "openai:gpt-4o (en)"),
        ("paper · zh", 1, "GPT-4o"),
        ("paper · zh", 2, "Qwen-2.5-VL-72B-Instruct"),
        ("paper · en", 1, "Qwen-2.5-VL-3B-Instruct"),
        ("partial", None, "gemini:gemini-2.5-flash"),
        ("synthetic", None, "openai:gpt-4o-mini"),
        ("baselines", None, "baseline:first"),  # four identical rows shown once
    ]
    baseline = rows[-1]
    assert baseline["Source"].startswith("4 identical rows: local run: sweep/cell0, local run: sweep/cell1")
    submitted = rows[1]
    assert submitted["Status"] == "verified · claims differ" and submitted["Source"] == "submitted: zip upload"


def test_one_row_per_model_and_settings_the_newest_run_naming_the_earlier(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _run(results, "b", "baseline:random", 0.25, updated_at="2026-11-02T10:00:00Z")
    _run(results, "a", "baseline:random", 0.125, updated_at="2026-11-01T10:00:00Z")
    _run(results, "c", "baseline:random", 0.125, lang="en")  # other settings: a row of its own
    _run(results, "d", "baseline:random", 0.5, identity={"model": "baseline:random", "seed": 7})
    rows = {r["Run"]: r for r in all_rows(None, results)}
    assert sorted(rows) == ["b", "c", "d"]
    assert rows["b"]["Cls acc %"] == 25.0 and rows["b"]["Source"] == "local run: b · newest of 2 runs (earlier: a)"


def test_a_run_without_an_identity_is_keyed_by_the_settings_marked_identity(tmp_path: Path) -> None:
    """run.json written before it kept `identity`: the settings eval/settings.py marks as identity (and the
    tasks) say which runs are one model + settings; how a run was made (max concurrency, timeout) does not."""
    results = tmp_path / "results"
    for name, extra, accuracy in (("a", {"max_concurrency": 8, "timeout": 60.0}, 0.25),
                                  ("b", {"max_concurrency": 64, "timeout": 300.0}, 0.375),
                                  ("c", {"max_concurrency": 8, "seed": 3}, 0.5),
                                  ("d", {"max_concurrency": 8, "task": "nutrition"}, 0.625)):
        _run(results, name, "baseline:random", accuracy, updated_at=f"2026-11-0{1 + 'abcd'.index(name)}T10:00:00Z")
        info = json.loads((results / name / "run.json").read_text())
        info["settings"].update(extra)
        (results / name / "run.json").write_text(json.dumps(info))
    rows = {r["Run"]: r for r in all_rows(None, results)}
    assert sorted(rows) == ["b", "c", "d"]  # a and b differ only in how they were made: b, the newest, stands
    assert rows["b"]["Source"] == "local run: b · newest of 2 runs (earlier: a)"


def test_search_and_filters(tmp_path: Path) -> None:
    csv_path, results = _results(tmp_path)
    rows = all_rows(csv_path, results)

    def models(**kw) -> list[str]:
        return sorted(r["Model"] for r in filter_rows(rows, **kw))

    assert models(search="QWEN 7b") == ["vllm:Qwen/Qwen2.5-VL-7B-Instruct"]  # every word, any case
    assert models(search="gpt-4o", lang="en") == ["openai:gpt-4o (en)"]
    assert models(weights="open") == ["Qwen-2.5-VL-3B-Instruct", "Qwen-2.5-VL-72B-Instruct",
                                      "vllm:OpenGVLab/InternVL3-14B", "vllm:Qwen/Qwen2.5-VL-7B-Instruct"]
    assert models(weights="closed", kinds=["full release"]) == ["openai:gpt-4o", "openai:gpt-4o (en)"]
    assert models(size="≤ 10B") == ["Qwen-2.5-VL-3B-Instruct", "vllm:Qwen/Qwen2.5-VL-7B-Instruct"]
    assert models(size="> 40B") == ["Qwen-2.5-VL-72B-Instruct"]
    assert models(size="10–40B") == ["vllm:OpenGVLab/InternVL3-14B"]
    assert "GPT-4o" in models(size="unknown") and "vllm:OpenGVLab/InternVL3-14B" not in models(size="unknown")
    assert models(kinds=["paper"], task="nutrition") == ["GPT-4o", "Qwen-2.5-VL-3B-Instruct", "Qwen-2.5-VL-72B-Instruct"]
    assert models(task="nutrition", kinds=["full release"]) == []  # the runs have no nutrition figure
    assert models(kinds=["baselines", "synthetic"]) == ["baseline:first", "openai:gpt-4o-mini"]
    assert model_size("Qwen-3-VL-30B-A3B-Thinking") == 30.0 and model_size("MiniCPM-V-4.5") is None


def test_the_page_freezes_rank_and_model_links_runs_and_shows_chosen_columns(tmp_path: Path) -> None:
    csv_path, results = _results(tmp_path)
    rows = rank(all_rows(csv_path, results), "Cls acc %")
    page = leaderboard_html(rows, "Cls acc %", ["Data", "Status"])
    head = page[page.index("<thead>"):page.index("</thead>")]
    assert [h.strip() for h in re.findall(r"<th(?:\s[^>]*)?>([^<]*)", head)] == ["#", "Model", "Data", "Status", "Cls acc %"]
    assert "data-sort='Cls acc %'" in head and "aria-sort='descending'" in head  # ranked by it, best first
    assert "<th class='db-rank'" in head and "<th class='db-model'" in head  # frozen by style.css
    assert "<a href='?run=qwen7b' title='open this run in the Runs tab'>vllm:Qwen/Qwen2.5-VL-7B-Instruct</a>" in page
    assert "<a href='?run=sweep%2Fcell0'" in page
    assert page.count("<tr class='db-group'>") == 7
    assert "partial</th><td colspan='3'>a subset of items: not ranked</td>" in page
    assert "db-status-mismatch" in page and "Avg MAPE" not in page
    empty = leaderboard_html([], "Cls acc %", DEFAULT_SHOWN)
    assert "No row matches these filters." in empty


def test_the_tab_filters_what_it_draws(tmp_path: Path) -> None:
    csv_path, results = _results(tmp_path)
    settings = SpaceSettings(results_dir=results, reported_csv=csv_path)
    tab = LeaderboardTab(settings)
    page = tab.page("Cls acc %", "qwen", None, "any", "any", "any", "any", ["Lang"])
    assert page.count("<tr class='db-group'>") == 3  # full release zh, paper en, paper zh
    assert "GPT-4o" not in page and ">Lang<" in page and ">Items<" not in page
    assert "<td class='db-num db-rank'>1</td>" in page


def test_the_space_card_describes_every_tab_and_every_setting() -> None:
    root = Path(__file__).resolve().parents[1]
    card = (root / "space" / "README.md").read_text(encoding="utf-8")
    settings = (root / "space" / "diningspace" / "settings.py").read_text(encoding="utf-8")
    names = set(re.findall(r"\"(DININGBENCH_[A-Z_]+)\"", settings))
    assert len(names) >= 20 and {n for n in names if f"`{n}`" not in card} == set()
    tabs = re.findall(r"gr\.Tab\(\"([^\"]+)\"", (root / "space" / "app.py").read_text(encoding="utf-8"))
    assert "Submit" in tabs and {t for t in tabs if f"- **{t}** —" not in card} == set()
    assert "python space/bundle.py" in card and "DININGBENCH_SPACE_SUBMIT_REPO" in card.split("## Deploy", 1)[1]


def _ranges_pair_by_pair(ordered: list[dict], metric: str, higher_better: bool) -> list:
    """The rule as the docstring states it, one pair at a time: what the counted version must equal."""
    from space.diningspace.leaderboard import _bounds

    bounds = [_bounds(r, metric) for r in ordered]

    def ahead(i: int, j: int) -> bool:
        a, b = ordered[i][metric], ordered[j][metric]
        if bounds[i] is None or bounds[j] is None:
            return a > b if higher_better else a < b
        return bounds[i][0] > bounds[j][1] if higher_better else bounds[i][1] < bounds[j][0]

    out = []
    for i in range(len(ordered)):
        best = 1 + sum(ahead(j, i) for j in range(len(ordered)) if j != i)
        worst = len(ordered) - sum(ahead(i, j) for j in range(len(ordered)) if j != i)
        out.append(best if best == worst else f"{best}–{worst}")
    return out


def test_rank_ranges_equal_the_pairwise_rule_on_boards_with_ties_and_rows_without_intervals() -> None:
    import random

    from eval import tasks
    from space.diningspace.leaderboard import RANKABLE, headline_column, interval_column, rank_ranges

    generator = random.Random(39)
    for task in tasks.all_tasks():
        metric, interval = headline_column(task), interval_column(task)
        higher_better = RANKABLE[metric]
        for _ in range(150):
            rows = []
            for _ in range(generator.randint(1, 40)):
                value = round(generator.choice([generator.uniform(0, 100), 50.0, 60.0]), 1)  # ties are common
                row = {metric: value}
                kind = generator.random()
                if kind < 0.7:
                    spread = generator.choice([0.0, 1.0, 5.0, generator.uniform(0, 20)])
                    row[interval] = f"[{value - spread:.2f}, {value + spread:.2f}]"
                elif kind < 0.75:  # written backwards: still never counted against itself
                    row[interval] = f"[{value + 3:.2f}, {value - 3:.2f}]"
                rows.append(row)
            rows.sort(key=lambda r: -r[metric] if higher_better else r[metric])
            assert rank_ranges(rows, metric, higher_better) == _ranges_pair_by_pair(rows, metric, higher_better)


def test_runs_of_a_protocol_with_its_own_reading_are_ranked_among_themselves(tmp_path: Path) -> None:
    """Any protocol whose figures are its own (not only the authors'): its full-release runs form a group of
    their own, never ranked against ours; the page says how they were asked."""
    from collections.abc import Mapping
    from typing import Any

    from eval import protocols, tasks
    from eval.protocols.ours import Ours

    class Lenient(Ours):
        name = "lenient"
        title = "a lenient reading"

        def own_figures(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
            found = entry.get("lenient")
            return found if isinstance(found, Mapping) else None

        def headline(self, task: tasks.Task, entry: Mapping[str, Any]) -> tuple[str, float | None] | None:
            found = self.own_figures(entry)
            return None if found is None else ("acc", found.get("acc"))

    protocols.register(Lenient())
    try:
        results = tmp_path / "results"
        _run(results, "ours", "openai:a", 0.5)
        _run(results, "lenient", "openai:b", 0.25)
        folder = results / "lenient"
        (folder / "metrics.json").write_text(json.dumps({"classification": {"accuracy": 0.25, "n": 40,
                                                                             "lenient": {"acc": 0.75}}}))
        info = json.loads((folder / "run.json").read_text())
        info["settings"]["protocol"] = "lenient"
        (folder / "run.json").write_text(json.dumps(info))
        rows = {r["Run"]: r for r in leaderboard_rows(None, results)}
    finally:
        protocols.unregister("lenient")
    assert rows["lenient"]["Group"] == "full release · zh · lenient protocol" and rows["lenient"]["#"] == 1
    assert rows["lenient"]["Cls acc %"] == 75.0 and rows["lenient"]["Protocol"] == "lenient"
    assert rows["lenient"]["_asked"] == "all views" and rows["ours"]["Group"] == "full release · zh"
    assert rows["lenient"]["_beside"]["Cls acc %"].startswith("the figure of a lenient reading; ours' reading of the "
                                                              "same answers: 25.00")


def test_weights_come_from_the_backends_declared_traits() -> None:
    def run(model: str, host: str | None = None) -> RunData:
        return RunData(path=Path("r"), info={"model": model, "base_url_host": host})

    assert weights_of(run("vllm:Qwen/Qwen2.5-VL-7B-Instruct")) == weights_of(run("hf:tiny")) == "open"
    assert weights_of(run("gemini:gemini-2.5-flash", "proxy.example")) == "closed"  # only Google's models
    assert weights_of(run("openai:gpt-4o")) == "closed"  # its public endpoint
    assert weights_of(run("openai:Qwen3-VL-8B", "127.0.0.1")) is None  # any OpenAI-compatible server
    assert weights_of(run("baseline:majority")) is None and weights_of(run("human:panel")) is None
