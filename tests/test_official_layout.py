"""The authors' layout (their JSON-lines files and images tree, archive or Hub id) read as a release:
the sample written in it and read back, the Hub with its functions replaced (nothing reaches the
network), conversion to our Parquet release and `datasets.load_dataset` over it, validate and summary."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

import diningbench
from dataset import official

SAMPLE_ROWS = {c: diningbench.read_release(c, diningbench.SAMPLE_DIR) for c in diningbench.CONFIGS}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("official") / "DiningBench"
    assert diningbench.main(["sample", "--layout", "official", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def archive_only(layout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The layout as the Hub holds it: the JSON-lines files and images.tar.gz, no images/ folder."""
    folder = tmp_path_factory.mktemp("archive") / "release"
    folder.mkdir()
    for path in layout.iterdir():
        if path.is_file():
            shutil.copy(path, folder / path.name)
    return folder


def test_the_sample_in_the_authors_layout_has_their_files_and_the_quirks_their_scripts_accept(layout: Path) -> None:
    assert sorted(p.name for p in layout.iterdir()) == sorted([*diningbench.OFFICIAL_FILES.values(), "images",
                                                               "images.tar.gz"])
    with tarfile.open(layout / "images.tar.gz") as tar:
        names = tar.getnames()
    assert names == sorted(names) and all(n.startswith("images/") for n in names)
    assert sorted(names) == sorted(str(p.relative_to(layout)) for p in (layout / "images").rglob("*") if p.is_file())
    classification, nutrition, vqa = (lines(layout / f"{c}.jsonl") for c in diningbench.CONFIGS)
    assert all(set(r) == {"id", "prompt", "ground_truth", "standard_image", "user_images"} for r in classification)
    assert any(isinstance(r["user_images"], str) for r in classification)
    assert "A" in classification[0]["prompt"] and all(r["ground_truth"] in "ABCDEFGH" for r in classification)
    truths = [r["ground_truth"] for r in nutrition]
    assert {type(t) for t in truths} == {dict, str}
    keys = {k for t in truths for k in (t if isinstance(t, dict) else json.loads(t))}
    assert {"卡路里", "calories", "菜品名称", "dish_name"} <= keys
    assert any(0 in (t if isinstance(t, dict) else json.loads(t)).values() for t in truths)
    without = [r for r in vqa if "images" not in r]
    assert len(without) == 1 and isinstance(without[0]["id"], int)
    assert (layout / f"images/{without[0]['id']:05d}.jpg").is_file()
    assert all(r["prompt"].endswith("\n仅输出最终答案，不要包含任何解释、分析、前言或总结。") for r in vqa)
    assert all(r["prompt"].endswith(diningbench.VQA_ENDINGS["en"]) for r in lines(layout / "vqa_en.jsonl"))


def test_writing_the_sample_twice_gives_the_same_bytes(layout: Path, tmp_path: Path) -> None:
    again = diningbench.write_sample_official(tmp_path / "again")
    for name in [*diningbench.OFFICIAL_FILES.values(), "images.tar.gz"]:
        assert (again / name).read_bytes() == (layout / name).read_bytes(), name


