"""Stage 1, photo filters: rule prefilters (undecodable, too many pixels, too small, near-duplicate
upload), then a VLM image-quality check on every photo and a reference-matching check on every user photo.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from itertools import count, groupby
from pathlib import Path
from typing import Any

from construct.context import Context
from construct.imagehash import hamming
from construct.models import Answer, Ask, parse_json_object
from construct.prefilter import prefilter  # noqa: F401  (the rules' entry point, where tests and benches find it)
from construct.rules import free_dish_rule
from construct.stages import PHOTOS as NAME
from construct.stages import RULED_OUT, prompt
from construct.work import Decision, Stage, dropped, inputs_key, kept, triage, write_jsonl

PROMPT_VERSION = "photos-v1"
STATE = "state.sqlite"
PAGE = 1000
QUALITY_PROMPT = prompt("photos.quality", """Task: photo quality check.
You screen photos uploaded to a restaurant platform for a food benchmark. Keep a photo only if it is a
clear, well-exposed photo whose main subject is one dish of food: not blurred or out of focus, not too
dark, not a screenshot, menu, receipt or promotional graphic, not a scene without identifiable food.
Reply with one JSON object and nothing else: {"quality": "good" or "bad", "reason": "<a few words>"}""")
MATCH_PROMPT = prompt("photos.match", """Task: reference matching.
The first image is the merchant's photo of a dish ("{name}"). The second image is a customer's photo
uploaded for the same menu item. Does the customer's photo show the same dish (same components; angle,
light and plating may differ)? A photo of a different dish, of several dishes or of no food is not a match.
Reply with one JSON object and nothing else: {{"same_dish": true or false, "reason": "<a few words>"}}""")


class PhotoState:
    """WORK/photos/state.sqlite: one row per photo in dish order (`seq`), its prefilter result (`pre`: NULL
    not yet run, "" passed, else "reason:detail"), its rule verdict for this run (`rule`: NULL still in,
    else a JSON reason), and the parsed-or-not model answers per check. Kept across runs with the same
    inputs (a kill loses no prefilter result); made anew when they change."""

    def __init__(self, path: Path, inputs: str, ctx: Context) -> None:
        fresh = True
        if path.exists():
            db = sqlite3.connect(path)
            try:
                fresh = db.execute("SELECT value FROM meta WHERE key = 'inputs'").fetchone() != (inputs,)
            except sqlite3.DatabaseError:
                pass
            db.close()
            if fresh:
                path.unlink()
        self.db = sqlite3.connect(path)
        self.db.executescript(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
            "CREATE TABLE IF NOT EXISTS photo (seq INTEGER PRIMARY KEY, photo_id TEXT NOT NULL UNIQUE, "
            " dish_id TEXT NOT NULL, role TEXT NOT NULL, path TEXT NOT NULL, pre TEXT, dhash TEXT, rule TEXT);"
            "CREATE INDEX IF NOT EXISTS photo_dish ON photo (dish_id, seq);"
            "CREATE TABLE IF NOT EXISTS answer (photo_id TEXT NOT NULL, kind TEXT NOT NULL, text TEXT, error TEXT, "
            " PRIMARY KEY (photo_id, kind)) WITHOUT ROWID;"
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);")
        if fresh:
            with self.db:
                rows = ((seq, pid, dish, role, path_) for seq, (pid, dish, role, path_) in enumerate(ctx.raw.photos.ordered()))
                self.db.executemany("INSERT INTO photo (seq, photo_id, dish_id, role, path) VALUES (?, ?, ?, ?, ?)", rows)
                self.db.execute("INSERT INTO meta VALUES ('inputs', ?)", (inputs,))

    def pages(self, sql: str, *args: Any) -> Iterator[tuple[Any, ...]]:
        """The rows of `SELECT seq, ... WHERE ... AND seq > ? ORDER BY seq LIMIT ?` a page at a time:
        no cursor stays open while the caller writes."""
        last = -1
        while rows := self.db.execute(sql, (*args, last, PAGE)).fetchall():
            yield from rows
            last = rows[-1][0]

    def close(self) -> None:
        self.db.close()


def run(ctx: Context) -> None:
    """Rules, then the quality check, then reference matching, then the decisions and items written."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    inputs = inputs_key(NAME, PROMPT_VERSION, s.job("photo_quality")[0], s.job("photo_match")[0], s.min_side,
                        s.dhash_distance, s.min_user_photos, ctx.raw.fingerprint)
    if stage.is_done(inputs):
        return
    state = PhotoState(stage.dir / STATE, inputs, ctx)
    try:
        check_rules(ctx, state)
        quality_ok = check_quality(ctx, state)
        dishes = dish_verdicts(ctx, state)
        match_ok = check_matching(ctx, state, dishes)
        write_jsonl(stage.dir / RULED_OUT, ruled_out_rows(ctx, state, dishes))
        stage.finish(decided(ctx, state, dishes),
                     ({"photo_id": d.item, **d.detail} for d in decided(ctx, state, dishes) if d.verdict == "kept"),
                     inputs, complete=quality_ok and match_ok)
    finally:
        state.close()


