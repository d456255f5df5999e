"""Stage 5, VQA items: one item per dish, its category drawn to `--vqa-mix`, question, answer and rationale
grounded in the dish's metadata (Tables 8, 9); question rules, near-duplicate questions within a category
removed (construct/dedupe.py), two audits by two models that reject with an issue_category (Table 12)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

from construct.context import Context
from construct.dedupe import candidates, char_ngrams, resolve
from construct.models import Answer, Ask, parse_json_object
from construct.neighbours import embed_texts
from construct.stages import DISH_REVIEW, NUTRITION, prompt, task_item
from construct.stages import VQA as NAME
from construct.work import MIX_NAMES, Decision, Stage, dropped, inputs_key, kept, screen
from diningbench import NUTRIENTS

TASK = NAME
PROMPT_VERSION = "vqa-v1"
ISSUES = ("multi_part", "false_premise", "not_visible", "trivial", "verbose_answer", "subjective", "wrong_answer")
PAIR_VERSION = "same-question-v1"
BLOCKING_VERSION = "lsh-top3-v1"  # construct/dedupe.py's question candidates: a new version reruns the stage
PAIR_PROMPT = prompt("vqa.same_question", """Task: same question check.
Two questions of one VQA category ({category}) of a food benchmark. Do they ask the same thing, so
that the second tests nothing the first does not, whatever the wording?
Question A ({a_id}): {a}
Question B ({b_id}): {b}
Reply with one JSON object and nothing else: {{"same_question": true or false, "reason": "..."}}""")
# Phrases that hand the model what it should see for itself (the "visual-agnostic phrasing" rule).
DESCRIBES_IMAGE = ("可以看到", "可见的", "图中的", "图片中的", "画面中", "金黄", "酥脆的", "油亮的",
                   "we can see", "as shown", "shown in the", "visible in the", "the golden", "the crispy", "glossy")
GUIDANCE = {
    "multi_image_analysis": "Standard vs. reality discrepancy audit: the first image is the merchant's promotional "
                            "photo, the second a customer's photo of the same order. Ask about a discrepancy in "
                            "portion, ingredient integrity or presentation and its consequence (a calorie gap, a "
                            "worse experience).",
    "cuisine_technique": "Cooking technique: ask what cooking method or step the visible surface, texture or "
                         "arrangement reveals.",
    "dietary_suggestion": "Dietary suggestion: ask whether the dish suits a dietary need (vegetarian, low-carb, an "
                          "allergy); the answer starts with a clear verdict.",
    "counterfactual_reasoning": "Counterfactual: ask how the dish would change if one visible element were different.",
}
GENERATE_PROMPT = prompt("vqa.generate", """Task: VQA generation ({category}).
{guidance}
Metadata of the dish (God view; the answer and rationale must agree with it, the question must not quote it):
{metadata}
Rules: one single-focused question ending with one question mark; never describe the image in the
question (not "given the golden crust..." but "evaluate the surface texture..."); it needs reasoning
from what is visible, not captioning; the answer is short and factual; the rationale goes observation ->
culinary principle -> conclusion. Write in Chinese.
Reply with one JSON object and nothing else: {{"question": "...", "answer": "...", "rationale": "..."}}""")
AUDIT_PROMPT = prompt("vqa.audit", """Task: VQA audit.
Question: {question}
Reference answer: {answer}
Rationale: {rationale}
Reject the item if any holds: several questions in one (multi_part); a false premise; what it asks about is
not clearly visible (not_visible); a non-expert answers it in half a second without thinking (trivial); a
verbose answer (verbose_answer); a subjective answer (subjective); the answer is wrong (wrong_answer).
Reply with one JSON object and nothing else: {{"verdict": "pass" or "reject", "issue_category": null or one of
{issues}}}""")


def question_problem(question: str) -> str | None:
    """Why a generated question breaks the rules, or None.

    >>> question_problem("这道菜的主要烹饪方式是什么？")
    >>> question_problem("这是什么菜？用了什么油？")
    'multiple_questions'
    >>> question_problem("根据图中可以看到的金黄外皮，这道菜是怎么做的？")
    'describes_image'
    """
    marks = len(re.findall(r"[?？]", question))
    if marks != 1 or not question.rstrip().endswith(("?", "？")):
        return "multiple_questions" if marks > 1 else "not_a_question"
    return "describes_image" if any(p in question.lower() for p in DESCRIBES_IMAGE) else None


def question_twins(ctx: Context, drafts: dict[str, dict], items: list[str]) -> tuple[dict[str, dict], bool]:
    """{dropped item: {"of": twin, "via": ..., "reason": ...}} and whether every pair was answered. Within
    each category the model judges each candidate pair (`candidates` over the questions' character n-grams and
    --embed-model vectors); `resolve` takes the items in `items` order."""
    s = ctx.settings
    checked: dict[tuple[str, str], dict] = {}  # the confirmed pairs only: the rest need no row
    same: list[tuple[str, str]] = []
    complete = True
    for category in sorted({drafts[i]["category"] for i in items}):
        group = [i for i in items if drafts[i]["category"] == category]
        vectors = embed_texts(s, [drafts[i]["question"] for i in group])
        found = candidates({"question": [char_ngrams(drafts[i]["question"]) for i in group]}, vectors=vectors,
                           seed=s.seed)
        via = {f"{group[a]}|{group[b]}": found.via[(a, b)] for a, b in found.pairs()}
        asks = (Ask(f"{group[a]}|{group[b]}", PAIR_PROMPT.format(category=category, a_id=group[a],
                                                                 a=drafts[group[a]]["question"], b_id=group[b],
                                                                 b=drafts[group[b]]["question"]))
                for a, b in found.pairs())

        def record(answer: Answer, via: Mapping[str, object] = via) -> None:
            nonlocal complete
            out = parse_json_object(answer.text) or {}
            complete = complete and not answer.error
            if out.get("same_question") is True:
                a, b = answer.item.split("|")
                same.append((a, b))
                checked[(a, b)] = {"via": via[answer.item], "model": s.model, "model_reason": out.get("reason")}

        if via:
            ctx.models.ask_each(NAME, s.model, PAIR_VERSION, asks, record)
    rank = {item: k for k, item in enumerate(items)}
    same.sort(key=lambda p: (rank[p[0]], rank[p[1]]))  # answers come in completion order
    twins = resolve(items, same)
    return {item: {"of": twin, **checked.get((twin, item), checked.get((item, twin), {}))}
            for item, twin in twins.items()}, complete


def quotas(n: int, mix: dict[str, float]) -> dict[str, int]:
    """Items per category for n dishes: largest-remainder rounding of n x share (ties: the mix's order).

    >>> quotas(10, {"technique": 0.662, "dietary": 0.272, "multi_image": 0.044, "counterfactual": 0.022})
    {'technique': 7, 'dietary': 3, 'multi_image': 0, 'counterfactual': 0}
    >>> quotas(100, {"technique": 0.662, "dietary": 0.272, "multi_image": 0.044, "counterfactual": 0.022})
    {'technique': 66, 'dietary': 27, 'multi_image': 5, 'counterfactual': 2}
    """
    exact = {k: n * v for k, v in mix.items()}
    out = {k: int(v) for k, v in exact.items()}
    order = sorted(mix, key=lambda k: (-(exact[k] - out[k]), list(mix).index(k)))
    for k in order[:n - sum(out.values())]:
        out[k] += 1
    return out


def plan(views: dict[str, int], mix: dict[str, float], seed: int = 0) -> dict[str, str]:
    """dish -> its one VQA category. `views` gives each dish's good views (reference + kept user photos).

    The dishes are put in the order of a stable hash of (seed, dish id), the quotas of `quotas` filled in
    that order: multi-image first, by the first dishes with at least two views (a shortfall goes to the
    largest single-image category), then the others in the mix's order. It depends only on the set of
    dishes, so every engine, and any order the answers come back in, draws alike.

    Hash order for seed 0 is d, a, c, b; quotas 2 technique, 1 dietary, 1 multi-image:

    >>> plan({"a": 3, "b": 1, "c": 3, "d": 3}, {"technique": 0.5, "dietary": 0.25, "multi_image": 0.25,
    ...      "counterfactual": 0.0})
    {'a': 'cuisine_technique', 'b': 'dietary_suggestion', 'c': 'cuisine_technique', 'd': 'multi_image_analysis'}
    >>> plan({"a": 3, "b": 3, "c": 3, "d": 1}, {"multi_image": 1.0})["d"]  # one view: never multi-image
    'cuisine_technique'
    """
    mix = {**dict.fromkeys(MIX_NAMES, 0.0), **mix}
    order = sorted(views, key=lambda d: hashlib.sha256(f"{seed}:{d}".encode()).hexdigest())
    want = quotas(len(order), mix)
    multi = [d for d in order if views[d] >= 2][:want["multi_image"]]
    single = [k for k in mix if k != "multi_image"]
    want[max(single, key=lambda k: (mix[k], -single.index(k)))] += want["multi_image"] - len(multi)
    out = dict.fromkeys(multi, MIX_NAMES["multi_image"])
    rest = iter(d for d in order if d not in out)
    for k in single:
        for _ in range(want[k]):
            out[next(rest)] = MIX_NAMES[k]
    return dict(sorted(out.items()))


def run(ctx: Context) -> None:
    """Each dish's draft held to the question rules, near-duplicate questions dropped, two audit passes."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    dishes, nutrition = Stage(ctx.work, DISH_REVIEW), Stage(ctx.work, NUTRITION)
    audits = s.filter_pair()
    inputs = inputs_key(NAME, PROMPT_VERSION, PAIR_VERSION, BLOCKING_VERSION, dishes.items_hash(), nutrition.items_hash(), s.model,
                        audits, s.embed_model, s.vqa_mix, s.seed)
    if stage.is_done(inputs):
        return
    targets = {t["dish_id"]: t for t in dishes.items()}
    labels = {n["dish_id"]: {k: n[k] for k in NUTRIENTS} for n in nutrition.items()}
    decisions: dict[str, Decision] = {}
    drafts, asks = draft_asks(ctx, targets, labels)
    answers = ctx.models.ask(NAME, s.model, PROMPT_VERSION, asks)
    accepted = check_drafts(drafts, answers, decisions)
    twins, answered = question_twins(ctx, drafts, accepted)
    for item, twin in twins.items():
        decisions[item] = dropped(item, "near_duplicate_question", TASK, question=drafts[item]["question"], **twin)
        accepted.remove(item)
    for n, spec in enumerate(audits, 1):
        verdicts = ctx.models.ask(NAME, spec, f"{PROMPT_VERSION}-audit{n}", audit_asks(ctx, drafts, accepted))
        accepted = check_audit(drafts, accepted, verdicts, n, spec, decisions)
    items = write_items(drafts, accepted, decisions)
    stage.finish_task(decisions, items, inputs, complete=answered)


def draft_asks(ctx: Context, targets: dict[str, dict], labels: dict[str, dict]) -> tuple[dict[str, dict], list[Ask]]:
    """Ask: ({"dish:category": its draft so far}, one generation ask per dish), the category `plan`
    draws, the photos the category shows, the dish's metadata (and nutrition label) in the prompt."""
    s = ctx.settings
    drafts: dict[str, dict] = {}
    asks = []
    views = {did: 1 + len(t["user_photos"]) for did, t in targets.items()}
    for did, category in plan(views, s.vqa_mix, s.seed).items():
        t, dish = targets[did], ctx.raw.dishes[did]
        item = f"{did}:{category}"
        if category == "multi_image_analysis":
            photos = [(t["reference"], "reference"), (t["user_photos"][0], "user")]
        elif category == "cuisine_technique":
            photos = [(t["reference"], "reference")]
        else:
            photos = [(t["user_photos"][0], "user")]
        metadata = {"name": dish.name, "menu_category": dish.menu_category, "description": dish.description,
                    "ingredients": list(dish.ingredients), "portion": dish.portion,
                    "nutrition_per_serving": labels.get(did)}
        prompt = GENERATE_PROMPT.format(category=category, guidance=GUIDANCE[category],
                                        metadata=json.dumps(metadata, ensure_ascii=False))
        drafts[item] = {"dish": t, "category": category, "photos": photos}
        asks.append(Ask(item, prompt, photos=ctx.raw.photo_refs(photos)))
    return drafts, asks


def parse_draft(text: str | None) -> dict[str, str] | None:
    """Parse: the draft's question, answer and rationale as written, or None unless all three are text.

    >>> parse_draft('{"question": "这道菜是怎么做的？", "answer": "红烧", "rationale": "色泽红亮……"}')["answer"]
    '红烧'
    >>> parse_draft('{"question": "这道菜是怎么做的？", "answer": " "}') is None
    True
    """
    out = parse_json_object(text) or {}
    if not all(isinstance(out.get(k), str) and out[k].strip() for k in ("question", "answer", "rationale")):
        return None
    return {k: out[k] for k in ("question", "answer", "rationale")}


def check_drafts(drafts: dict[str, dict], answers: dict[str, Answer],
                 decisions: dict[str, Decision]) -> list[str]:
    """The drafts whose question keeps the rules: each answer parsed into its draft; a drop decision
    for the others."""
    def own(item: str, out: dict[str, str]) -> Decision | None:
        drafts[item].update({k: v.strip() for k, v in out.items()})
        problem = question_problem(out["question"])
        return dropped(item, problem, TASK, question=out["question"]) if problem else None
    return screen(drafts, answers, lambda text: (parse_draft(text),), own, decisions, TASK)


def audit_asks(ctx: Context, drafts: dict[str, dict], accepted: list[str]) -> list[Ask]:
    """Ask: one audit question per accepted draft, with the photos its question was written for."""
    return [Ask(item, AUDIT_PROMPT.format(question=drafts[item]["question"], answer=drafts[item]["answer"],
                                          rationale=drafts[item]["rationale"], issues=", ".join(ISSUES)),
                photos=ctx.raw.photo_refs(drafts[item]["photos"])) for item in accepted]


def parse_audit(text: str | None) -> tuple[str | None, str | None]:
    """Parse: (the audit's verdict, None unless pass or reject; the issue category, None unless one of ISSUES).

    >>> parse_audit('{"verdict": "reject", "issue_category": "trivial"}')
    ('reject', 'trivial')
    >>> parse_audit('{"verdict": "reject", "issue_category": "too hard"}')
    ('reject', None)
    """
    out = parse_json_object(text) or {}
    verdict, issue = out.get("verdict"), out.get("issue_category")
    return (verdict if verdict in ("pass", "reject") else None), (issue if issue in ISSUES else None)


def check_audit(drafts: dict[str, dict], accepted: list[str], verdicts: dict[str, Answer], n: int, spec: str,
                decisions: dict[str, Decision]) -> list[str]:
    """Audit pass n: the items it passes; a drop decision for each item it rejects."""
    def own(item: str, verdict: str, issue: str | None) -> Decision | None:
        return dropped(item, issue or "audit_other", TASK, audit_pass=n, audit_model=spec,
                       question=drafts[item]["question"]) if verdict == "reject" else None
    return screen(accepted, verdicts, parse_audit, own, decisions, TASK, audit_pass=n)


def write_items(drafts: dict[str, dict], accepted: list[str], decisions: dict[str, Decision]) -> list[dict]:
    """The items of the accepted drafts; a kept decision for each."""
    items = []
    for item in accepted:
        d = drafts[item]
        decisions[item] = kept(item, TASK, category=d["category"])
        items.append(task_item(f"vqa-{item.replace(':', '-')}", d["dish"], [p for p, _ in d["photos"]],
                               image_roles=[r for _, r in d["photos"]], question=d["question"], answer=d["answer"],
                               rationale=d["rationale"], vqa_category=d["category"]))
    return items
