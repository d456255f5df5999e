"""The task prompts (the paper's protocol, Figures 6-8 and Table 5), in zh (default) and en.

Prompts are versioned: any change to a template below must bump PROMPT_VERSION, which goes into
every request hash (so a changed prompt is a new run, never mixed with old answers) and run.json.
"""

from __future__ import annotations

from collections.abc import Sequence

PROMPT_VERSION = "diningbench-prompts-v1"

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# Classification (Figure 6): forced choice, a lone uppercase letter and nothing else.
_CLASSIFICATION = {
    "zh": ("请仔细观察图片中的菜品，从以下选项中选出图片中菜品的正确名称。\n{options}\n"
           "你的回答只能是一个大写英文字母（{letters}之一），不要输出任何描述、解释或选项字母以外的内容。"),
    "en": ("Look carefully at the dish in the images and choose its correct name from the options below.\n"
           "{options}\nYour answer should only be a single uppercase English letter (one of {letters}), "
           "without any description, explanation, or content other than the option letter."),
}

# Nutrition (Figure 7): one JSON object per serving; kcal and grams.
_NUTRITION = {
    "zh": ("请根据图片估计这份菜品（一份）的营养成分。只输出一个 JSON 对象，格式如下：\n"
           '{"calories": 数值, "protein": 数值, "carbohydrates": 数值, "fat": 数值}\n'
           "热量（calories）单位为千卡（kcal），蛋白质、碳水化合物和脂肪单位为克（g），均为每份的数值。"),
    "en": ("Estimate the nutrition of one serving of the dish in the images. Output only one JSON object "
           'in this format:\n{"calories": number, "protein": number, "carbohydrates": number, "fat": number}\n'
           "All units are grams or kilocalories per serving: calories in kcal; protein, carbohydrates "
           "and fat in g."),
}

# VQA (Figure 8): the question itself, answered concisely.
_VQA = {
    "zh": "请根据图片回答以下问题，回答要简洁明确。\n问题：{question}",
    "en": "Answer the following question based on the images. Be concise and definite.\nQuestion: {question}",
}

# Chain of thought (Table 5): visual observation -> ingredient breakdown -> answer on a marked last line.
FINAL_MARKER = {"zh": "最终答案：", "en": "Final answer: "}
_COT = {
    "zh": ("请按以下三个步骤思考后作答：\n"
           "1. 视觉观察：描述食物的颜色、形状、质地、摆盘特征以及推断的烹饪状态。\n"
           "2. 食材拆解：详细识别并列出主料、辅料、调味料和酱汁成分。\n"
           "3. 综合作答：结合原始图片内容以及上述观察和拆解回答问题。\n"
           "最后一行必须以“最终答案：”开头，后面紧跟符合下述任务要求格式的答案。\n\n任务：\n"),
    "en": ("Think through the following three steps before answering:\n"
           "1. Visual observation: describe the food's color, shape, texture, plating characteristics, "
           "and inferred cooking state.\n"
           "2. Ingredient breakdown: identify and list the main ingredients, auxiliary ingredients, "
           "seasonings, and sauce components in detail.\n"
           "3. Comprehensive answer: answer the question based on the original image content and the "
           "observations and breakdown above.\n"
           "The last line must start with \"Final answer: \" followed by the answer in the format the "
           "task below asks for.\n\nTask:\n"),
}


def classification_prompt(options: Sequence[str], lang: str) -> str:
    """The Figure 6 prompt: options listed as `A. name` lines; letters derived from their count."""
    letters = LETTERS[: len(options)]
    listed = "\n".join(f"{letter}. {name}" for letter, name in zip(letters, options, strict=True))
    sep = "、" if lang == "zh" else ", "
    return _CLASSIFICATION[lang].format(options=listed, letters=sep.join(letters))


def nutrition_prompt(lang: str) -> str:
    return _NUTRITION[lang]


def vqa_prompt(question: str, lang: str) -> str:
    return _VQA[lang].format(question=question)


def with_cot(prompt: str, lang: str) -> str:
    """Prepend the three-step template; the task's own format rules then apply to the final line."""
    return _COT[lang] + prompt
