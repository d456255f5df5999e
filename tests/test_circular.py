"""`run --circular`: every option rotation asked, rotation 0 reused, circular accuracy and a
chi-square test of position bias (p-values from our own incomplete gamma function)."""

from __future__ import annotations

import json
import math

import pytest

from diningbench import chi_square_sf, position_bias, regularized_gamma_q
from eval import api
from eval.circular import circular_figures
from eval.report.report import build_report
from eval.report.runs import ReportError, load_run
from eval.settings import RunSettings, UsageError
from eval.tasks import rotate_options
from eval.types import Prediction, Response
from tests.helpers_harness import CLASSIFICATION_ANSWERS, make_release, read_jsonl


class DishKnower:
    """Names the right dish (option text, which the parser maps to the letter shown), or always says A."""

    spec = "fake:knower"

    def __init__(self, always_a: bool = False) -> None:
        self.always_a, self.calls = always_a, 0

    async def generate(self, request):
        self.calls += 1
        if self.always_a:
            return Response(text="答案：A", finish_reason="stop")
        i = int(request.id[1:]) - 1
        return Response(text=f"菜品{i}-{ord(CLASSIFICATION_ANSWERS[i]) - ord('A')}", finish_reason="stop")

    def describe(self):
        return {"spec": self.spec}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return make_release(tmp_path_factory.mktemp("release") / "diningbench")


@pytest.mark.parametrize(("statistic", "df", "p"), [(7.815, 3, 0.05), (14.067, 7, 0.05), (3.841, 1, 0.05),
                                                      (6.635, 1, 0.01), (18.475, 7, 0.01), (100.0, 50, 3.4549e-05),
                                                      (0.5, 10, 0.99999339)])
def test_chi_square_p_values_match_the_tables(statistic, df, p):
    assert chi_square_sf(statistic, df) == pytest.approx(p, rel=2e-3)


def test_incomplete_gamma_matches_closed_forms_on_both_branches():
    for x in (0.1, 1.0, 2.9, 3.1, 10.0, 40.0):  # below and above a + 1: series and continued fraction
        assert regularized_gamma_q(1.0, x) == pytest.approx(math.exp(-x), rel=1e-12)
        assert regularized_gamma_q(0.5, x) == pytest.approx(math.erfc(math.sqrt(x)), rel=1e-9)
    assert regularized_gamma_q(3.0, 0.0) == 1.0


def test_rotation_moves_the_answer_letter_with_its_option():
    row = {"id": "x", "options": [f"dish {k}" for k in range(8)], "options_en": [f"d{k}" for k in range(8)],
           "answer": "C"}
    for rotation in range(8):
        rotated = rotate_options(row, rotation)
        assert rotated["options"][ord(rotated["answer"]) - ord("A")] == "dish 2"
        assert rotated["options_en"][ord(rotated["answer"]) - ord("A")] == "d2"
    assert sorted(rotate_options(row, r)["answer"] for r in range(8)) == list("ABCDEFGH")
    assert rotate_options(row, 0) is row


def test_position_bias_by_hand():
    # 2-option items: A picked 3 times of 4; expected 2 and 2 -> (3-2)²/2 + (1-2)²/2 = 1, df 1
    result = position_bias(["A", "A", "A", "B", None], [2, 2, 2, 2, 2])
    assert result["n_answers"] == 4 and result["statistic"] == 1.0 and result["df"] == 1
    assert result["p_value"] == pytest.approx(0.3173, abs=1e-4)


def test_circular_accuracy_by_hand():
    plain = [{"id": "a", "merchant_id": "m1", "correct": True, "parsed": "A"},
             {"id": "b", "merchant_id": "m2", "correct": True, "parsed": "B"},
             {"id": "c", "merchant_id": "m2", "correct": False, "parsed": "A"}]
    rotated = [{"id": "a", "rotation": 1, "n_options": 2, "merchant_id": "m1", "correct": True, "parsed": "B"},
               {"id": "b", "rotation": 1, "n_options": 2, "merchant_id": "m2", "correct": False, "parsed": "B"},
               {"id": "c", "rotation": 1, "n_options": 2, "merchant_id": "m2", "correct": True, "parsed": "A"}]
    found = circular_figures(plain, rotated, n_boot=50)
    assert found["items"] == 3 and found["rotations"] == 2
    assert found["circular_accuracy"] == pytest.approx(1 / 3) and found["accuracy"] == pytest.approx(2 / 3)
    assert found["position_bias"]["pick_rate"] == {"A": 0.5, "B": 0.5}
    assert circular_figures(plain, []) is None


