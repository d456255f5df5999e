"""`python diningbench.py sample --out diningbench` rebuilds the committed sample.

Everything but the JPEG bytes is compared exactly (Parquet columns, the card). JPEG bytes depend on
the encoder Pillow is built with: with the Pillow that requirements-dev.txt pins (the one that wrote
the committed sample) they must be identical; with another build, the images must decode to the same
size with pixels at most 3 levels apart (the rounding of a different JPEG encoder).
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import PIL
import pyarrow.parquet as pq
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "diningbench"


def pinned_pillow() -> str:
    match = re.search(r"^pillow==(\S+)", (ROOT / "requirements-dev.txt").read_text(encoding="utf-8"), re.MULTILINE)
    assert match, "requirements-dev.txt pins the Pillow that wrote the committed sample"
    return match.group(1)


def _card(path: Path) -> str:
    # The byte counts in the card's YAML follow the JPEG bytes; everything else must match.
    return re.sub(r"(num_bytes|dataset_size|download_size): \d+", r"\1: N", path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_rebuilding_the_sample_reproduces_the_committed_one(tmp_path):
    """Every file, every column and every image of the committed sample comes back. The renderer takes its sines,
    cosines and powers from the C library one value at a time (`synthetic/portable.py`), never from NumPy's
    per-CPU kernels, whose last bits differ between AVX-512 and AVX2 machines and used to move a few pixels; with
    the pinned Pillow the JPEG bytes are then the same (0 of 242 images differ when rebuilt on an AVX2 machine).
    An image whose bytes still differ (a C library or CPU whose `sin` rounds otherwise, e.g. without FMA) is
    compared by its pixels: at most 2 levels apart on at most 1% of them, in at most 1 image in 20."""
    out = tmp_path / "diningbench"
    subprocess.run([sys.executable, "diningbench.py", "sample", "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True, timeout=600)
    committed = sorted(p.relative_to(COMMITTED) for p in COMMITTED.rglob("*") if p.is_file())
    assert sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) == committed
    assert _card(out / "README.md") == _card(COMMITTED / "README.md")
    same_encoder = PIL.__version__ == pinned_pillow()
    images = 0  # images whose JPEG bytes differ from the committed ones
    total = 0
    for path in [p for p in committed if p.suffix == ".parquet"]:
        old, new = pq.read_table(COMMITTED / path), pq.read_table(out / path)
        assert new.schema.equals(old.schema), path
        for name in old.column_names:
            if name != "images":
                assert new.column(name).to_pylist() == old.column(name).to_pylist(), (path, name)
                continue
            for row_old, row_new in zip(old.column(name).to_pylist(), new.column(name).to_pylist(), strict=True):
                assert len(row_old) == len(row_new)
                total += len(row_old)
                for a, b in zip(row_old, row_new, strict=True):
                    if a["bytes"] == b["bytes"]:
                        continue
                    images += 1
                    pa_, pb = (np.asarray(Image.open(io.BytesIO(x["bytes"])).convert("RGB"), dtype=int) for x in (a, b))
                    assert pa_.shape == pb.shape, path
                    moved = np.abs(pa_ - pb)
                    # The same Pillow: only a CPU's floating-point rounding moves a pixel (see the docstring).
                    assert moved.max() <= (2 if same_encoder else 3), (path, int(moved.max()))
                    if same_encoder:
                        assert (moved.max(axis=2) > 0).mean() <= 0.01, (path, float((moved.max(axis=2) > 0).mean()))
    if same_encoder:
        assert images <= max(3, total // 20), f"{images} of {total} images re-encode differently"
    for path in committed:
        # The Parquet files are compared column by column above, the card with its byte counts masked.
        if path.suffix != ".parquet" and path != Path("README.md"):
            assert (out / path).read_bytes() == (COMMITTED / path).read_bytes(), path


def test_the_card_states_the_nutrient_type_the_data_has():
    card = (COMMITTED / "README.md").read_text(encoding="utf-8")
    table = pq.read_table(COMMITTED / "data" / "nutrition" / "test-00000-of-00001.parquet")
    assert str(table.schema.field("calories").type) == "double"
    assert "float32" not in card and "(g; float64, per serving)" in card
