"""DiningBench nutrition estimation error: parse a model's nutrition JSON, score MAE/RMSE/MAPE.

The one parser for the nutrition task (`parse_nutrition`); the harness imports it from here.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

NUTRIENTS = ("calories", "protein", "carbohydrates", "fat")


# Key synonyms after _canonical_key folding (lower case, no spaces/underscores/"total").
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "calories": ("calories", "calorie", "cal", "kcal", "energy", "热量", "卡路里", "能量", "kilocalories"),
    "protein": ("protein", "proteins", "蛋白质", "蛋白"),
    "carbohydrates": ("carbohydrates", "carbohydrate", "carbs", "carb", "碳水", "碳水化合物", "carbohydrates(g)"),
    "fat": ("fat", "fats", "脂肪", "totalfat", "lipid", "lipids"),
}
_KEY_TO_NUTRIENT = {syn: nutrient for nutrient, syns in _SYNONYMS.items() for syn in syns}
# Where a nested answer keeps its totals: {"nutrition": {...}}, {"total": {...}}, {"营养成分": {...}}.
_CONTAINER_KEYS = ("nutrition", "nutrients", "nutritionfacts", "nutritioninfo", "nutritionalinfo",
                   "nutritionalvalues", "perserving", "total", "totals", "estimate", "estimates",
                   "营养", "营养成分", "营养信息", "每份", "总计", "合计", "answer", "result")
_UNIT_WORDS = r"kcal|kj|mg|g|grams?|千卡|大卡|千焦|毫克|克|卡"
_KJ_PER_KCAL = 4.184
_MAX_NESTING = 6
_NUMBER = r"(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?"
_RANGE_RE = re.compile(rf"({_NUMBER})\s*(?:-|–|—|~|～|至|到|to)\s*({_NUMBER})", re.IGNORECASE)
_NUMBER_RE = re.compile(_NUMBER)
_FENCE_RE = re.compile(r"```[a-zA-Z]*\s*(.*?)(?:```|$)", re.DOTALL)
# "key: value" pairs for text that is not valid JSON (truncated, commented, prose or key lists).
_PAIR_RE = re.compile(
    r"(?:^|[{,\n;；，|])[^\S\n]*[\"']?(?P<key>[^\s\"':：=\n{},;|][^\"':：=\n{},;|]{0,39}?)[\"']?\s*(?:[:：=]|\|)\s*"
    r"(?P<val>\"[^\"\n]*\"?|'[^'\n]*'?|(?:[^,\n}{;；，|]|,(?=\d{3}(?!\d)))*)"
)
_FINAL_MARKER_RE = re.compile(r"final\s+answer|最终答案|最终结果|最终估算|最终估计", re.IGNORECASE)


def _strip_reasoning(text: str) -> str:
    """Drop <think>...</think>: the answer follows the scratchpad; an unclosed one has no answer."""
    if "</think>" in text.lower():
        text = re.split(r"</think>", text, flags=re.IGNORECASE)[-1]
    return re.split(r"<think>", text, flags=re.IGNORECASE)[0]


@functools.lru_cache(maxsize=4096)  # models repeat the same few keys: five regexes once per spelling
def _canonical_key(key: str) -> tuple[str | None, str]:
    """Map a key to (nutrient or None, unit hint): "Energy (kJ)" -> ("calories", "kj")."""
    key = unicodedata.normalize("NFKC", str(key)).casefold().strip(" *_#-•`\"'")
    unit = ""
    bracket = re.search(r"[(\[]\s*([^)\]]*)\s*[)\]]", key)
    if bracket:
        unit = bracket.group(1).strip()
        key = key[: bracket.start()] + key[bracket.end():]
    suffix = re.search(rf"[_\s-]({_UNIT_WORDS})$", key)
    if suffix:
        unit = unit or suffix.group(1)
        key = key[: suffix.start()]
    key = re.sub(r"[\s_\-]+", "", key)
    key = re.sub(r"^(?:total|estimated|approx(?:imate)?|约|估计|总|每份)+", "", key)
    return _KEY_TO_NUTRIENT.get(key) or _KEY_TO_NUTRIENT.get(key + unit), unit


def _to_amount(value: Any, nutrient: str, unit_hint: str = "") -> float | None:
    """A finite non-negative amount in kcal (calories) or g from a number, string, range or dict. kJ is
    converted (÷ 4.184) because some models answer with the EU label's energy line; a range becomes its
    midpoint because that is the estimate the model commits to."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        amount = float(value)
        unit = unit_hint
    elif isinstance(value, Mapping):
        lowered = {str(k).casefold(): v for k, v in value.items()}
        if "min" in lowered and "max" in lowered:
            low, high = _to_amount(lowered["min"], nutrient, unit_hint), _to_amount(lowered["max"], nutrient, unit_hint)
            return None if low is None or high is None else (low + high) / 2
        for name in ("value", "amount", "数值", "estimate"):
            if name in lowered:
                unit = str(lowered.get("unit", lowered.get("单位", unit_hint)))
                return _to_amount(lowered[name], nutrient, unit)
        return None
    elif isinstance(value, list | tuple):
        if len(value) != 2:
            return None
        low, high = _to_amount(value[0], nutrient, unit_hint), _to_amount(value[1], nutrient, unit_hint)
        return None if low is None or high is None else (low + high) / 2
    elif isinstance(value, str):
        text = unicodedata.normalize("NFKC", value).strip().casefold()
        if re.match(r"^\s*-\s*\d", text):
            return None  # a negative amount is not an estimate
        first = _NUMBER_RE.search(text)
        if first is None:
            return None
        # Only a range that starts at the first number is the estimate: "600 (range 500-800)" is 600.
        span = _RANGE_RE.match(text, first.start())
        if span:
            amount = (float(span.group(1).replace(",", "")) + float(span.group(2).replace(",", ""))) / 2
        else:
            amount = float(first.group(0).replace(",", ""))
        unit = text + " " + unit_hint
    else:
        return None
    unit = unit.casefold()
    if re.search(r"kj|千焦", unit) and nutrient == "calories":
        amount /= _KJ_PER_KCAL
    elif re.search(r"(?<![a-z])mg|毫克", unit) and nutrient != "calories":
        amount /= 1000.0
    return amount if math.isfinite(amount) and amount >= 0 else None


