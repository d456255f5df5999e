"""One table and percent style for everything printed or written: markdown tables, `24.45` percent
cells with `–` for a missing value, `[low, high]` intervals, the end-of-run summary table, and `as_text`,
the one way text from elsewhere (a model, a server, a run folder, a release) is shown, in Markdown or HTML."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from eval import protocols
from eval.numbers import resampled_unit
from eval.protocols import Protocol
from eval.report.runs import RunData
from eval.settings import RunSettings
from eval.tasks import all_tasks
from eval.types import TaskFigures, UserError

MISSING = "–"


def pct(value: float | None) -> str:
    """A fraction as a percentage with 2 decimals (no % sign: headers say `(%)`)."""
    return MISSING if value is None or math.isnan(value) else f"{100 * value:.2f}"


SMALL_SAMPLE = 20  # merchants: below this a 95% interval covers less than 95% (0.84 measured at 5)
SMALL_MARK = "‡"
SMALL_NOTE = (f"{SMALL_MARK} fewer than {SMALL_SAMPLE} merchants: a 95% interval that resamples merchants covers "
              "less than 95% with so few (about 0.84 measured at 5 merchants); read it as rough.")
SMALL_ITEMS_NOTE = (f"{SMALL_MARK} fewer than {SMALL_SAMPLE} items: a 95% interval that resamples so few items covers "
                    "less than 95%; read it as rough.")


def small_note(units: set[str]) -> str:
    """The note for `‡`, in the words of what the marked intervals resampled (merchants or items)."""
    return SMALL_ITEMS_NOTE if units == {"items"} else SMALL_NOTE


def resampled_units(runs: Sequence[RunData]) -> set[str]:
    """What the runs' intervals resampled, as they recorded it (metrics.json `resampled`, and
    `official_resampled` for the authors' figures), else as their rows say."""
    units = set()
    for run in runs:
        for task, rows in run.scores.items():
            units.add(str(run.entry(task).get("resampled") or resampled_unit(rows)))
        for spec in all_tasks():  # a task whose protocol's figure leads: what that figure resampled
            if spec.name in run.scores and run.headline(spec) is not None:
                units.add(str(run.entry(spec.name).get("official_resampled") or "items"))
    return units or {"merchants"}


def read_differently(entry: TaskFigures) -> int:
    """How many answers the run's protocol and ours read differently (a task's metrics.json
    `official_disagreements`); 0 when the entry holds no count (a folder from elsewhere may hold anything)."""
    found = entry.get("official_disagreements")
    return found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else 0


def indices_sent(run: RunData) -> tuple[int, ...] | None:
    """The image indices the run's requests named (`Protocol.indices_sent`: the authors' protocol), None
    when views went by count (`--images`) or the settings cannot be read back."""
    settings = run.info.get("settings")
    try:
        return run.protocol.indices_sent(RunSettings.from_saved(settings if isinstance(settings, dict) else {}))
    except (TypeError, ValueError, UserError):
        return None


NUTRIENT_LABELS = (("calories", "", " kcal"), ("protein", "P ", " g"), ("carbohydrates", "C ", " g"),
                   ("fat", "F ", " g"))


