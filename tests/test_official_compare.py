"""Comparisons of runs made under the authors' protocol: `eval compare`, the report's paired table, the
model card's "Settings compared", the Space's Compare and its Leaderboard read each task by the
protocol's headline (their scripts' reading of each answer), with ours' reading of the same answers
beside it, and name the protocol, the image indices sent and the release.

The runs are the authors' prediction files imported on the corpus release (tests/helpers_official.py):
A holds the hand-built answers, B answers whose two readings differ most. In B every classification
answer is "The answer is X" with X the reference: their rule reads the first letter (T), wrong every
time; ours reads X. So A − B is +50 points by theirs and −25 by ours, and a swap of the readings fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import tasks
from eval.cli import main as cli_main
from eval.compare import compare_runs
from eval.official_io import import_official
from eval.report.runs import ReportError, load_run
from tests.helpers_official import CORPUS, corpus_rows, write_folder

# Hand-counted from tests/corpus/official/classification*.jsonl. Their reading of A's answers: 6 of 12
# right (AUTHORS_PRINTED); of B's, none (each answer starts with T). Ours of A: 8 of 12 (B, "The answer
# is B", 答案：C, D. 回锅肉, c, (E), h and **A** read; the empty, failed, 42 and Z answers not); of B: 11 of
# 12 (the reference of row 6 is written "c": "The answer is c" is no capital letter, ours reads none).
THEIRS = {"a": 6 / 12, "b": 0 / 12}
OURS = {"a": 8 / 12, "b": 11 / 12}


def _said_plainly(folder: Path, task: str) -> Path:
    """A prediction file of theirs whose every answer is 'The answer is <the reference>'."""
    rows = corpus_rows(f"{task}.jsonl")
    lines = []
    for line in corpus_rows(f"{task}_pred.jsonl"):
        text = f"The answer is {rows[line['idx']]['ground_truth']}"
        lines.append({**line, "model_pred": text, "model_full_pred": text})
    path = folder / f"{task}_plain_pred.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def _exact(folder: Path) -> Path:
    """A nutrition prediction file of theirs whose every answer is the row's published ground truth."""
    rows = corpus_rows("nutrition.jsonl")
    lines = []
    for line in corpus_rows("nutrition_pred.jsonl"):
        truth = rows[line["idx"]]["ground_truth"]
        text = truth if isinstance(truth, str) else json.dumps(truth, ensure_ascii=False)
        lines.append({**line, "model_pred": text, "model_full_pred": text})
    path = folder / "nutrition_exact_pred.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("official-compare")
    release = write_folder(root / "release")
    found = {}
    plain = _said_plainly(root, "classification")
    for name, source, model, folder in (
            ("a", CORPUS / "classification_pred.jsonl", "openai:a", root / "results" / "a"),
            ("b", plain, "openai:b", root / "results" / "b"),
            ("card", plain, "openai:a", root / "card"),  # B's answers as A's model's: a model card is of one model
    ):
        found[name] = import_official(source, "classification", folder, dataset=str(release), model=model, n_boot=200)
    for name, source in (("na", CORPUS / "nutrition_pred.jsonl"), ("nb", _exact(root))):
        found[name] = import_official(source, "nutrition", root / "nutrition" / name, dataset=str(release),
                                      model="openai:m", n_boot=200)
    found["root"] = root
    return found


def test_the_runs_readings_differ_as_counted_by_hand(runs: dict[str, Path]) -> None:
    for name in ("a", "b"):
        entry = json.loads((runs[name] / "metrics.json").read_text())["classification"]
        assert entry["official"]["acc"] == pytest.approx(THEIRS[name])
        assert entry["accuracy"] == pytest.approx(OURS[name])


def test_eval_compare_reads_the_authors_figure_first_and_ours_beside_it(runs: dict[str, Path]) -> None:
    text, found = compare_runs([runs["a"], runs["b"]], n_perm=999, n_boot=200)
    [result] = found
    assert result["diff"] == pytest.approx(THEIRS["a"] - THEIRS["b"])  # +0.50: their reading
    assert result["ours"]["diff"] == pytest.approx(OURS["a"] - OURS["b"])  # −0.25: ours beside
    assert result["reading"] == "the authors' protocol" and result["protocol"] == "official"
    # McNemar on their reading: 6 items only A got right, none only B: 2 × 0.5^6
    assert result["mcnemar"] == {"b": 6, "c": 0, "p_value": pytest.approx(2 / 64)}
    assert result["resampled"] == "items" and result["merchants"] is None  # their release names no merchant
    assert result["asked"] == {"a": "the authors' protocol, image indices 0", "b": "the authors' protocol, image indices 0"}
    fingerprint = json.loads((runs["a"] / "run.json").read_text())["dataset"]["fingerprints"]["classification"]
    assert fingerprint[:12] in result["release"]["a"]
    lines = text.splitlines()
    assert lines[2].startswith("Protocol: the authors' protocol, whose reading gives the headline figures")
    assert "Asked: the authors' protocol, image indices 0." in lines[2] and fingerprint[:12] in lines[2]
    assert lines[3].startswith("classification: accuracy (the authors' protocol) A − B = +50.00 pp, 95% CI [")
    assert "(paired item bootstrap)" in lines[3] and "12 items)" in lines[3]
    assert lines[4].startswith("  Ours' reading of the same answers: accuracy A − B = -25.00 pp, 95% CI [")
    assert "Fewer than 20 items: the interval covers less than 95%; read it as rough" in text
    assert "merchant" not in text


