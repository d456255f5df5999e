"""Between the two layouts: our Parquet release written in the authors' layout (the sample, with the
quirks their scripts accept), and the authors' release converted to our Parquet release."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from dataset.build import write_release
from dataset.load import layout_of, read_release
from dataset.official import HUB_ID, LANGS, OFFICIAL_LICENSE, OFFICIAL_PAPER, OfficialRelease, write_official
from dataset.official_rows import classification_prompt, nutrition_ground_truth, published_row, text_of
from dataset.schema import CONFIGS, DECLARED, NUTRIENTS, SAMPLE_DIR, DatasetError, columns, config_of

# --------------------------------------------------------------------- ours -> the authors' layout

# Option markers, spread over rows: the forms the authors' prompts are read in.
_MARKERS = ("{}. ", "{}、", "({}) ")


def _image_name(row: dict[str, Any], k: int, cell: dict[str, Any]) -> str:
    """`images/<the cell's own file name>` when it is a plain name (shared views of one dish keep one
    file), else one made from the item."""
    name = cell.get("path") or ""
    if not name or PurePosixPath(name).name != name or name.startswith(".") or "\\" in name:
        name = f"{row['id']}_{k}.jpg"
    return f"images/{name}"


def _with_images(config: str, k: int, row: dict[str, Any], lang: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The row as published (numbered from 1, standard image first), and its image files."""
    paths = [_image_name(row, j, cell) for j, cell in enumerate(row["images"])]
    published = published_row(config, k + 1, row, lang, paths)
    return published, {p: cell["bytes"] for p, cell in zip(paths, row["images"], strict=True)}


Published = list[tuple[dict[str, Any], dict[str, bytes]]]  # a file's rows: (published object, its image files)


def _choice_rows(config: str, rows: list[dict[str, Any]], lang: str) -> Published:
    found = []
    for k, row in enumerate(rows):
        published, files = _with_images(config, k, row, lang)
        published["prompt"] = classification_prompt(text_of(row, "options", lang), lang, _MARKERS[k % len(_MARKERS)])
        if k == 1:  # quirk: user_images as one string (the item then has one customer photo)
            published["user_images"] = published["user_images"][0]
            files = {p: files[p] for p in (published["standard_image"], published["user_images"])}
        found.append((published, files))
    return found


def _nutrient_rows(config: str, rows: list[dict[str, Any]], lang: str) -> Published:
    found = []
    for k, row in enumerate(rows):
        published, files = _with_images(config, k, row, lang)
        keys_lang = LANGS[(k + (lang == "en")) % 2]  # quirk: Chinese or English keys, alternating by row
        values: list[Any] = [row[n] for n in NUTRIENTS]
        if k == 2:
            values[3] = 0  # quirk: a zero reference value (the authors leave it out of that nutrient's MAPE)
        if k % 4 == 3:
            values[1] = f"{values[1]}"  # quirk: a value as numeric text
        truth = nutrition_ground_truth(text_of(row, "dish_name", lang), values, keys_lang)
        # quirk: the ground truth as a JSON string in every third row
        published["ground_truth"] = json.dumps(truth, ensure_ascii=False) if k % 3 == 1 else truth
        found.append((published, files))
    return found


def _question_rows(config: str, rows: list[dict[str, Any]], lang: str) -> Published:
    # quirk: one row (the first after the first with a single photo) without `images`; the authors'
    # script then sends images/{id:05d}.jpg
    fallback = next((k for k, r in enumerate(rows) if len(r["images"]) == 1 and k >= 1), None)
    found = []
    for k, row in enumerate(rows):
        published, files = _with_images(config, k, row, lang)
        if k == fallback:
            del published["images"]
            files = {f"images/{k + 1:05d}.jpg": row["images"][0]["bytes"]}
        found.append((published, files))
    return found


# The quirks the authors' scripts accept, spread over a file's rows, by the shape its config is published in.
_SAMPLE_ROWS = {"choice": _choice_rows, "nutrients": _nutrient_rows, "question": _question_rows}