def readable(value: Any, limit: int = 220) -> str:
    """An answer or a reference as one line a person reads: nutrition as `682 kcal · P 33.2 g · C 81.6 g ·
    F 23.3 g` (a nutrient left out shows as ?), other values as their text or JSON, cut at `limit`.

    >>> readable({"calories": 682.4, "protein": 33.21, "fat": 23.3}), readable(None), readable(["B", "C"])
    ('682 kcal · P 33.2 g · C ? g · F 23.3 g', '', '["B", "C"]')
    """
    if value is None:
        return ""
    if isinstance(value, dict) and any(key in value for key, _, _ in NUTRIENT_LABELS):
        text = " · ".join(f"{prefix}{number:.{0 if key == 'calories' else 1}f}{unit}"
                          if isinstance(number := value.get(key), int | float) and not isinstance(number, bool)
                          else f"{prefix}?{unit}" for key, prefix, unit in NUTRIENT_LABELS)
    else:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def with_ci(value: float | None, interval: Sequence[float] | None, merchants: int | None = None, *,
            unit: str = "merchant") -> str:
    """`24.45 [20.10, 28.80]`; `‡` after an interval from fewer than SMALL_SAMPLE merchants (or items, the
    `unit` resampled where the release names no merchant); the value alone when there is no interval, with
    why when `merchants` says (one merchant cannot be resampled).

    >>> with_ci(0.5, (0.4, 0.6), merchants=5), with_ci(0.5, None, merchants=1), with_ci(0.5, (0.4, 0.6), 30)
    ('50.00 [40.00, 60.00]‡', '50.00 (no interval: one merchant)', '50.00 [40.00, 60.00]')
    >>> with_ci(0.5, None, 1, unit="item")
    '50.00 (no interval: one item)'
    """
    if value is None:
        return MISSING
    if not interval or any(x is None or math.isnan(x) for x in interval):
        return pct(value) + (f" (no interval: one {unit})" if merchants is not None and merchants < 2 else "")
    mark = SMALL_MARK if merchants is not None and merchants < SMALL_SAMPLE else ""
    return f"{pct(value)} [{pct(interval[0])}, {pct(interval[1])}]{mark}"


def headline_cell(value: float | None, interval: Sequence[float] | None, *, failed: int = 0, n: int = 0,
                  merchants: int | None = None) -> str:
    """`with_ci`, or `– (all 12 failed)` for a task with no answered item (its headline is None).

    >>> headline_cell(None, None, failed=12, n=12), headline_cell(0.5, None, failed=1, n=4)
    ('– (all 12 failed)', '50.00')
    """
    if value is None and n and failed >= n:
        return f"{MISSING} (all {failed} failed)"
    return with_ci(value, interval, merchants)


# Text from elsewhere is shown as the characters it is by writing every character that could be
# read as syntax as a character reference (`&#42;` for `*`): HTML renders a reference as its
# character, and CommonMark / GitHub-flavoured Markdown render it as that character and never as
# syntax (nor as a table's `|`). So one escaped text is safe in Markdown, in a report.md and in HTML.
# Always: HTML's `& < >` (no tag, entity or `<http://...>` autolink) and Markdown's inline syntax.
# `_` inside a word (`cuisine_technique`) is never emphasis and stays as written. A link or image
# needs `](`, a link definition `[ref]:`, a bare address linkified by GFM `://` or `www.`.
_SPECIAL = re.compile(r"[\\`*~|#$&<>]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|(?<=\])\(|:(?=//)|(?<=www)\.",
                      re.IGNORECASE)
