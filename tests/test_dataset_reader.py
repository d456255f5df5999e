"""Reading a release folder without `datasets`: `eval run` on a local release (the embedded sample
too) reads the Parquet files with pyarrow alone, gives the same rows as `diningbench.load`, refuses
the same bad releases, and never imports `datasets` or `pandas` (most of a second of start-up CPU)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import diningbench
from dataset import build as dataset_build
from dataset import load as dataset_load
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_dataset import copy_sample, rewrite

ROOT = Path(diningbench.__file__).parent


def _run_python(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("config", diningbench.CONFIGS)
@pytest.mark.parametrize("optional", [False, True])
def test_the_arrow_schema_is_the_features_schema(config: str, optional: bool) -> None:
    declared = diningbench.features(config, optional=optional).arrow_schema
    assert diningbench.arrow_schema(config, optional=optional).equals(declared.remove_metadata())


def _typed(value):
    """A value with the type of every part spelled out: 1 and 1.0 are not the same here."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize("config", diningbench.CONFIGS)
def test_both_readers_give_the_same_rows_in_any_order(config: str) -> None:
    local = diningbench.read_release(config)
    assert isinstance(local, diningbench.LocalRelease)
    loaded = diningbench.LoadedRelease(diningbench.load(config, decode_images=False))
    assert [_typed(r) for r in local.rows] == [_typed(r) for r in loaded.rows]
    assert [list(r) for r in local.rows] == [list(r) for r in loaded.rows]  # the same fields, in the same order
    order = list(range(len(local)))
    random.Random(7).shuffle(order)
    for positions in (range(len(local)), order, [3, 3, 0]):
        got, want = list(local.iter_rows(positions)), list(loaded.iter_rows(positions))
        assert [r["id"] for r in got] == [local.rows[i]["id"] for i in positions]
        assert [_typed(r) for r in got] == [_typed(r) for r in want]
        assert all(isinstance(image["bytes"], bytes) and image["bytes"][:2] == b"\xff\xd8"
                   for r in got for image in r["images"])


def _refusals(folder: Path, config: str) -> tuple[str, str]:
    """What `load` and the pyarrow reader each say about a bad release (one line each)."""
    messages = []
    for read in (lambda: diningbench.load(config, folder, decode_images=False),
                 lambda: diningbench.read_release(config, folder)):
        with pytest.raises(ValueError) as refused:
            read()
        messages.append(str(refused.value))
    assert all("\n" not in m for m in messages)
    return messages[0], messages[1]


def test_no_parquet_files_is_the_same_refusal(tmp_path: Path) -> None:
    folder = copy_sample(tmp_path / "release")
    for path in (folder / "data" / "vqa").glob("*.parquet"):
        path.unlink()
    by_load, by_reader = _refusals(folder, "vqa")
    assert by_load == by_reader == f"release folder {folder} has no data/vqa/*.parquet"


def test_an_image_that_is_only_a_path_is_the_same_refusal(tmp_path: Path) -> None:
    folder = copy_sample(tmp_path / "release")

    def path_only(rows: list[dict]) -> list[dict]:
        rows[5]["images"][1] = {"bytes": None, "path": "/etc/passwd"}
        return rows

    rewrite(folder, "classification", path_only)
    by_load, by_reader = _refusals(folder, "classification")
    assert by_load == by_reader
    assert by_reader == (f"cannot load 'classification' from {folder}: item classification-00006: images[1] has no "
                         "embedded bytes, only a file path; a release must embed its images")
    assert len(diningbench.read_release("nutrition", folder)) == 24  # the other configs still read


@pytest.fixture
def no_kept_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache folder nothing can be written in: the reader streams images from the Parquet files."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(dataset_load, "datasets_cache", lambda: blocker / "datasets")


def release_with_an_empty_image(tmp_path: Path) -> Path:
    """The sample with nutrition item 3's first view an empty byte string (and a path, never to be read)."""
    folder = copy_sample(tmp_path / "release")

    def emptied(rows: list[dict]) -> list[dict]:
        rows[2]["images"][0] = {"bytes": b"", "path": "/etc/passwd"}
        return rows

    rewrite(folder, "nutrition", emptied)
    return folder


def test_an_empty_byte_string_is_refused_before_any_image_leaves(tmp_path: Path) -> None:
    """An empty byte string is not a null: row group statistics cannot tell it from an image. The
    first ask for images makes the kept Arrow file, which checks every cell: the release is refused
    there, in load's words, and nothing is kept."""
    folder = release_with_an_empty_image(tmp_path)
    reader = diningbench.read_release("nutrition", folder)
    with pytest.raises(ValueError) as refused:
        list(reader.iter_rows([0]))
    with pytest.raises(ValueError) as by_load:
        diningbench.load("nutrition", folder, decode_images=False)
    assert str(refused.value) == str(by_load.value)
    with pytest.raises(ValueError):  # refused again on the next run: nothing was kept
        list(diningbench.read_release("nutrition", folder).iter_rows([0]))


