"""DiningBench dataset contract: the features of each config, load, fingerprint, validate, build and
publish a release, and the CLI (`python diningbench.py {validate,build,sample,convert,push,summary}`).

The code lives in the `dataset/` package beside this file, one module per concern: `schema` (the
columns of each config, row encoding, limits), `jsonl` (the one JSON-lines reader), `load` (a release
folder with pyarrow alone, a Hub id through `datasets`, fingerprints), `cache` (the cache folder, the
Hub's reachability), `official` (the authors' layout: JSON lines + an images tree or archive, read and
written; `archive` unpacks it safely), `convert` (between the two layouts), `stats` (chi-square of answer
positions), `validate` and `build` (Parquet shards, the card, the synthetic sample, push). This file is
the entry point: `import diningbench` gives all of it, `python diningbench.py` is the CLI. Copy it with
`dataset/` next to any release (or into a Space) to use it without the rest of the repository.
`datasets` >= 4 runs no loading scripts, so a release is Parquet + a README with `configs:`.
"""

from __future__ import annotations

import argparse
import sys

from dataset.archive import MAX_MEMBERS, MAX_UNPACKED_BYTES, unpack_once
from dataset.build import (
    ShardWriter,
    build,
    card_info,
    card_license,
    card_text,
    generate,
    push,
    write_release,
)
from dataset.cache import (
    FINGERPRINTS_KEPT,
    Held,
    datasets_cache,
    hash_file,
    hold,
    hub_reachable,
    remove_unheld,
    temp_file,
)
from dataset.convert import convert, write_sample_official
from dataset.jsonl import (
    MAX_JSON_DEPTH,
    MAX_JSON_FILE_BYTES,
    JsonlPolicy,
    file_problem,
    finite_number,
    iter_jsonl_objects,
    json_depth_within,
    read_json_file,
)
from dataset.load import (
    IMAGE_BATCH,
    IMAGE_CACHES_KEPT,
    Layout,
    LoadedRelease,
    LocalRelease,
    OfficialLayout,
    ParquetLayout,
    _source,
    fingerprint,
    is_official,
    layout_of,
    load,
    read_release,
    summary,
    validate,
)
from dataset.official import (
    HUB_ID,
    IMAGES_ARCHIVE,
    IMAGES_DIR,
    LANGS,
    LAYOUTS,
    MAX_IMAGES_PER_ROW,
    MAX_LINE_BYTES,
    MAX_ROWS,
    OFFICIAL_FILES,
    OFFICIAL_LICENSE,
    OFFICIAL_PAPER,
    PUBLISHED_ROWS,
    UNPACKED_KEPT,
    OfficialRelease,
    duplicate_ids,
    in_authors_layout,
    license_terms,
    official_configs,
    read_official,
    write_official,
)
from dataset.official_rows import (
    DISH_NAME_KEYS,
    NO_OPTIONS,
    NUTRIENT_KEYS,
    PROTOCOL,
    PROTOCOL_FILE,
    SHAPES,
    VQA_ENDINGS,
    Shape,
    classification_prompt,
    derive_row,
    fixed_ending,
    normalize_keys,
    nutrition_ground_truth,
    nutrition_prompt,
    nutrition_truth,
    parse_options,
    published_images,
    published_row,
    reference_letter,
    shape_of,
    text_of,
    vqa_image_fallback,
    vqa_prompt,
    vqa_question,
)
from dataset.schema import (
    CARD,
    CITATION,
    COLUMNS,
    COMMON_COLUMNS,
    CONFIGS,
    CUISINES,
    DECLARED,
    DESCRIPTION,
    ENVIRONMENT_ERRORS,
    GRAMS_PER_UNIT,
    IMAGE,
    IMAGE_ROLES,
    LETTERS,
    LICENSE,
    MAX_CALORIES,
    MAX_GRAMS,
    MAX_PHOTO_BYTES,
    MAX_PIXELS,
    MIN_POSITIVE,
    NUTRIENTS,
    NUTRITION_SOURCES,
    OPTIONAL_COLUMNS,
    PUBLISHED_COLUMNS,
    ROOT,
    ROW_GROUP_SIZE,
    SAMPLE_DIR,
    SPLIT,
    VQA_CATEGORIES,
    Config,
    DatasetError,
    arrow_schema,
    column_type_ok,
    columns,
    config_of,
    encode_row,
    features,
    portion_grams,
    release_schema,
    schema_problems,
)
from dataset.stats import chi_square_sf, position_bias, regularized_gamma_q
from dataset.validate import Problem, image_problem

