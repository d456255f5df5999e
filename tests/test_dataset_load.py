"""Loading the embedded sample the way users do: `load_dataset` from the repo root and `diningbench.load`."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import datasets
import pytest
import yaml
from PIL import Image

import diningbench
from synthetic.nutrients import nutrition_of, table

ROOT = Path(diningbench.__file__).parent


def test_import_finds_the_module_file_not_the_release_folder() -> None:
    assert Path(diningbench.__file__).name == "diningbench.py"
    assert not (diningbench.SAMPLE_DIR / "__init__.py").exists()
    assert not list(diningbench.SAMPLE_DIR.rglob("*.py"))


@pytest.mark.parametrize("config", diningbench.CONFIGS)
def test_load_dataset_from_repo_root_gives_the_sample_offline(config: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert datasets.config.HF_HUB_OFFLINE  # conftest sets HF_HUB_OFFLINE=1: nothing may come from the Hub
    ds = datasets.load_dataset("diningbench", config, split="test")
    assert ds.features == diningbench.features(config)
    assert len(ds) == len(diningbench.load(config))
    first = ds[0]
    assert isinstance(first["images"][0], Image.Image)
    assert len(first["images"]) == len(first["image_roles"]) and first["image_roles"][0] == "reference"


@pytest.mark.parametrize("config", diningbench.CONFIGS)
def test_images_stay_encoded_until_a_row_is_read(config: str) -> None:
    ds = diningbench.load(config)
    stored = ds.data.column("images").type.value_type
    assert {f.name for f in stored} == {"bytes", "path"}  # arrow holds JPEG bytes, not pixels
    raw = diningbench.load(config, decode_images=False)[0]["images"][0]
    assert set(raw) == {"bytes", "path"} and raw["bytes"][:2] == b"\xff\xd8"
    decoded = ds[0]["images"][0]
    assert decoded.tobytes() == Image.open(io.BytesIO(raw["bytes"])).tobytes()


def test_source_resolution_argument_then_env_then_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DININGBENCH_SOURCE", raising=False)
    assert len(diningbench.load("vqa")) == len(diningbench.load("vqa", diningbench.SAMPLE_DIR))
    monkeypatch.setenv("DININGBENCH_SOURCE", str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="nowhere"):
        diningbench.load("vqa")
    assert len(diningbench.load("vqa", diningbench.SAMPLE_DIR)) > 0  # an argument beats the env var


def test_a_release_folder_given_as_a_relative_path_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--dataset releases/paper` is how people type it; the path is relative to the working directory.
    monkeypatch.chdir(diningbench.SAMPLE_DIR.parent)
    assert len(diningbench.load("nutrition", "diningbench")) == len(diningbench.load("nutrition"))
    monkeypatch.chdir(diningbench.SAMPLE_DIR)
    assert len(diningbench.load("vqa", ".")) == len(diningbench.load("vqa"))


def test_unknown_config_is_one_line_naming_the_choices() -> None:
    with pytest.raises(ValueError) as err:
        diningbench.load("recipes")
    assert str(err.value) == "unknown config 'recipes'; choose one of classification, nutrition, vqa"


def test_fingerprint_is_stable_and_follows_content(tmp_path: Path) -> None:
    import shutil

    a = diningbench.fingerprint("nutrition")
    assert a == diningbench.fingerprint("nutrition") and re.fullmatch(r"[0-9a-f]{16}", a)
    copy = shutil.copytree(diningbench.SAMPLE_DIR, tmp_path / "copy")
    assert diningbench.fingerprint("nutrition", copy) == a
    (shard,) = (copy / "data" / "nutrition").glob("*.parquet")
    shard.write_bytes(shard.read_bytes() + b"\0")
    assert diningbench.fingerprint("nutrition", copy) != a


def test_sample_meets_the_spec() -> None:
    cls, nut, vqa = (diningbench.load(c, decode_images=False) for c in diningbench.CONFIGS)
    assert (len(cls), len(nut), len(vqa)) >= (32, 24, 16)
    assert len(set(cls["cuisine"])) >= 3 and len(set(cls["merchant_id"])) >= 4
    assert set(vqa["vqa_category"]) == set(diningbench.VQA_CATEGORIES)
    multi = [r for r in vqa if r["vqa_category"] == "multi_image_analysis"]
    assert len(multi) >= 2 and all(r["image_roles"] == ["reference", "user"] for r in multi)
    # Classification items show a reference shot plus 2-5 customer shots; answers cover A-H evenly.
    assert all(r[0] == "reference" and 2 <= r.count("user") <= 5 for r in cls["image_roles"])
    letters = Counter(cls["answer"])
    assert set(letters) == set("ABCDEFGH") and max(letters.values()) - min(letters.values()) <= 1
    size = sum(p.stat().st_size for p in diningbench.SAMPLE_DIR.rglob("*"))
    assert size < 20 * 2 ** 20
    for row in [*cls, *nut, *vqa]:
        assert all(row[k] for k in ("id", "dish_id", "merchant_id", "category"))


def test_distractors_are_the_same_merchants_same_menu_category() -> None:
    cls = diningbench.load("classification", decode_images=False)
    names_by_menu: dict[tuple[str, str], set[str]] = {}
    for row in cls:
        names_by_menu.setdefault((row["merchant_id"], row["category"]), set()).update(row["options"])
    for row in cls:
        assert set(row["options"]) == names_by_menu[(row["merchant_id"], row["category"])]
        assert len(set(row["options"])) == 8 and len(set(row["options_en"])) == 8


def test_nutrition_is_exactly_the_sum_of_the_weighed_ingredients() -> None:
    by_name = {f"{i.name_zh} {i.name_en}": key for key, i in table().items()}
    for row in diningbench.load("nutrition", decode_images=False):
        grams = {}
        for line in row["ingredients"]:
            name, g = re.fullmatch(r"(.+) ([\d.]+) g", line).groups()
            grams[by_name[name]] = float(g)
        expected = nutrition_of(grams)
        for nutrient in diningbench.NUTRIENTS:
            assert row[nutrient] == pytest.approx(getattr(expected, nutrient), abs=0.06), (row["id"], nutrient)
        assert row["nutrition_source"] == "computed"


def test_card_header_declares_the_real_features_and_its_examples_match_the_sample() -> None:
    card = (ROOT / "dataset_card.md").read_text(encoding="utf-8")
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["language"] == ["zh", "en"] and header["license"]
    for info in header["dataset_info"]:
        declared = datasets.DatasetInfo._from_yaml_dict(dict(info)).features
        assert declared == diningbench.features(info["config_name"])
    assert diningbench.load("classification", decode_images=False)[3]["answer"] == "F"
    nut = diningbench.load("nutrition", decode_images=False)[5]
    assert (nut["id"], round(nut["calories"], 1), round(nut["protein"], 1)) == ("nutrition-00006", 673.2, 42.3)
    assert "broccoli is missing" in diningbench.load("vqa", decode_images=False)[10]["answer_en"]


def test_summary_cli_counts_items_cuisines_and_images() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "diningbench.py", "summary"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    n = len(diningbench.load("classification"))
    assert f"classification: {n} items" in done.stdout
    assert "vqa_category: cuisine_technique" in done.stdout and "per item" in done.stdout


def test_nutrition_reads_back_as_written_and_older_float32_releases_still_validate(tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = diningbench.load("nutrition", decode_images=False)
    assert all(len(repr(v)) <= 8 for v in ds["calories"])  # 682.4, not 682.4000244140625
    old = tmp_path / "old"
    shutil.copytree(diningbench.SAMPLE_DIR, old)
    (path,) = (old / "data" / "nutrition").glob("*.parquet")
    table = pq.read_table(path)
    for name in diningbench.NUTRIENTS:
        table = table.set_column(table.schema.get_field_index(name), name, table[name].cast(pa.float32()))
    pq.write_table(table, path)
    errors = [p for p in diningbench.validate(old) if p.level == "error"]
    assert errors == []


def test_loads_in_two_threads_at_once_keep_tqdms_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several evaluations load the dataset at once (the Space does). datasets reads shards through
    tqdm's `thread_map`, whose `ensure_lock` deletes a lock it had to create: two threads that both
    found none both delete, and the second raises AttributeError. The interleaving is forced here
    (each thread waits for the other between finding no lock and creating one), as in a fresh process."""
    import threading

    from datasets.utils.tqdm import tqdm as hf_tqdm
    from tqdm.contrib.concurrent import thread_map

    for cls in type.mro(hf_tqdm):  # a fresh process: no tqdm class holds a lock yet
        if "_lock" in vars(cls):
            monkeypatch.delattr(cls, "_lock")
    both_looked = threading.Barrier(2, timeout=5)

    class Interleaved(hf_tqdm):
        @classmethod
        def get_lock(cls):  # called only by a thread that found no lock
            both_looked.wait()
            return super().get_lock()

    diningbench.load("nutrition")
    errors: list[BaseException] = []

    def shard_read() -> None:
        try:
            thread_map(len, ["a", "bb"], tqdm_class=Interleaved, disable=True, max_workers=2)
        except BaseException as exc:  # noqa: BLE001 - the test reports whatever the thread raised
            errors.append(exc)

    threads = [threading.Thread(target=shard_read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == [] and hasattr(hf_tqdm, "_lock")


def test_load_dataset_without_a_config_loads_classification_the_default() -> None:
    """The Hub's multi-config convention (`default: true` on one config): no "Config name is missing"."""
    from pathlib import Path

    from datasets import load_dataset

    from diningbench import SAMPLE_DIR

    ds = load_dataset(str(Path(SAMPLE_DIR)), split="test")
    assert ds.num_rows == 40 and "options" in ds.column_names  # the classification config
