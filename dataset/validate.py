"""Validation of a release in either layout (schema, rows, images, the card, option provenance) and
the summary of one in the authors' layout; `dataset.load`'s Layout asks the one of its layout."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from dataset.jsonl import finite_number
from dataset.official import OfficialRelease, duplicate_ids, official_configs
from dataset.official_rows import NO_OPTIONS, fixed_ending, nutrition_truth
from dataset.schema import (
    COLUMNS,
    CONFIGS,
    CUISINES,
    DECLARED,
    IMAGE_ROLES,
    LETTERS,
    MAX_CALORIES,
    MAX_GRAMS,
    MAX_PIXELS,
    MIN_POSITIVE,
    NUTRIENTS,
    NUTRITION_SOURCES,
    VQA_CATEGORIES,
    columns,
    config_of,
    schema_problems,
)
from dataset.sources import _data_files
from dataset.stats import position_bias

# ------------------------------------------------------------------------------------------ validate


@dataclass(frozen=True)
class Problem:
    """One finding of `validate`: an `error` makes the release unusable, a `warning` deserves a look."""

    level: str  # error | warning
    config: str
    item_id: str
    message: str

    def __str__(self) -> str:
        where = f"{self.config}/{self.item_id}" if self.item_id else self.config
        return f"{self.level}: {where}: {self.message}"


def image_problem(image: Any) -> str | None:
    """Why an image cell is unusable, or None. The pixel count is read from the header before any
    decoding; JPEGs decode at reduced size (draft: the whole file is still read, so a truncated one
    fails), PNGs are checked chunk by chunk (verify), so a check costs milliseconds, not gigabytes."""
    from PIL import Image as PILImage

    data = image.get("bytes") if isinstance(image, dict) else None
    if not data:
        if isinstance(image, dict) and image.get("path"):
            return "image has no embedded bytes, only a file path (a release must embed its images)"
        return "image has no bytes"
    try:
        with PILImage.open(io.BytesIO(data)) as img:
            width, height = img.size
            if width * height > MAX_PIXELS:
                return f"image is {width}x{height} pixels, over the {MAX_PIXELS:,} limit"
            if img.format == "PNG":
                img.verify()
            else:
                img.draft("RGB", (64, 64))
                img.load()
    except PILImage.DecompressionBombError:
        return f"image declares over {MAX_PIXELS:,} pixels"
    except Exception as exc:
        return f"image does not decode ({type(exc).__name__})"
    return None


def _nutrition_problems(values: dict[str, Any]) -> list[str]:
    """Per-serving values no dish can have (see MAX_CALORIES, MAX_GRAMS, MIN_POSITIVE)."""
    problems = []
    for name, value in values.items():
        limit, unit = (MAX_CALORIES, "kcal") if name == "calories" else (MAX_GRAMS, "g")
        if value > limit:
            problems.append(f"{name}={value:g} is over {limit:,.0f} {unit} per serving")
        elif 0 < value < MIN_POSITIVE:
            problems.append(f"{name}={value:g} is a positive value under {MIN_POSITIVE:g} (write 0 for none)")
    return problems


def _check_row(config: str, row: dict[str, Any], report) -> None:
    """A row converted from the authors' layout (it carries `published`) is held to what their rows
    can give: no merchant, dish, menu category, cuisine, English texts, nutrition source or VQA
    category is asked of it, and options that cannot be read from its prompt are a warning."""
    item = str(row.get("id"))
    published = row.get("published") is not None
    images, roles = row.get("images") or [], row.get("image_roles") or []
    if not images:
        report("error", item, "no images")
    for k, image in enumerate(images):
        if why := image_problem(image):
            report("error", item, f"images[{k}]: {why}")
    if len(roles) != len(images):
        report("error", item, f"image_roles has {len(roles)} entries for {len(images)} images")
    if any(r not in IMAGE_ROLES for r in roles):
        report("error", item, f"image_roles must be reference/user, got {sorted(set(roles) - set(IMAGE_ROLES))}")
    if not published and row.get("cuisine") not in CUISINES:
        report("error", item, f"cuisine {row.get('cuisine')!r} is not one of {', '.join(CUISINES)}")
    for key in () if published else ("dish_id", "merchant_id", "category"):
        if not row.get(key):
            report("error", item, f"{key} is empty")
    _ROW_CHECKS[config_of(config).shape](item, row, published, report)


def _choice_row(item: str, row: dict[str, Any], published: bool, report) -> None:
    """Lettered options, in both languages (one read from the prompt, for a converted row)."""
    keys: tuple[str, ...] = ("options", "options_en")
    if published:  # options come from the prompt text: maybe unreadable, and there is no English copy
        keys = tuple(k for k in keys if row.get(k) is not None)
        if row.get("options") is None:
            report("warning", item, NO_OPTIONS)
    for key in keys:
        opts = row.get(key) or []
        if len(opts) != 8 or len(set(opts)) != 8 or not all(opts):
            report("warning" if published else "error", item,
                   f"{key} must be 8 distinct non-empty names, got {len(set(opts))} distinct of {len(opts)}")
    answer, n = row.get("answer"), len(LETTERS) if published else len(row.get("options") or [])
    if not (isinstance(answer, str) and len(answer) == 1 and answer in LETTERS[:n]):
        report("error", item, f"answer {answer!r} is not a letter of an existing option (A-{LETTERS[max(n, 1) - 1]})")


def _nutrient_row(item: str, row: dict[str, Any], published: bool, report) -> None:
    """Per-serving values a dish can have, close to their Atwater sum; its names and source."""
    found = {n: row.get(n) for n in NUTRIENTS}
    if published and all(v is None for v in found.values()):
        report("error", item, "ground truth unreadable: no calories, protein, carbohydrates or fat in it")
        return
    bad = [f"{n}={v}" for n, v in found.items() if not finite_number(v, 0)]
    values = {n: float(v) for n, v in found.items() if isinstance(v, int | float)}
    absurd = [] if bad else _nutrition_problems(values)
    if bad:
        report("error", item, f"nutrition must be finite and >= 0: {', '.join(bad)}")
    elif absurd:
        report("error", item, f"nutrition not physically possible: {'; '.join(absurd)}")
    elif values["calories"] > 0:
        atwater = 4 * values["protein"] + 4 * values["carbohydrates"] + 9 * values["fat"]
        gap = abs(values["calories"] - atwater) / values["calories"]
        if gap > 0.10:
            report("warning", item, f"Atwater gap {gap:.0%}: {values['calories']:.0f} kcal vs 4P+4C+9F = {atwater:.0f}")
    if not published and row.get("nutrition_source") not in NUTRITION_SOURCES:
        report("error", item, f"nutrition_source {row.get('nutrition_source')!r} is not one of {', '.join(NUTRITION_SOURCES)}")
    for key in () if published else ("dish_name", "dish_name_en"):
        if not row.get(key):
            report("error", item, f"{key} is empty")


def _question_row(item: str, row: dict[str, Any], published: bool, report) -> None:
    """A question and its answer in both languages (one, for a converted row), and its category."""
    if not published and row.get("vqa_category") not in VQA_CATEGORIES:
        report("error", item, f"vqa_category {row.get('vqa_category')!r} is not one of {', '.join(VQA_CATEGORIES)}")
    for key in ("question", "answer") if published else ("question", "question_en", "answer", "answer_en"):
        if not row.get(key):
            report("error", item, f"{key} is empty")


# The checks of a row's own columns, by the kind of item its config declares (`Config.shape`).
_ROW_CHECKS = {"choice": _choice_row, "nutrients": _nutrient_row, "question": _question_row}


def _validate_config(folder: Path, config: str, report) -> None:
    if not (files := _data_files(folder, config)):
        report("error", "", f"no data/{config}/*.parquet files")
        return
    expected = columns(config)
    ids: Counter[str] = Counter()
    letters: list[str] = []
    for path in files:
        try:
            parquet = pq.ParquetFile(path)
        except Exception as exc:
            report("error", "", f"{path.name} is not readable Parquet ({type(exc).__name__})")
            continue
        for level, messages in zip(("error", "warning"), schema_problems(config, parquet.schema_arrow), strict=True):
            for message in messages:
                report(level, "", f"{path.name}: {message}")
        for group in range(parquet.num_row_groups):
            for row in parquet.read_row_group(group).to_pylist():
                ids[str(row.get("id"))] += 1
                _check_row(config, {k: row.get(k) for k in [*expected, "published"]}, report)
                if "options" in COLUMNS[config] and isinstance(row.get("answer"), str):
                    letters.append(row["answer"])
    for item, count in sorted(ids.items()):
        if count > 1:
            report("error", item, f"duplicate id ({count} rows)")
    if len(letters) >= 16:
        bias = position_bias(letters, [len(LETTERS)] * len(letters)) or {}
        stat, p = bias.get("statistic"), bias.get("p_value")
        if p is not None and p < 0.001:
            counts = ", ".join(f"{k}={v}" for k, v in sorted(Counter(letters).items()))
            report("warning", "", f"answer letters far from uniform over A-H (chi2={stat:.1f}, p={p:.1e}; {counts})")


def _declared_configs(readme: Path) -> set[str] | str:
    """Config names under `configs:` in the card's YAML header, or why they cannot be read."""
    import yaml

    if not readme.exists():
        return "README.md (dataset card with configs:) is missing"
    text = readme.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return "README.md has no YAML header (configs:, dataset_info:)"
    try:
        header = yaml.safe_load(text.split("---", 2)[1]) or {}
    except (yaml.YAMLError, IndexError) as exc:
        return f"README.md YAML header does not parse ({type(exc).__name__})"
    if not isinstance(header, dict):
        return f"README.md YAML header is a {type(header).__name__}, not a mapping of fields"
    configs = header.get("configs") or []
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        return (f"README.md configs: must be a list of entries with config_name and data_files, "
                f"got {configs!r:.60}")
    return {str(c.get("config_name")) for c in configs}