__all__ = ["arrow_schema", "CARD", "CITATION", "column_type_ok", "COLUMNS", "columns", "COMMON_COLUMNS", "CONFIGS", "CUISINES", "DatasetError", "DESCRIPTION", "encode_row", "ENVIRONMENT_ERRORS", "features", "GRAMS_PER_UNIT", "IMAGE", "IMAGE_ROLES", "LETTERS", "LICENSE", "MAX_CALORIES", "MAX_GRAMS", "MAX_PIXELS", "MIN_POSITIVE", "NUTRIENTS", "NUTRITION_SOURCES", "OPTIONAL_COLUMNS", "portion_grams", "release_schema", "ROOT", "ROW_GROUP_SIZE", "SAMPLE_DIR", "schema_problems", "SPLIT", "VQA_CATEGORIES", "iter_jsonl_objects", "file_problem", "finite_number", "json_depth_within", "read_json_file", "MAX_JSON_FILE_BYTES", "JsonlPolicy", "MAX_JSON_DEPTH", "datasets_cache", "fingerprint", "FINGERPRINTS_KEPT", "hub_reachable", "IMAGE_BATCH", "IMAGE_CACHES_KEPT", "load", "LoadedRelease", "LocalRelease", "read_release", "chi_square_sf", "position_bias", "regularized_gamma_q", "image_problem", "Problem", "summary", "validate", "build", "card_info", "card_text", "generate", "push", "ShardWriter", "write_release",
           "MAX_MEMBERS", "MAX_UNPACKED_BYTES", "card_license", "convert", "write_sample_official", "HUB_ID", "LANGS", "LAYOUTS",
           "MAX_IMAGES_PER_ROW", "MAX_LINE_BYTES", "MAX_ROWS", "OFFICIAL_FILES", "OFFICIAL_LICENSE", "OfficialRelease",
           "is_official", "license_terms", "nutrition_truth", "parse_options", "read_official", "write_official",
           "MAX_PHOTO_BYTES", "PUBLISHED_COLUMNS", "NO_OPTIONS", "VQA_ENDINGS", "PROTOCOL", "PROTOCOL_FILE", "hash_file",
           "unpack_once", "DISH_NAME_KEYS", "IMAGES_ARCHIVE", "IMAGES_DIR", "NUTRIENT_KEYS", "OFFICIAL_PAPER", "PUBLISHED_ROWS",
           "UNPACKED_KEPT", "derive_row", "duplicate_ids", "official_configs", "published_images", "vqa_image_fallback",
           "fixed_ending", "normalize_keys", "reference_letter", "vqa_question",
           "classification_prompt", "nutrition_prompt", "nutrition_ground_truth", "vqa_prompt", "published_row", "text_of",
           "Config", "DECLARED", "config_of", "SHAPES", "Shape", "shape_of", "Held", "hold", "remove_unheld", "temp_file",
           "Layout", "OfficialLayout", "ParquetLayout", "layout_of", "in_authors_layout"]


