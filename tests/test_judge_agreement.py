"""`python -m eval judge-agreement RUN --judges A,B`: pairwise agreement and Cohen's kappa (hand
computed below), the rule against each judge, human labels as one more rater, and the report line."""

from __future__ import annotations

import json

import pytest

import diningbench
from eval import api
from eval.agreement import cohen_kappa, judge_agreement, parse_judge_spec
from eval.cli import main
from eval.report.report import build_report
from eval.report.runs import load_run
from eval.settings import RunSettings
from eval.types import Response
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import _common, classification_rows, nutrition_rows

CLOSED_Q, CLOSED_REF = "这道菜是否适合素食者？", "不适合，酱汁里有猪油。"
# id: (merchant, question, reference, the model's answer). v5 is closed-form: the rule decides it (C);
# v6 has no answer: "I" for everybody, left out of the comparison.
ITEMS = {
    "v1": ("m1", "这道菜用了什么烹饪方法？", "清蒸。", "ZZGOOD 清蒸"),
    "v2": ("m1", "这道菜用了什么烹饪方法？", "红烧。", "ZZOK 炖"),
    "v3": ("m2", "这道菜用了什么烹饪方法？", "油炸。", "ZZBAD 凉拌"),
    "v4": ("m2", "份量和参考图相比如何？", "少约三分之一。", "ZZGOOD 少一些"),
    "v5": ("m3", CLOSED_Q, CLOSED_REF, "不适合，因为有猪油。"),
    "v6": ("m3", "这道菜用了什么烹饪方法？", "清炒。", ""),
}


def strict_judge(prompt: str) -> str:
    return "GRADE: C" if "ZZGOOD" in prompt else "GRADE: I"


def lenient_judge(prompt: str) -> str:
    return "GRADE: C" if "ZZGOOD" in prompt or "ZZOK" in prompt else "GRADE: I"


class Answerer:
    spec = "fake:answerer"

    async def generate(self, request):
        return Response(text=ITEMS[request.id][3], finish_reason="stop")

    def describe(self):
        return {"spec": self.spec}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agreement")
    rows = [{**_common(60 + i, item_id, merchant, "主菜", 2), "question": q, "question_en": q, "answer": ref,
             "answer_en": ref, "rationale": "因为", "rationale_en": "because", "vqa_category": "cuisine_technique"}
            for i, (item_id, (merchant, q, ref, _)) in enumerate(ITEMS.items())]
    others = {"classification": classification_rows(), "nutrition": nutrition_rows(), "vqa": rows}
    release = diningbench.write_release(folder / "release", {c: (len(r), iter(r)) for c, r in others.items()})
    settings = RunSettings(task="vqa", model="baseline:first", dataset=str(release), out=folder / "run", n_boot=50)
    return api.run(settings, backend=Answerer(), progress=False)


def test_kappa_by_hand():
    assert cohen_kappa("CCCCC", "CCCCC") is None  # one verdict throughout: chance agreement is 1
    assert cohen_kappa("CI", "IC") == pytest.approx(-1.0)
    assert cohen_kappa("CCIICI", "CCIICI") == pytest.approx(1.0)


def test_pairwise_agreement_kappa_and_rule_check(run_dir):
    calls = []

    def counted(judge):
        def call(prompt):
            calls.append(prompt)
            return judge(prompt)
        return call

    result = judge_agreement(run_dir, {"strict": counted(strict_judge), "lenient": counted(lenient_judge)}, n_boot=200)
    assert (result["items"], result["judged"], result["no_answer"], result["rule_decided"]) == (6, 5, 1, 1)
    pair = result["pairs"][0]
    # strict C I I C C(rule), lenient C C I C C(rule): po 4/5; pe .6*.8 + .4*.2 = .56 -> .24 / .44
    assert (pair["a"], pair["b"], pair["n"]) == ("strict", "lenient", 5)
    assert pair["agreement"] == pytest.approx(0.8) and pair["kappa"] == pytest.approx(0.24 / 0.44)
    low, high = pair["agreement_ci95"]
    assert 0 <= low <= 0.8 <= high <= 1
    # the rule says C on v5; asked too, both judges say I
    assert [(c["judge"], c["n"], c["agreement"]) for c in result["rule_vs_judge"]] == [("strict", 1, 0.0),
                                                                                      ("lenient", 1, 0.0)]
    assert result["accuracy"] == {"strict": 0.6, "lenient": 0.8}
    assert {d["id"] for d in result["disagreements"]} == {"v2", "v5"}
    assert len(calls) == 10  # 4 open answers + v5, per judge; v6 has nothing to judge

    again = judge_agreement(run_dir, {"strict": counted(strict_judge), "lenient": counted(lenient_judge)},
                            judge_all=True, n_boot=50)
    assert len(calls) == 10  # every verdict came from the run folder's cache
    pair = again["pairs"][0]  # strict C I I C I, lenient C C I C I: po .8, pe .4*.6 + .6*.4 = .48
    assert pair["kappa"] == pytest.approx(0.32 / 0.52)


