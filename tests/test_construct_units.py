"""The construction pipeline's pure parts: hashes, rules, gates, the FDC reader, the raw export reader,
and the optional option_dish_ids check of `diningbench.validate`."""

from __future__ import annotations

import doctest
import importlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageFilter

import construct.dishes
import construct.models
import construct.nutrition
import construct.pipeline
import construct.raw
import construct.vqa
import construct.work
import diningbench
from construct.fdc import FoodData, ingredient_check, kcal_gap
from construct.imagehash import dhash, hamming
from construct.photos import prefilter
from construct.raw import load_raw
from synthetic import raw_export

FDC = Path(__file__).parents[1] / "data" / "fdc_sr28_sample"


@pytest.mark.parametrize("module", [construct.dishes, construct.models, construct.nutrition, construct.pipeline,
                                    construct.raw, construct.vqa, construct.work, raw_export])
def test_docstring_examples_hold(module):
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("name", ["construct.classification", "construct.translate", "construct.rules"])
def test_the_other_stages_parsers_hold_their_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


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
    # The independent check: the export's own entries (either language), grams x per-100 g, no model.
    result = ingredient_check(fdc, ["米饭 200克", "olive oil 10 g", "独门酱料 15克", "鸡蛋 1个"])
    assert result["computed"]["calories"] == pytest.approx(2 * 130 + 0.1 * 884, abs=0.2)  # rice 130, olive oil 884
    assert result["coverage"] == pytest.approx(210 / 225, abs=0.001)  # the house sauce is no FDC food
    assert result["unmatched"] == ["独门酱料 15克"] and result["unweighed"] == ["鸡蛋 1个"]
    assert [fid for _, fid in result["matched"]] == [168878, rice_oil := fdc.lookup("Oil, olive, salad or cooking").fdc_id]
    assert rice_oil != 168878 and kcal_gap(result["computed"], {"calories": 348.4 * 1.5}) == pytest.approx(0.5, abs=0.01)
    # the build's glossary reads a name the lexicon does not know
    assert ingredient_check(fdc, ["独门米 100克"], {"独门米": "Rice, white, long-grain, regular, enriched, cooked"}
                            )["computed"]["calories"] == 130


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


def test_sample_raw_merchants_scales_the_export_and_its_labelled_defects(tmp_path, capsys):
    assert diningbench.main(["sample", "--raw", "--merchants", "6", "--out", str(tmp_path / "raw")]) == 0
    raw = load_raw(tmp_path / "raw")
    # Merchants 5 and 6 are templates 1 and 2 again: 5 + 5 + 3 + 4 + 4 and 4 + 5 + 6 + 4 photos on top of 60.
    assert sorted(raw.merchants) == [f"merchant-{i:02d}" for i in range(1, 7)] and len(raw.photos) == 100
    truth = raw_export.write_raw_export(tmp_path / "again", merchants=6)
    assert truth["defects"]["merchant-05-d0"] == "blurred_user_photo"
    assert truth["defects"]["merchant-06-d1"] == "reuploaded_user_photo"
    assert "merchant-07-d3" not in truth["defects"]  # a partial block: only its merchants' defects
    assert truth["plants"]["vqa"]["merchant-06-d0"] == "duplicate_of:merchant-05-d4"
    assert truth["plants"]["classification"]["merchant-06-d3"] == [1, "ambiguous"]
    assert truth["photos"][__import__("hashlib").sha256(raw.photo_path("merchant-05-d1-p4").read_bytes()).hexdigest()][
        "shows"] == "merchant-06-d5"  # the wrong-dish photo shows the dish of its own block