def nutrition_from_mapping(obj: Any, _depth: int = 0) -> dict[str, float] | None:
    """The four nutrients from a decoded JSON value, looking inside the usual nested shapes.

    >>> nutrition_from_mapping({"nutrition": {"热量": "450 kcal", "蛋白质": "20g", "碳水": 50, "脂肪": 18}})
    {'calories': 450.0, 'protein': 20.0, 'carbohydrates': 50.0, 'fat': 18.0}
    """
    if _depth > _MAX_NESTING:
        return None  # an answer is never buried this deep; stop before Python's recursion limit
    if isinstance(obj, list):
        # A one-element list wrapping the object ("[{...}]") is common; longer lists are per-item.
        return nutrition_from_mapping(obj[0], _depth + 1) if len(obj) == 1 else None
    if not isinstance(obj, Mapping):
        return None
    found: dict[str, float] = {}
    seen: set[str] = set()
    for key, value in obj.items():
        nutrient, unit = _canonical_key(key)
        if nutrient is None:
            continue
        seen.add(nutrient)
        amount = _to_amount(value, nutrient, unit)
        if amount is not None:
            found[nutrient] = amount
    if len(found) == len(NUTRIENTS):
        return {n: found[n] for n in NUTRIENTS}
    if seen:
        return None  # the answer object was found but is incomplete: never fill in a guess
    for key, value in obj.items():
        folded = re.sub(r"[\s_\-]+", "", str(key).casefold())
        if folded in _CONTAINER_KEYS or any(folded.startswith(k) for k in ("nutrition", "营养")):
            nested = nutrition_from_mapping(value, _depth + 1)
            if nested is not None:
                return nested
    nested_found = [r for v in obj.values() if isinstance(v, Mapping) if (r := nutrition_from_mapping(v, _depth + 1))]
    return nested_found[0] if len(nested_found) == 1 else None


def _clean_json(text: str) -> str:
    """Repair what models add to JSON: comments, trailing commas, unquoted unit values."""
    text = re.sub(r"//[^\n\"]*$", "", text, flags=re.MULTILINE)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    text = re.sub(r"#[^\n\"{}]*$", "", text, flags=re.MULTILINE)
    text = re.sub(r",\s*([}\]])", r"\1", text)
    return text


def _decode(candidate: str) -> Any:
    for attempt in (candidate, _clean_json(candidate)):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError):
            pass
        try:
            return ast.literal_eval(attempt)  # single quotes, Python dict reprs
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return None