def _validate_parquet(src: str, folder: Path | None) -> list[Problem]:
    """Every problem of a release in our layout (SPEC 3.4): a release folder, or (`folder` None) a
    Hub id whose card and Parquet files are fetched."""
    if folder is None:
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(src, repo_type="dataset", allow_patterns=["README.md", "data/**"]))
        except Exception as exc:
            return [Problem("error", "-", "", f"cannot read {src}: neither a folder nor a reachable Hub dataset ({type(exc).__name__})")]
    problems: list[Problem] = []
    declared = _declared_configs(folder / "README.md")
    if isinstance(declared, str):
        problems.append(Problem("error", "-", "", declared))
    for config in CONFIGS:
        if isinstance(declared, set) and config not in declared:
            problems.append(Problem("error", config, "", "config not declared under configs: in README.md"))

        def report(level: str, item: str, message: str, _config: str = config) -> None:
            problems.append(Problem(level, _config, item, message))

        try:
            _validate_config(folder, config, report)
        except Exception as exc:  # damage no check anticipated: still one itemised line, never a traceback
            first = (str(exc).strip().splitlines() or [""])[0]
            report("error", "", f"unreadable data ({type(exc).__name__}: {first})")
    for config in (c.name for c in DECLARED if _OPTION_DISHES in c.optional):
        try:
            problems += _option_dish_problems(folder, config)
        except Exception as exc:
            problems.append(Problem("error", config, "", f"option_dish_ids unreadable ({type(exc).__name__})"))
    return problems


