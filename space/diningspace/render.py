"""An item's fields as the HTML card of the Browse tab (pure functions, no Gradio).

Every dataset string is escaped: the card shows text, never markup from the data.
"""

from __future__ import annotations

import json
import math
from typing import Any

from eval import tasks
from eval.report.tables import as_text
from eval.types import LETTERS, NUTRIENT_UNITS, NUTRIENTS

NUTRIENT_ROWS = tuple((n, n.capitalize(), NUTRIENT_UNITS[n]) for n in NUTRIENTS)
VQA_CATEGORY_NAMES = {
    "cuisine_technique": "Cuisine technique",
    "dietary_suggestion": "Dietary suggestion",
    "multi_image_analysis": "Multi-image analysis",
    "counterfactual_reasoning": "Counterfactual reasoning",
}


def _e(value: Any) -> str:
    return as_text(value, lines=True)


def _pick(row: dict[str, Any], field: str, lang: str) -> str:
    """The field in the chosen language, falling back to the other one when it is missing."""
    en, zh = row.get(f"{field}_en"), row.get(field)
    return str((en or zh) if lang == "en" else (zh or en) or "")


def _chips(row: dict[str, Any], n_images: int) -> str:
    # The authors' release names no cuisine, category or merchant: those chips are left out, not shown as None.
    chips = [row.get("cuisine"), row.get("category"),
             VQA_CATEGORY_NAMES.get(row.get("vqa_category") or "", row.get("vqa_category")),
             f"{n_images} view{'s' if n_images != 1 else ''}",
             f"merchant {row.get('merchant_id')}" if row.get("merchant_id") not in (None, "") else None]
    return "".join(f'<span class="db-chip">{_e(c)}</span>' for c in chips if c)


def _published(row: dict[str, Any], show_answer: bool) -> str:
    """A row of the authors' release: the exact prompt their scripts send, and (asked for) their ground
    truth as published. Empty for rows of our own layout."""
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        return ""
    parts = [f'<details class="db-block db-prompt"><summary><b>Prompt sent to the model</b> (the authors\' text)'
             f'</summary><p>{_e(prompt)}</p></details>']
    truth = row.get("ground_truth")
    # A letter beside readable options, or a VQA answer, is already shown above as the answer.
    shown = isinstance(truth, str) and truth.strip() == str(row.get("answer") or "").strip() and (
        bool(row.get("options")) or "question" in row)
    if show_answer and truth not in (None, "") and not shown:
        text = truth if isinstance(truth, str) else json.dumps(truth, ensure_ascii=False)
        parts.append(f'<div class="db-block"><b>Ground truth (as published)</b><p>{_e(text)}</p></div>')
    return "".join(parts)


def _classification(row: dict[str, Any], lang: str, show_answer: bool) -> str:
    primary = row.get("options_en") if lang == "en" and row.get("options_en") else row.get("options")
    secondary = row.get("options") if primary is row.get("options_en") else row.get("options_en")
    items = []
    for i, name in enumerate(primary or []):
        letter = LETTERS[i] if i < len(LETTERS) else str(i + 1)
        correct = show_answer and letter == row.get("answer")
        other = secondary[i] if secondary and i < len(secondary) else ""
        items.append(
            f'<li class="db-option{" db-correct" if correct else ""}"><span class="db-letter">{letter}</span>'
            f'<span class="db-name">{_e(name)}</span><span class="db-alt">{_e(other)}</span>'
            f'{"<span class=db-tick>✓ answer</span>" if correct else ""}</li>')
    hint = "" if show_answer else '<p class="db-hint">Which one is it? Turn on <b>Show answer</b> to check.</p>'
    if not items:  # the authors' prompt whose options cannot be read: the prompt itself shows them
        hint += '<p class="db-hint">The options are in the prompt below.</p>'
    return f'<h3>Which dish is in the photos?</h3><ol class="db-options">{"".join(items)}</ol>{hint}'


def _number(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    return "—" if not math.isfinite(number) else f"{number:,.1f}"


def _nutrition(row: dict[str, Any], lang: str) -> str:
    facts = "".join(f"<tr><td>{label}</td><td class='db-num'>{_number(row.get(key))} {unit}</td></tr>"
                    for key, label, unit in NUTRIENT_ROWS)
    ingredients = ", ".join(str(i) for i in row.get("ingredients") or [])
    name, other = _pick(row, "dish_name", lang), _pick(row, "dish_name", "zh" if lang == "en" else "en")
    source = row.get("nutrition_source") or ("the authors' ground truth" if row.get("prompt") else "—")
    return (f"<h3>{_e(name)}</h3>"
            + (f'<p class="db-sub">{_e(other)}</p>' if other != name else "")
            + f"<p><b>Portion</b> {_e(row.get('portion')) or '—'}</p>"
            f"<p><b>Ingredients</b> {_e(ingredients) or '—'}</p>"
            f'<table class="db-facts"><caption>Nutrition facts per serving</caption>{facts}</table>'
            f'<p class="db-sub">Source of the figures: {_e(source)}</p>')


def _vqa(row: dict[str, Any], lang: str) -> str:
    rationale = _pick(row, "rationale", lang)
    return (f'<h3>{_e(_pick(row, "question", lang))}</h3>'
            f'<div class="db-block"><b>Reference answer</b><p>{_e(_pick(row, "answer", lang))}</p></div>'
            + (f'<div class="db-block"><b>Rationale</b><p>{_e(rationale)}</p></div>' if rationale else ""))


def item_card(config: str, row: dict[str, Any], *, n_images: int, lang: str = "zh",
              show_answer: bool = False) -> str:
    """The HTML card for one item of `config` (classification / nutrition / vqa)."""
    answer_format = tasks.answer_format(config)  # "text" for a config no task registered
    if answer_format == "letter":
        body = _classification(row, lang, show_answer)
    elif answer_format == "nutrients":
        body = _nutrition(row, lang)
    else:
        body = _vqa(row, lang)
    return (f'<div class="db-card"><div class="db-id">{_e(row.get("id"))}</div>'
            f'<div class="db-chips">{_chips(row, n_images)}</div>{body}{_published(row, show_answer)}</div>')


def gallery_caption(role: str, index: int) -> str:
    """`reference · view 1` for the merchant photo, `user · view 2` for customer photos."""
    return f"{role} · view {index + 1}"


def plain_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The row as JSON-safe values (float32 → float, NaN → None) for the /browse API."""
    def clean(value: Any) -> Any:
        if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalars
            value = value.item()
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return {k: clean(v) for k, v in row.items()}
