"""Stage 1, photo filters: rule prefilters (undecodable, too many pixels, too small, near-duplicate
upload), then a VLM image-quality check on every photo and a reference-matching check on every user photo.

The paper distils two discriminators (quality, reference matching) from a large model; here each check
goes to its own model, `--photo-quality-model` and `--photo-match-model` (default `--model`), e.g. a
small VLM behind `vllm serve`. Rules run first so no model sees a photo a rule can reject; a photo over
the harness's pixel limit (`eval.images.MAX_PIXELS`) is dropped from its header, never decoded.
"""

from __future__ import annotations

import io
import warnings
from functools import partial

from PIL import Image

from construct.context import Context
from construct.imagehash import dhash, hamming
from construct.models import Ask, parse_json_object, photo_part
from construct.work import MODEL_ERROR, Decision, Stage, dropped, inputs_key, kept, triage
from eval.images import MAX_PIXELS
from eval.types import ImagePart

NAME = "photos"
PROMPT_VERSION = "photos-v1"
QUALITY_PROMPT = """Task: photo quality check.
You screen photos uploaded to a restaurant platform for a food benchmark. Keep a photo only if it is a
clear, well-exposed photo whose main subject is one dish of food: not blurred or out of focus, not too
dark, not a screenshot, menu, receipt or promotional graphic, not a scene without identifiable food.
Reply with one JSON object and nothing else: {"quality": "good" or "bad", "reason": "<a few words>"}"""
MATCH_PROMPT = """Task: reference matching.
The first image is the merchant's photo of a dish ("{name}"). The second image is a customer's photo
uploaded for the same menu item. Does the customer's photo show the same dish (same components; angle,
light and plating may differ)? A photo of a different dish, of several dishes or of no food is not a match.
Reply with one JSON object and nothing else: {{"same_dish": true or false, "reason": "<a few words>"}}"""


def prefilter(data: bytes, min_side: int) -> tuple[str | None, int | None]:
    """(why the rules reject a photo or None, its dHash). Decoding checks the whole file."""
    try:
        with warnings.catch_warnings():  # a bomb warning is our own too_many_pixels below
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
        with img:
            width, height = img.size  # from the header, before any decoding
            if width * height > MAX_PIXELS:  # the limit the model call would refuse it at
                return f"too_many_pixels:{width}x{height}", None
            if min(width, height) < min_side:
                img.load()  # still decoded: a tiny photo can also be broken, and that is the first reason
                return f"too_small:{width}x{height}", None
            # JPEG: decode in grey at a reduced DCT scale (still every byte of the file, so a cut-off
            # file fails here); the 9x8 hash needs no more, and it runs at decode speed or faster.
            img.draft("L", (64, 64))
            img.load()
            return None, dhash(img)
    except Image.DecompressionBombError:
        return "too_many_pixels:over Pillow's limit", None
    except Exception as exc:
        return f"undecodable:{type(exc).__name__}", None


def run(ctx: Context) -> None:
    """Rules, then the quality check, then reference matching, then the decisions and items written."""
    stage = Stage(ctx.work, NAME)
    s = ctx.settings
    inputs = inputs_key(NAME, PROMPT_VERSION, s.job("photo_quality")[0], s.job("photo_match")[0], s.min_side,
                        s.dhash_distance, sorted(ctx.raw.photos))
    if stage.is_done(inputs):
        return
    decisions: dict[str, Decision] = {}
    # Reference first, then user photos in id order: a duplicate is the later upload.
    order = sorted(ctx.raw.photos.values(), key=lambda p: (p.dish_id, p.role != "reference", p.photo_id))
    hashes = check_rules(ctx, order, decisions)
    good, quality_ok = check_quality(ctx, list(hashes), decisions)
    match_ok = check_matching(ctx, good, hashes, decisions)
    ordered = [decisions[p.photo_id] for p in order]
    items = [{"photo_id": d.item, **d.detail} for d in ordered if d.verdict == "kept"]
    stage.finish(ordered, items, inputs, complete=quality_ok and match_ok)


