"""A STAND-IN for the construction stages' model, NOT a model: an OpenAI-compatible server on 127.0.0.1
that answers each stage prompt of `python -m construct run` from the synthetic generator's known truth
(synthetic/raw_export.py), for demos and tests only; its answers say nothing about any model."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from construct import classification, dishes, nutrition, photos, vqa
from construct import translate as translation
from construct.errors import BuildError
from construct.pipeline import stage_runs
from construct.stages import STANDIN_ANSWERS, prompt_of, standin_answer
from diningbench import iter_jsonl_objects
from synthetic.raw_export import CLASSIFICATION_PLANTS, VQA_PLANTS

__all__ = ["CLASSIFICATION_PLANTS", "VQA_PLANTS", "ConstructOracle", "StandInServer", "synthetic_truth"]

DEFAULT_FILTER_MODELS = ("openai:standin-judge-a", "openai:standin-judge-b")
BANNER = ("STAND-IN, NOT A MODEL: answers the construct stage prompts from the synthetic generator's known "
          "truth, for demos and tests only")


def _found(pattern: str, text: str) -> str:
    """The first group of `pattern` in a prompt the stand-in was built for (a prompt without it is a bug)."""
    match = re.search(pattern, text, flags=re.M)
    if match is None:
        raise ValueError(f"the stand-in cannot read this prompt (no {pattern!r})")
    return match.group(1)

class StageRequest(Protocol):
    """What the oracle reads from a request: the prompt text, the image bytes and the JSON body."""

    prompt: str
    images: list[bytes]
    body: Any


ASPECTS = [("份量", "portion size"), ("主料数量", "amount of the main ingredient"), ("配菜完整性", "completeness of the sides"),
           ("摆盘", "plating"), ("酱汁用量", "amount of sauce"), ("米饭比例", "share of rice"), ("色泽", "colour"),
           ("装盘容器", "serving vessel"), ("配料种类", "variety of toppings"), ("堆叠高度", "height of the pile"),
           ("切配方式", "cutting style"), ("油量", "amount of oil")]


class ConstructOracle:
    """The answers. Each depends only on the request (prompt, images, model name), never on what was
    asked before, so both engines, retries, replicas and any call order get the same answer to the same
    prompt. A photo is known by the SHA-256 of the bytes received (small JPEGs travel as stored), a dish by
    its id or name. The answers are a careful model's, except where the truth plants a defect only a model
    can make: an ambiguous or too-easy classification item (found by one of the two filter models, whose
    names only tell the audit passes apart) and VQA drafts that break a question rule, repeat another
    question or fail an audit."""

    CATEGORIES = ("multi_image_analysis", "cuisine_technique", "dietary_suggestion", "counterfactual_reasoning")

    def __init__(self, truth: dict[str, Any], filter_models: tuple[str, str]) -> None:
        self.truth = truth
        self.dishes = truth["dishes"]
        self.filter_models = filter_models
        plants = truth.get("plants") or {"vqa": VQA_PLANTS, "classification": CLASSIFICATION_PLANTS}
        self.vqa_plants: dict[str, str] = plants["vqa"]
        self.cls_plants = {d: tuple(v) for d, v in plants["classification"].items()}
        self.photo_dishes = sorted({p["dish_id"] for p in truth["photos"].values() if p["shows"] == p["dish_id"]})
        self.aspect_of = {d: i % len(ASPECTS) for i, d in enumerate(self.photo_dishes)}
        # Every draft the oracle can write, known up front: which dish a question was written for (the
        # audit's plants) and each Chinese text's English (translation).
        self.en: dict[str, str] = {}
        self.generated: dict[str, str] = {}  # question -> dish
        for dish_id in self.photo_dishes:
            for category in self.CATEGORIES:
                zh, en = self.texts(dish_id, category)
                for k in zh:
                    self.en.setdefault(zh[k], en[k])
                self.generated.setdefault(zh["question"], dish_id)
        self.calls: list[str] = []  # the task line of every prompt, for tests that count calls
        self.prompt_ids: list[str | None] = []  # the id of every prompt (None: no stage's), in the order asked
        stage_runs()  # every registered stage's module imported: its prompts and stand-in answers declared

    def __call__(self, request: StageRequest) -> str:
        self.calls.append(request.prompt.split("\n", 1)[0])
        prompt = prompt_of(request.prompt)
        self.prompt_ids.append(prompt.id if prompt else None)
        answer = STANDIN_ANSWERS.get(prompt.id) if prompt else None
        return json.dumps(answer(self, request), ensure_ascii=False) if answer else "I cannot help with that."

    # -- helpers
    def photo(self, data: bytes) -> dict[str, Any]:
        return self.truth["photos"][hashlib.sha256(data).hexdigest()]

    def dish_of(self, request: StageRequest) -> dict[str, Any]:
        return self.dishes[self.photo(request.images[0])["dish_id"]]

    def pass_of(self, request: StageRequest) -> int:
        model = request.body.get("model")
        return 1 + self.filter_models.index(f"openai:{model}") if f"openai:{model}" in self.filter_models else 0

    # -- photos
    @standin_answer(photos.QUALITY_PROMPT)
    def quality(self, request: StageRequest) -> dict:
        bad = self.photo(request.images[0])["quality"] == "bad"
        return {"quality": "bad" if bad else "good", "reason": "blurred" if bad else "clear"}

    @standin_answer(photos.MATCH_PROMPT)
    def matching(self, request: StageRequest) -> dict:
        ref, user = self.photo(request.images[0]), self.photo(request.images[1])
        same = user["shows"] == ref["dish_id"]
        return {"same_dish": same, "reason": "same components" if same else "a different dish"}

    # -- dedupe: pairs named by id in the prompt, judged from the truth alone
    @standin_answer(dishes.PAIR_PROMPT, dishes.GROUP_PROMPT)
    def same_dish(self, request: StageRequest) -> dict:
        """The same dish when the truth gives both one recipe; a group question is answered pair by pair."""
        named = re.findall(r"^Dish (A|B\d*) \((\S+)\):", request.prompt, flags=re.M)
        recipe = ("standard_name", "slots", "grams")

        def verdict(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
            same = not a["odd"] and not b["odd"] and all(a.get(k) == b.get(k) for k in recipe)
            return {"same_dish": same, "reason": "one recipe under two names" if same else "different recipes"}

        a = self.dishes[named[0][1]]
        if [label for label, _ in named] == ["A", "B"]:
            return verdict(a, self.dishes[named[1][1]])
        return {i: verdict(a, self.dishes[i]) for _, i in named[1:]}

    @standin_answer(vqa.PAIR_PROMPT)
    def same_question(self, request: StageRequest) -> dict:
        """The same question when the truth gives both items one question text."""
        a, b = (self.texts(*item.split(":"))[0]["question"]
                for item in re.findall(r"^Question [AB] \((\S+)\):", request.prompt, flags=re.M))
        return {"same_question": a == b, "reason": "asks the same thing" if a == b else "asks different things"}

    # -- classification
    @standin_answer(classification.SELECT_PROMPT)
    def selection(self, request: StageRequest) -> dict:
        ids = re.findall(r"^- (\S+): ", request.prompt, flags=re.M)
        target_name = _found(r"^Target dish: (.+)$", request.prompt)
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

    @standin_answer(classification.FILTER_PROMPT)
    def cls_filter(self, request: StageRequest) -> dict:
        dish = self.dish_of(request)
        planted = self.cls_plants.get(dish["dish_id"])
        if planted and planted[0] == self.pass_of(request):
            return {"verdict": planted[1], "reason": "planted"}
        return {"verdict": "pass", "reason": "close look-alikes"}

    # -- nutrition
    @standin_answer(nutrition.ESTIMATE_PROMPT)
    def estimate(self, request: StageRequest) -> dict:
        dish = self.dish_of(request)
        return {**dish["nutrition"], "ingredients": dish["ingredients"]}

    @standin_answer(nutrition.PLAUSIBILITY_PROMPT)
    def plausible(self, request: StageRequest) -> dict:
        dish = self.dish_of(request)
        values = json.loads(_found(r"^Labelled nutrition for one serving: (.+)$", request.prompt))
        real = dish["nutrition"]["calories"]
        ok = abs(values["calories"] - real) <= 0.25 * real
        return {"plausible": ok, "reason": "fits the dish" if ok else "far too low for this amount of food"}

    # -- vqa
    def texts(self, dish_id: str, category: str) -> tuple[dict[str, str], dict[str, str]]:
        d = self.dishes[dish_id]
        aspect_zh, aspect_en = ASPECTS[self.aspect_of[dish_id]]
        name, name_en = d["standard_name"], d["name_en"]
        if category == "multi_image_analysis":
            zh = {"question": f"对比商家展示图与顾客实拍图，这份{name}在{aspect_zh}上的差异意味着什么？",
                  "answer": "实拍的份量比展示图略少，热量随之略低。",
                  "rationale": f"观察两张图的{aspect_zh}，结合标称份量{d['grams']:.0f}克推断差异。"}
            en = {"question": f"Comparing the merchant photo with the customer photo of the {name_en}, what does the difference in {aspect_en} imply?",
                  "answer": "The real serving is slightly smaller than advertised, so it has slightly fewer calories.",
                  "rationale": f"Compare the {aspect_en} in both photos against the stated {d['grams']:.0f} g portion."}
        elif category == "cuisine_technique":
            zh = {"question": f"从{aspect_zh}判断，这道{name}采用了哪种主要烹饪方式？", "answer": f"{d['technique_zh']}。",
                  "rationale": f"观察{aspect_zh}的特征，对应{d['technique_zh']}。"}
            en = {"question": f"Judging from the {aspect_en}, which main cooking technique was used for the {name_en}?",
                  "answer": f"{d['technique_en']}.", "rationale": f"The {aspect_en} points to {d['technique_en']}."}
        elif category == "dietary_suggestion":
            veg = not ({"meat", "seafood"} & set(d["tags"]))
            zh = {"question": f"考虑{aspect_zh}，不吃肉和海鲜的素食者能吃这道{name}吗？", "answer": "可以。" if veg else "不可以。",
                  "rationale": "可见的蛋白质来源" + ("不是肉类或海鲜。" if veg else "是肉类或海鲜。")}
            en = {"question": f"Considering the {aspect_en}, can a vegetarian who eats no meat or seafood eat the {name_en}?",
                  "answer": "Yes." if veg else "No.",
                  "rationale": "The visible protein is " + ("neither meat nor seafood." if veg else "meat or seafood.")}
        else:
            zh = {"question": f"如果{aspect_zh}减半，这道{name}的口感会怎样变化？", "answer": "口感会更单薄。",
                  "rationale": f"{aspect_zh}决定了这道菜的层次感。"}
            en = {"question": f"If the {aspect_en} were halved, how would the mouthfeel of the {name_en} change?",
                  "answer": "It would feel thinner.", "rationale": f"The {aspect_en} carries the dish's layering."}
        planted = self.vqa_plants.get(dish_id, "")
        if planted == "multiple_questions":
            zh["question"], en["question"] = zh["question"] + "为什么？", en["question"] + " Why?"
        elif planted == "describes_image":
            zh["question"] = "根据图中可以看到的金黄外皮，" + zh["question"]
            en["question"] = "Given the golden crust we can see, " + en["question"][0].lower() + en["question"][1:]
        elif planted.startswith("duplicate_of:"):  # the other dish's draft in the same category
            zh, en = self.texts(planted.split(":", 1)[1], category)
        return zh, en

    @standin_answer(vqa.GENERATE_PROMPT)
    def generate(self, request: StageRequest) -> dict:
        category = _found(r"\((\w+)\)", request.prompt.split("\n", 1)[0])
        return self.texts(self.dish_of(request)["dish_id"], category)[0]

    @standin_answer(vqa.AUDIT_PROMPT)
    def audit(self, request: StageRequest) -> dict:
        question = _found(r"^Question: (.+)$", request.prompt)
        planted = self.vqa_plants.get(self.generated.get(question, ""), "")
        if planted.startswith(f"audit{self.pass_of(request)}:"):
            return {"verdict": "reject", "issue_category": planted.split(":", 1)[1]}
        return {"verdict": "pass", "issue_category": None}

    # -- translation
    @standin_answer(translation.GLOSSARY_PROMPT)
    def glossary(self, request: StageRequest) -> dict:
        names = json.loads(next(line for line in request.prompt.splitlines() if line.startswith("[")))
        return {n: self.truth["names_en"][n] for n in names}

    @standin_answer(dishes.GLOSSARY_PROMPT)
    def dedupe_glossary(self, request: StageRequest) -> dict:
        """English for dish names (the truth's) and ingredient names (the synthetic table's)."""
        from synthetic.nutrients import table

        names = json.loads(next(line for line in request.prompt.splitlines() if line.startswith("[")))
        known = {**{i.name_zh: i.name_en for i in table().values()}, **self.truth["names_en"]}
        return {n: known[n] for n in names if n in known}

    @standin_answer(translation.TEXT_PROMPT)
    def translate(self, request: StageRequest) -> dict:
        texts = json.loads(request.prompt.strip().splitlines()[-2])
        return {k: self.en.get(v, f"(untranslated) {v}") for k, v in texts.items()}


# -- the synthetic export's truth
def synthetic_truth(raw: str | Path, seed: int = 0) -> dict[str, Any]:
    """The truth of the synthetic export in `raw` (any `--merchants N`), rendered again from `seed` (about
    a second per four merchants); ValueError when the folder's photos are not that export's (the stand-in
    knows nothing else)."""
    from synthetic.raw_export import write_raw_export

    raw = Path(raw)
    photos_file, merchants_file = raw / "photos.jsonl", raw / "merchants.jsonl"
    if not photos_file.is_file() or not merchants_file.is_file():
        raise BuildError(f"{raw} has no photos.jsonl or merchants.jsonl: write one with "
                         f"`python diningbench.py sample --raw --out {raw}`")
    n = sum(1 for line in merchants_file.read_text(encoding="utf-8").splitlines() if line.strip())
    with tempfile.TemporaryDirectory(prefix="standin-") as tmp:
        truth = write_raw_export(tmp, seed=seed, merchants=max(n, 1))
    for _, row in iter_jsonl_objects(photos_file, error=BuildError):
        path = raw / str(row.get("path"))
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() not in truth["photos"]:
            raise BuildError(f"{raw}: photo {row.get('photo_id')} is not one the synthetic generator writes with "
                             f"--seed {seed} --merchants {n}; the stand-in answers only for `python diningbench.py "
                             f"sample --raw --seed {seed} --merchants N` (pass the export's --seed)")
    return truth


# -- the OpenAI-compatible server
@dataclass
class _Request:
    body: Any
    prompt: str = ""
    images: list[bytes] = field(default_factory=list)


def _parse(body: dict[str, Any]) -> _Request:
    request = _Request(body)
    texts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                texts.append(part["text"])
            elif part.get("type") == "image_url":
                data = part["image_url"]["url"].partition(",")[2].replace("-", "+").replace("_", "/")
                request.images.append(base64.b64decode(data + "=" * (-len(data) % 4)))
    request.prompt = "".join(texts)
    return request


class StandInServer(ThreadingHTTPServer):
    """POST /v1/chat/completions answered by the oracle; GET /v1/models lists `standin`. 127.0.0.1 only."""

    daemon_threads = True
    request_queue_size = 256  # a client opening --concurrency connections at once is not refused (default 5)

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.oracle: ConstructOracle | None = None  # requests wait in the backlog until it is set and served
        self.latency = 0.0  # seconds each answer waits, as a remote model would (the benches)
        self.answered = 0  # chat completions answered (the calls that really reached it)
        self._count = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, {"error": {"message": "body is not a chat completion request", "code": 400}}
        try:
            request = _parse(body)
            text = self.oracle(request) if self.oracle else "I cannot help with that."
            if self.latency:
                time.sleep(self.latency)
            with self._count:
                self.answered += 1
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            return 400, {"error": {"message": f"the stand-in cannot answer this request ({type(exc).__name__})",
                                   "code": 400}}
        # A stand-in spends no tokens: usage is reported as zero so no cost is ever made up.
        return 200, {"id": "chatcmpl-standin", "object": "chat.completion", "created": int(time.time()),
                     "model": body.get("model", "standin"),
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm on, the body would wait for the
    # client's delayed ACK of the headers (40 ms on Linux), on every answer.
    disable_nagle_algorithm = True
    server: StandInServer

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            # Listed as `vllm serve` lists a model, with its context, so a client need not probe it with a
            # first request sent alone (the stand-in answers any model name and has no real limit).
            return self._send(200, {"object": "list", "data": [{"id": "standin", "object": "model", "created": 0,
                                                                 "owned_by": "diningbench-standin",
                                                                 "max_model_len": 131072}]})
        return self._send(404, {"error": {"message": f"no route {self.path}", "code": 404}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}", "code": 404}})
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        return self._send(*self.server.answer(body))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m construct.standin", description=BANNER + ".")
    ap.add_argument("raw", help="the folder `python diningbench.py sample --raw --out RAW` wrote")
    ap.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free port; default 8765)")
    ap.add_argument("--seed", type=int, default=0, help="the --seed the export was written with (default 0)")
    ap.add_argument("--filter-models", default=",".join(DEFAULT_FILTER_MODELS),
                    help="the two SPEC,SPEC given to `construct run --filter-models` (default: %(default)s)")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="wait this long before each answer, as a remote model would (benches; default 0)")
    ap.add_argument("--serve-for", type=float, default=None, metavar="SECONDS",
                    help="stop by itself after this many seconds (default: until Ctrl-C or SIGTERM)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    filters = tuple(x.strip() for x in args.filter_models.split(",") if x.strip())
    if len(filters) != 2:
        print(f"error: --filter-models wants two SPEC,SPEC, got {args.filter_models!r}", file=sys.stderr)
        return 2
    try:
        server = StandInServer(args.port)  # bound first: a client that comes early waits in the backlog
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    # SIGINT too: a shell starts a background job with SIGINT ignored, and Ctrl-C should still stop it.
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    try:
        try:
            server.oracle = ConstructOracle(synthetic_truth(args.raw, args.seed), filters)
            server.latency = max(0.0, args.latency_ms) / 1000
        except (ValueError, OSError, KeyError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        thread.start()
        print(f"{BANNER}; serving {args.raw} (seed {args.seed}) on {server.base_url}, filter models "
              f"{','.join(filters)}" + (f", for {args.serve_for:g} s" if args.serve_for else "")
              + "; Ctrl-C or SIGTERM stops it", flush=True)
        stop.wait(args.serve_for)
    finally:
        if thread.is_alive():
            server.shutdown()
        server.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"stand-in stopped after {server.answered} chat completion(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
