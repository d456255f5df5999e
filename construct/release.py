"""Stage 8, the release: the items review lets through, with their photo bytes, written as Parquet by
`diningbench.write_release` (classification carries `option_dish_ids`) or in the authors' layout by
`dataset.official.write_official` (`--layout official`), with a card, then `diningbench.validate`."""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import diningbench
from construct import funnel
from construct.errors import BuildError
from construct.fdc import BUNDLED
from construct.prefilter import read_photo
from construct.raw import EXPORT_INDEX, RawExport, load_raw
from construct.review import card_markdown, released_rows
from construct.stages import VQA
from construct.work import MIX_NAMES, BuildSettings, Stage, load_settings
from dataset.official import (
    IMAGES_ARCHIVE,
    IMAGES_DIR,
    LANGS,
    LAYOUTS,
    OFFICIAL_FILES,
    published_row,
    write_official,
)

COMMON = ("id", "dish_id", "merchant_id", "category", "cuisine")
# Each config's own columns, optional ones included, as the data contract declares them once.
FIELDS = {config.name: (*config.columns, *config.optional) for config in diningbench.DECLARED}


def image_roles(item: dict[str, Any]) -> list[str]:
    """The roles of a work item's photos: as recorded, else the reference first and user photos after."""
    return list(item.get("image_roles") or ["reference"] + ["user"] * (len(item["photos"]) - 1))


def release_row(raw: RawExport, item: dict[str, Any]) -> dict[str, Any]:
    """A work item as a release row: photo ids become embedded image bytes with their roles."""
    images = [{"bytes": read_photo(raw.photo_path(p)), "path": Path(raw.photos[p].path).name} for p in item["photos"]]
    return {**{k: item[k] for k in COMMON}, "images": images, "image_roles": image_roles(item),
            **{k: item[k] for k in FIELDS[item["task"]]}}


def official_image_path(raw: RawExport, photo_id: str) -> str:
    """Where a photo lies in a release of the authors' layout: under `images/`, at its path in the
    export (a leading `images/` not doubled), so the release's tree mirrors the export's."""
    parts = PurePosixPath(posixpath.normpath(raw.photos[photo_id].path)).parts
    return "/".join((IMAGES_DIR, *(parts[1:] if parts[0] == IMAGES_DIR else parts)))


def official_rows(raw: RawExport, items: list[dict[str, Any]], lang: str,
                  written: set[str]) -> Iterator[tuple[dict[str, Any], dict[str, bytes]]]:
    """Work items as the authors' published rows in `lang`, each with its photo files (read for the
    Chinese file only: the English rows name the same files); each path given is added to `written`."""
    for item in items:
        paths = [official_image_path(raw, p) for p in item["photos"]]
        row = published_row(item["task"], item["id"], {**item, "image_roles": image_roles(item)}, lang, paths)
        files = {path: read_photo(raw.photo_path(p)) for path, p in zip(paths, item["photos"], strict=True)} \
            if lang == LANGS[0] else {}
        written.update(files)
        yield row, files


def rules_markdown(work: Path, s: BuildSettings) -> str:
    """The build's cuisine balance and USDA cross-check, as they ran."""
    dish_decisions = Stage(work, "dishes").decisions()
    capped = Counter((d["detail"]["cuisine"], d["detail"]["cap"], d["detail"].get("rule", "explicit"))
                     for d in dish_decisions if d["reason"] == "cuisine_cap")
    rule = (f"a cuisine keeps at most {s.cuisine_ratio:g} times the dishes of the largest other cuisine (the "
            f"paper's Table 3 balance, Chinese 2,086 to Western 286; `--cuisine-ratio`)" if s.cuisine_ratio
            else "no ratio rule (`--cuisine-ratio 0`)")
    if s.cuisine_caps:
        rule += "; caps set by hand: " + ", ".join(f"{c}={n}" for c, n in sorted(s.cuisine_caps.items()))
    done = ", ".join(f"{c} at {cap} ({why}, {n} dropped)" for (c, cap, why), n in sorted(capped.items())) or "none"
    return "\n".join(["### Rules", "", f"Cuisine balance: {rule}. Capped in this build: {done}.", "",
                      usda_markdown(work, s), "", dedupe_markdown(work), "", filters_markdown(s), ""])