def _scan_pairs(text: str) -> dict[str, float] | None:
    """Four nutrients from loose "key: value" text; a key given two different values is ambiguous."""
    values: dict[str, set[float]] = {}
    for match in _PAIR_RE.finditer(_clean_json(text)):
        nutrient, unit = _canonical_key(match.group("key"))
        if nutrient is None or "%" in match.group("val"):
            continue  # "Protein: 40% DV" is a share of a daily value, not the dish's grams
        amount = _to_amount(match.group("val").strip().strip("\"'"), nutrient, unit)
        if amount is not None:
            values.setdefault(nutrient, set()).add(round(amount, 6))
    if all(len(values.get(n, ())) == 1 for n in NUTRIENTS):
        return {n: next(iter(values[n])) for n in NUTRIENTS}
    return None


# Prose answers name the four nutrients in many orders and shapes; one regex finds each mention.
# Key first: "Calories: 450 kcal", "**Protein**: ~25 g", "| Fat | 18 g |", "calories 500", "蛋白质：约25g".
# Value first: "120 kCal", "6 g of carbs", "~9g protein", "约450千卡".
# Every repeat is bounded and a number may not start inside another number, so a scan is linear
# even on a 60,000-character run of digits or "450 kcal " (tests/test_reliability_parsers.py).
_PROSE_KEYS = {
    "calories": r"(?<![A-Za-z])(?:calories|calorie|kilocalories|energy)(?![A-Za-z])|热量|卡路里|能量",
    "protein": r"(?<![A-Za-z])proteins?(?![A-Za-z])|蛋白质|蛋白",
    "carbohydrates": r"(?<![A-Za-z])(?:carbohydrates?|carbs?)(?![A-Za-z])|碳水化合物|碳水",
    "fat": r"(?<![A-Za-z])(?:total\s)?fats?(?![A-Za-z])|脂肪",
}
# After a value, these words name calories by their unit alone ("450 kcal", "1883 kJ", "约450千卡").
_VALUE_FIRST_ENERGY = r"(?<![A-Za-z])(?:kcal|kj|kilocalories|calories|calorie|cals?)(?![A-Za-z])|千卡|大卡|千焦|卡路里"
_PROSE_DIGITS = r"\d{1,7}(?:,\d{3})?(?:\.\d{1,4})?"
# A minus sign before the value makes it negative, which is no estimate: "-50" is not read as 50.
_PROSE_VALUE = (rf"(?<![\d.,\-−]){_PROSE_DIGITS}(?:[^\S\n]?(?:-|–|—|~|～|to|至|到)[^\S\n]?{_PROSE_DIGITS})?"
                r"(?![\d%]|[^\S\n]*%)")
_HEDGE = r"(?:approx(?:imately|\.)?|about|around|roughly|almost|estimated|est\.|约为|大约|约)"
_MASS_UNIT = r"(?:g|grams?|mg|克|毫克)(?![A-Za-z])"
_PROSE_RE = re.compile(
    "|".join(rf"(?P<key_{n}>{pattern})" for n, pattern in _PROSE_KEYS.items()).join(("(?:", ")"))
    + rf"[^\S\n]?(?:[(（](?P<hint>[^)）\n]{{0,12}})[)）])?[^\w\n]{{0,8}}(?:{_HEDGE}[^\w\n]{{0,4}})?"
    + rf"(?P<val>{_PROSE_VALUE})[^\S\n]?(?P<unit>kcal|kj|千卡|大卡|千焦|{_MASS_UNIT})?"
    # A unit of energy names the nutrient by itself: "Total: 400-500 kcal".
    + rf"|(?P<val2>{_PROSE_VALUE})[^\S\n]?(?P<energy2>{_VALUE_FIRST_ENERGY})"
    # A value right after "Key:" belongs to that key ("Fiber: 1 g Protein: 3 g"), not to the next one.
    + rf"|(?<![:：=])(?<![:：=][^\S\n])(?P<val3>{_PROSE_VALUE})[^\S\n]?(?:(?P<unit3>{_MASS_UNIT})[^\S\n]?(?:of[^\S\n])?)?"
    + "(?:" + "|".join(rf"(?P<key3_{n}>{pattern})" for n, pattern in _PROSE_KEYS.items() if n != "calories") + ")",
    re.IGNORECASE,
)
# "saturated fat: 8 g" is not the dish's fat, nor "net carbs" its carbohydrates.
# Only words on the same line count: "(mostly unsaturated)\nProtein ~8g" is protein.
_NOT_THE_NUTRIENT_RE = re.compile(r"(?:saturated|sat\.|trans|饱和|反式|net)[^\w\n]{0,2}\Z", re.IGNORECASE)
# A heading that marks a set as the dish's answer, after a chain of thought lists the parts.
_TOTAL_MARKER_RE = re.compile(r"total|overall|combined|per serving|whole (?:meal|dish)|总计|合计|总共|总量|每份|整份",
                              re.IGNORECASE)
