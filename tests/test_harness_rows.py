"""Each dataset row is read once per run (its metadata up front, its image bytes when it is asked),
whether a release folder is read with pyarrow or a Hub id through `datasets`; each view is hashed
once per process, and loading without decoding copies nothing."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import datasets
import PIL.Image
import pyarrow.parquet as pq
import pytest

import diningbench
from dataset import build as dataset_build
from dataset import load as dataset_load
from eval import api, requests, tasks
from eval.api import RunSettings
from eval.images import ViewHashes
from eval.protocols import base as protocols_base
from tests.helpers_harness import make_release, read_jsonl


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny release with one row per Parquet row group (pyarrow reads a whole row group: with one
    row in each, the rows it reads are the rows asked for)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dataset_build, "ROW_GROUP_SIZE", 1)
        return make_release(tmp_path_factory.mktemp("release"))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Rows handed out by every public way of reading a datasets.Dataset or a Parquet file, by column set."""
    counts: Counter = Counter()

    def parquet_reader(name: str):
        original = getattr(pq.ParquetFile, name)

        def read(self, *args, columns=None, **kwargs):
            table = original(self, *args, columns=columns, **kwargs)
            counts["images" if columns is None or "images" in columns else "metadata"] += table.num_rows
            return table

        monkeypatch.setattr(pq.ParquetFile, name, read)

    for name in ("read", "read_row_group", "read_row_groups"):
        parquet_reader(name)
    original_parquet_batches = pq.ParquetFile.iter_batches

    def parquet_batches(self, *args, columns=None, **kwargs):
        for batch in original_parquet_batches(self, *args, columns=columns, **kwargs):
            counts["images" if columns is None or "images" in columns else "metadata"] += batch.num_rows
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", parquet_batches)
    monkeypatch.setattr(pq, "read_table", None)  # not a way the reader may take unseen

    def kind(dataset) -> str:
        return "images" if "images" in dataset.column_names else "metadata"

    original_iter, original_batches = datasets.Dataset.__iter__, datasets.Dataset.iter
    original_list, original_item = datasets.Dataset.to_list, datasets.Dataset.__getitem__

    def iterate(self):
        for row in original_iter(self):
            counts[kind(self)] += 1
            yield row

    def batches(self, batch_size, *args, **kwargs):
        for batch in original_batches(self, batch_size, *args, **kwargs):
            counts[kind(self)] += len(next(iter(batch.values())))
            yield batch

    def to_list(self):
        rows = original_list(self)
        counts[kind(self)] += len(rows)
        return rows

    def getitem(self, key):
        value = original_item(self, key)
        counts[kind(self)] += len(value) if isinstance(key, str) or not isinstance(key, int) else 1
        return value

    original_mapped = diningbench.LocalRelease._mapped_cells

    def mapped(column, start, n):
        counts["images"] += n
        return original_mapped(column, start, n)

    monkeypatch.setattr(diningbench.LocalRelease, "_mapped_cells", staticmethod(mapped))
    original_write = diningbench.LocalRelease._write_images

    def write(self, path):  # the kept image file is made from the Parquet files: once per release, not per run
        before = counts["images"]
        original_write(self, path)
        counts["kept file"] += counts["images"] - before
        counts["images"] = before

    monkeypatch.setattr(diningbench.LocalRelease, "_write_images", write)
    monkeypatch.setattr(datasets.Dataset, "__iter__", iterate)
    monkeypatch.setattr(datasets.Dataset, "iter", batches)
    monkeypatch.setattr(datasets.Dataset, "to_list", to_list)
    monkeypatch.setattr(datasets.Dataset, "__getitem__", getitem)
    return counts


