"""Writing a release without `datasets`: the schema, the stored rows and the card's `dataset_info` are
what `datasets` itself would write (it stays the reference here, in the tests only), and
`python diningbench.py build|sample` never imports it.

(pandas is still imported on the way: pyarrow imports it the first time it converts Python values to
an array, `pa.array` asking its pandas shim whether the values are a pandas object.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import diningbench
from tests.helpers_dataset import write_records

ROOT = Path(diningbench.__file__).resolve().parent


@pytest.mark.parametrize("config", diningbench.CONFIGS)
@pytest.mark.parametrize("optional", [False, True])
def test_the_release_schema_is_the_one_datasets_writes_metadata_included(config: str, optional: bool) -> None:
    ours = diningbench.release_schema(config, optional=optional)
    theirs = diningbench.features(config, optional=optional).arrow_schema
    assert ours.equals(theirs, check_metadata=True)
    assert ours.metadata == theirs.metadata  # the `huggingface` JSON, byte for byte
    assert ours.serialize().to_pybytes() == theirs.serialize().to_pybytes()


def sample_rows(config: str) -> list[dict]:
    """The embedded sample's rows as a writer receives them: image cells as `{"bytes", "path"}`."""
    reader = diningbench.read_release(config)
    return list(reader.iter_rows(range(len(reader))))


@pytest.mark.parametrize("config", diningbench.CONFIGS)
def test_encode_row_stores_the_embedded_sample_as_datasets_does(config: str) -> None:
    features = diningbench.features(config)
    rows = sample_rows(config)
    assert rows and all(r["images"] and all(isinstance(i["bytes"], bytes) for i in r["images"]) for r in rows)
    for row in rows:
        assert diningbench.encode_row(config, row) == features.encode_example(row)


def test_encode_row_converts_and_fills_as_datasets_does() -> None:
    """JSON records carry numbers where text is declared, ints for floats, raw bytes, missing or extra keys."""
    row = {**sample_rows("nutrition")[0], "merchant_id": 17, "calories": 682, "protein": "31.5", "unknown": 1,
           "ingredients": ("rice", "egg"), "images": [b"\xff\xd8raw", {"bytes": b"x", "path": None, "extra": 1}]}
    del row["fat"]
    with_optional = {**sample_rows("classification")[0], "option_dish_ids": ["d1"] * 8}
    for config, value, optional in (("nutrition", row, False), ("classification", with_optional, True),
                                    ("classification", with_optional, False)):
        ours = diningbench.encode_row(config, value, optional=optional)
        assert ours == diningbench.features(config, optional=optional).encode_example(value)
        assert list(ours) == list(diningbench.columns(config, optional=optional))
    assert diningbench.encode_row("nutrition", row)["calories"] == 682.0


@pytest.mark.parametrize(("cell", "words"), [
    ("photo.jpg", "images[1] is a file path, not an image"),
    ({"bytes": None, "path": None}, "images[1] has neither bytes nor path"),
    ({"bytes": "not bytes", "path": "a.jpg"}, "images[1] must be"),
])
def test_an_image_cell_that_is_not_bytes_is_refused_naming_the_item(cell, words) -> None:
    row = sample_rows("vqa")[3]
    row["images"] = [row["images"][0], cell]
    with pytest.raises(ValueError, match="^" + re.escape(f"vqa item {row['id']}: {words}")):
        diningbench.encode_row("vqa", row)


def test_a_pil_image_or_a_list_for_text_is_refused_naming_the_item() -> None:
    from PIL import Image

    row = sample_rows("vqa")[0]
    with pytest.raises(ValueError, match=r"^vqa item vqa-00001: images\[0\] is a PIL.Image.Image, not an image cell"):
        diningbench.encode_row("vqa", {**row, "images": [Image.new("RGB", (4, 4))]})
    with pytest.raises(ValueError, match=r"^vqa item vqa-00001: question must be text, got list"):
        diningbench.encode_row("vqa", {**row, "question": ["a", "b"]})
    with pytest.raises(ValueError, match=r"^vqa item vqa-00001: image_roles must be a list, got str"):
        diningbench.encode_row("vqa", {**row, "image_roles": "reference"})


