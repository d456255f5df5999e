"""`python -m eval sweep` end to end: baselines through the real harness on a tiny release."""

import json

import pytest
from helpers_report import table_rows

from eval import cli
from tests.helpers_harness import make_release


def sweep(*argv: str) -> int:
    """The exit status of `python -m eval sweep ARGV` (argparse's mistakes exit 2 too)."""
    try:
        return cli.main(["sweep", "--no-progress", *argv])
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return make_release(tmp_path_factory.mktemp("release") / "diningbench")


def test_sweep_runs_every_cell_and_charts_it(release, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["--model", "baseline:first", "--model", "baseline:random", "--task", "classification",
            "--images", "1,2", "--cot", "both", "--dataset", str(release), "--out", str(out), "--n-boot", "50"]
    assert sweep(*argv) == 0
    cells = sorted(p.parent.name for p in out.glob("*/scores.jsonl"))
    assert len(cells) == 8  # 2 models x 2 view counts x CoT off/on
    assert "baseline-first-classification-zh-img2-reference-first-cot" in cells
    assert len(json.loads((out / "sweep.json").read_text())["cells"]) == 8
    text = (out / "report.md").read_text()
    # the release's answers are A, B, A, C, A, D: always answering A is right 3 times of 6
    views = text.split("by number of views")[1]
    assert [c.split(" ")[0] for c in table_rows(views, "baseline:first")[0][1:]] == ["50.00", "50.00"]
    cot = text.split("with and without chain of thought")[1]
    assert table_rows(cot, "baseline:first · 1 view")[0][3] == "+0.00 [+0.00, +0.00]"
    for png in ("views_classification.png", "cot_classification.png"):
        assert (out / png).stat().st_size > 20_000
    assert capsys.readouterr().out == text

    # a second sweep over the same folder resumes: nothing is asked again, nothing duplicated
    sizes = {c: (out / c / "predictions.jsonl").read_text().count("\n") for c in cells}
    assert sweep(*argv) == 0
    assert {c: (out / c / "predictions.jsonl").read_text().count("\n") for c in cells} == sizes == {
        c: 6 for c in cells}


def test_bad_sweep_settings_are_one_line_errors(release, tmp_path, capsys):
    argv = ["--model", "baseline:first", "--task", "classification", "--lang", "fr", "--out", str(tmp_path)]
    assert sweep(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--lang" in err and err.count("\n") == 1
    assert sweep("--model", "baseline:first", "--task", "classification", "--images", "0,1", "--out", "x") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "at least 1" in err and err.count("\n") == 1


def test_vqa_sweep_judges_each_answer_once_and_draws_the_cot_figure_per_category(release, tmp_path):
    from tests.fakes.openai_server import FakeOpenAIServer

    out = tmp_path / "vqa-sweep"
    with FakeOpenAIServer(oracle=lambda request: "Same conclusion.\nGRADE: C") as judge:
        argv = ["--model", "baseline:random", "--task", "vqa", "--images", "1", "--cot", "both",
                "--judge", "openai:fake-judge", "--judge-base-url", judge.base_url, "--dataset", str(release),
                "--out", str(out), "--n-boot", "50"]
        assert sweep(*argv) == 0
        asked = len(judge.requests)
    # the baseline answers alike with and without CoT: each distinct answer is judged once, shared
    verdicts = [json.loads(line) for cell in out.glob("*/scores.jsonl") for line in cell.read_text().splitlines()]
    assert len(verdicts) == 6 and all(v["verdict"] in ("C", "I") for v in verdicts)
    assert asked == len({(v["id"], v["parsed"]) for v in verdicts if v["decided_by"] == "judge"}) <= 3
    text = (out / "report.md").read_text()
    section = text.split("VQA accuracy by VQA category with and without chain of thought")[1]
    categories = {v["vqa_category"] for v in verdicts}
    for category in categories:
        assert table_rows(section, f"baseline:random · 1 view · {category}"), category
    assert (out / "cot_vqa.png").stat().st_size > 20_000


def test_a_vqa_sweep_without_a_judge_is_one_error_line(release, tmp_path, capsys):
    argv = ["--model", "baseline:random", "--task", "vqa", "--dataset", str(release), "--out", str(tmp_path / "s")]
    assert sweep(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--judge" in err and err.count("\n") == 1