def check_rules(ctx: Context, state: PhotoState) -> None:
    """The rule prefilter of every photo not yet prefiltered (on the engine: its CPU is the build's), then,
    dish by dish, near-duplicate uploads and the free dish rules: a `rule` verdict for each photo."""
    s = ctx.settings
    todo = state.db.execute("SELECT COUNT(*) FROM photo WHERE pre IS NULL").fetchone()[0]
    if todo:
        rows = ((seq, str(ctx.raw.root / path)) for seq, path in
                state.pages("SELECT seq, path FROM photo WHERE pre IS NULL AND seq > ? ORDER BY seq LIMIT ?"))
        for n, (seq, why, h) in enumerate(ctx.engine.prefilter(rows, s.min_side, total=todo), 1):
            state.db.execute("UPDATE photo SET pre = ?, dhash = ? WHERE seq = ?",
                             (why or "", f"{h:016x}" if h is not None else None, seq))
            if n % PAGE == 0:
                state.db.commit()
        state.db.commit()
    for _, group in groupby(state.pages("SELECT seq, photo_id, dish_id, role, pre, dhash FROM photo WHERE seq > ? "
                                       "ORDER BY seq LIMIT ?"), key=lambda row: row[2]):
        _rule_dish(ctx, state, list(group))
    state.db.commit()


def _rule_dish(ctx: Context, state: PhotoState, group: list[tuple[Any, ...]]) -> None:
    """One dish's photos (reference first, then user photos by id): rule verdicts, and the dish's free rules."""
    s = ctx.settings
    verdicts: dict[int, dict[str, Any] | None] = {}
    kept_hashes: list[tuple[str, int]] = []
    for seq, pid, _, _, pre, dhash_hex in group:
        if pre:
            reason, _, detail = pre.partition(":")
            verdicts[seq] = {"reason": reason, "detail": detail}
            continue
        h = int(dhash_hex, 16)
        twin = next(((other, hamming(oh, h)) for other, oh in kept_hashes if hamming(oh, h) <= s.dhash_distance), None)
        if twin is not None:
            verdicts[seq] = {"reason": "near_duplicate", "of": twin[0], "distance": twin[1]}
            continue
        verdicts[seq] = None
        kept_hashes.append((pid, h))
    dish = ctx.raw.dishes[group[0][2]]
    has_reference = group[0][3] == "reference"
    reference_ok = has_reference and verdicts[group[0][0]] is None
    users = sum(1 for seq, _, _, role, _, _ in group if role == "user" and verdicts[seq] is None)
    why = free_dish_rule(has_reference, reference_ok, users, dish.ingredients, s.min_user_photos)
    if why:
        for seq in verdicts:
            if verdicts[seq] is None:
                verdicts[seq] = {"reason": "dish_ruled_out", "dish_rule": why}
    state.db.executemany("UPDATE photo SET rule = ? WHERE seq = ?",
                         [(json.dumps(v, ensure_ascii=False) if v else None, seq) for seq, v in verdicts.items()])