def test_nutrition_is_compared_on_their_avg_mape_with_ours_beside(runs: dict[str, Path]) -> None:
    """Their reading of A's answers on the 7 rows both readings can read (2 rows whose reference ours
    cannot read have no record in scores.jsonl; the row whose ground truth is no JSON counts in neither):
    rows 0 and 1 read (550/28/45/30 against 600/30/40/35, 650/30/100/25 against 700/35/90/20), the others
    penalised at 100%, the zero protein reference of row 2 not counted. B answers the ground truth: 0."""
    calories = (50 / 600 + 50 / 700 + 5) / 7
    protein = (2 / 30 + 5 / 35 + 4) / 6
    carbohydrates = (5 / 40 + 10 / 90 + 5) / 7
    fat = (5 / 35 + 5 / 20 + 5) / 7
    theirs = (calories + protein + carbohydrates + fat) / 4  # 0.7391
    text, [result] = compare_runs([runs["na"], runs["nb"]], n_perm=999, n_boot=200)
    assert result["diff"] == pytest.approx(theirs)
    entries = {n: json.loads((runs[n] / "metrics.json").read_text())["nutrition"] for n in ("na", "nb")}
    assert result["ours"]["diff"] == pytest.approx(entries["na"]["avg_mape"] - entries["nb"]["avg_mape"])
    assert abs(result["diff"] - result["ours"]["diff"]) > 0.05  # the two readings differ: a swap would fail
    assert result["mcnemar"] is None and result["unrecorded"] == {"a": 2, "b": 2}
    assert "Avg MAPE (the authors' protocol) A − B = +73.91 pp" in text
    assert ("Left out of both readings here: 2 items of A and 2 of B whose reference ours cannot read (scores.jsonl "
            "holds no record of them); the figure of the authors' protocol counts those its rules can read.") in text


