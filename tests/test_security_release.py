"""A release from an untrusted source: it must not make anyone read local files, exhaust memory on a
decompression bomb, send a truncated photo unnoticed, or pass non-physical nutrition. Each refusal
is one line naming the item."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

import diningbench
from eval import images as eval_images
from eval.images import ImageError, encode_for_transport
from tests.helpers_dataset import copy_sample, rewrite
from tests.helpers_memory import peak_growth_mb

ROOT = Path(diningbench.__file__).parent
SECRET_TEXT = b"local secret: this file must never leave the machine"


def png_bomb(side: int = 30000) -> bytes:
    """A one-colour PNG of side x side pixels: under 1 MB stored, side^2 bytes decoded."""
    buffer = io.BytesIO()
    Image.new("L", (side, side)).save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg(size: tuple[int, int] = (320, 240)) -> bytes:
    buffer = io.BytesIO()
    Image.effect_noise(size, 64).convert("RGB").save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return png_bomb()


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("home") / "secret.jpg"
    path.write_bytes(SECRET_TEXT)
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, bomb: bytes, secret_file: Path) -> Path:
    """The sample with: a path cell, a PNG bomb and a truncated JPEG (classification); absurd and
    denormal nutrition; a card whose `configs:` is a number."""
    folder = copy_sample(tmp_path_factory.mktemp("hostile") / "release")
    whole = jpeg()

    def images(rows: list[dict]) -> list[dict]:
        rows[0]["images"][0] = {"bytes": None, "path": str(secret_file)}
        rows[1]["images"][0] = {"bytes": bomb, "path": None}
        rows[2]["images"][0] = {"bytes": whole[: len(whole) // 2], "path": None}
        return rows

    def nutrition(rows: list[dict]) -> list[dict]:
        rows[0].update(calories=3e38)
        rows[1].update(protein=1e-45)
        rows[2].update(fat=2500.0)
        return rows

    rewrite(folder, "classification", images)
    rewrite(folder, "nutrition", nutrition)
    return folder


def _errors(problems: list[diningbench.Problem]) -> dict[str, str]:
    return {f"{p.config}/{p.item_id}": p.message for p in problems if p.level == "error"}


def test_validate_names_path_cells_bombs_and_truncated_photos(hostile: Path) -> None:
    rows = diningbench.load("classification", diningbench.SAMPLE_DIR, decode_images=False)
    ids = [str(i) for i in rows["id"][:3]]
    started = time.monotonic()
    errors = _errors(diningbench.validate(hostile))
    assert time.monotonic() - started < 30  # the bomb is refused from its header, not decoded
    assert "file path" in errors[f"classification/{ids[0]}"]
    assert "pixels" in errors[f"classification/{ids[1]}"] and "40,000,000" in errors[f"classification/{ids[1]}"]
    assert "does not decode" in errors[f"classification/{ids[2]}"]


def test_validate_refuses_non_physical_nutrition(hostile: Path) -> None:
    ids = [str(i) for i in diningbench.load("nutrition", diningbench.SAMPLE_DIR)["id"][:3]]
    errors = _errors(diningbench.validate(hostile))
    assert "calories=3e+38 is over 10,000 kcal" in errors[f"nutrition/{ids[0]}"]
    assert "is a positive value under 1e-06" in errors[f"nutrition/{ids[1]}"]  # float32 keeps 1.4e-45
    assert "fat=2500 is over 2,000 g" in errors[f"nutrition/{ids[2]}"]


@pytest.mark.parametrize("header", ["configs: 5", "configs: [5]", "configs: {a: 1}", "- just\n- a list"])
def test_a_malformed_card_header_is_one_line_not_a_traceback(tmp_path: Path, header: str) -> None:
    folder = copy_sample(tmp_path / "release")
    card = folder / "README.md"
    body = card.read_text(encoding="utf-8").split("---", 2)[2]
    card.write_text(f"---\n{header}\n---{body}", encoding="utf-8")
    done = subprocess.run([sys.executable, "diningbench.py", "validate", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert any(line.startswith("error: -: README.md") for line in done.stdout.splitlines()), done.stdout


def test_loading_refuses_an_image_that_is_only_a_path(hostile: Path) -> None:
    first = str(diningbench.load("classification", diningbench.SAMPLE_DIR)["id"][0])
    with pytest.raises(ValueError, match=f"item {first}: images\\[0\\] has no embedded bytes"):
        diningbench.load("classification", hostile, decode_images=False)
    diningbench.load("nutrition", hostile, decode_images=False)  # other configs still load


def test_the_harness_never_reads_a_path_from_a_cell(secret_file: Path) -> None:
    with pytest.raises(ImageError, match="item x1: image 0 has no embedded bytes"):
        encode_for_transport({"bytes": None, "path": str(secret_file)}, max_side=1024, role="user",
                             item_id="x1", index=0)
    assert diningbench.image_problem({"bytes": None, "path": str(secret_file)}) == \
        "image has no embedded bytes, only a file path (a release must embed its images)"


def test_a_decompression_bomb_is_refused_before_decoding(bomb: Path, tmp_path: Path) -> None:
    for side in (30000, 13000):
        data = bomb if side == 30000 else png_bomb(side)
        with pytest.raises(ImageError, match=f"item b{side}: image 1 .*{side}x{side} pixels|item b{side}: image 1 declares"):
            encode_for_transport({"bytes": data, "path": None}, max_side=1024, role="user", item_id=f"b{side}",
                                 index=1)
        assert f"{side}x{side} pixels" in diningbench.image_problem({"bytes": data, "path": None}) or \
            "declares over" in diningbench.image_problem({"bytes": data, "path": None})
        # Memory in a fresh process (this one's peak already holds the bomb's making): refusing it costs
        # little; 13000^2 RGB decoded alone would be 507 MB.
        stored = tmp_path / f"bomb{side}.png"
        stored.write_bytes(data)
        grown_mb = peak_growth_mb(
            f"""
            from pathlib import Path
            import diningbench
            from eval.images import ImageError, encode_for_transport
            data = Path({str(stored)!r}).read_bytes()
            """,
            """
            try:
                encode_for_transport({"bytes": data, "path": None}, max_side=1024, role="user", item_id="b", index=1)
            except ImageError:
                pass
            else:
                raise SystemExit("the bomb was not refused")
            diningbench.image_problem({"bytes": data, "path": None})
            """)
        assert grown_mb < 300, f"peak memory grew by {grown_mb:.0f} MB"


def test_a_truncated_jpeg_is_not_sent_as_stored() -> None:
    whole = jpeg()
    cut = whole[: len(whole) // 2]
    assert encode_for_transport(whole, max_side=1024, role="user", item_id="ok", index=0).data == whole
    assert diningbench.image_problem({"bytes": whole, "path": None}) is None  # validate checks a release
    assert not eval_images.sent_as_stored({"bytes": cut}, 1024)
    with pytest.raises(ImageError, match="item t1: image 0 cannot be decoded"):
        encode_for_transport({"bytes": cut, "path": None}, max_side=1024, role="user", item_id="t1", index=0)
    assert diningbench.image_problem({"bytes": cut, "path": None}).startswith("image does not decode")


def test_large_photos_are_still_shrunk_within_the_pixel_limit() -> None:
    part = encode_for_transport(jpeg((4000, 3000)), max_side=1024, role="user", item_id="big", index=0)
    with Image.open(io.BytesIO(part.data)) as img:
        assert max(img.size) == 1024


def test_the_pixel_limit_is_one_number_in_both_modules() -> None:
    assert diningbench.MAX_PIXELS == eval_images.MAX_PIXELS


def _catalog_with(cell: dict) -> object:
    """A Space catalog whose first classification item's first view is `cell`."""
    from helpers_space import tiny_dataset

    from space.diningspace.catalog import Catalog

    def loader(config: str):
        dataset = tiny_dataset(config)
        if config != "classification":
            return dataset
        rows = dataset.to_list()
        rows[0]["images"][0] = cell
        return dataset.from_list(rows, features=dataset.features)

    return Catalog(loader=loader)


def test_the_space_never_shows_a_file_a_cell_names(secret_file: Path, hostile: Path) -> None:
    from space.diningspace.catalog import Catalog, CatalogError

    catalog = _catalog_with({"bytes": None, "path": str(secret_file)})
    with pytest.raises(CatalogError, match="item cla-1: image 0 has no embedded bytes"):
        catalog.images("classification", "cla-1")
    first = str(diningbench.load("classification", diningbench.SAMPLE_DIR)["id"][0])
    with pytest.raises(CatalogError, match=f"item {first}: images\\[0\\] has no embedded bytes"):
        Catalog(source=str(hostile)).filter_ids("classification")


def test_the_space_refuses_a_bomb_and_shows_big_photos_bounded(bomb: bytes) -> None:
    from space.diningspace.catalog import DISPLAY_SIDE, CatalogError

    with pytest.raises(CatalogError, match="item cla-1: image 0 declares too many pixels"):
        _catalog_with({"bytes": bomb, "path": None}).images("classification", "cla-1")
    views = _catalog_with({"bytes": jpeg((4000, 3000)), "path": None}).images("classification", "cla-1")
    assert max(views[0][0].size) == DISPLAY_SIDE
