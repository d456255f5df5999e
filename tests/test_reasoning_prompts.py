"""Each task's chain-of-thought prompt: the paper's three steps, then the answer on a marked last line
in the task's own format, and no direct-answer rule to contradict them. Direct prompts are unchanged."""

from __future__ import annotations

import json

import pytest

from eval import prompts, tasks
from metrics.dining_accuracy.core import parse_choice
from metrics.judge_accuracy.core import final_answer
from metrics.nutrition_error.core import parse_nutrition

OPTIONS = ["宫保鸡丁", "鱼香肉丝", "麻婆豆腐"]


def all_cot_prompts() -> list[tuple[str, str, str]]:
    return [(task, lang, tasks.task_prompt(task, lang, cot=True, options=OPTIONS, question="这道菜辣吗？"))
            for task in ("classification", "nutrition", "vqa") for lang in ("zh", "en")]


@pytest.mark.parametrize("task, lang, text", all_cot_prompts())
def test_cot_prompts_have_the_three_steps_and_a_marked_last_line(task, lang, text):
    steps = ("视觉观察", "食材拆解", "综合作答") if lang == "zh" else (
        "Visual observation", "Ingredient breakdown", "Comprehensive answer")
    assert all(step in text for step in steps)
    assert prompts.FINAL_MARKER[lang].strip() in text
    # Never a direct-answer rule beside the reasoning one.
    for contradiction in ("只输出一个", "不要输出任何描述", "Output only", "without any description"):
        assert contradiction not in text


def test_the_classification_cot_answer_is_a_final_answer_letter():
    text = prompts.classification_prompt(OPTIONS, "en", cot=True)
    assert "A. 宫保鸡丁" in text and "one of A, B, C" in text
    assert parse_choice("1. Red oil, diced chicken...\n2. Peanuts, chili...\n3. Kung pao.\nFinal answer: A") == "A"
    assert parse_choice("1. 红油……\n2. 花生……\n3. 宫保鸡丁。\n最终答案：A") == "A"


def test_the_nutrition_cot_answer_ends_with_the_json_object():
    text = prompts.nutrition_prompt("zh", cot=True)
    assert "JSON" in text and text.index("最终答案") < text.index('{"calories"')
    reply = ('1. 米饭约200克……\n2. 猪肉、青椒……\n3. 估算如下。\n最终答案：'
             + json.dumps({"calories": 650, "protein": 28, "carbohydrates": 80, "fat": 22}))
    assert parse_nutrition(reply) == {"calories": 650.0, "protein": 28.0, "carbohydrates": 80.0, "fat": 22.0}


def test_the_vqa_cot_answer_is_what_the_judge_reads():
    assert "这道菜辣吗？" in prompts.vqa_prompt("这道菜辣吗？", "zh", cot=True)
    assert final_answer("1. 红油……\n2. 干辣椒……\n3. 辣。\nFinal answer: Yes, quite spicy.").endswith(
        "Yes, quite spicy.")


def test_direct_prompts_are_the_papers_and_the_version_moved():
    assert prompts.PROMPT_VERSION == "diningbench-prompts-v2"
    assert prompts.classification_prompt(OPTIONS, "zh") == (
        "请仔细观察图片中的菜品，从以下选项中选出图片中菜品的正确名称。\nA. 宫保鸡丁\nB. 鱼香肉丝\nC. 麻婆豆腐\n"
        "你的回答只能是一个大写英文字母（A、B、C之一），不要输出任何描述、解释或选项字母以外的内容。")
    assert prompts.nutrition_prompt("en").startswith("Estimate the nutrition of one serving")
    assert tasks.task_prompt("vqa", "en", question="Spicy?") == prompts.vqa_prompt("Spicy?", "en")
    with pytest.raises(ValueError):
        tasks.task_prompt("classification", "en", cot=True)