# Values per 100 g describe a food, not the portion in the photo: the task asks for the serving.
_PER_100G_RE = re.compile(r"per\s*100\s*g|/\s*100\s*g|每\s*100\s*(?:g|克)|100\s*(?:g|克)\s*含", re.IGNORECASE)
_SET_GAP = 300  # characters: mentions further apart than this belong to different passages


def _prose_mentions(text: str) -> list[tuple[str, float, int, int]]:
    """(nutrient, amount, start, end) for each nutrient named with its value, in order."""
    mentions = []
    for match in _PROSE_RE.finditer(text):
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        nutrient = next((k.split("_", 1)[1] for k in groups if k.startswith("key")), "calories")
        value, unit = next((groups[v], groups.get(u, "")) for v, u in
                           (("val", "unit"), ("val2", "energy2"), ("val3", "unit3")) if v in groups)
        if _NOT_THE_NUTRIENT_RE.search(text[max(0, match.start() - 12): match.start()]):
            continue
        amount = _to_amount(value, nutrient, f"{unit} {groups.get('hint', '')}")
        if amount is not None:
            mentions.append((nutrient, amount, match.start(), match.end()))
    return mentions


def _scan_prose(text: str) -> dict[str, float] | None:
    """The dish's four nutrients from prose, lists or tables, or None. Mentions are grouped into sets; a
    nutrient named again starts a new set. A chain of thought lists each ingredient before the dish, so the
    last complete set wins, unless a set headed "total"/"合计"/"per serving" exists: the last such set wins,
    and if it is incomplete the answer is partial. Sets given per 100 g are skipped.

    >>> _scan_prose("Estimated nutrition:\\nCalories: 450 kcal\\nProtein: 25 g\\nCarbs: 50 g\\nFat: 18 g")
    {'calories': 450.0, 'protein': 25.0, 'carbohydrates': 50.0, 'fat': 18.0}
    >>> _scan_prose("主要营养成分：\\n• 蛋白质：约25g\\n• 脂肪：约20g\\n• 碳水化合物：约60g\\n• 热量：约520千卡")
    {'calories': 520.0, 'protein': 25.0, 'carbohydrates': 60.0, 'fat': 20.0}
    >>> _scan_prose("120 kCal, 6 g of carbs, 11 g of fats, 1.5g of Protein")
    {'calories': 120.0, 'protein': 1.5, 'carbohydrates': 6.0, 'fat': 11.0}
    >>> _scan_prose("Calories: 354, fats 13.3, protein 20.7, Carbs 37.6")
    {'calories': 354.0, 'protein': 20.7, 'carbohydrates': 37.6, 'fat': 13.3}
    >>> _scan_prose("| Nutrient | Amount |\\n|---|---|\\n| **Calories** | ~400-500 kcal |\\n| Protein | 20 g |"
    ...             "\\n| Carbohydrates | 55 g |\\n| Fat | 2092 kJ |")["calories"]  # midpoint; kJ only for energy
    450.0
    >>> _scan_prose("Rice: 200 kcal, 4 g protein, 45 g carbs, 0.5 g fat.\\nTotal: 650 kcal, 30 g protein, "
    ...             "70 g carbs, 25 g fat.\\nEach spoon of sauce adds 40 kcal, 1 g protein, 5 g carbs, 2 g fat.")
    {'calories': 650.0, 'protein': 30.0, 'carbohydrates': 70.0, 'fat': 25.0}
    >>> _scan_prose("Chicken: 300 kcal, 40 g protein, 0 g carbs, 14 g fat. Total: 500 kcal, 45 g protein") is None
    True
    >>> _scan_prose("Per 100 g: 165 kcal, 31 g protein, 0 g carbs, 3.6 g fat") is None
    True
    >>> _scan_prose("Calories: 25% DV, Protein: 40% DV, Carbs: 10% DV, Fat: 30% DV") is None
    True
    """
    mentions = _prose_mentions(text)
    sets: list[tuple[dict[str, float], bool]] = []  # (values, marked as total)
    current: dict[str, float] = {}
    heading_start = first = last_end = 0

    def close() -> None:
        if current:
            passage = text[heading_start:last_end]
            if not _PER_100G_RE.search(passage):
                heading = text[heading_start:first]
                sets.append((dict(current), bool(_TOTAL_MARKER_RE.search(heading))))

    for nutrient, amount, start, end in mentions:
        if nutrient in current or (current and start - last_end > _SET_GAP):
            close()
            current, heading_start = {}, last_end
        if not current:
            first = start
        current[nutrient] = amount
        last_end = end
    close()
    complete = [(i, values) for i, (values, _) in enumerate(sets) if len(values) == len(NUTRIENTS)]
    marked = [i for i, (_, is_total) in enumerate(sets) if is_total]
    if marked:
        if len(sets[marked[-1]][0]) < len(NUTRIENTS) and (not complete or complete[-1][0] < marked[-1]):
            return None  # the total the model gave is partial: never fall back to an ingredient's numbers
        marked_complete = [values for i, values in complete if i in marked]
        if marked_complete:
            return {n: marked_complete[-1][n] for n in NUTRIENTS}
    return {n: complete[-1][1][n] for n in NUTRIENTS} if complete else None


