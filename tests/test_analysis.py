"""`python -m eval analyze RUN [RUN ...]`: difficulty, distractors, nutrition error direction, loops
and truncation, thinking vs instruct, each checked on cases small enough to count by hand."""

from __future__ import annotations

import json

import pytest

from diningbench import portion_grams
from eval import api
from eval.analysis import (
    analyze,
    difficulty_bin,
    loops,
    mode_pair_key,
    nutrition_direction,
    portion_bins,
)
from eval.report.runs import load_run
from eval.settings import RunSettings
from eval.types import Response
from tests.helpers_harness import CLASSIFICATION_ANSWERS, make_release

LOOP = "让我仔细看看这道菜。" + "好的，" * 2000


class Picker:
    """Answers each classification item with a fixed letter; the first item loops until cut off."""

    def __init__(self, spec: str, letters: str) -> None:
        self.spec, self.letters = spec, letters

    async def generate(self, request):
        i = int(request.id[1:]) - 1
        if i == 0 and "Instruct" in self.spec:
            return Response(text=LOOP, finish_reason="length")
        return Response(text=f"答案：{self.letters[i]}", finish_reason="stop")

    def describe(self):
        return {"spec": self.spec}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    release = make_release(root / "release")
    folders = []
    # answers A B A C A D; thinking gets c1-c4 right, instruct c2 and c5 (c1 loops)
    for spec, letters in (("vllm:Fam-8B-Thinking", "ABACBB"), ("vllm:Fam-8B-Instruct", "ABBBAB")):
        settings = RunSettings(task="classification", model=spec, dataset=str(release), out=root / spec[5:], n_boot=50)
        folders.append(api.run(settings, backend=Picker(spec, letters), progress=False))
    return folders


def test_pure_pieces_by_hand():
    assert portion_grams("1份，约320克") == 320.0 and portion_grams("about 1.2 kg") == 1200.0
    assert portion_grams("一碗") is None
    # the 克 of a Chinese portion may run straight into more text; the market 斤 and 两 are 500 g and 50 g
    assert portion_grams("约450克不含汤") == 450.0 and portion_grams("半斤约1斤") == 500.0 and portion_grams("2两") == 100.0
    assert loops(LOOP) and not loops("这是一碗牛肉面，汤底清澈，面条劲道，配有青菜和卤蛋。" * 2)
    assert difficulty_bin(0.5) == "medium" and difficulty_bin(1.0) == "every run right"
    assert mode_pair_key("vllm:Fam-8B-Instruct") == ("vllm:Fam-8B", "instruct")
    rows = [{"parsed": {"protein": 12}, "reference": {"protein": 10}},
            {"parsed": {"protein": 5}, "reference": {"protein": 10}},
            {"parsed": {"protein": 1}, "reference": {"protein": 0}},  # reference 0: left out
            {"parsed": None, "reference": {"protein": 10}}]  # unparsed: left out
    direction = nutrition_direction(rows)["protein"]
    assert direction == {"n": 2, "over": 0.5, "under": 0.5, "median_signed": pytest.approx(-0.15)}


def test_portion_bins_fall_back_to_calories_when_grams_are_missing():
    rows = [{"id": str(i), "reference": {"calories": kcal}} for i, kcal in enumerate((100, 350, 650, 950))]
    measure, groups = portion_bins(rows, {str(i): "1 份" for i in range(4)})
    assert measure.startswith("reference calories") and [len(g) for _, g in groups] == [1, 1, 1, 1]
    measure, groups = portion_bins(rows, {str(i): f"约{100 * (i + 1)}克" for i in range(4)})
    assert measure.startswith("portion (grams") and sum(len(g) for _, g in groups) == 4


def test_analysis_of_a_thinking_and_an_instruct_run(runs, tmp_path):
    text = analyze(runs, out=tmp_path, n_boot=50)
    # difficulty: c1 1/2, c2 2/2, c3 1/2, c4 1/2, c5 1/2, c6 0/2
    assert "| classification | 6 | 1 | 0 | 4 | 0 | 1 |" in text
    # wrong picks: thinking c5 B, c6 B; instruct c1 unparsed, c3 B, c4 B, c6 B
    assert "| 菜品5-1 | 2 |" in text  # c6's option B chosen by both runs
    assert "| 菜品5-3 | 菜品5-1 | 2 |" in text  # c6: correct D, chosen B, twice
    assert "| vllm:Fam-8B-Instruct | classification | 6 | 1 | 1 | 1 |" in text  # c1 truncated while looping
    # thinking 4/6, instruct 2/6 on the same items: +33.33 pp
    assert "| vllm:Fam-8B | classification | 6 | 66.67 | 33.33 | +33.33 |" in text
    # the interval's words name what the runs recorded they resampled
    [recorded] = {json.loads((run / "metrics.json").read_text())["classification"]["resampled"] for run in runs}
    assert f"paired {recorded.removesuffix('s')} bootstrap." in text
    assert (tmp_path / "analysis.md").read_text() == text and (tmp_path / "analysis_difficulty.png").stat().st_size
    assert load_run(runs[0]).scores["classification"][0]["correct"] is True
    assert CLASSIFICATION_ANSWERS == ["A", "B", "A", "C", "A", "D"]