_OPTION_DISHES = "option_dish_ids"  # the column a config of options may declare (dataset/schema.py DECLARED)


def _option_dish_problems(folder: Path, config: str) -> list[Problem]:
    """When a config of options carries option_dish_ids: 8 distinct ids, the answer's is the item's dish, and
    every option whose dish appears anywhere in the release is from the same merchant and menu category
    (distractors only on the menu, with no item of their own, cannot be checked from the release)."""
    files = _data_files(folder, config)
    if not files or not all(_OPTION_DISHES in pq.ParquetFile(p).schema_arrow.names for p in files):
        return []
    where: dict[str, tuple[str, str]] = {}
    for other in CONFIGS:
        for path in _data_files(folder, other):
            table = pq.read_table(path, columns=["dish_id", "merchant_id", "category"])
            for dish, merchant, category in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
                where.setdefault(str(dish), (str(merchant), str(category)))
    problems = []
    for path in files:
        table = pq.read_table(path, columns=["id", "dish_id", "merchant_id", "category", "answer", _OPTION_DISHES])
        for row in table.to_pylist():
            if row[_OPTION_DISHES] is None:  # a row converted from the authors' layout: no dish ids
                continue
            item, ids = str(row["id"]), row[_OPTION_DISHES]
            if len(ids) != 8 or len(set(ids)) != 8:
                problems.append(Problem("error", config, item, f"option_dish_ids must be 8 distinct dish ids, got {len(set(ids))} of {len(ids)}"))
                continue
            k = LETTERS.find(str(row["answer"])) if isinstance(row["answer"], str) and len(row["answer"]) == 1 else -1
            if k >= 0 and ids[k] != row["dish_id"]:
                problems.append(Problem("error", config, item, f"option_dish_ids[{row['answer']}] is {ids[k]}, not the item's dish {row['dish_id']}"))
            own = (str(row["merchant_id"]), str(row["category"]))
            if strays := [i for i in ids if i in where and where[i] != own]:
                problems.append(Problem("error", config, item, f"option(s) {', '.join(strays)} are not from merchant "
                                        f"{own[0]} / menu category {own[1]}"))
    return problems


# ------------------------------------------------------------------------------ the authors' layout


def _official_row_problems(config: str, row: dict[str, Any]) -> list[tuple[str, str]]:
    """(level, message) of one row of the authors' layout: what their scripts could not score is an
    error, what only our analyses miss a warning."""
    found = [] if row["prompt"].strip() else [("error", "prompt is empty or not text")]
    return found + _OFFICIAL_CHECKS[config_of(config).shape](row)