@pytest.mark.parametrize("reader", ["pyarrow", "datasets"])
def test_a_run_reads_each_row_once(release, tmp_path, reads, monkeypatch, reader):
    """4 nutrition items, 3 asked, twice (epochs): the metadata of the 4 is read once, the image
    bytes of the 3 once per epoch, and neither scoring nor the report reads the dataset again. A
    release folder is read with pyarrow; a Hub id through datasets (here the same folder through it)."""
    monkeypatch.setattr(dataset_load, "datasets_cache", lambda: tmp_path / "cache")
    if reader == "datasets":
        monkeypatch.setattr(diningbench, "read_release", lambda config, source, lang="zh": diningbench.LoadedRelease(
            diningbench.load(config, source, decode_images=False)))
    for run in ("first", "second"):
        reads.clear()
        out = tmp_path / run
        api.run(RunSettings(task="nutrition", model="baseline:median", dataset=str(release), out=out, limit=3,
                            epochs=2, n_boot=20), progress=False)
        assert len(read_jsonl(out / "predictions.jsonl")) == 6
        # pyarrow keeps the release's images in an Arrow file, made from all 4 rows by the first run
        made = {"kept file": 4} if reader == "pyarrow" and run == "first" else {}
        assert reads == {"metadata": 4, "images": 6, **made}


def test_rows_handed_to_requests_are_whole_and_in_order(release):
    settings = RunSettings(task="classification", model="baseline:zero", dataset=str(release), ids=("c5", "c2"))
    (data,) = api.load_task_data(settings)
    rows = list(data.iter_rows())
    stored = diningbench.load("classification", str(release), decode_images=False).to_list()
    by_id = {r["id"]: r for r in stored}
    assert [r["id"] for r in rows] == ["c5", "c2"]  # in the order --ids named them
    assert rows == [by_id["c5"], by_id["c2"]]


def test_each_view_is_hashed_once_across_epochs_rotations_and_cells(release, tmp_path, monkeypatch):
    hashes = ViewHashes()
    monkeypatch.setattr(protocols_base, "VIEW_HASHES", hashes)
    base = dict(model="baseline:first", dataset=str(release), n_boot=20, images=2)
    api.run(RunSettings(task="classification", out=tmp_path / "a", epochs=2, circular=True, **base), progress=False)
    # 6 items x 2 views, asked 2 epochs x 8 rotations each: 12 views hashed.
    assert len(read_jsonl(tmp_path / "a" / "predictions.jsonl")) == 6 * 2 * 8
    assert hashes.computed == 12
    api.run(RunSettings(task="classification", out=tmp_path / "b", lang="en", **base), progress=False)
    assert hashes.computed == 12  # another sweep cell over the same views


def test_the_next_run_over_the_same_release_reads_the_kept_view_hashes(release, tmp_path, monkeypatch):
    kept = tmp_path / "kept"
    base = dict(task="classification", model="baseline:first", dataset=str(release), n_boot=20, images=2)
    first = ViewHashes(folder=lambda: kept)
    monkeypatch.setattr(protocols_base, "VIEW_HASHES", first)
    api.run(RunSettings(out=tmp_path / "a", **base), progress=False)
    assert first.computed == 12 and len(list(kept.glob("*.json"))) == 1
    second = ViewHashes(folder=lambda: kept)  # a new process
    monkeypatch.setattr(protocols_base, "VIEW_HASHES", second)
    api.run(RunSettings(out=tmp_path / "b", **base), progress=False)
    assert second.computed == 0
    hashes_a = [p["request_hash"] for p in read_jsonl(tmp_path / "a" / "predictions.jsonl")]
    assert hashes_a == [p["request_hash"] for p in read_jsonl(tmp_path / "b" / "predictions.jsonl")]
    third = ViewHashes(folder=lambda: kept)  # another size bound is another view: hashed again
    monkeypatch.setattr(protocols_base, "VIEW_HASHES", third)
    api.run(RunSettings(out=tmp_path / "c", max_image_side=2048, **base), progress=False)
    assert third.computed == 12


