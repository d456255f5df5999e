"""Stage 6, translation to English: dish names once per merchant as a glossary (so an option, a dish
name and a question name a dish the same way), then each VQA item's question, answer and rationale
with that glossary in the prompt. A translation that drops a glossary name is rejected.
"""

from __future__ import annotations

import json

from construct.classification import NAME as CLASSIFICATION
from construct.context import Context
from construct.models import Ask, parse_json_object
from construct.nutrition import NAME as NUTRITION
from construct.vqa import NAME as VQA
from construct.work import Decision, Stage, dropped, inputs_key, kept

NAME = "translate"
PROMPT_VERSION = "translate-v1"
GLOSSARY_PROMPT = """Task: dish name glossary.
Translate these dish names of one restaurant menu into natural English menu names. Names that differ
must stay different in English.
{names}
Reply with one JSON object and nothing else, mapping each name exactly as given to its English name."""
TEXT_PROMPT = """Task: translation to English.
Translate the values of this JSON object into English; keep the keys. Use these dish names exactly:
{glossary}
{texts}
Reply with one JSON object and nothing else, with the same keys."""
FIELDS = ("question", "answer", "rationale")


def run(ctx: Context) -> None:
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    sources = {t: Stage(ctx.work, n) for t, n in
               (("classification", CLASSIFICATION), ("nutrition", NUTRITION), ("vqa", VQA))}
    inputs = inputs_key(NAME, PROMPT_VERSION, s.model, {t: st.items_hash() for t, st in sources.items()})
    if stage.is_done(inputs):
        return
    items = {t: st.items() for t, st in sources.items()}
    names: dict[str, set[str]] = {}
    for row in items["classification"]:
        names.setdefault(row["merchant_id"], set()).update(row["options"])
    for row in items["nutrition"]:
        names.setdefault(row["merchant_id"], set()).add(row["dish_name"])
    for row in items["vqa"]:
        names.setdefault(row["merchant_id"], set()).add(ctx.raw.dishes[row["dish_id"]].name)
    asks = [Ask(m, GLOSSARY_PROMPT.format(names=json.dumps(sorted(n), ensure_ascii=False)))
            for m, n in sorted(names.items())]
    answers = ctx.models.ask(NAME, s.model, PROMPT_VERSION + "-glossary", asks)
    complete = all(a.error is None for a in answers.values())
    glossary: dict[str, dict[str, str]] = {}
    for merchant, answer in answers.items():
        parsed = parse_json_object(answer.text) or {}
        glossary[merchant] = {k: str(v).strip() for k, v in parsed.items() if isinstance(v, str) and v.strip()}

    decisions: list[Decision] = []
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
        en = glossary.get(row["merchant_id"], {}).get(row["dish_name"])
        if not en:
            decisions.append(dropped(row["id"], "untranslated", "nutrition"))
            continue
        out.append({"task": "nutrition", **row, "dish_name_en": en})
        decisions.append(kept(row["id"], "nutrition"))

    asks = []
    for row in items["vqa"]:
        g = glossary.get(row["merchant_id"], {})
        texts = {k: row[k] for k in FIELDS}
        used = {zh: en for zh, en in g.items() if any(zh in v for v in texts.values())}
        asks.append(Ask(row["id"], TEXT_PROMPT.format(glossary=json.dumps(used, ensure_ascii=False),
                                                      texts=json.dumps(texts, ensure_ascii=False))))
    answers = ctx.models.ask(NAME, s.model, PROMPT_VERSION, asks)
    for row in items["vqa"]:
        answer = answers[row["id"]]
        parsed = parse_json_object(answer.text) or {}
        if answer.error:
            complete = False
            decisions.append(dropped(row["id"], "model_error", "vqa", error=answer.error))
            continue
        if not all(isinstance(parsed.get(k), str) and parsed[k].strip() for k in FIELDS):
            decisions.append(dropped(row["id"], "untranslated", "vqa"))
            continue
        g = glossary.get(row["merchant_id"], {})
        off = [zh for zh, en in g.items() for k in FIELDS if zh in row[k] and en.lower() not in parsed[k].lower()]
        if off:
            decisions.append(dropped(row["id"], "glossary_inconsistent", "vqa", names=sorted(set(off))))
            continue
        out.append({"task": "vqa", **row, **{f"{k}_en": parsed[k].strip() for k in FIELDS}})
        decisions.append(kept(row["id"], "vqa"))
    stage.finish(decisions, out, inputs, complete=complete)
    (stage.dir / "glossary.json").write_text(json.dumps(glossary, ensure_ascii=False, indent=1), encoding="utf-8")