def test_without_a_kept_file_an_empty_byte_string_is_refused_when_its_row_is_read(tmp_path: Path,
                                                                                 no_kept_images) -> None:
    folder = release_with_an_empty_image(tmp_path)
    reader = diningbench.read_release("nutrition", folder)
    assert [r["id"] for r in reader.iter_rows([0, 1])] == ["nutrition-00001", "nutrition-00002"]
    with pytest.raises(ValueError) as refused:
        list(reader.iter_rows([2]))
    with pytest.raises(ValueError) as by_load:
        diningbench.load("nutrition", folder, decode_images=False)
    assert str(refused.value) == str(by_load.value)


def test_the_kept_image_file_is_made_once_mapped_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(dataset_load, "datasets_cache", lambda: cache)
    folder = copy_sample(tmp_path / "release")
    first = diningbench.read_release("vqa", folder)
    rows = list(first.iter_rows([3, 4, 0]))
    (kept,) = (cache / "diningbench-images").glob("*.arrow")
    made, inode = kept.stat().st_mtime_ns, kept.stat().st_ino
    again = list(diningbench.read_release("vqa", folder).iter_rows([3, 4, 0]))
    assert again == rows and kept.stat().st_ino == inode  # mapped again, not written again
    assert list((cache / "diningbench-images").glob("*.tmp")) == []
    assert kept.stat().st_mtime_ns >= made
    monkeypatch.setattr(dataset_load, "IMAGE_CACHES_KEPT", 2)
    for k in range(3):  # three more releases: only the two most recently used files stay
        other = copy_sample(tmp_path / f"release{k}")
        list(diningbench.read_release("vqa", other).iter_rows([0]))
    assert len(list((cache / "diningbench-images").glob("*.arrow"))) == 2
    assert not kept.exists()


@pytest.mark.parametrize("change, why", [
    (lambda s: pa.schema([f for f in s if f.name != "portion"]), "schema mismatch, missing column(s) portion"),
    (lambda s: s.set(s.get_field_index("calories"), pa.field("calories", pa.string())),
     "column calories has type string, expected double"),
])
def test_a_file_whose_columns_are_not_the_configs_is_refused_naming_it(tmp_path: Path, change, why: str) -> None:
    folder = copy_sample(tmp_path / "release")
    schema = change(diningbench.arrow_schema("nutrition"))

    def fitted(rows: list[dict]) -> list[dict]:
        return [{k: str(v) if schema.field(k).type == pa.string() and not isinstance(v, str) else v
                 for k, v in r.items() if k in schema.names} for r in rows]

    rewrite(folder, "nutrition", fitted, schema)
    (shard,) = (folder / "data" / "nutrition").glob("*.parquet")
    # `load` names the files it reads, so datasets takes their columns as they are (and the harness
    # met the damage later, at a prompt or a reference); the reader checks them against the config.
    with pytest.raises(ValueError) as refused:
        diningbench.read_release("nutrition", folder)
    assert str(refused.value) == f"cannot load 'nutrition' from {folder}: {shard.name}: {why}"


def test_a_damaged_file_is_one_line_naming_it(tmp_path: Path) -> None:
    folder = copy_sample(tmp_path / "release")
    (shard,) = (folder / "data" / "vqa").glob("*.parquet")
    shard.write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=f"^cannot load 'vqa' from {folder}: {shard.name} is not readable Parquet"):
        diningbench.read_release("vqa", folder)