def test_human_labels_are_one_more_rater(run_dir):
    labels = {"v1": "C", "v2": "C", "v3": "I", "v4": "I", "v5": "C"}
    result = judge_agreement(run_dir, {"strict": strict_judge}, human_labels=labels, n_boot=50)
    pair = result["pairs"][0]  # strict C I I C C vs human C C I I C
    assert (pair["a"], pair["b"], pair["agreement"]) == ("strict", "human", pytest.approx(0.6))
    # po .6; strict C .6, human C .6: pe .36 + .16 = .52 -> .08 / .48
    assert pair["kappa"] == pytest.approx(0.08 / 0.48)


def test_one_rater_is_refused(run_dir):
    with pytest.raises(ValueError, match="two raters"):
        judge_agreement(run_dir, {"strict": strict_judge})


def test_judge_spec_may_name_its_server():
    assert parse_judge_spec("openai:a@http://127.0.0.1:8000/v1") == ("openai:a", "http://127.0.0.1:8000/v1")
    assert parse_judge_spec(" openai:gpt-4o ") == ("openai:gpt-4o", None)


def test_cli_over_two_fake_servers_and_the_report_line(run_dir, tmp_path, capsys):
    with FakeOpenAIServer(lambda r: strict_judge(r.prompt)) as one, \
            FakeOpenAIServer(lambda r: lenient_judge(r.prompt)) as two:
        labels = tmp_path / "labels.jsonl"
        labels.write_text("".join(json.dumps({"id": k, "verdict": v}) + "\n" for k, v in
                                  {"v1": "C", "v2": "C", "v3": "I", "v4": "C", "v5": "C"}.items()))
        code = main(["judge-agreement", str(run_dir), "--judges",
                     f"openai:strict@{one.base_url},openai:lenient@{two.base_url}",
                     "--human-labels", str(labels), "--n-boot", "50"])
        assert code == 0
        printed = capsys.readouterr().out
        assert "| openai:strict | openai:lenient | 5 | 80.00" in printed and "Cohen's κ" in printed
        saved = json.loads((run_dir / "judge_agreement.json").read_text())
        assert saved["servers"] == {"openai:strict": f"127.0.0.1:{one.port}", "openai:lenient": f"127.0.0.1:{two.port}"}
        assert "http" not in json.dumps(saved["servers"])  # hosts only, never URLs
        api.score(run_dir, judge="openai:strict", judge_base_url=one.base_url)
    report = build_report([load_run(run_dir)], reported=False, n_boot=50)
    assert "judged by openai:strict; 1 of 6 verdicts decided by the deterministic rule" in report
    assert "openai:strict vs openai:lenient 80.00%" in report


def test_a_judge_agreement_file_from_elsewhere_is_read_bounded_and_checked(run_dir, tmp_path):
    """A run folder may come from anywhere: its judge_agreement.json is shown only where it holds what the
    report prints (pairs of named raters with numbers), and a link out of the folder or a file nested past
    the JSON depth limit is not read at all; the report still builds."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    with FakeOpenAIServer(lambda r: strict_judge(r.prompt)) as server:
        api.score(folder, judge="openai:strict", judge_base_url=server.base_url)
    agreement = folder / "judge_agreement.json"
    good = {"a": "openai:strict", "b": "human", "n": 5, "agreement": 0.8, "kappa": None}
    agreement.write_text(json.dumps({"pairs": [good, "x", {"a": "openai:strict", "b": ["z"], "n": 5, "agreement": 1},
                                               {"a": "openai:strict", "b": "y", "n": 5, "agreement": "all"}, {}]}))
    report = build_report([load_run(folder)], reported=False, n_boot=50)
    assert "judge agreement openai:strict vs human 80.00%." in report and " vs y " not in report
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"pairs": [{**good, "b": "secret-file"}]}))
    agreement.unlink()
    agreement.symlink_to(outside)
    assert "secret-file" not in build_report([load_run(folder)], reported=False, n_boot=50)
    agreement.unlink()
    agreement.write_text('{"pairs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "judge agreement" not in build_report([load_run(folder)], reported=False, n_boot=50)