def _brace_spans(text: str) -> list[str]:
    """Top-level {...} spans in order; an unclosed last one runs to the end (truncated output)."""
    spans, depth, start, quote = [], 0, -1, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
            continue
        if ch == '"' and depth:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start: i + 1])
    if depth:
        spans.append(text[start:])
    return spans


_UNKNOWN_VALUES = {"", "-1", "-1.0", "unknown", "n/a", "na", "none", "null", "?", "未知", "无法估计", "不确定", "不详"}


def _declined(obj: Any, _depth: int = 0) -> bool:
    """Whether a decoded answer object names nutrients and gives none of them: every value is the
    prompt's unknown marker (-1), null or a word for unknown. Why: the model's final word is "I cannot
    tell"; numbers found earlier in its reasoning (an ingredient's, another dish's) are not its answer."""
    if _depth > _MAX_NESTING:
        return False
    if isinstance(obj, list):
        return len(obj) == 1 and _declined(obj[0], _depth + 1)
    if not isinstance(obj, Mapping):
        return False
    values = [v for k, v in obj.items() if _canonical_key(k)[0] is not None]
    if values:
        return all(v is None or (isinstance(v, int | float) and not isinstance(v, bool) and v < 0)
                   or (isinstance(v, str) and v.strip().casefold() in _UNKNOWN_VALUES) for v in values)
    return any(_declined(v, _depth + 1) for v in obj.values() if isinstance(v, Mapping | list))


def parse_nutrition(text: str | None) -> dict[str, float] | None:
    """Read `{calories, protein, carbohydrates, fat}` (kcal, g) from a model's answer, or None. Looks at
    fenced blocks and {...} objects, last first (the final answer wins), then at loose "key: value" text. All
    four nutrients must be present: a partial answer is unparsed, never completed with a guess.

    >>> parse_nutrition('```json\\n{"calories": 450, "protein": 20, "carbohydrates": 50, "fat": 18}\\n```')
    {'calories': 450.0, 'protein': 20.0, 'carbohydrates': 50.0, 'fat': 18.0}
    >>> parse_nutrition('估算如下：{"热量": "约600千卡", "蛋白质": "25克", "碳水化合物": "60-80g", "脂肪": "20 g"}')
    {'calories': 600.0, 'protein': 25.0, 'carbohydrates': 70.0, 'fat': 20.0}
    >>> parse_nutrition("{'energy': '2092 kJ', 'protein': 30, 'carbs': 40, 'fat': 10,}")["calories"]
    500.0
    >>> parse_nutrition('{"calories": 450, "protein": 20, "carbohydrates": 50, "fat": 1') ["fat"]  # truncated
    1.0
    >>> parse_nutrition('{"calories": 450, "protein": 20}') is None
    True
    >>> parse_nutrition("I cannot estimate nutrition from this image.") is None
    True
    >>> parse_nutrition('Grapes have 69 kcal, 0.7 g protein per 100 g ...\\n{"calories": -1, "protein": -1, '
    ...                 '"carbohydrates": -1, "fat": -1}') is None  # declined: no number from the reasoning
    True
    """
    if isinstance(text, Mapping):
        return nutrition_from_mapping(text)
    if not isinstance(text, str):
        return None
    text = unicodedata.normalize("NFKC", _strip_reasoning(text))
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)]
    candidates += _brace_spans(text)
    for candidate in reversed(candidates):
        decoded = _decode(candidate.strip())
        if decoded is not None and _declined(decoded):
            return None  # the last answer object says "unknown": that is the answer
        result = nutrition_from_mapping(decoded) if decoded is not None else _scan_pairs(candidate)
        if result is not None:
            return result
    finals = list(_FINAL_MARKER_RE.finditer(text))
    if finals:
        tail = text[finals[-1].end():].lstrip(" :：-—*")
        result = _scan_prose(tail) or _scan_pairs(tail)
        if result is not None:
            return result
    # Prose read as sets of mentions; then loose "key: value" pairs, for keys the prose reader
    # does not know ("Energy (kJ)", "calories_kcal").
    return _scan_prose(text) or _scan_pairs(text)


