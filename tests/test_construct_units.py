"""The construction pipeline's pure parts: hashes, rules, gates, the FDC reader, the raw export reader,
and the optional option_dish_ids check of `diningbench.validate`."""

from __future__ import annotations

import doctest
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageFilter

import construct.dishes
import construct.models
import construct.nutrition
import construct.raw
import construct.vqa
import diningbench
from construct.fdc import FoodData, cross_check
from construct.imagehash import dhash, hamming
from construct.photos import prefilter
from construct.raw import load_raw

FDC = Path(__file__).parents[1] / "data" / "fdc_sr28_sample"


@pytest.mark.parametrize("module", [construct.dishes, construct.models, construct.nutrition, construct.raw, construct.vqa])
def test_docstring_examples_hold(module):
    assert doctest.testmod(module).failed == 0


def _photo(seed: int) -> Image.Image:
    rng = __import__("numpy").random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype="uint8")).resize((256, 256))


def test_hashes_see_a_reupload_as_the_same_photo_and_another_photo_as_different():
    a, b = _photo(1), _photo(2)
    again = Image.open(io.BytesIO(_jpeg(a, 50)))
    assert hamming(dhash(a), dhash(again)) <= 6
    assert hamming(dhash(a), dhash(b)) > 16


def _jpeg(img: Image.Image, quality: int = 85) -> bytes:
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def test_prefilter_rejects_cut_off_and_small_photos():
    data = _jpeg(_photo(3))
    assert prefilter(data, 128)[0] is None
    assert prefilter(data[:500], 128)[0].startswith("undecodable")
    assert prefilter(_jpeg(_photo(3).resize((40, 40))), 128)[0] == "too_small:40x40"
    assert prefilter(_jpeg(_photo(3).filter(ImageFilter.GaussianBlur(3))), 128)[0] is None  # blur is a model's call


def test_fdc_reader_finds_foods_by_description_and_sums_an_ingredient_breakdown():
    fdc = FoodData(FDC)
    rice = fdc.lookup("Rice, white, long-grain, regular, enriched, cooked")
    assert rice.fdc_id == 168878 and rice.per100g["calories"] == 130
    assert fdc.lookup("white rice long-grain cooked enriched regular").fdc_id == 168878
    assert fdc.lookup("unicorn steak") is None
    result = cross_check(fdc, [{"name": "米饭", "grams": 200, "usda_description": "Rice, white, long-grain, regular, enriched, cooked"},
                               {"name": "油", "grams": 10, "usda_description": "Oil, olive, salad or cooking"}],
                         {"calories": 350.0})
    assert result["coverage"] == 1.0 and result["fdc"]["calories"] == pytest.approx(260 + 88.4, abs=0.2)
    assert result["kcal_gap"] < 0.01


def test_fdc_folder_without_its_files_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="food.csv is missing"):
        FoodData(tmp_path)


def test_raw_export_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "merchants.jsonl").write_text('{"merchant_id": "m1", "name": "A", "cuisine": "martian"}\n')
    with pytest.raises(ValueError, match="merchants.jsonl line 1: cuisine 'martian'"):
        load_raw(tmp_path)


def test_raw_export_schema_is_valid_json_and_names_every_file():
    schema = json.loads(construct.raw.SCHEMA.read_text(encoding="utf-8"))
    assert set(schema["properties"]) == {"merchants.jsonl", "dishes.jsonl", "photos.jsonl"}
    assert schema["$defs"]["nutrition"]["properties"]["unit"]["enum"] == ["per_serving", "per_100g"]


def test_sample_raw_cli_writes_an_export_the_pipeline_reads(tmp_path):
    assert diningbench.main(["sample", "--raw", "--out", str(tmp_path / "raw")]) == 0
    raw = load_raw(tmp_path / "raw")
    assert len(raw.merchants) == 4 and len(raw.photos) == 60
    assert any(d.nutrition and d.nutrition["unit"] == "per_100g" for d in raw.dishes.values())


def _sample_release(tmp_path: Path) -> Path:
    """The embedded sample's classification rows with option_dish_ids made up from their menus."""
    from datasets import Dataset

    rows = {c: diningbench.load(c, decode_images=False) for c in diningbench.CONFIGS}
    cls = rows["classification"].to_list()
    for row in cls:
        row["option_dish_ids"] = [row["dish_id"] if i == ord(row["answer"]) - 65 else f"{row['dish_id']}-x{i}"
                                  for i in range(8)]
    data = {c: (len(rows[c]), iter(cls if c == "classification" else Dataset.to_list(rows[c])))
            for c in diningbench.CONFIGS}
    return diningbench.write_release(tmp_path / "release", data, optional=("classification",))


def test_validate_checks_option_dish_ids_against_merchant_and_category(tmp_path):
    release = _sample_release(tmp_path)
    assert [p for p in diningbench.validate(release) if p.level == "error"] == []
    path = next((release / "data" / "classification").glob("*.parquet"))
    table = pq.read_table(path).to_pylist()
    other = next(r for r in table if r["merchant_id"] != table[0]["merchant_id"])
    wrong = 1 if table[0]["answer"] != "B" else 2
    table[0]["option_dish_ids"][wrong] = other["dish_id"]
    schema = diningbench.features("classification", optional=True).arrow_schema
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(table, schema=schema), path)
    errors = [str(p) for p in diningbench.validate(release) if p.level == "error"]
    assert len(errors) == 1 and "not from merchant" in errors[0] and other["dish_id"] in errors[0]
