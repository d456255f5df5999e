"""Offline, a model or dataset that is neither on disk nor cached fails at once in one line, instead
of minutes of Hub retries."""

from __future__ import annotations

import time

import pytest

import diningbench
from eval import cli
from tests.helpers_backends import opts


def test_a_hub_dataset_id_offline_is_one_line_at_once(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(ValueError, match="unreachable"):
        diningbench.load("classification", "someone/no-such-dataset")
    assert cli.main(["run", "--task", "classification", "--model", "baseline:first", "--dataset",
                     "someone/no-such-dataset", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "someone/no-such-dataset" in err
    assert time.monotonic() - start < 20


def test_an_hf_model_that_is_nowhere_offline_is_one_line_at_once(monkeypatch):
    pytest.importorskip("transformers")
    from eval.backends import make_backend
    from eval.backends._local import EngineUnavailable

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(EngineUnavailable, match="neither a folder nor in the Hugging Face cache"):
        make_backend("hf:someone/no-such-vlm", opts(device="cpu"))
    assert time.monotonic() - start < 30