@pytest.mark.parametrize("kept", [True, False], ids=["kept-file", "parquet"])
def test_memory_holds_one_row_group_of_images_however_many_rows_are_asked(tmp_path: Path, kept: bool,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """120 nutrition items of about 100 KiB of views each (12 MB), in row groups of 5: reading all of
    them in a shuffled order holds a few groups' worth of images in Arrow memory, never all of them
    (from the kept file, memory-mapped: none; from the Parquet files: a row group's)."""
    cache = tmp_path / "cache"
    if not kept:
        cache.write_text("")  # no folder can be made under a file
    monkeypatch.setattr(dataset_load, "datasets_cache", lambda: cache / "datasets")
    folder = copy_sample(tmp_path / "release")
    noise = random.Random(3)

    def many(rows: list[dict]) -> list[dict]:
        out = []
        for k in range(120):
            row = dict(rows[k % len(rows)], id=f"n{k:03d}")
            row["images"] = [{"bytes": b"\xff\xd8" + noise.randbytes(50_000), "path": None} for _ in range(2)]
            row["image_roles"] = ["reference", "user"]
            out.append(row)
        return out

    monkeypatch.setattr(dataset_build, "ROW_GROUP_SIZE", 5)
    rewrite(folder, "nutrition", many)
    reader = diningbench.read_release("nutrition", folder)
    order = list(range(len(reader)))
    random.Random(1).shuffle(order)
    start = pa.total_allocated_bytes()
    peak, seen = 0, []
    for row in reader.iter_rows(order):
        peak = max(peak, pa.total_allocated_bytes() - start)
        seen.append(row["id"])
    group_bytes, all_bytes = 5 * 2 * 50_002, 120 * 2 * 50_002
    assert seen == [f"n{k:03d}" for k in order]
    assert peak < min(6 * group_bytes, all_bytes // 4), f"{peak:,} bytes of Arrow memory for {all_bytes:,} of images"
    assert kept == (cache / "datasets" / "diningbench-images").is_dir()


def test_the_datasets_cache_folder_is_found_as_datasets_finds_it(tmp_path: Path) -> None:
    """`fingerprint` keeps its cache where it always was, in `datasets.config.HF_DATASETS_CACHE`."""
    settings = [{}, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {"HF_HOME": "~/hf-home"},
                {"HF_HOME": str(tmp_path / "hf"), "XDG_CACHE_HOME": str(tmp_path / "xdg")},
                {"HF_DATASETS_CACHE": str(tmp_path / "ds"), "HF_HOME": str(tmp_path / "hf")}]
    code = f"""
import importlib, json, os
import datasets.config, diningbench
for env in {json.dumps(settings)}:
    for name in ("HF_DATASETS_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        os.environ.pop(name, None)
    os.environ.update(env)
    importlib.reload(datasets.config)
    print(json.dumps([str(datasets.config.HF_DATASETS_CACHE), str(diningbench.datasets_cache())]))
"""
    pairs = [json.loads(line) for line in _run_python(code).splitlines()]
    assert len(pairs) == len(settings) and len({ours for _, ours in pairs}) == len(settings)
    assert all(theirs == ours for theirs, ours in pairs), pairs


@pytest.mark.parametrize("backend", ["baseline", "openai"])
def test_eval_run_on_a_release_folder_never_imports_datasets_or_pandas(tmp_path: Path, backend: str) -> None:
    """The CLI run in a fresh interpreter on the embedded sample, then its modules listed."""
    model = ["--model", "baseline:category-mean"]
    with contextlib.ExitStack() as stack:
        if backend == "openai":
            server = stack.enter_context(FakeOpenAIServer(lambda request: "A"))
            model = ["--model", "openai:fake-vlm", "--base-url", server.base_url, "--max-attempts", "1"]
        argv = ["eval", "run", "--task", "all", *model, "--limit", "2", "--out", str(tmp_path / "run"), "--no-progress"]
        code = f"""
import json, runpy, sys
sys.argv = {argv!r}
try:
    runpy.run_module("eval", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps(sorted(sys.modules)))
"""
        modules = set(json.loads(_run_python(code, env={**os.environ, "OPENAI_API_KEY": "sk-test"}).splitlines()[-1]))
    assert {"eval.cli", "eval.api", "eval.scoring", "diningbench"} <= modules  # it did run
    assert len((tmp_path / "run" / "predictions.jsonl").read_text(encoding="utf-8").splitlines()) == 6
    assert not {m for m in modules if m.split(".")[0] in ("datasets", "pandas")}


def test_threads_that_make_the_kept_image_file_at_once_each_get_whole_rows(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The Space runs several evaluations in one process: writers never share a partial file."""
    import threading

    cache = tmp_path / "cache"
    monkeypatch.setattr(dataset_load, "datasets_cache", lambda: cache)
    folder = copy_sample(tmp_path / "release")
    expected = list(diningbench.LoadedRelease(diningbench.load("classification", folder, decode_images=False))
                    .iter_rows(range(10)))
    barrier, results, errors = threading.Barrier(4), [], []

    def read() -> None:
        try:
            reader = diningbench.read_release("classification", folder)
            barrier.wait()
            results.append(list(reader.iter_rows(range(10))))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 4 and all(rows == expected for rows in results)
    assert list((cache / "diningbench-images").glob("*.tmp")) == []
    assert list(diningbench.read_release("classification", folder).iter_rows(range(10))) == expected