def _reference(i: int, ref: Any) -> dict[str, float]:
    if not isinstance(ref, Mapping):
        raise ValueError(f"reference {i} must be a dict with {', '.join(NUTRIENTS)}; got {type(ref).__name__}")
    out = {}
    for nutrient in NUTRIENTS:
        value = ref.get(nutrient)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"reference {i}: {nutrient} must be a finite number >= 0, got {value!r}")
        out[nutrient] = float(value)
    return out


def _prediction(value: Any) -> dict[str, float] | None:
    return nutrition_from_mapping(value) if isinstance(value, Mapping) else parse_nutrition(value)


def _median(values: np.ndarray) -> float:
    """`np.median` of a non-empty 1-D array, the same value (the middle one, or the mean of the two
    middle ones; NaN when any is NaN) without `np.median`, which imports numpy.ma (20 ms) on first use.

    >>> _median(np.array([3.0, 1.0, 2.0])), _median(np.array([4.0, 1.0, 2.0, 3.0]))
    (2.0, 2.5)
    """
    ordered = np.sort(values)  # NaN sorts last
    if math.isnan(ordered[-1]):
        return math.nan
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return float(np.mean(ordered[middle - 1:middle + 1]))


def _summary(errors: np.ndarray, truths: np.ndarray, suffix: str) -> dict[str, Any]:
    """MAE/RMSE/MAPE per component and the pooled figures, over the items given (nutrients x items)."""
    out: dict[str, Any] = {}
    all_apes: list[float] = []
    for j, c in enumerate(NUTRIENTS):
        e = np.abs(np.ascontiguousarray(errors[j]))
        y = np.ascontiguousarray(truths[j])
        nonzero = y > 0
        apes = e[nonzero] / y[nonzero]
        all_apes.extend(apes.tolist())
        out[f"{c}_mae{suffix}"] = float(e.mean()) if e.size else None
        out[f"{c}_rmse{suffix}"] = float(np.sqrt((e**2).mean())) if e.size else None
        out[f"{c}_mape{suffix}"] = float(apes.mean()) if apes.size else None
        out[f"{c}_median_ape{suffix}"] = _median(apes) if apes.size else None
        out[f"{c}_wmape{suffix}"] = float(e.sum() / y.sum()) if y.sum() > 0 else None
    mapes = [out[f"{c}_mape{suffix}"] for c in NUTRIENTS]
    wmapes = [out[f"{c}_wmape{suffix}"] for c in NUTRIENTS]
    out[f"avg_mape{suffix}"] = float(np.mean(mapes)) if None not in mapes else None
    out[f"median_ape{suffix}"] = _median(np.asarray(all_apes, dtype=float)) if all_apes else None
    out[f"wmape{suffix}"] = float(np.mean(wmapes)) if None not in wmapes else None
    return out