def usda_markdown(work: Path, s: BuildSettings) -> str:
    """The independent USDA check as it ran: where the FDC values came from, coverage, judged, flagged."""
    checks = [c for d in Stage(work, "nutrition").decisions() if d["verdict"] == "kept"
              and isinstance(c := d["detail"].get("checks", {}).get("usda"), dict)]
    if not checks:
        return "USDA check: off (no FoodData Central data: give `--fdc` the FDC CSV download)"
    source = f"`{Path(s.fdc).name}`" if s.fdc else f"the bundled SR28 subset (`{BUNDLED.name}`, 41 foods)"
    grams = [(c["coverage"], len(c["matched"]) + len(c["unmatched"])) for c in checks]
    coverage = sum(cov * n for cov, n in grams) / max(1, sum(n for _, n in grams))
    judged, flagged = sum(bool(c["judged"]) for c in checks), sum(bool(c["flag"]) for c in checks)
    return (f"USDA check (computed by code from each dish's ingredient grams x FoodData Central per-100 g values, "
            f"independent of any model): on, from {source}; {len(checks)} nutrition item(s), {coverage:.0%} of their "
            f"weighed ingredient entries' grams matched on average; {judged} judged (>= 80% of the grams matched, "
            f"every entry weighed); {flagged} sent to review flagged (released calories more than "
            f"{s.fdc_tolerance:.0%} from the computed)")


def dedupe_markdown(work: Path) -> str:
    """How dishes were compared for near-duplicates and what the model said."""
    path = work / "dishes" / "dedupe.json"
    if not path.exists():
        return "Near-duplicate dishes: not recorded"
    d = json.loads(path.read_text(encoding="utf-8"))
    return (f"Near-duplicate dishes across merchants: compared on {d['compared_on']}; {d['pairs']} candidate pair(s) "
            f"of {d['dishes']} dishes judged by the model, {d['same']} the same dish, {d['dropped']} dish(es) dropped "
            f"(each only as the confirmed twin of a kept dish), {d['unreadable']} verdict(s) unreadable, "
            f"{d['failed']} call(s) failed")


def filters_markdown(s: BuildSettings) -> str:
    a, b = s.filter_pair()
    note = s.filter_note()
    return f"Filter and audit passes: {a}, then {b}" + (f". Note: {note}" if note else " (two different models, as the paper's)")


def card_section(rows: list[dict[str, Any]], work: Path, settings: BuildSettings) -> str:
    per_task = Counter(r["task"] for r in rows)
    cuisines = sorted({r["cuisine"] for r in rows})
    lines = ["## How this release was built", "",
             "Built with `python -m construct` (the paper's Section 3.2 pipeline) from a raw merchant export.", "",
             "| config | items |", "|---|---:|"]
    lines += [f"| {t} | {per_task.get(t, 0)} |" for t in FIELDS]
    lines += ["", "| cuisine | " + " | ".join(FIELDS) + " |", "|---|" + "---:|" * len(FIELDS)]
    per_cell = Counter((r["cuisine"], r["task"]) for r in rows)
    lines += [f"| {c} | " + " | ".join(str(per_cell[c, t]) for t in FIELDS) + " |" for c in cuisines]
    lines += ["", vqa_mix_markdown(rows, settings.vqa_mix), "", "### Funnel", "", funnel.markdown(work, settings),
              rules_markdown(work, settings), card_markdown(work)]
    return "\n".join(lines)


