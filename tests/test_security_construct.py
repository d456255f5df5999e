"""Construction reads photo files someone else exported: a file past MAX_PHOTO_BYTES is dropped from its
size alone, never read, by the prefilter of both engines, by the model calls and by the release. Each
hostile file is built here: a valid 1x1 JPEG followed by 400 MB of zeros (a hole: no disk)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from construct.prefilter import MAX_PHOTO_BYTES, prefilter_chunk, read_photo
from tests.helpers_memory import peak_growth_mb


def tiny_jpeg_then_zeros(path: Path, size: int) -> Path:
    buffer = io.BytesIO()
    Image.new("RGB", (1, 1), (200, 100, 50)).save(buffer, format="JPEG")
    with path.open("wb") as fh:
        fh.write(buffer.getvalue())
        fh.truncate(size)
    return path


def photos(folder: Path, n: int = 12) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(n):
        path = folder / f"p{k}.jpg"
        Image.new("RGB", (640, 480), (k * 20, 90, 160)).save(path, format="JPEG", quality=85)
        paths.append(str(path))
    return paths


def test_a_photo_file_past_the_bound_is_dropped_by_its_size_and_never_read(tmp_path: Path) -> None:
    big = tiny_jpeg_then_zeros(tmp_path / "big.jpg", 400 << 20)
    genuine = photos(tmp_path / "ok", 2)
    out = prefilter_chunk([(1, genuine[0]), (2, str(big)), (3, genuine[1])], 128)
    assert [(seq, why) for seq, why, _ in out] == [(1, None), (2, f"too_large:{400 << 20}"), (3, None)]
    with pytest.raises(ValueError, match="over the 64 MB a photo file may have"):
        read_photo(big)
    assert len(read_photo(genuine[0])) < MAX_PHOTO_BYTES


def test_the_ray_engines_prefilter_and_the_model_calls_drop_it_too(tmp_path: Path) -> None:
    from construct.models import photo_part
    from construct.ray_engine import _prefilter_batch

    big = tiny_jpeg_then_zeros(tmp_path / "big.jpg", 400 << 20)
    done = _prefilter_batch({"seq": [7], "path": [str(big)]}, 128)  # what each Ray task runs, on its batch
    assert done["why"] == [f"too_large:{400 << 20}"]
    with pytest.raises(ValueError, match="over the 64 MB"):  # `answer_asks` fails that item alone: "photo unusable"
        photo_part(big, "user")


def test_a_workers_peak_with_a_400_mb_photo_stays_that_of_an_undisturbed_build(tmp_path: Path) -> None:
    genuine = photos(tmp_path / "ok")
    big = tiny_jpeg_then_zeros(tmp_path / "big.jpg", 400 << 20)
    measured = "from construct.prefilter import prefilter_chunk\nout = prefilter_chunk(rows, 128)"

    def growth(paths: list[str]) -> float:
        return peak_growth_mb(f"rows = list(enumerate({paths!r}))\nimport construct.prefilter", measured)

    undisturbed = growth(genuine)
    assert growth([*genuine[:6], str(big), *genuine[6:]]) < undisturbed + 50