def score_nutrition(predictions: Sequence[Any], references: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """Nutrition error figures (flat keys, ratios as fractions) plus per-item APEs for the harness. Policies:
    an unparsed prediction is scored as predicting 0 for every component, so its error is |y| and its APE is
    1.0 (predicting nothing is never better than predicting zero); the `*_parsed_only` figures leave it out. A
    ground truth of 0 is left out of that component's MAPE (and median APE) and counted in `{c}_zero_gt`; MAE,
    RMSE and WMAPE still include it.

    >>> r = score_nutrition(
    ...     ['{"calories": 450, "protein": 20, "carbohydrates": 50, "fat": 18}', "no idea"],
    ...     [{"calories": 500, "protein": 25, "carbohydrates": 50, "fat": 20},
    ...      {"calories": 400, "protein": 10, "carbohydrates": 40, "fat": 10}])
    >>> r["calories_mape"], r["calories_mape_parsed_only"], r["parse_failures"]  # (0.1 + 1.0) / 2
    (0.55, 0.1, 1)
    """
    _check_lengths(predictions, references)
    return score_parsed_nutrition([_prediction(p) for p in predictions], references)


def _check_lengths(predictions: Sequence[Any], references: Sequence[Any]) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"predictions ({len(predictions)}) and references ({len(references)}) differ in length")
    if not references:
        raise ValueError("no predictions to score: predictions and references are empty")


def score_item(guess: Mapping[str, float] | None, truth: Mapping[str, float]) -> dict[str, Any]:
    """One parsed answer against its (checked) reference: `{"parsed", "ape", "abs_error"}`.

    >>> score_item(None, {"calories": 400.0, "protein": 0.0, "carbohydrates": 40.0, "fat": 10.0})["ape"]
    {'calories': 1.0, 'protein': None, 'carbohydrates': 1.0, 'fat': 1.0}
    """
    ape: dict[str, float | None] = {}
    abs_error: dict[str, float] = {}
    for c in NUTRIENTS:
        y = truth[c]
        error = abs((guess[c] if guess is not None else 0.0) - y)
        abs_error[c] = error
        ape[c] = error / y if y > 0 else None
    return {"parsed": guess, "ape": ape, "abs_error": abs_error}


def score_parsed_nutrition(parsed: Sequence[Mapping[str, float] | None],
                           references: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """`score_nutrition` for answers already read by `parse_nutrition` (a dict, or None when unparsed):
    each answer is parsed once, wherever it was parsed."""
    _check_lengths(parsed, references)
    truths = [_reference(i, ref) for i, ref in enumerate(references)]
    per_item = [score_item(guess, truth) for guess, truth in zip(parsed, truths, strict=True)]
    return {**nutrition_figures(per_item, truths), "per_item": per_item}


def nutrition_figures(per_item: Sequence[Mapping[str, Any]], references: Sequence[Mapping[str, float]]
                      ) -> dict[str, Any]:
    """Every figure of `score_nutrition` but `per_item`, from its per-item results (each item's
    `parsed`, None when unparsed, and `abs_error`): a saved run's figures without parsing again."""
    _check_lengths(per_item, references)
    truths = _reference_matrix(references)  # one contiguous row of values per nutrient
    errors = np.array([[float(item["abs_error"][c]) for item in per_item] for c in NUTRIENTS], dtype=float)
    answered = np.fromiter((item.get("parsed") is not None for item in per_item), dtype=bool, count=len(per_item))
    result: dict[str, Any] = {"n": len(per_item), "parse_failures": int((~answered).sum())}
    result.update(_summary(errors, truths, ""))
    result.update(_summary(errors[:, answered], truths[:, answered], "_parsed_only"))
    for j, c in enumerate(NUTRIENTS):
        result[f"{c}_zero_gt"] = int((truths[j] == 0).sum())
    result["zero_gt_exclusions"] = sum(result[f"{c}_zero_gt"] for c in NUTRIENTS)
    return result


def _reference_matrix(references: Sequence[Any]) -> np.ndarray:
    """The references' values, nutrients x items, each checked as `_reference` checks it (plain
    dicts of plain numbers are checked in bulk; anything else, and any refusal, goes through
    `_reference` item by item, for the same values and the same error)."""
    try:
        if all(type(ref) is dict for ref in references):
            columns = [[ref[c] for ref in references] for c in NUTRIENTS]
            if {type(v) for column in columns for v in column} <= {int, float}:
                values = np.array(columns, dtype=float)
                if np.isfinite(values).all() and (values >= 0).all():
                    return values
    except (KeyError, OverflowError):
        pass
    truths = [_reference(i, ref) for i, ref in enumerate(references)]
    return np.array([[t[c] for t in truths] for c in NUTRIENTS], dtype=float)