def test_runs_of_different_protocols_are_refused_in_one_line(runs: dict[str, Path], tmp_path: Path, capsys) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    for name in ("scores.jsonl", "metrics.json"):
        (ours / name).write_bytes((runs["a"] / name).read_bytes())
    info = json.loads((runs["a"] / "run.json").read_text())
    info["settings"]["protocol"] = "ours"
    (ours / "run.json").write_text(json.dumps(info))
    with pytest.raises(ReportError, match="scored under the authors' protocol and ours under this project's protocol"):
        compare_runs([runs["a"], ours], n_perm=99, n_boot=50)
    assert cli_main(["compare", str(runs["a"]), str(ours)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "their headlines are not the same figure; not compared" in err[0]
    from eval.report.paired import comparison

    table = comparison([load_run(runs["a"]), load_run(ours)], n_boot=50)
    assert "| not compared: they were scored under different protocols |" in table


def test_the_report_and_the_model_card_compare_on_their_reading_with_ours_beside(runs: dict[str, Path]) -> None:
    from eval.report.model_card import render_model_card
    from eval.report.paired import comparison

    table = comparison([load_run(runs["a"]), load_run(runs["b"])], n_boot=200)
    theirs, ours = (line for line in table.splitlines() if line.startswith("| classification"))
    assert "| accuracy (the authors' protocol) |" in theirs and "| +50.00 |" in theirs
    assert "| accuracy (ours' reading of the same answers) |" in ours and "| -25.00 |" in ours
    assert "| 12 items |" in theirs and "merchants" not in table  # their release names no merchant to count
    assert "Asked: the authors' protocol, image indices 0." in table
    card = render_model_card([load_run(runs["a"]), load_run(runs["card"])], allow_partial=True)
    section = card.split("## Settings compared", 1)[1]
    assert "| accuracy (the authors' protocol) |" in section and "| +50.00 |" in section
    assert "Protocol: the authors' protocol" in section
    assert ("resampling items (the release names no merchant), and the p-value of a paired permutation test"
            in section)  # each item its own cluster: nothing is clustered


def test_the_reports_paired_note_says_items_were_resampled_and_swapped(runs: dict[str, Path]) -> None:
    from eval.report.report import build_report

    text = build_report([load_run(runs["a"]), load_run(runs["b"])], reported=False, n_boot=200)
    section = text.split("## Paired comparison", 1)[1].split("\n## ", 1)[0]
    assert ("Both runs are resampled on the same items (the release names no merchant), so shared difficulty "
            "cancels out. p: a paired permutation test (each item's answers swapped between A and B;") in section
    assert "merchant" not in section.replace("names no merchant", "")


def test_the_compare_help_names_items_beside_merchants(capsys) -> None:
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    listed = " ".join(capsys.readouterr().out.split())
    assert "its interval resampling merchants where the rows name them, else items" in listed
    assert "merchant-clustered" not in listed
    with pytest.raises(SystemExit):
        cli_main(["compare", "--help"])
    assert "of whole merchants where the rows name them, else of items" in " ".join(capsys.readouterr().out.split())


def test_the_spaces_compare_and_leaderboard_show_their_figure_with_ours_beside(runs: dict[str, Path]) -> None:
    pytest.importorskip("gradio")
    from space.diningspace.leaderboard import leaderboard_html, leaderboard_rows
    from space.diningspace.leaderboard_tab import LeaderboardTab
    from space.diningspace.settings import SpaceSettings

    results = runs["root"] / "results"
    tab = LeaderboardTab(SpaceSettings.from_env({"DININGBENCH_SPACE_RESULTS": str(results)}, repo_root=results))
    shown = tab.compare("a", "b")
    assert "classification: accuracy (the authors' protocol) A − B = +50.00 pp" in shown
    assert "-25.00 pp" in shown and "image indices 0" in shown
    assert str(runs["root"]) not in shown  # the release by its folder's name: the operator's paths stay theirs

    rows = {r["Run"]: r for r in leaderboard_rows(None, results)}
    entry = json.loads((runs["a"] / "metrics.json").read_text())["classification"]
    low, high = entry["official_ci95"]
    assert rows["a"]["Cls acc %"] == 50.0 and rows["a"]["Cls 95% CI"] == f"[{100 * low:.2f}, {100 * high:.2f}]‡"
    assert rows["a"]["_beside"]["Cls acc %"].startswith(
        "the figure of the authors' protocol; ours' reading of the same answers: 66.67 [")
    page = leaderboard_html(list(rows.values()), "Cls acc %")
    assert "ours&#x27; reading of the same answers: 66.67" in page
    assert "title='official: the authors&#x27; protocol, image indices 0'" in page


def test_the_recap_reads_an_official_runs_answers_as_it_reads_yours_and_says_so(runs: dict[str, Path]) -> None:
    from space.diningspace.recap import model_answers, tally

    found = dict(model_answers(runs["root"] / "results", tasks.get("classification"), ["0", "1", "6"]))
    label = "openai:b (ours' reading; its headline is the authors' protocol's, on the Leaderboard)"
    assert set(found) == {label, label.replace("openai:b", "openai:a")}
    # ours reads B's "The answer is B" as B (right) where their rule reads T; row 6's "c" is no capital letter
    assert [found[label][i]["correct"] for i in ("0", "1", "6")] == [True, True, False]
    assert "2 of 3 right on the same items" in tally("classification", [], [(label, found[label])])


def test_vqa_is_compared_on_their_judges_keywords_with_the_strict_reading_beside(runs: dict[str, Path]) -> None:
    """A: the judged corpus file. Their keywords count 4 of its 7 counted answers right (rows 0, 1, 2, 5);
    the strict reading of the same replies 3 (是, 是。, Yes; 不是 is no). B differs on two rows: row 0 judged
    否 (wrong in both readings) and row 7 judged 不是 (right by their keywords, wrong strictly). Theirs:
    4/7 − 4/7 = 0; ours: 3/7 − 2/7 = +1/7. Row 6 has an empty reference: neither reading counts it."""
    root = runs["root"]
    lines = corpus_rows("vqa_judged_pred.jsonl")
    lines[0].update(eval_match=False, eval_result="否")
    lines[7].update(eval_match=True, eval_result="不是")
    changed = root / "vqa_b_pred.jsonl"
    changed.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    release = root / "release"
    a = import_official(CORPUS / "vqa_judged_pred.jsonl", "vqa", root / "vqa" / "a", dataset=str(release), n_boot=200)
    b = import_official(changed, "vqa", root / "vqa" / "b", dataset=str(release), n_boot=200)
    text, [result] = compare_runs([a, b], n_perm=999, n_boot=200)
    assert result["diff"] == pytest.approx(0.0) and result["ours"]["diff"] == pytest.approx(1 / 7)
    assert result["mcnemar"] == {"b": 1, "c": 1, "p_value": 1.0} and result["n"] == 7
    assert "vqa: accuracy (the authors' protocol) A − B = +0.00 pp" in text
    assert "Ours' reading of the same answers: accuracy A − B = +14.29 pp" in text