@pytest.mark.parametrize("argv, message", [
    (["--raw", "--scale", "paper"], "--scale sizes the release, not a raw export: use --raw --merchants N"),
    (["--merchants", "8"], "--merchants sizes a raw export: add --raw"),
    (["--raw", "--merchants", "0"], "--merchants wants a positive number, got 0"),
])
def test_sample_refuses_a_size_flag_it_would_ignore_in_one_line(tmp_path, capsys, argv, message):
    assert diningbench.main(["sample", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_the_stand_in_answers_from_the_prompt_alone(tmp_path):
    """A planted audit verdict without the draft ever being generated first, the same from two oracles."""
    from construct.standin import ConstructOracle
    from tests.fakes.base import RecordedRequest

    truth = raw_export.write_raw_export(tmp_path / "raw", merchants=8)
    filters = ("openai:a", "openai:b")
    one, two = ConstructOracle(truth, filters), ConstructOracle(truth, filters)
    question = one.texts("merchant-08-d0", "dietary_suggestion")[0]["question"]  # the second block's audit1 false_premise
    prompt = f"Task: VQA audit.\nQuestion: {question}\nReference answer: x\nRationale: y\n"
    ask = RecordedRequest(path="/v1/chat/completions", headers={}, body={"model": "a"}, prompt=prompt)
    assert json.loads(one(ask)) == {"verdict": "reject", "issue_category": "false_premise"}
    assert two(ask) == one(ask)
    ask.body = {"model": "b"}  # the second pass, any other model name
    assert json.loads(one(ask)) == {"verdict": "pass", "issue_category": None}


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


def test_filter_models_default_to_two_distinct_models_and_say_so_when_there_is_one():
    from construct.work import BuildSettings

    one = BuildSettings(model="openai:gen")
    assert one.filter_pair() == ["openai:gen", "openai:gen"] and "both filter passes use one model" in one.filter_note()
    two = BuildSettings(model="openai:gen", photo_match_model="openai:vl-7b")  # on the same server
    assert two.filter_pair() == ["openai:gen", "openai:vl-7b"] and two.filter_note() is None
    elsewhere = BuildSettings(model="openai:gen", photo_match_model="openai:vl-7b", photo_match_base_url="http://h:1/v1")
    assert elsewhere.filter_pair() == ["openai:gen", "openai:gen"]  # another server: the filter calls could not reach it
    given = BuildSettings(model="openai:gen", filter_models=["openai:a", "openai:b"])
    assert given.filter_pair() == ["openai:a", "openai:b"]
    assert BuildSettings(model="openai:gen", filter_models=["openai:a"]).filter_pair() == ["openai:a", "openai:gen"]


def test_the_usda_check_flags_values_far_from_the_computed_ones_for_review(tmp_path):
    from types import SimpleNamespace

    from construct import nutrition
    from construct.raw import Dish
    from construct.work import BuildSettings

    dish = Dish("d1", "m1", "米饭", "主食", "", ("米饭 200克", "olive oil 10 g"), "约210克",
                {"unit": "per_serving", "calories": 120, "protein": 5, "carbohydrates": 20, "fat": 1})
    ctx = SimpleNamespace(raw=SimpleNamespace(dishes={"d1": dish}), settings=BuildSettings(model="openai:gen"))
    checks: dict = {"d1": {}}
    computed = 2 * 130 + 0.1 * 884  # 348.4 kcal
    nutrition.usda_check(ctx, FoodData(FDC), {}, {"d1": {"calories": 600.0}}, checks)
    usda = checks["d1"]["usda"]
    assert usda["computed"]["calories"] == pytest.approx(computed, abs=0.2) and usda["judged"] and usda["flag"]
    assert usda["gap"] == pytest.approx((600 - computed) / computed, abs=0.002)
    assert usda["label_gap"] == pytest.approx((computed - 120) / computed, abs=0.002)  # the label, compared too
    flag = nutrition.usda_flag(usda, {"calories": 600.0})
    assert flag["computed_kcal"] == pytest.approx(computed, abs=0.2) and flag["released_kcal"] == 600.0
    nutrition.usda_check(ctx, FoodData(FDC), {}, {"d1": {"calories": 360.0}}, checks)
    assert checks["d1"]["usda"]["judged"] and not checks["d1"]["usda"]["flag"]  # within the 40% tolerance


def test_a_usda_flag_goes_to_a_person_with_both_figures_even_when_the_task_is_exempt():
    from construct.review import _summary, is_exempt

    row = {"task": "nutrition", "dish_name": "米饭", "dish_name_en": "Rice", "calories": 600.0, "protein": 5.0,
           "carbohydrates": 20.0, "fat": 1.0, "nutrition_source": "estimated", "portion": "约210克"}
    assert is_exempt(row, {"nutrition"}) and "USDA" not in _summary(row)
    row["usda_check"] = {"computed_kcal": 348.4, "released_kcal": 600.0, "gap": 0.722, "label_gap": None, "coverage": 1.0}
    assert not is_exempt(row, {"nutrition"})
    assert "computed from the ingredients 348 kcal vs 600 kcal here (72% apart, 100% of the grams matched)" in _summary(row)