def test_an_image_named_like_a_file_in_the_working_directory_keeps_its_bytes(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An image cell's `path` is a name, not a file to read: a release embeds the bytes it was given,
    whatever folder the writer runs in."""
    rows = {c: sample_rows(c)[:2] for c in diningbench.CONFIGS}
    name = rows["vqa"][0]["images"][0]["path"]
    here = tmp_path / "here"
    here.mkdir()
    (here / name).write_bytes(b"a file that happens to share the photo's name")
    monkeypatch.chdir(here)
    release = diningbench.write_release(tmp_path / "release", {c: (len(r), iter(r)) for c, r in rows.items()})
    stored = pq.read_table(next((release / "data" / "vqa").glob("*.parquet"))).column("images").to_pylist()
    assert stored[0][0] == rows["vqa"][0]["images"][0]
    assert diningbench.validate(release) == []


def datasets_card_info(counts: dict[str, int], num_bytes: dict[str, int], optional: set[str]) -> list[dict]:
    """Each config's `dataset_info` as `datasets` writes it: the reference for `card_text`."""
    import datasets

    infos = []
    for config in diningbench.CONFIGS:
        split = datasets.SplitDict()
        split.add(datasets.SplitInfo(name=diningbench.SPLIT, num_bytes=num_bytes.get(config, 0),
                                     num_examples=counts.get(config, 0)))
        info = datasets.DatasetInfo(features=diningbench.features(config, optional=config in optional), splits=split,
                                    config_name=config, dataset_size=num_bytes.get(config, 0))
        infos.append({**info._to_yaml_dict(), **diningbench.card_info()})
    return infos


@pytest.mark.parametrize(("counts", "num_bytes", "note", "optional"), [
    ({"classification": 48, "nutrition": 24, "vqa": 12}, {"classification": 9_876_543, "nutrition": 4321, "vqa": 1},
     "", set()),
    ({"classification": 7, "nutrition": 10, "vqa": 5}, {"classification": 1234, "nutrition": 0, "vqa": 99},
     "Built by `python -m construct`.", {"classification"}),
    ({"classification": 2884, "nutrition": 1650, "vqa": 804}, {}, "Synthetic data: not real photos.", set()),
    ({}, {}, "", {"classification", "nutrition"}),
])
def test_the_card_states_the_dataset_info_datasets_would(counts, num_bytes, note, optional) -> None:
    import yaml

    card = diningbench.card_text(counts, num_bytes, note, optional)
    header = yaml.safe_load(card.split("---\n")[1])
    expected = {**header, "dataset_info": datasets_card_info(counts, num_bytes, optional)}
    reference = "---\n" + yaml.safe_dump(expected, sort_keys=False, allow_unicode=True, width=120) + "---\n\n"
    assert card.startswith(reference)
    assert card == reference + card.split("---\n", 2)[2].lstrip("\n")


def _writes_without(argv: list[str]) -> set[str]:
    """The modules `python diningbench.py ARGV` has imported when it returns, run in a fresh process."""
    code = f"""
import json, runpy, sys
sys.argv = {["diningbench.py", *argv]!r}
try:
    runpy.run_path("diningbench.py", run_name="__main__")
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps(sorted(sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_build_writes_a_release_without_importing_datasets(tmp_path: Path) -> None:
    records = write_records(tmp_path / "records", per_config=2)
    modules = _writes_without(["build", str(tmp_path / "records"), "--out", str(tmp_path / "release")])
    assert {"pyarrow.parquet", "yaml"} <= modules  # it did write
    assert not {m for m in modules if m.split(".")[0] == "datasets"}
    for config, rows in records.items():
        loaded = diningbench.load(config, tmp_path / "release", decode_images=False).to_list()
        assert [r["id"] for r in loaded] == [r["id"] for r in rows]
        assert loaded[0]["images"][0]["bytes"] == rows[0]["images"][0]["bytes"]


@pytest.mark.slow
def test_sample_writes_a_release_without_importing_datasets(tmp_path: Path) -> None:
    modules = _writes_without(["sample", "--out", str(tmp_path / "sample"), "--workers", "1"])
    assert "synthetic.sample" in modules
    assert not {m for m in modules if m.split(".")[0] == "datasets"}
    assert diningbench.validate(tmp_path / "sample") == []