def test_kept_view_hashes_are_only_the_releases_own_bytes_and_a_bad_file_costs_a_rehash(tmp_path):
    kept = tmp_path / "kept"
    hashes = ViewHashes(folder=lambda: kept)
    stored = hashes.digest("fp:nutrition", "n1", 0, 1024, b"jpeg bytes", stored=True)
    hashes.digest("fp:nutrition", "n2", 0, 1024, b"re-encoded by this Pillow")
    hashes.save()
    again = ViewHashes(folder=lambda: kept)
    assert again.digest("fp:nutrition", "n1", 0, 1024, b"jpeg bytes", stored=True) == stored
    assert again.digest("fp:nutrition", "n2", 0, 1024, b"re-encoded by this Pillow", stored=True)
    assert again.computed == 1  # the re-encoded view was never kept
    (path,) = kept.glob("*.json")
    path.write_text('{"scope": "fp:nutrition", "hashes": [1, 2', encoding="utf-8")
    damaged = ViewHashes(folder=lambda: kept)
    assert damaged.digest("fp:nutrition", "n1", 0, 1024, b"jpeg bytes", stored=True) == stored
    assert damaged.computed == 1
    path.write_text('{"scope": "fp:nutrition", "hashes": {"n1\\t0\\t1024\\t10": 5}}', encoding="utf-8")
    wrong_value = ViewHashes(folder=lambda: kept)  # an entry that is not a sha256 is never used
    assert wrong_value.digest("fp:nutrition", "n1", 0, 1024, b"jpeg bytes", stored=True) == stored
    assert wrong_value.computed == 1
    blocker = tmp_path / "a file"
    blocker.write_text("")
    unwritable = ViewHashes(folder=lambda: blocker / "kept")
    unwritable.digest("fp:nutrition", "n1", 0, 1024, b"jpeg bytes", stored=True)
    unwritable.save()  # best effort: nothing kept, nothing raised


def test_a_cached_hash_gives_the_same_request_hash(release):
    settings = RunSettings(task="nutrition", model="baseline:zero", dataset=str(release), images=3)
    (data,) = api.load_task_data(settings)
    for row in data.iter_rows():
        plain = requests.build_request(tasks.get("nutrition"), row, settings, 1)
        cached = requests.build_request(tasks.get("nutrition"), row, settings, 1, scope=data.fingerprint)
        again = requests.build_request(tasks.get("nutrition"), row, settings, 1, scope=data.fingerprint)
        assert plain.request_hash == cached.request_hash == again.request_hash


def test_another_release_with_the_same_ids_never_shares_a_hash(tmp_path):
    hashes = ViewHashes()
    assert hashes.digest("fp-a:nutrition", "n1", 0, 1024, b"one") != hashes.digest("fp-b:nutrition", "n1", 0, 1024,
                                                                                     b"two")
    assert hashes.computed == 2


def test_loading_without_decoding_maps_the_same_arrow_file(release):
    decoded = diningbench.load("nutrition", str(release))
    raw = diningbench.load("nutrition", str(release), decode_images=False)
    assert raw.cache_files == decoded.cache_files  # no second copy of the rows on disk
    first = raw[0]["images"][0]
    assert set(first) == {"bytes", "path"}
    with PIL.Image.open(io.BytesIO(first["bytes"])) as stored:
        assert stored.size == decoded[0]["images"][0].size


def test_a_fingerprint_is_hashed_once_until_a_file_changes(tmp_path, monkeypatch):
    import os
    import shutil

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    copy = shutil.copytree(diningbench.SAMPLE_DIR, tmp_path / "copy")
    first = diningbench.fingerprint("nutrition", copy)
    opened = []
    original = Path.open

    def counting_open(self, *args, **kwargs):
        if self.suffix == ".parquet":
            opened.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    assert diningbench.fingerprint("nutrition", copy) == first and opened == []  # kept, not read again
    (shard,) = (copy / "data" / "nutrition").glob("*.parquet")
    data = bytearray(shard.read_bytes())
    data[-20] ^= 0xFF  # same size, other content, a later modification time
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    opened.clear()
    assert diningbench.fingerprint("nutrition", copy) != first and opened == [shard.name]


def test_the_view_hash_cache_is_bounded():
    hashes = ViewHashes(max_entries=2)
    for index in (0, 1, 2):
        hashes.digest("fp:nutrition", "n1", index, 1024, b"view %d" % index)
    assert hashes.computed == 3
    hashes.digest("fp:nutrition", "n1", 2, 1024, b"view 2")  # kept: the most recent
    hashes.digest("fp:nutrition", "n1", 0, 1024, b"view 0")  # the oldest was dropped: hashed again
    assert hashes.computed == 4