def test_circular_run_reuses_rotation_zero_and_scores_every_rotation(release, tmp_path):
    settings = RunSettings(task="classification", model="baseline:first", dataset=str(release), out=tmp_path / "run",
                           n_boot=50)
    knower = DishKnower()
    api.run(settings, backend=knower, progress=False)
    plain_hashes = {r["id"]: r["request_hash"] for r in read_jsonl(tmp_path / "run" / "predictions.jsonl")}
    settings.circular = True
    api.run(settings, backend=knower, progress=False)
    assert knower.calls == 6 + 6 * 7  # rotation 0 was already answered
    lines = read_jsonl(tmp_path / "run" / "predictions.jsonl")
    assert sorted((r["id"], r["rotation"]) for r in lines) == sorted((f"c{i}", k) for i in range(1, 7) for k in range(8))
    assert {r["id"]: r["request_hash"] for r in lines if r["rotation"] == 0} == plain_hashes
    assert len({r["request_hash"] for r in lines}) == 48
    assert len(read_jsonl(tmp_path / "run" / "scores.jsonl")) == 6  # one line per item, as stored
    assert len(read_jsonl(tmp_path / "run" / "rotations.jsonl")) == 42
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())["classification"]
    assert metrics["accuracy"] == 1.0 and metrics["circular_accuracy"] == 1.0 and metrics["n"] == 6
    assert metrics["circular"]["position_bias"]["statistic"] == 0.0  # the right dish sits everywhere once
    api.run(settings, backend=knower, progress=False)  # the same command again: nothing asked
    assert knower.calls == 48


def test_a_position_biased_model_fails_circular_eval(release, tmp_path):
    settings = RunSettings(task="classification", model="baseline:first", dataset=str(release), out=tmp_path / "run",
                           n_boot=50, circular=True, epochs=2)
    model = DishKnower(always_a=True)
    out = api.run(settings, backend=model, progress=False)
    assert model.calls == 6 * 8 * 2
    metrics = json.loads((out / "metrics.json").read_text())["classification"]
    assert metrics["accuracy"] == 0.5  # A is right for c1, c3, c5 as stored
    assert metrics["circular_accuracy"] == 0.0 and metrics["circular"]["items"] == 12  # items x epochs
    bias = metrics["circular"]["position_bias"]
    # 96 answers, all A; expected 12 per position: (96-12)²/12 + 7 * 12 = 672
    assert bias["pick_rate"]["A"] == 1.0 and bias["statistic"] == 672.0 and bias["df"] == 7
    assert bias["p_value"] < 1e-100
    report = build_report([load_run(out)], reported=False, n_boot=50)
    assert "## Option-order robustness (CircularEval)" in report and "| A 100.00 |" in report


def test_old_prediction_lines_read_as_rotation_zero():
    old = {"id": "c1", "task": "classification", "raw": "A", "parsed": "A", "error": None, "attempts": 1,
           "latency_s": 0.1, "usage": None, "request_hash": "h"}
    assert Prediction.from_json(old).rotation == 0 and Prediction.from_json(old).epoch == 0


def test_circular_needs_classification():
    with pytest.raises(UsageError, match="--circular"):
        RunSettings(task="nutrition", model="baseline:first", circular=True).validate()


def test_a_rotations_file_from_elsewhere_is_read_bounded_and_checked(release, tmp_path):
    """A run folder may come from anywhere: rotations.jsonl lines whose counts are not small whole numbers are
    left out (an option count of a billion once made the report build a set of a billion rotations), as is the
    file when it is a link out of the folder; a scores.jsonl line with such a count is refused by its reader."""
    settings = RunSettings(task="classification", model="baseline:first", dataset=str(release), out=tmp_path / "run",
                           n_boot=50, circular=True)
    api.run(settings, backend=DishKnower(), progress=False)
    run = tmp_path / "run"
    honest = build_report([load_run(run)], reported=False, n_boot=50)
    lines = read_jsonl(run / "rotations.jsonl")
    hostile = [{**lines[0], "n_options": 10**9}, {**lines[1], "rotation": "x"}, {**lines[2], "epoch": -1},
               {**lines[3], "correct": "yes"}, {"id": ["c1"], "rotation": 1}]
    (run / "rotations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*lines, *hostile]))
    assert build_report([load_run(run)], reported=False, n_boot=50) == honest
    assert "| baseline:first | 6 | 100.00 | 100.00" in honest
    scores = read_jsonl(run / "scores.jsonl")
    plain = [{**r, "n_options": 10**9} if k == 0 else r for k, r in enumerate(scores)]
    figures = circular_figures(plain, lines, n_boot=50)  # the figures alone leave such an item out
    assert figures is not None and (figures["items"], figures["incomplete"]) == (5, 1)
    (run / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in plain))
    with pytest.raises(ReportError, match="scores.jsonl line 1: has `n_options` '1000000000'"):
        load_run(run)  # and the reader refuses the line, naming it
    (run / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    outside = tmp_path / "elsewhere.jsonl"
    (run / "rotations.jsonl").rename(outside)
    (run / "rotations.jsonl").symlink_to(outside)
    assert "## Option-order robustness" in honest
    assert "## Option-order robustness" not in build_report([load_run(run)], reported=False, n_boot=50)