@pytest.mark.parametrize("config", diningbench.CONFIGS)
def test_read_back_the_rows_are_the_samples(layout: Path, config: str) -> None:
    ours = SAMPLE_ROWS[config]
    theirs = diningbench.read_official(config, layout)
    assert len(theirs) == len(ours) and theirs.lang == "zh" and theirs.revision is None
    assert theirs.path == layout / f"{config}.jsonl"
    for k, (mine, row) in enumerate(zip(ours.iter_rows(range(len(ours))), theirs.iter_rows(range(len(theirs))),
                                        strict=True)):
        assert row["idx"] == k and row["id"] == str(k + 1)
        assert row["published"] == lines(layout / f"{config}.jsonl")[k]
        assert {"merchant_id", "dish_id", "cuisine", "category"} <= set(row)
        assert row["merchant_id"] is row["cuisine"] is row["category"] is None
        images = [image["bytes"] for image in row["images"]]
        assert [image["path"] for image in row["images"]] == row["image_paths"]
        if "options" in mine:
            assert row["options"] == mine["options"] and row["answer"] == mine["answer"]
            assert row["options_en"] is None and row["has_standard_image"]
            kept = 2 if isinstance(row["published"]["user_images"], str) else len(mine["images"])
            assert images == [image["bytes"] for image in mine["images"][:kept]]
            assert row["image_roles"] == ["reference"] + ["user"] * (kept - 1)
        elif "calories" in mine:
            zeroed = {n for n in diningbench.NUTRIENTS if row[n] == 0 and mine[n] != 0}
            assert {n: row[n] for n in diningbench.NUTRIENTS if n not in zeroed} == \
                {n: mine[n] for n in diningbench.NUTRIENTS if n not in zeroed}
            assert row["dish_name"] == mine["dish_name"]
            assert images == [image["bytes"] for image in mine["images"]]
        else:
            assert row["question"] == mine["question"] and row["answer"] == mine["answer"]
            assert row["rationale"] == mine["rationale"] and row["image_roles"] == ["user"] * len(images)
            assert images == [image["bytes"] for image in mine["images"]]


def test_the_english_files_a_single_file_and_the_archive_read_alike(layout: Path, archive_only: Path) -> None:
    folder = diningbench.read_official("classification", layout, lang="en")
    assert folder.path.name == "classification_en.jsonl" and folder.lang == "en"
    assert folder.rows[0]["options"] == SAMPLE_ROWS["classification"].rows[0]["options_en"]
    one = diningbench.read_official("classification", archive_only / "classification_en.jsonl")
    assert one.lang == "en" and one.rows[0]["options"] == folder.rows[0]["options"]
    assert [r["images"] for r in one.iter_rows([0, 5])] == [r["images"] for r in folder.iter_rows([0, 5])]
    assert one.fingerprint == folder.fingerprint  # the same bytes, folder or archive
    assert diningbench.read_official("vqa", archive_only, "en").fingerprint != folder.fingerprint
    with pytest.raises(ValueError, match="classification_en.jsonl holds classification rows, not nutrition"):
        diningbench.read_official("nutrition", archive_only / "classification_en.jsonl")


def test_read_release_and_fingerprint_take_the_layout_down_the_one_road(layout: Path, tmp_path: Path) -> None:
    release = diningbench.read_release("nutrition", layout, lang="en")
    assert isinstance(release, diningbench.OfficialRelease) and release.lang == "en"
    assert diningbench.fingerprint("nutrition", layout, lang="en") == release.fingerprint
    assert diningbench.fingerprint("nutrition", layout) != release.fingerprint  # the other file
    local = diningbench.read_release("nutrition", diningbench.SAMPLE_DIR, lang="en")  # a Parquet release ignores lang
    assert isinstance(local, diningbench.LocalRelease)
    copy = tmp_path / "copy"
    shutil.copytree(layout, copy)
    before = diningbench.fingerprint("vqa", copy)
    first = diningbench.read_official("vqa", copy).rows[0]["image_paths"][0]
    (copy / first).write_bytes((copy / first).read_bytes() + b"\0")
    assert diningbench.fingerprint("vqa", copy) != before  # an image's bytes count, not only the lines


def test_a_folder_with_parquet_is_ours_and_sources_are_told_apart(layout: Path, tmp_path: Path) -> None:
    assert diningbench.is_official(layout) and diningbench.is_official(layout / "vqa.jsonl")
    assert diningbench.is_official("meituan/DiningBench") and diningbench.is_official("meituan/DiningBench@v1.0")
    assert not diningbench.is_official(diningbench.SAMPLE_DIR) and not diningbench.is_official("someone/DiningBench")
    assert not diningbench.is_official("meituan/DiningBench-v2") and not diningbench.is_official(tmp_path)
    mixed = tmp_path / "mixed"
    shutil.copytree(diningbench.SAMPLE_DIR, mixed)
    shutil.copy(layout / "vqa.jsonl", mixed)
    assert not diningbench.is_official(mixed)


