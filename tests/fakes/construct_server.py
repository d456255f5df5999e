"""A fake VLM for the construction stages: the OpenAI-compatible fake, answering each stage's prompt
from the synthetic raw export's truth (synthetic/raw_export.py), which it alone knows.

It recognises a photo by the SHA-256 of the bytes it receives (small JPEGs travel as stored) and a
dish by its id or name, and answers as a careful model would, except where the truth plants a defect
that only a model can make: an ambiguous or too-easy classification item (found by one of the two
filter models), and VQA drafts that break a question rule, repeat another question or fail an audit.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from tests.fakes.base import RecordedRequest
from tests.fakes.openai_server import FakeOpenAIServer

ASPECTS = [("份量", "portion size"), ("主料数量", "amount of the main ingredient"), ("配菜完整性", "completeness of the sides"),
           ("摆盘", "plating"), ("酱汁用量", "amount of sauce"), ("米饭比例", "share of rice"), ("色泽", "colour"),
           ("装盘容器", "serving vessel"), ("配料种类", "variety of toppings"), ("堆叠高度", "height of the pile"),
           ("切配方式", "cutting style"), ("油量", "amount of oil")]
# Model-side defects: dish:category -> what the model gets wrong; classification dish -> (filter pass, verdict).
VQA_PLANTS = {"merchant-01-d0:cuisine_technique": "multiple_questions",
              "merchant-01-d1:multi_image_analysis": "describes_image",
              "merchant-02-d0:multi_image_analysis": "duplicate_of:merchant-01-d4:multi_image_analysis",
              "merchant-04-d0:multi_image_analysis": "audit1:false_premise",
              "merchant-02-d1:dietary_suggestion": "audit2:trivial"}
CLASSIFICATION_PLANTS = {"merchant-02-d3": (1, "ambiguous"), "merchant-03-d3": (2, "too_easy")}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ConstructOracle:
    def __init__(self, truth: dict[str, Any], filter_models: tuple[str, str]) -> None:
        self.truth = truth
        self.dishes = truth["dishes"]
        self.filter_models = filter_models
        self.photo_dishes = sorted({p["dish_id"] for p in truth["photos"].values() if p["shows"] == p["dish_id"]})
        self.en: dict[str, str] = {}
        self.generated: dict[str, str] = {}  # question -> dish:category
        self.calls: list[str] = []  # the task line of every prompt, for tests that count calls

    def __call__(self, request: RecordedRequest) -> str:
        task = request.prompt.split("\n", 1)[0]
        self.calls.append(task)
        handler = {"Task: photo quality check.": self.quality, "Task: reference matching.": self.matching,
                   "Task: hard-negative selection.": self.selection, "Task: classification item audit.": self.cls_filter,
                   "Task: nutrition estimation.": self.estimate, "Task: nutrition plausibility check.": self.plausible,
                   "Task: VQA audit.": self.audit, "Task: dish name glossary.": self.glossary,
                   "Task: translation to English.": self.translate}.get(task)
        if handler is None and task.startswith("Task: VQA generation"):
            handler = self.generate
        return json.dumps(handler(request), ensure_ascii=False) if handler else "I cannot help with that."

    # -- helpers
    def photo(self, data: bytes) -> dict[str, Any]:
        return self.truth["photos"][_sha(data)]

    def dish_of(self, request: RecordedRequest) -> dict[str, Any]:
        return self.dishes[self.photo(request.images[0])["dish_id"]]

    def pass_of(self, request: RecordedRequest) -> int:
        model = request.body.get("model")
        return 1 + self.filter_models.index(f"openai:{model}") if f"openai:{model}" in self.filter_models else 0

    # -- photos
    def quality(self, request: RecordedRequest) -> dict:
        bad = self.photo(request.images[0])["quality"] == "bad"
        return {"quality": "bad" if bad else "good", "reason": "blurred" if bad else "clear"}

    def matching(self, request: RecordedRequest) -> dict:
        ref, user = self.photo(request.images[0]), self.photo(request.images[1])
        same = user["shows"] == ref["dish_id"]
        return {"same_dish": same, "reason": "same components" if same else "a different dish"}

    # -- classification
    def selection(self, request: RecordedRequest) -> dict:
        ids = re.findall(r"^- (\S+): ", request.prompt, flags=re.M)
        target_name = re.search(r"^Target dish: (.+)$", request.prompt, flags=re.M).group(1)
        merchant = self.dishes[ids[0]]["merchant_id"]
        target = next(d for d in self.dishes.values() if d["merchant_id"] == merchant and d["name"] == target_name)
        rows, pool, names = [], [], set()
        for i in ids:
            d = self.dishes[i]
            excluded = ("same_as_target" if d["standard_name"] == target["standard_name"]
                        else "obviously_different" if d["odd"] else None)
            rows.append({"dish_id": i, "standard_name": d["standard_name"], "excluded": excluded})
            if not excluded and d["standard_name"] not in names:  # one item per standard name
                names.add(d["standard_name"])
                pool.append((-sum(d["slots"].get(s) == o for s, o in target["slots"].items()), i))
        return {"target_standard_name": target["standard_name"], "candidates": rows,
                "selected": [i for _, i in sorted(pool)[:7]]}

    def cls_filter(self, request: RecordedRequest) -> dict:
        dish = self.dish_of(request)
        planted = CLASSIFICATION_PLANTS.get(dish["dish_id"])
        if planted and planted[0] == self.pass_of(request):
            return {"verdict": planted[1], "reason": "planted"}
        return {"verdict": "pass", "reason": "close look-alikes"}

    # -- nutrition
    def estimate(self, request: RecordedRequest) -> dict:
        dish = self.dish_of(request)
        return {**dish["nutrition"], "ingredients": dish["ingredients"]}

    def plausible(self, request: RecordedRequest) -> dict:
        dish = self.dish_of(request)
        values = json.loads(re.search(r"^Labelled nutrition for one serving: (.+)$", request.prompt, flags=re.M).group(1))
        real = dish["nutrition"]["calories"]
        ok = abs(values["calories"] - real) <= 0.25 * real
        return {"plausible": ok, "reason": "fits the dish" if ok else "far too low for this amount of food"}

    # -- vqa
    def texts(self, dish_id: str, category: str) -> tuple[dict[str, str], dict[str, str]]:
        d = self.dishes[dish_id]
        aspect_zh, aspect_en = ASPECTS[self.photo_dishes.index(dish_id) % len(ASPECTS)]
        if category == "multi_image_analysis":
            zh = {"question": f"对比商家展示图与顾客实拍图，这份菜在{aspect_zh}上的差异意味着什么？",
                  "answer": "实拍的份量比展示图略少，热量随之略低。",
                  "rationale": f"观察两张图的{aspect_zh}，结合标称份量{d['grams']:.0f}克推断差异。"}
            en = {"question": f"Comparing the merchant photo with the customer photo, what does the difference in {aspect_en} imply?",
                  "answer": "The real serving is slightly smaller than advertised, so it has slightly fewer calories.",
                  "rationale": f"Compare the {aspect_en} in both photos against the stated {d['grams']:.0f} g portion."}
        elif category == "cuisine_technique":
            zh = {"question": f"从{aspect_zh}判断，这道菜采用了哪种主要烹饪方式？", "answer": f"{d['technique_zh']}。",
                  "rationale": f"观察{aspect_zh}的特征，对应{d['technique_zh']}。"}
            en = {"question": f"Judging from the {aspect_en}, which main cooking technique was used?",
                  "answer": f"{d['technique_en']}.", "rationale": f"The {aspect_en} points to {d['technique_en']}."}
        elif category == "dietary_suggestion":
            veg = not ({"meat", "seafood"} & set(d["tags"]))
            zh = {"question": f"考虑{aspect_zh}，不吃肉和海鲜的素食者能吃这道菜吗？", "answer": "可以。" if veg else "不可以。",
                  "rationale": "可见的蛋白质来源" + ("不是肉类或海鲜。" if veg else "是肉类或海鲜。")}
            en = {"question": f"Considering the {aspect_en}, can a vegetarian who eats no meat or seafood eat this dish?",
                  "answer": "Yes." if veg else "No.",
                  "rationale": "The visible protein is " + ("neither meat nor seafood." if veg else "meat or seafood.")}
        else:
            zh = {"question": f"如果{aspect_zh}减半，这道菜的口感会怎样变化？", "answer": "口感会更单薄。",
                  "rationale": f"{aspect_zh}决定了这道菜的层次感。"}
            en = {"question": f"If the {aspect_en} were halved, how would the dish's mouthfeel change?",
                  "answer": "It would feel thinner.", "rationale": f"The {aspect_en} carries the dish's layering."}
        planted = VQA_PLANTS.get(f"{dish_id}:{category}", "")
        if planted == "multiple_questions":
            zh["question"], en["question"] = zh["question"] + "为什么？", en["question"] + " Why?"
        elif planted == "describes_image":
            zh["question"] = "根据图中可以看到的金黄外皮，" + zh["question"]
            en["question"] = "Given the golden crust we can see, " + en["question"][0].lower() + en["question"][1:]
        elif planted.startswith("duplicate_of:"):
            zh, en = self.texts(*planted.split(":", 1)[1].split(":"))
        return zh, en

    def generate(self, request: RecordedRequest) -> dict:
        category = re.search(r"\((\w+)\)", request.prompt.split("\n", 1)[0]).group(1)
        dish_id = self.dish_of(request)["dish_id"]
        zh, en = self.texts(dish_id, category)
        for k in zh:
            self.en[zh[k]] = en[k]
        self.generated.setdefault(zh["question"], f"{dish_id}:{category}")
        return zh

    def audit(self, request: RecordedRequest) -> dict:
        question = re.search(r"^Question: (.+)$", request.prompt, flags=re.M).group(1)
        planted = VQA_PLANTS.get(self.generated.get(question, ""), "")
        if planted.startswith(f"audit{self.pass_of(request)}:"):
            return {"verdict": "reject", "issue_category": planted.split(":", 1)[1]}
        return {"verdict": "pass", "issue_category": None}

    # -- translation
    def glossary(self, request: RecordedRequest) -> dict:
        names = json.loads(next(line for line in request.prompt.splitlines() if line.startswith("[")))
        return {n: self.truth["names_en"][n] for n in names}

    def translate(self, request: RecordedRequest) -> dict:
        texts = json.loads(request.prompt.strip().splitlines()[-2])
        return {k: self.en.get(v, f"(untranslated) {v}") for k, v in texts.items()}


def construct_server(truth: dict[str, Any], filter_models: tuple[str, str]) -> tuple[FakeOpenAIServer, ConstructOracle]:
    oracle = ConstructOracle(truth, filter_models)
    return FakeOpenAIServer(oracle), oracle