# What starts a block where a line starts: a list item (`- x`, `+ x`, `1. x`, `1) x`), a setext
# heading's underline or a rule (`===`, `- - -`); its marker character is escaped.
_BLOCK = re.compile(r"^[ \t]{0,3}(?:\d{1,9}([.)])|([-+]))(?=[ \t]|$)|^[ \t]{0,3}([-=])[-= \t]*$", re.MULTILINE)
_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def as_text(value: object, *, lines: bool = False) -> str:
    """`value` as literal text in Markdown or HTML: links, images, tags, code, emphasis, tables,
    lists and headings show as the characters they are. Whitespace runs, newlines included, become
    one space (a table row or a heading stays one line) unless `lines`, for an element that shows
    line breaks. The one escaping helper for what came from a model, a server, a run folder or a
    release, in every Markdown writer, `eval view` and the Space.

    >>> print(as_text("![](http://t/x) <img src=x onerror=alert(1)>\\n`a|b` **c**"))
    ![]&#40;http&#58;//t/x) &lt;img src=x onerror=alert(1)&gt; &#96;a&#124;b&#96; &#42;&#42;c&#42;&#42;
    >>> as_text("cuisine_technique 24.45 [20.10, 28.80]")
    'cuisine_technique 24.45 [20.10, 28.80]'
    """
    text = "" if value is None else str(value)
    if not lines:
        text = " ".join(text.split())
    marks = {found.start() for found in _SPECIAL.finditer(text)}
    defined = text.rfind("]:")  # every `[` before the last `]:` (a label longer than a line is no label)
    if defined > 0:
        marks.update(i for i, c in enumerate(text[:defined]) if c == "[")
    for found in _BLOCK.finditer(text):
        marks.add(next(found.start(g) for g in (1, 2, 3) if found.start(g) >= 0))
    return "".join(_NAMED.get(c) or f"&#{ord(c)};" if i in marks else c for i, c in enumerate(text))


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table; every cell is text (`as_text`), whatever it holds."""
    lines = ["| " + " | ".join(as_text(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(as_text(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def results_table(metrics: dict[str, Any], protocol: Protocol | None = None) -> str:
    """The end-of-run table (metrics.json content): headline with its 95% interval, the items that
    did not count as answered, and token totals; notes on what to do about them follow. Under a
    protocol whose headline is not ours (`protocol.headline`), its figure leads and ours stands beside."""
    protocol = protocol or protocols.get(None)
    rows, notes = [], []
    for spec in all_tasks():
        task = spec.name
        if (m := metrics.get(task)) is None:
            continue
        failed, truncated = m.get("generation_failures", 0), m.get("truncated", 0)
        figure = spec.figure
        if spec.judged and not m.get("scored"):
            rows.append([task, str(m["n"]), "not scored (no judge)", MISSING, MISSING])
            notes.append(m["note"])
        else:
            rows.append([task, str(m["n"]), spec.figure_name,
                         headline_cell(m[figure], m.get(f"{figure}_ci95"), failed=failed, n=m["n"]),
                         f"{m.get('unscored', 0)} unscored" if spec.judged else str(m["parse_failures"])])
        rows[-1] += [str(truncated), str(failed), _tokens(m.get("tokens"))]
        theirs = protocol.headline(spec, m)
        if theirs is not None:  # its figure leads, ours beside it with the answers the two read differently
            ours = rows[-1]
            rows[-1] = [*ours[:2], f"{protocol.name} {theirs[0]}", f"{with_ci(theirs[1], protocol.interval(m))} (ours: "
                        f"{ours[3]}; {read_differently(m)} read differently)", *ours[4:]]
            notes.append(protocol.headline_note(spec, m))
        elif m.get("ours_left_out"):
            notes.append(f"{task}: {m['ours_left_out']} items whose reference cannot be read (the release publishes "
                         "none for them) were asked and left out of the figures")
        if spec.components:
            parts = ", ".join(f"{c} {pct(m.get(f'{c}_mape'))}" for c in spec.components)
            notes.append(f"{task} MAPE per component (%): {parts}")
        if m.get("injection_suspected"):
            notes.append(f"{task}: {m['injection_suspected']} answers carried text aimed at the judge (a GRADE line "
                         "or an instruction); the judge saw them fenced as data, with verdict tokens neutralized")
        if isinstance(m.get("epochs"), dict) and m["epochs"].get("agreement") is not None:
            e = m["epochs"]
            notes.append(f"{task}: {e['epochs']} epochs (n counts items x epochs); {pct(e['agreement'])}% of "
                         f"{e['items']} items answered alike in every epoch")
        if truncated:
            notes.append(f"{task}: {truncated} answers were cut off by the token limit and count as unanswered; "
                         "rerun with a larger --max-tokens (and --thinking-budget for Gemini thinking models) "
                         "into the same --out to ask only those again")
    units = {m.get("resampled", "merchants") for m in metrics.values() if isinstance(m, dict)}
    unit = "item" if units == {"items"} else "merchant"  # the authors' release names no merchant
    table = md_table(["task", "n", "headline (%)", f"value [95% CI, {unit} bootstrap]", "unparsed", "truncated",
                      "failed", "tokens (prompt/completion/reasoning)"], rows)
    return "\n".join([table, ""] + notes).rstrip()


def _tokens(totals: dict[str, int] | None) -> str:
    if not totals or not any(totals.values()):
        return MISSING
    return "/".join(f"{int(totals.get(k) or 0):,}" for k in ("prompt_tokens", "completion_tokens", "reasoning_tokens"))
