"""Building a release from records, regenerating the synthetic sample, and publishing to a (fake) Hub."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import diningbench
from tests.helpers_dataset import FakeHub, write_records

ROOT = Path(diningbench.__file__).parent


def test_build_round_trips_records_into_a_loadable_release(tmp_path: Path) -> None:
    records = write_records(tmp_path / "records", per_config=3)
    out = diningbench.build(tmp_path / "records", tmp_path / "release")
    assert diningbench.validate(out) == []
    for config, rows in records.items():
        loaded = diningbench.load(config, out, decode_images=False).to_list()
        assert len(loaded) == 3
        for got, want in zip(loaded, rows, strict=True):
            assert [i["bytes"] for i in got["images"]] == [i["bytes"] for i in want["images"]]
            assert {k: v for k, v in got.items() if k != "images"} == {k: v for k, v in want.items() if k != "images"}
    card = (out / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(card.split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == list(diningbench.CONFIGS)
    assert {"name": "images", "list": "image"} in header["dataset_info"][0]["features"]
    assert header["size_categories"] == ["n<1K"] and header["language"] == ["zh", "en"]
    assert header["dataset_info"][1]["splits"][0]["num_examples"] == 3
    assert "## Limitations" in card and card.count("\n---\n") == 1  # one header, the card's body


def test_build_names_the_record_that_is_wrong(tmp_path: Path) -> None:
    write_records(tmp_path / "records", per_config=2)
    (tmp_path / "records" / "images" / "nutrition" / "nutrition-00002_0.jpg").unlink()
    with pytest.raises(ValueError, match=r"nutrition item nutrition-00002: image file .*nutrition-00002_0.jpg not found"):
        diningbench.build(tmp_path / "records", tmp_path / "release")
    done = subprocess.run([sys.executable, "diningbench.py", "build", str(tmp_path / "records"), "--out",
                           str(tmp_path / "release")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: nutrition item nutrition-00002")


def test_same_seed_gives_byte_identical_parquet_whatever_the_worker_count(tmp_path: Path) -> None:
    a = diningbench.generate(tmp_path / "a", scale="tiny", seed=7, workers=1)
    b = diningbench.generate(tmp_path / "b", scale="tiny", seed=7, workers=2)
    c = diningbench.generate(tmp_path / "c", scale="tiny", seed=8, workers=1)
    files = sorted(p.relative_to(a) for p in a.rglob("*.parquet"))
    assert len(files) == 3
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert (a / "README.md").read_text() == (b / "README.md").read_text()
    assert (a / files[0]).read_bytes() != (c / files[0]).read_bytes()
    assert diningbench.validate(a) == []
    counts = {cfg: len(diningbench.load(cfg, a)) for cfg in diningbench.CONFIGS}
    assert counts == {"classification": 8, "nutrition": 4, "vqa": 4}


def test_committed_sample_is_what_the_generator_makes(tmp_path: Path) -> None:
    """The embedded sample comes from the generator's plan for seed 0 (same dishes, same answer letters).

    Pixels are not compared here: JPEG bytes may differ across Pillow builds; determinism on one
    machine is the test above."""
    from synthetic.sample import plan

    p = plan("sample", 0)
    cls = diningbench.load("classification", decode_images=False)
    assert [d.dish_id for d, _ in p.classification] == cls["dish_id"]
    assert ["ABCDEFGH"[pos] for _, pos in p.classification] == cls["answer"]


def test_push_sends_the_release_to_the_hub_with_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = tmp_path / "records"
    write_records(records, per_config=1)
    release = diningbench.build(records, tmp_path / "release")
    monkeypatch.setenv("HF_TOKEN", "hf_test_token_123")
    # The suite runs with HF_HUB_OFFLINE=1; lift it for this test only: the "Hub" is on 127.0.0.1.
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with FakeHub() as hub:
        url = diningbench.push(release, "someone/diningbench-mini", endpoint=hub.url)
    assert url.startswith(hub.url)
    paths = [path for method, path, _ in hub.requests]
    assert paths[0] == "/api/repos/create"
    assert any(p.startswith("/api/datasets/someone/diningbench-mini/commit/") for p in paths)
    assert all(h.get("authorization", h.get("Authorization")) == "Bearer hf_test_token_123"
               for m, p, h in hub.requests if m == "POST")
    expected = {str(p.relative_to(release)): p.read_bytes() for p in release.rglob("*") if p.is_file()}
    assert hub.committed == expected
    assert hub.validated_yaml and "config_name: vqa" in hub.validated_yaml[0]


def test_push_needs_a_token_and_a_valid_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ValueError, match="set HF_TOKEN"):
        diningbench.push(diningbench.SAMPLE_DIR, "someone/x", endpoint="http://127.0.0.1:9")
    (tmp_path / "data").mkdir()
    with pytest.raises(ValueError, match="refusing to push"):
        diningbench.push(tmp_path, "someone/x", endpoint="http://127.0.0.1:9")


def test_large_releases_are_written_in_shards_of_small_row_groups(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    row = diningbench.load("vqa", decode_images=False)[0]
    writer = diningbench.ShardWriter(tmp_path, "vqa", total=250, rows_per_shard=120)
    for i in range(250):
        writer.add({**row, "id": f"vqa-{i:05d}"})
    writer.close()
    shards = sorted((tmp_path / "data" / "vqa").glob("*.parquet"))
    assert [s.name for s in shards] == [f"test-0000{k}-of-00003.parquet" for k in range(3)]
    sizes = [[pq.ParquetFile(s).metadata.row_group(g).num_rows for g in range(pq.ParquetFile(s).num_row_groups)]
             for s in shards]
    assert sizes == [[100, 20], [100, 20], [10]]
    with pytest.raises(ValueError, match="wrote 1 rows, expected 2"):
        short = diningbench.ShardWriter(tmp_path / "short", "vqa", total=2)
        short.add(row)
        short.close()


def test_paper_scale_plan_has_the_papers_shape() -> None:
    from collections import Counter

    from synthetic.sample import plan

    p = plan("paper", 0)
    assert (len(p.classification), len(p.nutrition), len(p.vqa)) == (2884, 1650, 804)
    assert Counter(c for _, c in p.vqa) == {"cuisine_technique": 532, "dietary_suggestion": 219,
                                            "multi_image_analysis": 35, "counterfactual_reasoning": 18}
    images = [1 + p.user_shots[d.dish_id] for d, _ in p.classification]
    assert 5.2 < sum(images) / len(images) < 5.45 and min(images) >= 4
    vqa_images = sum(2 if c == "multi_image_analysis" else 1 for _, c in p.vqa) / len(p.vqa)
    assert round(vqa_images, 2) == 1.04
    cuisines = Counter(d.cuisine for d, _ in p.classification)
    assert set(cuisines) == set(diningbench.CUISINES) and cuisines.most_common(1)[0][0] == "chinese"
    letters = Counter(pos for _, pos in p.classification)
    assert max(letters.values()) - min(letters.values()) <= 1
    assert len({d.dish_id for d in p.dishes}) == len(p.dishes)


def test_build_rejects_a_wrongly_typed_field_naming_the_item(tmp_path: Path) -> None:
    import json

    write_records(tmp_path / "records", per_config=2)
    path = tmp_path / "records" / "nutrition.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    record["calories"] = "about 500"
    lines[1] = json.dumps(record, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^nutrition item nutrition-00002: "):
        diningbench.build(tmp_path / "records", tmp_path / "release")


def test_a_refused_push_is_one_line_without_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_456")
    with FakeHub() as hub:
        hub.refuse = True
        with pytest.raises(ValueError) as err:
            diningbench.push(diningbench.SAMPLE_DIR, "someone/x", endpoint=hub.url)
    message = str(err.value)
    assert message.startswith("push to someone/x failed: ") and "\n" not in message
    assert "hf_secret_value_456" not in message