def vqa_mix_markdown(rows: list[dict[str, Any]], target: dict[str, float]) -> str:
    """The released VQA items per category beside the target mix (`--vqa-mix`): one item per dish."""
    vqa = [r for r in rows if r["task"] == VQA]
    n = len(vqa) or 1
    got = Counter(r["vqa_category"] for r in vqa)
    lines = [f"VQA categories: one item per dish ({len(vqa)} items, {len({r['dish_id'] for r in vqa})} dishes), "
             "each dish's category drawn to the target mix before generation; filters and review then drop some.",
             "", "| VQA category | target | released | items |", "|---|---:|---:|---:|"]
    for key, name in MIX_NAMES.items():
        lines.append(f"| {name} | {100 * target.get(key, 0.0):.1f}% | {100 * got[name] / n:.1f}% | {got[name]} |")
    return "\n".join(lines)


def _check_out(out: Path, layout: str) -> None:
    """Refuse a folder holding a release of the other layout: a reader would take the mix for that one."""
    parquet = any((out / "data").glob("*/*.parquet"))
    official = any((out / name).exists() for name in OFFICIAL_FILES.values())
    if (layout == "official" and parquet) or (layout == "parquet" and official):
        other = "a Parquet release (data/*/*.parquet)" if parquet else "a release in the authors' layout (JSON lines)"
        raise BuildError(f"{out} holds {other}: write the {layout} layout to another --out folder")


def write_official_release(raw: RawExport, by_task: dict[str, list[dict[str, Any]]], out: Path) -> None:
    """The released items in the authors' layout: the Chinese files and their `_en` translations,
    `images/` and `images.tar.gz` (members sorted, dated 0: the same build gives the same bytes); a
    photo left in `images/` by an earlier release into this folder is removed."""
    stale = {p.relative_to(out).as_posix() for p in (out / IMAGES_DIR).rglob("*") if p.is_file()} \
        if (out / IMAGES_DIR).is_dir() else set()
    written: set[str] = set()
    write_official(out, {OFFICIAL_FILES[(task, lang)]: official_rows(raw, items, lang, written)
                         for lang in LANGS for task, items in by_task.items()})
    for rel in sorted(stale - written):
        (out / rel).unlink()


def build_release(work: str | Path, out: str | Path, layout: str = "parquet") -> tuple[Path, list[diningbench.Problem]]:
    """Write the release folder in `layout` and validate it (both languages of the authors' layout)."""
    if layout not in LAYOUTS:
        raise BuildError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    work, out = Path(work), Path(out)
    _check_out(out, layout)
    settings = load_settings(work)
    raw = load_raw(settings.raw, index=work / EXPORT_INDEX)  # the build's photo index, reused
    rows = released_rows(work)
    by_task = {t: [r for r in rows if r["task"] == t] for t in FIELDS}
    note = (f"Built by `python -m construct` from the raw export `{Path(settings.raw).name}`: "
            f"{', '.join(f'{len(v)} {k}' for k, v in by_task.items())} items.")
    card = out / "README.md"
    if layout == "official":
        out.mkdir(parents=True, exist_ok=True)
        write_official_release(raw, by_task, out)
        files = ", ".join(f"`{OFFICIAL_FILES[(t, lang)]}`" for lang in LANGS for t in FIELDS)
        card.write_text(f"# A DiningBench-style release in the authors' layout\n\n{note} Files: {files}, "
                        f"`{IMAGES_DIR}/` and `{IMAGES_ARCHIVE}`, as in `meituan/DiningBench`; merchant, cuisine and "
                        "menu category are not in this layout (the tables below count them).\n", encoding="utf-8")
    else:
        diningbench.write_release(out, {t: (len(v), (release_row(raw, r) for r in v)) for t, v in by_task.items()},
                                  note, optional=("classification",))
    funnel.write(work, settings)
    card.write_text(card.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + card_section(rows, work, settings), encoding="utf-8")
    if layout == "parquet":
        return out, diningbench.validate(out)
    english = [diningbench.Problem(p.level, f"{p.config}_en", p.item_id, p.message)
               for p in diningbench.validate(out, lang="en")]
    return out, diningbench.validate(out, lang="zh") + english
