"""Stage 6, translation to English: dish names once per merchant as a glossary (so an option, a dish
name and a question name a dish the same way), then each VQA item's question, answer and rationale
with that glossary in the prompt. A translation that drops a glossary name is rejected."""

from __future__ import annotations

import json

from construct.context import Context
from construct.models import Answer, Ask, parse_json_object
from construct.stages import CLASSIFICATION, NUTRITION, VQA, prompt
from construct.stages import TRANSLATE as NAME
from construct.work import Decision, Stage, dropped, inputs_key, kept, triage

PROMPT_VERSION = "translate-v1"
GLOSSARY_PROMPT = prompt("translate.glossary", """Task: dish name glossary.
Translate these dish names of one restaurant menu into natural English menu names. Names that differ
must stay different in English.
{names}
Reply with one JSON object and nothing else, mapping each name exactly as given to its English name.""")
TEXT_PROMPT = prompt("translate.text", """Task: translation to English.
Translate the values of this JSON object into English; keep the keys. Use these dish names exactly:
{glossary}
{texts}
Reply with one JSON object and nothing else, with the same keys.""")
FIELDS = ("question", "answer", "rationale")


def run(ctx: Context) -> None:
    """One glossary per merchant, then the items' names from it and each VQA item's text translated."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    sources = {t: Stage(ctx.work, t) for t in (CLASSIFICATION, NUTRITION, VQA)}  # each task's stage has its name
    inputs = inputs_key(NAME, PROMPT_VERSION, s.model, {t: st.items_hash() for t, st in sources.items()})
    if stage.is_done(inputs):
        return
    items = {t: st.items() for t, st in sources.items()}
    asks = glossary_asks(ctx, items)
    answers = ctx.models.ask(NAME, s.model, PROMPT_VERSION + "-glossary", asks)
    complete = all(a.error is None for a in answers.values())
    glossary = {ask.item: parse_glossary(answers[ask.item].text) for ask in asks}
    decisions: list[Decision] = []
    out = check_names(items, glossary, decisions)
    texts = ctx.models.ask(NAME, s.model, PROMPT_VERSION, text_asks(items["vqa"], glossary))
    out += check_texts(items["vqa"], texts, glossary, decisions)
    stage.finish(decisions, out, inputs, complete=complete and all(a.error is None for a in texts.values()))
    (stage.dir / "glossary.json").write_text(json.dumps(glossary, ensure_ascii=False, indent=1), encoding="utf-8")


def glossary_asks(ctx: Context, items: dict[str, list[dict]]) -> list[Ask]:
    """Ask: one glossary per merchant, of every dish name its items show (options, dish names, VQA dishes)."""
    names: dict[str, set[str]] = {}
    for row in items["classification"]:
        names.setdefault(row["merchant_id"], set()).update(row["options"])
    for row in items["nutrition"]:
        names.setdefault(row["merchant_id"], set()).add(row["dish_name"])
    for row in items["vqa"]:
        names.setdefault(row["merchant_id"], set()).add(ctx.raw.dishes[row["dish_id"]].name)
    return [Ask(m, GLOSSARY_PROMPT.format(names=json.dumps(sorted(n), ensure_ascii=False)))
            for m, n in sorted(names.items())]


def parse_glossary(text: str | None) -> dict[str, str]:
    """Parse: {name: English name} of every entry whose English name is non-empty text.

    >>> parse_glossary('{"红烧肉": " Braised Pork Belly ", "鱼香肉丝": "", "宫保鸡丁": 3}')
    {'红烧肉': 'Braised Pork Belly'}
    """
    parsed = parse_json_object(text) or {}
    return {k: str(v).strip() for k, v in parsed.items() if isinstance(v, str) and v.strip()}


def check_names(items: dict[str, list[dict]], glossary: dict[str, dict[str, str]],
                decisions: list[Decision]) -> list[dict]:
    """The classification and nutrition items whose every dish name the glossary gives in English (options
    distinct), with those names; an untranslated decision for the others."""
    out: list[dict] = []
    for row in items["classification"]:
        g = glossary.get(row["merchant_id"], {})
        en = [g.get(o) for o in row["options"]]
        if not all(en) or len(set(en)) != len(en):
            decisions.append(dropped(row["id"], "untranslated", "classification", missing=[o for o in row["options"] if not g.get(o)]))
            continue
        out.append({"task": "classification", **row, "options_en": en})
        decisions.append(kept(row["id"], "classification"))
    for row in items["nutrition"]:
        name_en = glossary.get(row["merchant_id"], {}).get(row["dish_name"])
        if not name_en:
            decisions.append(dropped(row["id"], "untranslated", "nutrition"))
            continue
        out.append({"task": "nutrition", **row, "dish_name_en": name_en})
        decisions.append(kept(row["id"], "nutrition"))
    return out


def text_asks(rows: list[dict], glossary: dict[str, dict[str, str]]) -> list[Ask]:
    """Ask: each VQA item's question, answer and rationale, with the glossary entries they mention."""
    asks = []
    for row in rows:
        g = glossary.get(row["merchant_id"], {})
        texts = {k: row[k] for k in FIELDS}
        used = {zh: en for zh, en in g.items() if any(zh in v for v in texts.values())}
        asks.append(Ask(row["id"], TEXT_PROMPT.format(glossary=json.dumps(used, ensure_ascii=False),
                                                      texts=json.dumps(texts, ensure_ascii=False))))
    return asks


def parse_text(text: str | None) -> dict[str, str] | None:
    """Parse: the translated question, answer and rationale, or None unless all three are non-empty text.

    >>> parse_text('{"question": "How was it cooked?", "answer": "Braised", "rationale": "Glossy sauce."}')
    {'question': 'How was it cooked?', 'answer': 'Braised', 'rationale': 'Glossy sauce.'}
    >>> parse_text('{"question": "How was it cooked?"}') is None
    True
    """
    parsed = parse_json_object(text) or {}
    if not all(isinstance(parsed.get(k), str) and parsed[k].strip() for k in FIELDS):
        return None
    return {k: parsed[k] for k in FIELDS}


def check_texts(rows: list[dict], answers: dict[str, Answer], glossary: dict[str, dict[str, str]],
                decisions: list[Decision]) -> list[dict]:
    """The VQA items whose translation parses and names every glossary dish as the glossary does, with the
    English text; a drop decision for the others."""
    out: list[dict] = []
    for row in rows:
        answer = answers[row["id"]]
        if failed := triage(row["id"], answer.error, True, "vqa"):  # unreadable text is "untranslated", below
            decisions.append(failed)
            continue
        if (parsed := parse_text(answer.text)) is None:
            decisions.append(dropped(row["id"], "untranslated", "vqa"))
            continue
        g = glossary.get(row["merchant_id"], {})
        off = [zh for zh, en in g.items() for k in FIELDS if zh in row[k] and en.lower() not in parsed[k].lower()]
        if off:
            decisions.append(dropped(row["id"], "glossary_inconsistent", "vqa", names=sorted(set(off))))
            continue
        out.append({"task": "vqa", **row, **{f"{k}_en": parsed[k].strip() for k in FIELDS}})
        decisions.append(kept(row["id"], "vqa"))
    return out
