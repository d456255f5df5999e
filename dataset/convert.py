"""Between the two layouts: our Parquet release written in the authors' layout (the sample, with the
quirks their scripts accept), and the authors' release converted to our Parquet release."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from dataset.build import write_release
from dataset.load import read_release
from dataset.official import (
    HUB_ID,
    LANGS,
    OFFICIAL_FILES,
    OFFICIAL_LICENSE,
    OFFICIAL_PAPER,
    OfficialRelease,
    is_official,
    official_configs,
    write_official,
)
from dataset.official_rows import VQA_ENDINGS
from dataset.schema import CONFIGS, LETTERS, NUTRIENTS, SAMPLE_DIR, DatasetError, columns

# --------------------------------------------------------------------- ours -> the authors' layout

# How the prompts are worded (ours, in the authors' shape: the options inside the text, the letter
# asked for; the four nutrients as JSON; the question and the fixed ending).
_CLASSIFY = {"zh": ("请根据图片判断这是菜单上的哪一道菜：", "请只输出正确选项的字母（A-H）。"),
             "en": ("Which dish on the menu do the photos show?", "Answer with the letter of the correct option (A-H) only.")}
_NUTRIENT_NAMES = {"zh": ("卡路里", "蛋白质", "碳水化合物", "脂肪"), "en": NUTRIENTS}
_DISH_NAME_KEY = {"zh": "菜品名称", "en": "dish_name"}
_NUTRITION = {"zh": "请估计图中这道菜一份的营养成分（卡路里单位千卡，其余单位克），只输出JSON：",
              "en": "Estimate the nutrition of one serving of the dish in the photos (calories in kcal, the rest "
                    "in grams). Output only JSON:"}
# Option markers, spread over rows: the forms the authors' prompts are read in.
_MARKERS = ("{}. ", "{}、", "({}) ")


def _image_name(row: dict[str, Any], k: int, cell: dict[str, Any]) -> str:
    """`images/<the cell's own file name>` when it is a plain name (shared views of one dish keep one
    file), else one made from the item."""
    name = cell.get("path") or ""
    if not name or PurePosixPath(name).name != name or name.startswith(".") or "\\" in name:
        name = f"{row['id']}_{k}.jpg"
    return f"images/{name}"


def _classification(k: int, row: dict[str, Any], lang: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    paths = [_image_name(row, j, cell) for j, cell in enumerate(row["images"])]
    files = {p: cell["bytes"] for p, cell in zip(paths, row["images"], strict=True)}
    options = row["options"] if lang == "zh" else row["options_en"]
    marker = _MARKERS[k % len(_MARKERS)]
    head, tail = _CLASSIFY[lang]
    prompt = "\n".join([head, *(marker.format(LETTERS[j]) + o for j, o in enumerate(options)), tail])
    users: list[str] | str = paths[1:]
    if k == 1:  # quirk: user_images as one string (the item then has one customer photo)
        users = paths[1]
        files = {p: files[p] for p in paths[:2]}
    return {"id": k + 1, "prompt": prompt, "ground_truth": row["answer"], "standard_image": paths[0],
            "user_images": users}, files


def _nutrition(k: int, row: dict[str, Any], lang: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    paths = [_image_name(row, j, cell) for j, cell in enumerate(row["images"])]
    keys_lang = LANGS[(k + (lang == "en")) % 2]  # quirk: Chinese or English keys, alternating by row
    names = _NUTRIENT_NAMES[keys_lang]
    values: list[Any] = [row[n] for n in NUTRIENTS]
    if k == 2:
        values[3] = 0  # quirk: a zero reference value (the authors leave it out of that nutrient's MAPE)
    if k % 4 == 3:
        values[1] = f"{values[1]}"  # quirk: a value as numeric text
    truth: dict[str, Any] = {_DISH_NAME_KEY[keys_lang]: row["dish_name"] if lang == "zh" else row["dish_name_en"],
                             **dict(zip(names, values, strict=True))}
    template = json.dumps(dict.fromkeys(_NUTRIENT_NAMES[lang], 0), ensure_ascii=False)
    return {"id": k + 1, "prompt": f"{_NUTRITION[lang]}{template}",
            # quirk: the ground truth as a JSON string in every third row
            "ground_truth": json.dumps(truth, ensure_ascii=False) if k % 3 == 1 else truth,
            "standard_image": paths[0], "user_images": paths[1:]}, \
        {p: cell["bytes"] for p, cell in zip(paths, row["images"], strict=True)}


def _vqa(k: int, row: dict[str, Any], lang: str, fallback: int | None) -> tuple[dict[str, Any], dict[str, bytes]]:
    question, answer, rationale = ((row["question"], row["answer"], row["rationale"]) if lang == "zh" else
                                   (row["question_en"], row["answer_en"], row["rationale_en"]))
    published: dict[str, Any] = {"id": k + 1, "prompt": f"{question}{VQA_ENDINGS[lang]}", "ground_truth": answer}
    if k == fallback:  # quirk: no `images`; the authors' script then sends images/{id:05d}.jpg
        return {**published, "reasoning": rationale}, {f"images/{k + 1:05d}.jpg": row["images"][0]["bytes"]}
    paths = [_image_name(row, j, cell) for j, cell in enumerate(row["images"])]
    return {**published, "images": paths, "reasoning": rationale}, \
        {p: cell["bytes"] for p, cell in zip(paths, row["images"], strict=True)}


def write_sample_official(out_dir: str | os.PathLike, source: str | os.PathLike | None = None,
                          tarball: bool = True) -> Path:
    """A release (default: the committed sample) written in the authors' layout: the six JSON-lines
    files, `images/` and `images.tar.gz`, with the quirks their scripts accept spread over the rows
    (a ground truth as object or JSON string, Chinese or English nutrient keys, a zero reference value,
    numeric text, a VQA row without `images`, `user_images` as one string). Deterministic."""
    rows = {}
    for config in CONFIGS:
        release = read_release(config, source or SAMPLE_DIR)
        rows[config] = list(release.iter_rows(range(len(release))))
    single = [k for k, r in enumerate(rows["vqa"]) if len(r["images"]) == 1]
    fallback = next((k for k in single if k >= 1), None)
    by_file: dict[str, list[tuple[dict[str, Any], dict[str, bytes]]]] = {}
    for lang in LANGS:
        by_file[OFFICIAL_FILES[("classification", lang)]] = [_classification(k, r, lang)
                                                             for k, r in enumerate(rows["classification"])]
        by_file[OFFICIAL_FILES[("nutrition", lang)]] = [_nutrition(k, r, lang) for k, r in enumerate(rows["nutrition"])]
        by_file[OFFICIAL_FILES[("vqa", lang)]] = [_vqa(k, r, lang, fallback) for k, r in enumerate(rows["vqa"])]
    order = [OFFICIAL_FILES[(c, lang)] for lang in LANGS for c in CONFIGS]
    return write_official(out_dir, {name: by_file[name] for name in order}, tarball=tarball)


# --------------------------------------------------------------------- the authors' layout -> ours

_ENGLISH = {"classification": {"options": "options_en"}, "nutrition": {"dish_name": "dish_name_en"},
            "vqa": {"question": "question_en", "answer": "answer_en", "rationale": "rationale_en"}}


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
            out.update({ours: other[theirs] for theirs, ours in _ENGLISH[config].items()})
        yield out


def convert(source: str | os.PathLike, out_dir: str | os.PathLike, lang: str = "zh") -> Path:
    """The authors' release (a folder, one file, or the Hub id) -> our Parquet release with the images
    embedded: every published field kept (`prompt`, `ground_truth`, `image_paths`, `published`), ours
    derived where the rows allow and null where not, and a card stating the source, its revision and
    the authors' license. `lang` both: the Chinese rows, with the English file's texts in the `_en`
    columns (their prompts stay in the `_en` file; convert with `en` to keep them)."""
    if lang not in (*LANGS, "both"):
        raise DatasetError(f"unknown language {lang!r}; choose zh, en or both")
    if not is_official(source):
        raise DatasetError(f"{source} is not in the authors' layout (their JSON-lines files, or {HUB_ID})")
    path = Path(source).expanduser()
    if lang == "both" and path.suffix == ".jsonl":
        raise DatasetError("--lang both reads a folder (or the Hub) holding both files of each config")
    present, first = official_configs(source, "en" if lang == "en" else "zh")
    rows: dict[str, tuple[int, Iterator[dict[str, Any]]]] = {c: (0, iter(())) for c in CONFIGS}
    revisions = set()
    for config in present:
        main = OfficialRelease(config, source, lang=first)
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
