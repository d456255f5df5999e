"""The dataset card `datasets` reads: no malformed-YAML warning, license/citation/description in `ds.info`."""

import logging
import shutil
from pathlib import Path

import datasets
import pytest
from helpers_harness import make_release

import diningbench

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def dataset_warnings():
    """Warnings `datasets` logs while loading (its loggers do not propagate to pytest's caplog)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("datasets")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def _fresh(folder: Path, config: str) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split="test", download_mode="force_redownload")


def test_a_built_release_loads_without_warnings_and_carries_its_info(tmp_path, dataset_warnings):
    release = make_release(tmp_path / "release")
    ds = _fresh(release, "nutrition")
    assert [r.getMessage() for r in dataset_warnings if "dataset_info" in r.getMessage()] == []
    assert ds.info.license == "apache-2.0"
    assert ds.info.citation.startswith("@misc{diningbench,")
    assert "nutrition estimation" in ds.info.description
    assert ds.info.splits["test"].num_examples == len(ds)


def test_the_top_level_card_loads_the_sample_without_warnings(tmp_path, dataset_warnings):
    folder = tmp_path / "release"
    shutil.copytree(diningbench.SAMPLE_DIR / "data", folder / "data")
    shutil.copy(ROOT / "dataset_card.md", folder / "README.md")
    ds = _fresh(folder, "nutrition")
    assert [r.getMessage() for r in dataset_warnings if r.levelno >= logging.WARNING] == []
    assert ds.info.license == diningbench.LICENSE and ds.info.citation == diningbench.CITATION
    assert ds.features == diningbench.features("nutrition")