def write_rows(folder: Path, name: str, rows: list[dict[str, Any]], images: dict[str, bytes] | None = None) -> Path:
    return diningbench.write_official(folder, {name: [(row, images or {}) for row in rows]}, tarball=False)


def test_ids_that_are_not_unique_name_items_by_line_and_unreadable_options_are_noted(tmp_path: Path) -> None:
    photo = {"images/a.jpg": b"\xff\xd8photo"}
    rows = [{"id": 7, "prompt": "Which?\nA. One\nB. Two", "ground_truth": " b ", "standard_image": "images/a.jpg",
             "user_images": []},
            {"id": 7, "prompt": "pick a letter", "ground_truth": "A", "standard_image": "", "user_images": "images/a.jpg"}]
    folder = write_rows(tmp_path, "classification.jsonl", rows, photo)
    (folder / "classification.jsonl").write_text("\n\n" + (folder / "classification.jsonl").read_text(), encoding="utf-8")
    release = diningbench.read_official("classification", folder)
    assert [r["id"] for r in release.rows] == ["0", "1"] and [r["idx"] for r in release.rows] == [0, 1]
    assert release.rows[0]["options"] == ["One", "Two"] and release.rows[0]["answer"] == "B"
    assert release.rows[1]["options"] is None and release.rows[1]["image_roles"] == ["user"]
    assert not release.rows[1]["has_standard_image"]
    assert any("ids are not unique" in note for note in release.notes)
    assert any("item 1 (idx 1)" in note and "cannot join analyses that need the options" in note
               for note in release.notes)
    problems = {(p.level, p.item_id, p.message.split(":")[0]) for p in diningbench.validate(folder)}
    assert ("warning", "7", "published id on 2 rows") in problems
    assert ("warning", "1", "options cannot be read from the prompt; cannot join analyses that need the options") in problems


def test_nutrition_ground_truth_is_read_as_the_authors_read_it() -> None:
    read = diningbench.nutrition_truth
    assert read({"calories": "512.5", "卡路里": 1, "protein": 3, "碳水化合物": 4, "脂肪": 0})["calories"] == 512.5
    assert read('{"name": "Mapo Tofu", "calories": 300}')["dish_name"] == "Mapo Tofu"
    assert read('{"calories": "lots", "fat": true, "protein": NaN}') == {
        "calories": None, "protein": None, "carbohydrates": None, "fat": None, "dish_name": None}
    assert read("not json") is None and read([1, 2]) is None and read(None) is None


def test_validate_names_rows_the_authors_scripts_cannot_score(tmp_path: Path) -> None:
    photo = {"images/a.jpg": b"\xff\xd8photo"}
    rows = [{"id": 1, "prompt": "p", "ground_truth": "not json", "standard_image": "images/a.jpg"},
            {"id": 2, "prompt": "p", "ground_truth": {"calories": -5, "protein": 1, "carbohydrates": 1},
             "standard_image": "images/a.jpg"},
            {"id": 3, "prompt": "p", "ground_truth": {"calories": 1, "protein": 1, "carbohydrates": 1, "fat": 1},
             "standard_image": "images/a.jpg", "user_images": ["images/missing.jpg"]}]
    folder = write_rows(tmp_path, "nutrition.jsonl", rows, photo)
    errors = {p.item_id: p.message for p in diningbench.validate(folder) if p.level == "error"}
    assert "ground truth unreadable" in errors["1"]
    assert any(p.item_id == "2" and "no readable fat" in p.message for p in diningbench.validate(folder))
    assert any(p.item_id == "2" and "calories=-5" in p.message for p in diningbench.validate(folder))
    assert errors["3"] == "image(s) not found: images/missing.jpg"
    with pytest.raises(ValueError, match=r"nutrition.jsonl item 3 \(idx 2\): image 'images/missing.jpg' not found"):
        list(diningbench.read_official("nutrition", folder).iter_rows([2]))
    assert diningbench.main(["validate", str(folder)]) == 1