# ----------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python diningbench.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  python diningbench.py validate path/to/release\n"
                                            "  python diningbench.py sample --out /tmp/diningbench-sample\n"
                                            "  python diningbench.py summary OWNER/NAME\n"
                                            f"  python diningbench.py convert {HUB_ID} --out releases/official")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    source_help = ("release folder or Hub dataset id OWNER/NAME, or the authors' layout (a folder of their JSON-lines "
                   f"files, one such file, {HUB_ID}[@REVISION]) (default: $DININGBENCH_SOURCE, else the embedded sample)")
    lang_help = "the authors' layout: the Chinese files or the English (_en) ones (default zh)"
    p = sub.add_parser("validate", help="check a release folder or Hub id; exit 1 on errors")
    p.add_argument("source", nargs="?", default=None, help=source_help)
    p.add_argument("--lang", choices=LANGS, default="zh", help=lang_help)
    p = sub.add_parser("build", help="records (JSONL + images) -> release folder")
    p.add_argument("records_dir", help="folder with classification.jsonl, nutrition.jsonl, vqa.jsonl and the "
                   "image files they name by relative path")
    p.add_argument("--out", required=True, help="release folder to write (Parquet shards + README.md card)")
    p = sub.add_parser("sample", help="regenerate the synthetic release (--raw: a raw merchant export instead)")
    p.add_argument("--raw", action="store_true", help="write a raw merchant export with planted defects, "
                   "the input of `python -m construct run`")
    p.add_argument("--scale", choices=("sample", "paper"), default=None,
                   help="sample: the small embedded release (default); paper: the paper's item counts "
                        "(not with --raw: a raw export's size is --merchants)")
    p.add_argument("--merchants", type=int, default=None,
                   help="with --raw: merchants in the export (default 4), the planted defects repeated per 4")
    p.add_argument("--seed", type=int, default=0, help="same seed, byte-identical Parquet (default 0)")
    p.add_argument("--workers", type=int, default=None, help="rendering processes (default: one per CPU)")
    p.add_argument("--layout", choices=LAYOUTS, default="parquet",
                   help="official: the committed sample in the authors' layout (six JSON-lines files, images/, "
                        "images.tar.gz), with the quirks their scripts accept")
    p.add_argument("--out", required=True, help="folder to write")
    p = sub.add_parser("convert", help="the authors' layout -> a Parquet release (images embedded, published fields kept)")
    p.add_argument("source", help=f"a folder of the authors' JSON-lines files, one such file, or {HUB_ID}[@REVISION]")
    p.add_argument("--out", required=True, help="release folder to write")
    p.add_argument("--lang", choices=(*LANGS, "both"), default="zh",
                   help="which files: zh, en, or both (the Chinese rows with the English texts in the _en columns)")
    p = sub.add_parser("push", help="upload a release folder to the Hub (token from HF_TOKEN)")
    p.add_argument("release_dir", help="a release folder that validates without errors")
    p.add_argument("repo_id", help="Hub dataset repository OWNER/NAME (created if missing)")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--public", action="store_true",
                   help=f"create it public even when the card's license is {OFFICIAL_LICENSE} (private otherwise)")
    p = sub.add_parser("summary", help="counts per config, cuisine, category, images per item")
    p.add_argument("source", nargs="?", default=None, help=source_help)
    p.add_argument("--lang", choices=LANGS, default="zh", help=lang_help)
    args = parser.parse_args(argv)
    if args.command == "summary":  # the one command that loads through datasets (build and sample never import it)
        import datasets

        datasets.disable_progress_bars()  # the CLI prints results; per-split progress bars are noise here
    try:
        if args.command == "validate":
            problems = validate(args.source, lang=args.lang)
            for problem in problems:
                print(problem)
            errors = sum(p.level == "error" for p in problems)
            print(f"{_source(args.source)}: {errors} error(s), {len(problems) - errors} warning(s)")
            return 1 if errors else 0
        if args.command == "build":
            print(f"wrote {build(args.records_dir, args.out)}")
        elif args.command == "sample" and args.layout == "official":
            if args.raw or args.merchants is not None or args.scale not in (None, "sample"):
                raise DatasetError("--layout official writes the committed sample: no --raw, --merchants or --scale paper")
            print(f"wrote {write_sample_official(args.out)}")
        elif args.command == "convert":
            print(f"wrote {convert(args.source, args.out, lang=args.lang)}")
        elif args.command == "sample" and args.raw:
            from synthetic.raw_export import MERCHANTS, write_raw_export

            if args.scale is not None:
                raise DatasetError("--scale sizes the release, not a raw export: use --raw --merchants N")
            n = len(MERCHANTS) if args.merchants is None else args.merchants
            if n < 1:
                raise DatasetError(f"--merchants wants a positive number, got {n}")
            write_raw_export(args.out, seed=args.seed, merchants=n)
            print(f"wrote raw export {args.out} ({n} merchants)")
        elif args.command == "sample":
            if args.merchants is not None:
                raise DatasetError("--merchants sizes a raw export: add --raw (the release's size is --scale)")
            print(f"wrote {generate(args.out, scale=args.scale or 'sample', seed=args.seed, workers=args.workers)}")
        elif args.command == "push":
            if terms := license_terms(card_license(args.release_dir)):
                print(terms + ("" if args.public else "; the repository is created private (--public to publish it)"))
            print(f"pushed: {push(args.release_dir, args.repo_id, private=args.private, public=args.public)}")
        else:
            print(summary(args.source, lang=args.lang))
    except (DatasetError, *ENVIRONMENT_ERRORS) as exc:  # a mistake or a refused file: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0  # anything else is a bug: its traceback, exit 1


if __name__ == "__main__":
    sys.exit(main())
