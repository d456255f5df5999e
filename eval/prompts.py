"""The task prompts (the paper's protocol, Figures 6-8 and Table 5), in zh (default) and en, each direct
or chain-of-thought (`cot=True`). Any change to a template below must bump PROMPT_VERSION."""

from __future__ import annotations

from collections.abc import Sequence

from eval.types import ALPHABET

# In every request hash (a changed prompt is a new run, never mixed with old answers) and in run.json.
PROMPT_VERSION = "diningbench-prompts-v2"  # v2: each task has its own CoT prompt

# What a classification prompt asks, and what a nutrition prompt asks and the answer's format: the direct
# and chain-of-thought prompts share them.
_CHOOSE = {
    "zh": "请仔细观察图片中的菜品，从以下选项中选出图片中菜品的正确名称。\n{options}\n",
    "en": "Look carefully at the dish in the images and choose its correct name from the options below.\n{options}\n",
}
_ESTIMATE = {"zh": "请根据图片估计这份菜品（一份）的营养成分。", "en": "Estimate the nutrition of one serving of the dish in the images."}
_JSON_FORMAT = {
    "zh": ('{"calories": 数值, "protein": 数值, "carbohydrates": 数值, "fat": 数值}\n'
           "热量（calories）单位为千卡（kcal），蛋白质、碳水化合物和脂肪单位为克（g），均为每份的数值。"),
    "en": ('{"calories": number, "protein": number, "carbohydrates": number, "fat": number}\n'
           "All units are grams or kilocalories per serving: calories in kcal; protein, carbohydrates "
           "and fat in g."),
}

# Classification (Figure 6): forced choice, a lone uppercase letter and nothing else.
_CLASSIFICATION = {
    "zh": _CHOOSE["zh"] + "你的回答只能是一个大写英文字母（{letters}之一），不要输出任何描述、解释或选项字母以外的内容。",
    "en": _CHOOSE["en"] + ("Your answer should only be a single uppercase English letter (one of {letters}), "
                           "without any description, explanation, or content other than the option letter."),
}

# Nutrition (Figure 7): one JSON object per serving; kcal and grams.
_NUTRITION = {
    "zh": _ESTIMATE["zh"] + "只输出一个 JSON 对象，格式如下：\n" + _JSON_FORMAT["zh"],
    "en": _ESTIMATE["en"] + " Output only one JSON object in this format:\n" + _JSON_FORMAT["en"],
}

# VQA (Figure 8): the question itself, answered concisely.
_VQA = {
    "zh": "请根据图片回答以下问题，回答要简洁明确。\n问题：{question}",
    "en": "Answer the following question based on the images. Be concise and definite.\nQuestion: {question}",
}

# Chain of thought (Table 5): the paper's three steps, then the answer on a marked last line in the
# task's own format. A CoT prompt never also says "answer with only a letter": the two contradict.
FINAL_MARKER = {"zh": "最终答案：", "en": "Final answer: "}  # every CoT template below names it
_STEPS = {
    "zh": ("请按以下三个步骤思考后作答：\n"
           "1. 视觉观察：描述食物的颜色、形状、质地、摆盘特征以及推断的烹饪状态。\n"
           "2. 食材拆解：详细识别并列出主料、辅料、调味料和酱汁成分。\n"
           "3. 综合作答：结合原始图片内容以及上述观察和拆解回答问题。\n"),
    "en": ("Think through the following three steps before answering:\n"
           "1. Visual observation: describe the food's color, shape, texture, plating characteristics, "
           "and inferred cooking state.\n"
           "2. Ingredient breakdown: identify and list the main ingredients, auxiliary ingredients, "
           "seasonings, and sauce components in detail.\n"
           "3. Comprehensive answer: answer the question based on the original image content and the "
           "observations and breakdown above.\n"),
}
_COT_CLASSIFICATION = {
    "zh": _CHOOSE["zh"] + _STEPS["zh"] + "最后一行只写“" + FINAL_MARKER["zh"] + "”和你选择的那一个大写英文字母（{letters}之一），不要写其他内容。",
    "en": (_CHOOSE["en"] + _STEPS["en"] + "The last line must be \"" + FINAL_MARKER["en"] + "\" followed by the single "
           "uppercase English letter you choose (one of {letters}), and nothing else."),
}
_COT_NUTRITION = {
    "zh": _ESTIMATE["zh"] + "\n" + _STEPS["zh"] + "最后一行写“" + FINAL_MARKER["zh"] + "”，后面紧跟一个 JSON 对象，格式如下：\n" + _JSON_FORMAT["zh"],
    "en": (_ESTIMATE["en"] + "\n" + _STEPS["en"] + "The last line must be \"" + FINAL_MARKER["en"]
           + "\" followed by one JSON object in this format:\n" + _JSON_FORMAT["en"]),
}
_COT_VQA = {
    "zh": "请根据图片回答以下问题。\n问题：{question}\n" + _STEPS["zh"] + "最后一行以“" + FINAL_MARKER["zh"] + "”开头，后面紧跟简洁明确的回答。",
    "en": ("Answer the following question based on the images.\nQuestion: {question}\n" + _STEPS["en"]
           + "The last line must start with \"" + FINAL_MARKER["en"] + "\" followed by a concise, definite answer."),
}


def classification_prompt(options: Sequence[str], lang: str, *, cot: bool = False) -> str:
    """The Figure 6 prompt: options listed as `A. name` lines; letters derived from their count. With `cot`,
    the three steps come before the answer, which is a `Final answer: C` last line."""
    letters = ALPHABET[: len(options)]
    listed = "\n".join(f"{letter}. {name}" for letter, name in zip(letters, options, strict=True))
    sep = "、" if lang == "zh" else ", "
    return (_COT_CLASSIFICATION if cot else _CLASSIFICATION)[lang].format(options=listed, letters=sep.join(letters))


def nutrition_prompt(lang: str, *, cot: bool = False) -> str:
    """The Figure 7 prompt; with `cot`, the JSON object comes last, after the three steps."""
    return (_COT_NUTRITION if cot else _NUTRITION)[lang]


def vqa_prompt(question: str, lang: str, *, cot: bool = False) -> str:
    """The Figure 8 prompt; with `cot`, the answer is a `Final answer: ...` last line."""
    return (_COT_VQA if cot else _VQA)[lang].format(question=question)