def test_summary_says_what_the_layout_lacks(layout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert diningbench.main(["summary", str(layout), "--lang", "en"]) == 0
    out = capsys.readouterr().out
    assert f"classification (classification_en.jsonl): {len(SAMPLE_ROWS['classification'])} items" in out
    assert "no merchant, cuisine, menu category or VQA category" in out


# ---------------------------------------------------------------------------------------------- Hub


class FakeHubFunctions:
    """`HfApi().dataset_info` and `hf_hub_download` over a local folder: a download is a copy into a
    snapshot folder named by the commit, as the Hugging Face cache keeps it. Records every call."""

    def __init__(self, folder: Path, cache: Path, sha: str = "c" * 40) -> None:
        self.folder, self.cache, self.sha = folder, cache, sha
        self.calls: list[tuple[Any, ...]] = []
        hub = self

        class Api:
            def dataset_info(self, repo_id: str, revision: str | None = None) -> Any:
                hub.calls.append(("dataset_info", repo_id, revision))
                return type("Info", (), {"sha": hub.sha})()

        self.Api = Api

    def download(self, repo_id: str, filename: str, *, repo_type: str, revision: str | None = None,
                 local_files_only: bool = False) -> str:
        self.calls.append(("download", repo_id, filename, repo_type, revision, local_files_only))
        snapshot = self.cache / "snapshots" / self.sha / filename
        if local_files_only and not snapshot.exists():
            raise FileNotFoundError(f"{filename} is not cached")
        if not snapshot.exists():
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.folder / filename, snapshot)
        return str(snapshot)


@pytest.fixture
def hub(archive_only: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHubFunctions:
    import huggingface_hub

    fake = FakeHubFunctions(archive_only, tmp_path / "hf-cache")
    monkeypatch.setattr(huggingface_hub, "HfApi", fake.Api)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake.download)
    monkeypatch.setattr(official, "hub_reachable", lambda: True)
    return fake


def test_the_hub_id_downloads_one_file_and_the_archive_at_the_resolved_commit(hub: FakeHubFunctions,
                                                                             archive_only: Path) -> None:
    release = diningbench.read_release("vqa", "meituan/DiningBench@v1", lang="en")
    assert hub.calls[0] == ("dataset_info", "meituan/DiningBench", "v1")
    assert [c[2] for c in hub.calls[1:]] == ["vqa_en.jsonl", "images.tar.gz"]
    assert all(c[3] == "dataset" and c[4] == "c" * 40 and not c[5] for c in hub.calls[1:])
    assert release.revision == "c" * 40 and release.lang == "en"
    local = diningbench.read_official("vqa", archive_only, lang="en")
    assert [r["images"] for r in release.iter_rows(range(3))] == [r["images"] for r in local.iter_rows(range(3))]
    assert release.fingerprint == local.fingerprint