def check_rules(ctx: Context, order: list, decisions: dict[str, Decision]) -> dict[str, int]:
    """The rule prefilters in `order`: the dHash of every photo that passes; a drop decision for the others."""
    s = ctx.settings
    hashes: dict[str, int] = {}
    by_dish: dict[str, list[str]] = {}
    for photo in order:
        try:
            data = ctx.raw.photo_path(photo.photo_id).read_bytes()
        except OSError as exc:
            decisions[photo.photo_id] = dropped(photo.photo_id, "undecodable", detail=f"unreadable ({type(exc).__name__})")
            continue
        why, h = prefilter(data, s.min_side)
        if why or h is None:
            why = why or "undecodable"
            reason, _, detail = why.partition(":")
            decisions[photo.photo_id] = dropped(photo.photo_id, reason, detail=detail)
            continue
        same_dish = by_dish.setdefault(photo.dish_id, [])  # per dish: linear in the export, not quadratic
        twin = next((pid for pid in same_dish if hamming(hashes[pid], h) <= s.dhash_distance), None)
        if twin is not None:
            decisions[photo.photo_id] = dropped(photo.photo_id, "near_duplicate", of=twin,
                                                distance=hamming(hashes[twin], h))
            continue
        hashes[photo.photo_id] = h
        same_dish.append(photo.photo_id)
    return hashes


def _own_photo(ctx: Context, pid: str) -> tuple[ImagePart, ...]:
    """The photo, read and encoded when its ask is about to be sent."""
    return (photo_part(ctx.raw.photo_path(pid), ctx.raw.photos[pid].role, pid),)


def _photo_pair(ctx: Context, ref: str, pid: str) -> tuple[ImagePart, ...]:
    """The dish's reference photo, then the user's photo, read and encoded when the ask is sent."""
    return (photo_part(ctx.raw.photo_path(ref), "reference", ref), photo_part(ctx.raw.photo_path(pid), "user", pid))


def check_quality(ctx: Context, survivors: list[str], decisions: dict[str, Decision]) -> tuple[list[str], bool]:
    """Ask `--photo-quality-model` about each photo; (the good ones, whether every call was answered)."""
    # Photos are read and encoded just before each call (`Ask.photos`), never all at once.
    quality = ctx.models.ask_job(NAME, "photo_quality", PROMPT_VERSION,
                                 [Ask(pid, QUALITY_PROMPT, photos=partial(_own_photo, ctx, pid)) for pid in survivors])
    complete, good = True, []
    for pid in survivors:
        answer = quality[pid]
        verdict = parse_json_object(answer.text)
        grade = verdict.get("quality") if verdict and verdict.get("quality") in ("good", "bad") else None
        if failed := triage(pid, answer.error, grade, check="quality"):
            decisions[pid] = failed
            complete = complete and failed.reason != MODEL_ERROR
        elif grade == "bad":
            decisions[pid] = dropped(pid, "low_quality", model_reason=str((verdict or {}).get("reason", "")))
        else:
            good.append(pid)
    return good, complete


def check_matching(ctx: Context, good: list[str], hashes: dict[str, int], decisions: dict[str, Decision]) -> bool:
    """Keep good references; ask `--photo-match-model` whether each good user photo shows its dish's
    reference. Returns whether every call was answered."""
    references = {ctx.raw.photos[pid].dish_id: pid for pid in good if ctx.raw.photos[pid].role == "reference"}
    asks = []
    for pid in good:
        photo = ctx.raw.photos[pid]
        if photo.role == "reference":
            decisions[pid] = kept(pid, dish_id=photo.dish_id, role="reference", dhash=f"{hashes[pid]:016x}")
        elif photo.dish_id not in references:
            decisions[pid] = dropped(pid, "no_reference", dish_id=photo.dish_id)
        else:
            ref = references[photo.dish_id]
            prompt = MATCH_PROMPT.format(name=ctx.raw.dishes[photo.dish_id].name)
            asks.append(Ask(pid, prompt, photos=partial(_photo_pair, ctx, ref, pid)))
    matches = ctx.models.ask_job(NAME, "photo_match", PROMPT_VERSION, asks)
    complete = True
    for ask in asks:
        pid, answer = ask.item, matches[ask.item]
        verdict = parse_json_object(answer.text)
        same = verdict.get("same_dish") if verdict and isinstance(verdict.get("same_dish"), bool) else None
        if failed := triage(pid, answer.error, same, check="reference_matching"):
            decisions[pid] = failed
            complete = complete and failed.reason != MODEL_ERROR
        elif not same:
            decisions[pid] = dropped(pid, "not_matching_reference", model_reason=str((verdict or {}).get("reason", "")))
        else:
            decisions[pid] = kept(pid, dish_id=ctx.raw.photos[pid].dish_id, role="user", dhash=f"{hashes[pid]:016x}")
    return complete