def _official_choice(row: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if not (isinstance(row["answer"], str) and len(row["answer"]) == 1 and row["answer"] in LETTERS):
        found.append(("error", f"ground truth {row['ground_truth']!r:.40} is not an option letter A-H"))
    elif row["options"] is not None and LETTERS.index(row["answer"]) >= len(row["options"]):
        found.append(("error", f"ground truth {row['answer']} names no option: the prompt lists {len(row['options'])}"))
    if row["options"] is None:
        found.append(("warning", NO_OPTIONS))
    elif len(row["options"]) != len(LETTERS):
        found.append(("warning", f"the prompt lists {len(row['options'])} options, not {len(LETTERS)}"))
    return found


def _official_nutrients(row: dict[str, Any]) -> list[tuple[str, str]]:
    values = nutrition_truth(row["ground_truth"])
    if values is None:
        return [("error", "ground truth unreadable: not an object, nor a JSON string of one")]
    found: list[tuple[str, str]] = []
    if missing := [n for n in NUTRIENTS if values[n] is None]:
        found.append(("error", f"ground truth has no readable {', '.join(missing)}"))
    numbers = {n: v for n, v in values.items() if n in NUTRIENTS and v is not None}
    if negative := [f"{n}={v:g}" for n, v in numbers.items() if v < 0]:
        found.append(("error", f"nutrition must be >= 0: {', '.join(negative)}"))
    found += [("error", f"nutrition not physically possible: {p}") for p in _nutrition_problems(numbers)]
    found += [("warning", f"{n} is 0: the authors leave it out of its MAPE") for n, v in numbers.items() if v == 0]
    return found


def _official_question(row: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    truth = row["ground_truth"]
    if not (isinstance(truth, str) and truth.strip()):
        found.append(("warning", "empty ground truth: the authors leave the item out of the judge's total"))
    if fixed_ending(row["prompt"]) is None:
        found.append(("warning", "the prompt does not end with the fixed sentence asking for the final answer only"))
    return found


# What the authors' scripts need of a row, by the shape its config is published in (`Config.shape`).
_OFFICIAL_CHECKS = {"choice": _official_choice, "nutrients": _official_nutrients, "question": _official_question}


def _validate_official(source: str, lang: str) -> list[Problem]:
    """Every problem of a release in the authors' layout, itemised by config and item (its id, or its
    line position when ids are not unique); never raises on bad data."""
    problems: list[Problem] = []
    try:
        present, lang = official_configs(source, lang)
    except Exception as exc:
        return [Problem("error", "-", "", str(exc))]
    for config in CONFIGS:
        if config not in present:
            if len(present) != 1:  # one file names its own config; a folder should hold all three
                problems.append(Problem("warning", config, "", f"no {config} file in {lang} in {source}"))
            continue
        try:
            release = OfficialRelease(config, source, lang=lang, refuse=False)
        except Exception as exc:  # a refused file, line or archive: one itemised line, never a traceback
            problems.append(Problem("error", config, "", (str(exc).strip().splitlines() or [type(exc).__name__])[0]))
            continue
        problems += [Problem(level, config, item, message) for level, item, message in release.problems]
        for row in release.rows:
            if not row["image_paths"]:
                problems.append(Problem("error", config, row["id"], "no images"))
            if missing := release.missing_images(row):
                more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
                problems.append(Problem("error", config, row["id"], f"image(s) not found: {', '.join(missing[:3])}{more}"))
            problems += [Problem(level, config, row["id"], message) for level, message in _official_row_problems(config, row)]
        for item, count in sorted(duplicate_ids(release.rows).items()):
            problems.append(Problem("warning", config, item, f"published id on {count} rows: items are named by their "
                                    "line position (idx) instead"))
    return problems


def _image_counts(n_images: list[int]) -> str:
    """A summary's counts of one config, from the number of images of each of its items."""
    return (f"{len(n_images)} items, {sum(n_images)} images ({sum(n_images) / max(len(n_images), 1):.2f} per item, "
            f"min {min(n_images, default=0)}, max {max(n_images, default=0)})")


def _official_summary(source: str, lang: str) -> str:
    present, lang = official_configs(source, lang)
    lines = []
    for config in present:
        release = OfficialRelease(config, source, lang=lang)
        lines.append(f"{config} ({release.path.name}{f' @ {release.revision}' if release.revision else ''}): "
                     f"{_image_counts([len(r['image_paths']) for r in release.rows])}")
        lines += [f"  note: {note}" for note in release.notes]
    lines.append("the authors' layout has no merchant, cuisine, menu category or VQA category: breakdowns by them and "
                 "merchant-clustered intervals are left out")
    return "\n".join(lines)