def test_offline_the_hub_id_reads_the_cache_or_says_why_not(hub: FakeHubFunctions,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(official, "hub_reachable", lambda: False)
    with pytest.raises(ValueError, match="the Hub is unreachable \\(offline\\?\\)") as refused:
        diningbench.read_official("nutrition", "meituan/DiningBench")
    assert "\n" not in str(refused.value) and not any(c[0] == "dataset_info" for c in hub.calls)
    monkeypatch.setattr(official, "hub_reachable", lambda: True)
    diningbench.read_official("nutrition", "meituan/DiningBench")  # now cached
    monkeypatch.setattr(official, "hub_reachable", lambda: False)
    cached = diningbench.read_official("nutrition", "meituan/DiningBench")
    assert cached.revision == "c" * 40 and len(cached) == len(SAMPLE_ROWS["nutrition"])


@pytest.mark.parametrize("source", ["meituan/DiningBench@../../etc", "meituan/DiningBench@refs/pr/1",
                                    "meituan/DiningBench@%2e%2e", "meituan/DiningBench@a b", "meituan/DiningBench@\x00",
                                    "meituan/DiningBench@", "meituan/DiningBench/../x", "meituan/DiningBench@..",
                                    "meituan/DiningBench@a\\b"])
def test_a_revision_with_path_characters_is_refused_before_anything_is_fetched(hub: FakeHubFunctions,
                                                                              source: str) -> None:
    with pytest.raises(ValueError, match="refusing Hub source") as refused:
        diningbench.read_release("classification", source)
    assert "\n" not in str(refused.value) and hub.calls == [] and not hub.cache.exists()


# ------------------------------------------------------------------------------------- convert, push


def test_convert_gives_a_release_that_validates_and_loads_with_decoded_images(layout: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import datasets
    from PIL import Image

    release = tmp_path / "release"
    assert diningbench.main(["convert", str(layout), "--out", str(release), "--lang", "both"]) == 0
    assert [p for p in diningbench.validate(release) if p.level == "error"] == []
    card = (release / "README.md").read_text(encoding="utf-8")
    assert "license: cc-by-nc-nd-4.0" in card and "arXiv:2604.10425" in card and "meituan/DiningBench" in card
    nutrition = datasets.load_dataset(str(release), "nutrition", split="test")
    first = nutrition[0]
    assert isinstance(first["images"][0], Image.Image) and len(first["images"]) == len(first["image_paths"])
    assert json.loads(first["published"]) == lines(layout / "nutrition.jsonl")[0]
    assert first["merchant_id"] is None and first["dish_name_en"] == SAMPLE_ROWS["nutrition"].rows[0]["dish_name_en"]
    assert isinstance(first["ground_truth"], str) and json.loads(first["ground_truth"])["菜品名称"] == first["dish_name"]
    classification = diningbench.read_release("classification", release)
    assert [r["options_en"] for r in classification.rows] == [r["options_en"] for r in SAMPLE_ROWS["classification"].rows]
    assert nutrition.info.license == "cc-by-nc-nd-4.0"


def test_convert_refuses_to_embed_a_file_from_outside_the_release(tmp_path: Path) -> None:
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(b"local secret")
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / "vqa.jsonl").write_text(json.dumps({"id": 1, "prompt": "q", "ground_truth": "a",
                                                  "images": [f"images/../../{secret.name}"]}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vqa.jsonl item 1 \(idx 0\): images\[0\] .* has a '..' component"):
        diningbench.convert(folder, tmp_path / "out")
    assert diningbench.main(["convert", str(folder), "--out", str(tmp_path / "out")]) == 2


def test_push_of_the_authors_license_is_private_unless_public(layout: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import huggingface_hub

    release = diningbench.convert(layout, tmp_path / "release")
    created: list[bool] = []
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, repo_id, **kw: created.append(kw["private"]))
    monkeypatch.setattr(huggingface_hub.HfApi, "create_commit",
                        lambda self, *a, **kw: type("Info", (), {"commit_url": "https://hub/commit/1"})())
    monkeypatch.setenv("HF_TOKEN", "hf_test_token_123")
    assert diningbench.main(["push", str(release), "someone/dining"]) == 0
    out = capsys.readouterr().out
    assert "non-commercially only" in out and "without derivatives" in out and "attribution" in out
    assert "created private" in out
    assert diningbench.main(["push", str(release), "someone/dining", "--public"]) == 0
    assert created == [True, False]


# ------------------------------------------------------------------ read once, each path checked once

@pytest.fixture
def own_copy(layout: Path, tmp_path: Path) -> Path:
    """The layout's nutrition files and images, in a folder this test may change."""
    folder = tmp_path / "release"
    folder.mkdir()
    for name in ("nutrition.jsonl", "nutrition_en.jsonl"):
        shutil.copy(layout / name, folder / name)
    shutil.copytree(layout / "images", folder / "images")
    return folder


def test_rows_fingerprint_and_every_image_check_each_path_once(own_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[Any] = []
    original = official._locate

    def counted(rel: Any, base: Path) -> tuple[Path | None, str | None, os.stat_result | None]:
        checked.append(rel)
        return original(rel, base)

    monkeypatch.setattr(official, "_locate", counted)
    release = diningbench.read_official("nutrition", own_copy)
    paths = {p for row in release.rows for p in row["image_paths"]}
    assert diningbench.fingerprint("nutrition", own_copy) == release.fingerprint
    rows = list(release.iter_rows(range(len(release))))
    assert sum(len(r["images"]) for r in rows) == len(paths) > 0
    assert sorted(checked) == sorted(paths)  # once each, though asked at load, by the fingerprint and per row


def test_a_release_open_in_this_process_is_read_once_until_its_file_changes(own_copy: Path) -> None:
    first = diningbench.read_official("nutrition", own_copy)
    assert diningbench.read_official("nutrition", own_copy) is first
    assert diningbench.read_official("nutrition", own_copy, lang="en") is not first
    jsonl = own_copy / "nutrition.jsonl"
    jsonl.write_text("".join(jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8")
    again = diningbench.read_official("nutrition", own_copy)
    assert again is not first and len(again) == 3
    again.close()
    assert diningbench.read_official("nutrition", own_copy) is not again  # closed: read afresh


def test_a_relative_path_names_the_release_of_the_folder_it_is_read_from(own_copy: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "elsewhere" / "release"
    shutil.copytree(own_copy, other)
    jsonl = other / "nutrition.jsonl"
    jsonl.write_text("".join(jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    monkeypatch.chdir(own_copy.parent)
    here = diningbench.read_official("nutrition", "release")
    monkeypatch.chdir(other.parent)
    there = diningbench.read_official("nutrition", "release")
    assert (len(here), len(there)) == (len(diningbench.read_official("nutrition", own_copy)), 2)


def test_a_link_put_in_an_image_path_after_the_release_was_opened_is_refused(own_copy: Path, tmp_path: Path) -> None:
    release = diningbench.read_official("nutrition", own_copy)
    outside = tmp_path / "outside"
    outside.mkdir()
    first = release.rows[0]["image_paths"][0]
    (outside / Path(first).name).write_bytes(b"a secret beside the release")
    (own_copy / first).unlink()
    (own_copy / first).symlink_to(outside / Path(first).name)
    with pytest.raises(diningbench.DatasetError, match="resolves outside the release's images"):
        list(release.iter_rows([0]))
    shutil.move(own_copy / "images", tmp_path / "moved")  # the whole folder now a link out of the release
    (own_copy / "images").symlink_to(outside)
    with pytest.raises(diningbench.DatasetError, match="resolves outside the release's images"):
        list(release.iter_rows([1]))


def test_an_image_rewritten_inside_the_release_after_it_was_opened_is_read_as_it_is_now(own_copy: Path) -> None:
    release = diningbench.read_official("nutrition", own_copy)
    first = release.rows[0]["image_paths"][0]
    (own_copy / first).unlink()
    (own_copy / first).write_bytes(b"new bytes")  # another file (inode) at the same path
    assert next(release.iter_rows([0]))["images"][0]["bytes"] == b"new bytes"
    (own_copy / first).unlink()
    with pytest.raises(diningbench.DatasetError, match="not found"):
        list(release.iter_rows([0]))


def test_a_photo_is_read_to_its_size_and_one_that_grew_past_the_bound_is_seen(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(bytes(range(100)))
    monkeypatch.setattr(official, "MAX_PHOTO_BYTES", 60)
    for stat_said, read in ((100, 61), (10, 61), (0, 61)):  # a stat taken before it grew: read on, to the bound + 1
        fd = os.open(photo, os.O_RDONLY)
        try:
            assert official._read_bounded(fd, stat_said) == bytes(range(read))
        finally:
            os.close(fd)
    monkeypatch.setattr(official, "MAX_PHOTO_BYTES", 1000)
    fd = os.open(photo, os.O_RDONLY)
    try:
        assert official._read_bounded(fd, 100) == bytes(range(100))
    finally:
        os.close(fd)