def _ask_check(ctx: Context, state: PhotoState, kind: str, asks: Iterator[Ask]) -> bool:
    """Ask the model of check `kind` ("quality" or "match": the jobs photo_quality, photo_match) each of
    `asks`, each answer recorded (committed every 200 answers); whether every call of the check (this
    run's and recorded ones) was answered."""
    answered = count(1)

    def on_answer(answer: Answer) -> None:
        state.db.execute("INSERT OR REPLACE INTO answer VALUES (?, ?, ?, ?)", (answer.item, kind, answer.text, answer.error))
        if next(answered) % 200 == 0:
            state.db.commit()

    spec, url = ctx.settings.job(f"photo_{kind}")
    ctx.models.ask_each(NAME, spec, PROMPT_VERSION, asks, on_answer, base_url=url)
    state.db.commit()
    return state.db.execute("SELECT COUNT(*) FROM answer WHERE kind = ? AND error IS NOT NULL AND error NOT LIKE "
                            "'truncated:%'", (kind,)).fetchone()[0] == 0


def quality_of(text: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """("good" | "bad" | None when unparsed, the parsed verdict) of a recorded quality answer's text."""
    verdict = parse_json_object(text)
    return (verdict["quality"] if verdict and verdict.get("quality") in ("good", "bad") else None), verdict


def check_quality(ctx: Context, state: PhotoState) -> bool:
    """Ask `--photo-quality-model` about each photo still in and not answered yet (`_ask_check`)."""
    asks = (Ask(pid, QUALITY_PROMPT.template, photos=((str(ctx.raw.root / path), role, pid),)) for _, pid, role, path in state.pages(
        "SELECT p.seq, p.photo_id, p.role, p.path FROM photo p LEFT JOIN answer a ON a.photo_id = p.photo_id AND "
        "a.kind = 'quality' WHERE p.rule IS NULL AND (a.photo_id IS NULL OR a.error IS NOT NULL) AND p.seq > ? "
        "ORDER BY p.seq LIMIT ?"))
    return _ask_check(ctx, state, "quality", asks)


def dish_verdicts(ctx: Context, state: PhotoState) -> dict[str, tuple[str | None, int]]:
    """{dish: (its reference photo when the quality check kept it, its user photos the check kept)} of
    the dishes with photos still in: what reference matching needs (a map the size of the menu)."""
    reference: dict[str, str] = {}
    users: Counter[str] = Counter()
    for _, pid, dish, role, text, error in state.pages(
            "SELECT p.seq, p.photo_id, p.dish_id, p.role, a.text, a.error FROM photo p JOIN answer a ON "
            "a.photo_id = p.photo_id AND a.kind = 'quality' WHERE p.rule IS NULL AND p.seq > ? ORDER BY p.seq LIMIT ?"):
        if error is None and quality_of(text)[0] == "good":
            if role == "reference":
                reference[dish] = pid
            else:
                users[dish] += 1
    return {d: (reference.get(d), users[d]) for d in set(reference) | set(users)}


def _match_due(ctx: Context, dishes: dict[str, tuple[str | None, int]], dish: str) -> bool:
    """Reference matching is worth a call for this dish's good user photos: its reference passed the
    quality check and enough of its user photos did (else the dish is out whatever matching says)."""
    ref, users = dishes.get(dish, (None, 0))
    return ref is not None and users >= ctx.settings.min_user_photos


def check_matching(ctx: Context, state: PhotoState, dishes: dict[str, tuple[str | None, int]]) -> bool:
    """Ask `--photo-match-model` whether each good user photo shows its dish's reference (only for dishes
    that can still pass); whether every call of the check was answered."""
    def asks() -> Iterator[Ask]:
        for _, pid, dish, path, text, error in state.pages(
                "SELECT p.seq, p.photo_id, p.dish_id, p.path, q.text, q.error FROM photo p JOIN answer q ON "
                "q.photo_id = p.photo_id AND q.kind = 'quality' LEFT JOIN answer m ON m.photo_id = p.photo_id AND "
                "m.kind = 'match' WHERE p.rule IS NULL AND p.role = 'user' AND (m.photo_id IS NULL OR m.error IS NOT "
                "NULL) AND p.seq > ? ORDER BY p.seq LIMIT ?"):
            if error is None and quality_of(text)[0] == "good" and _match_due(ctx, dishes, dish):
                ref = dishes[dish][0]
                assert ref is not None
                ref_path = state.db.execute("SELECT path FROM photo WHERE photo_id = ?", (ref,)).fetchone()[0]
                yield Ask(pid, MATCH_PROMPT.format(name=ctx.raw.dishes[dish].name),
                          photos=((str(ctx.raw.root / ref_path), "reference", ref), (str(ctx.raw.root / path), "user", pid)))

    return _ask_check(ctx, state, "match", asks())


def decided(ctx: Context, state: PhotoState,
            dishes: dict[str, tuple[str | None, int]]) -> Iterator[Decision]:
    """The decision of every photo, in dish order, from the recorded rules and answers (one joined read
    per page, no lookup per photo)."""
    for row in state.pages(
            "SELECT p.seq, p.photo_id, p.dish_id, p.role, p.rule, p.dhash, q.photo_id IS NOT NULL, q.text, q.error, "
            "m.photo_id IS NOT NULL, m.text, m.error FROM photo p "
            "LEFT JOIN answer q ON q.photo_id = p.photo_id AND q.kind = 'quality' "
            "LEFT JOIN answer m ON m.photo_id = p.photo_id AND m.kind = 'match' WHERE p.seq > ? ORDER BY p.seq LIMIT ?"):
        _, pid, dish, role, rule, dhash_hex = row[:6]
        quality = (row[7], row[8]) if row[6] else None
        match = (row[10], row[11]) if row[9] else None
        if rule is not None:
            verdict = json.loads(rule)
            yield dropped(pid, verdict.pop("reason"), **verdict)
            continue
        grade, parsed = quality_of(quality[0]) if quality and quality[1] is None else (None, None)
        if failed := triage(pid, quality[1] if quality else "not asked", grade, check="quality"):
            yield failed
        elif grade == "bad":
            yield dropped(pid, "low_quality", model_reason=str((parsed or {}).get("reason", "")))
        elif role == "reference":
            yield kept(pid, dish_id=dish, role="reference", dhash=dhash_hex)
        elif dishes.get(dish, (None, 0))[0] is None:
            yield dropped(pid, "no_reference", dish_id=dish)
        elif not _match_due(ctx, dishes, dish):
            yield dropped(pid, "dish_ruled_out", dish_rule="too_few_user_photos")
        else:
            verdict = parse_json_object(match[0]) if match and match[1] is None else None
            same = verdict.get("same_dish") if verdict and isinstance(verdict.get("same_dish"), bool) else None
            if failed := triage(pid, match[1] if match else "not asked", same, check="reference_matching"):
                yield failed
            elif not same:
                yield dropped(pid, "not_matching_reference", model_reason=str((verdict or {}).get("reason", "")))
            else:
                yield kept(pid, dish_id=dish, role="user", dhash=dhash_hex)


def ruled_out_rows(ctx: Context, state: PhotoState, dishes: dict[str, tuple[str | None, int]]) -> list[dict[str, Any]]:
    """One row per dish a free rule ruled out, by dish id: before any call (the reason its photos carry as
    `dish_rule`), or between the two checks (its reference kept, too few user photos through the quality
    check: reference matching was not asked)."""
    out = {}
    for dish, rule in state.db.execute("SELECT DISTINCT dish_id, rule FROM photo WHERE rule LIKE '%dish_ruled_out%'"):
        out[dish] = {"dish_id": dish, "reason": json.loads(rule)["dish_rule"], "before": "photo_checks"}
    for dish, (ref, users) in dishes.items():
        if ref is not None and users < ctx.settings.min_user_photos:
            out[dish] = {"dish_id": dish, "reason": "too_few_user_photos", "before": "reference_matching",
                         "kept_user_photos": users}
    return [out[d] for d in sorted(out)]