def write_sample_official(out_dir: str | os.PathLike, source: str | os.PathLike | None = None,
                          tarball: bool = True) -> Path:
    """A release (default: the committed sample) written in the authors' layout: the six JSON-lines
    files, `images/` and `images.tar.gz`, with the quirks their scripts accept spread over the rows
    (a ground truth as object or JSON string, Chinese or English nutrient keys, a zero reference value,
    numeric text, a VQA row without `images`, `user_images` as one string). Deterministic."""
    rows = {}
    for config in DECLARED:
        release = read_release(config.name, source or SAMPLE_DIR)
        rows[config.name] = list(release.iter_rows(range(len(release))))
    return write_official(out_dir, {config.official_file(lang): _SAMPLE_ROWS[config.shape](config.name, rows[config.name], lang)
                                    for lang in LANGS for config in DECLARED}, tarball=tarball)


# --------------------------------------------------------------------- the authors' layout -> ours

def _truth_text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else json.dumps(value, ensure_ascii=False)


def _converted(config: str, main: OfficialRelease, english: OfficialRelease | None) -> Iterator[dict[str, Any]]:
    keep = columns(config, optional=True)
    for k, row in enumerate(main.iter_rows(range(len(main)))):
        out = {name: row.get(name) for name in keep}
        out.update(ground_truth=_truth_text(row["ground_truth"]),
                   published=json.dumps(row["published"], ensure_ascii=False))
        if english is not None:
            other = english.rows[k]
            if other["published"].get("id") != row["published"].get("id"):
                raise DatasetError(f"{english.path.name} line {k + 1} has id {other['published'].get('id')!r}, "
                                   f"{main.path.name} has {row['published'].get('id')!r}: the two languages must "
                                   "list the same items in the same order")
            out.update({english_column: other[column] for column, english_column in config_of(config).english.items()})
        yield out


def convert(source: str | os.PathLike, out_dir: str | os.PathLike, lang: str = "zh") -> Path:
    """The authors' release (a folder, one file, or the Hub id) -> our Parquet release with the images
    embedded: every published field kept (`prompt`, `ground_truth`, `image_paths`, `published`), ours
    derived where the rows allow and null where not, and a card stating the source, its revision and
    the authors' license. `lang` both: the Chinese rows, with the English file's texts in the `_en`
    columns (their prompts stay in the `_en` file; convert with `en` to keep them)."""
    if lang not in (*LANGS, "both"):
        raise DatasetError(f"unknown language {lang!r}; choose zh, en or both")
    present, first = layout_of(source).published(lang)
    path = Path(source).expanduser()
    rows: dict[str, tuple[int, Iterator[dict[str, Any]]]] = {c: (0, iter(())) for c in CONFIGS}
    revisions = set()
    for config in present:
        main = OfficialRelease(config, source, lang=first)  # `published` said the source is in their layout
        english = OfficialRelease(config, source, lang="en") if lang == "both" else None
        if english is not None and len(english) != len(main):
            raise DatasetError(f"{english.path.name} has {len(english)} rows, {main.path.name} {len(main)}")
        revisions.add(main.revision)
        rows[config] = (len(main), _converted(config, main, english))
    where = HUB_ID if not path.exists() else f"a local copy ({path.name})"
    revision = ", ".join(sorted(r for r in revisions if r)) or "not recorded"
    note = (f"Converted by `python diningbench.py convert` from the authors' publication, {where} (revision "
            f"{revision}; {'Chinese and English' if lang == 'both' else {'zh': 'Chinese', 'en': 'English'}[first]} "
            f"files). DiningBench is the authors' dataset ({OFFICIAL_PAPER}, https://huggingface.co/datasets/{HUB_ID}), "
            f"licensed {OFFICIAL_LICENSE}: non-commercial use only, no derivatives, attribution to the authors. "
            "Published fields are kept as published (`prompt`, `ground_truth`, `image_paths`, `published`); "
            "merchant, cuisine, menu category and VQA category are not in the publication and are null.")
    return write_release(out_dir, rows, note, optional=CONFIGS, license_id=OFFICIAL_LICENSE)
