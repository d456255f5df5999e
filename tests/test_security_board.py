"""The Leaderboard's rows belong to their source: rows of different repositories or owners are never
merged into one whatever their model names, and a model name that could pass for another (a trailing
no-break space, an invisible or bidirectional character) is refused in one line. Each hostile card,
run.json and folder is built here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from space.diningspace.leaderboard import all_rows
from space.diningspace.submissions import SubmissionError, Submissions, _settings_of, self_reported

DATASET = "us/diningbench"


def card(name: str, accuracy: float = 61.25) -> str:
    return f"""---
model-index:
- name: "{name}"
  results:
  - task: {{type: image-classification}}
    dataset: {{name: DiningBench, type: {DATASET}, config: classification, split: test, args: {{lang: zh}}}}
    metrics: [{{type: accuracy, value: {accuracy}}}]
---
"""


def test_cards_of_two_repositories_reporting_one_model_name_keep_a_row_each(tmp_path: Path) -> None:
    store = Submissions(tmp_path / "results")
    store.keep_self_reported(self_reported(card("vl-7b"), DATASET, "alice/model"), "alice/model")
    store.keep_self_reported(self_reported(card("vl-7b", 99.0), DATASET, "mallory/model"), "mallory/model")
    rows = sorted((r["Source"], r["Cls acc %"]) for r in all_rows(None, tmp_path / "results"))
    assert rows == [("submitted: hub:alice/model", 61.25), ("submitted: hub:mallory/model", 99.0)]


def _submitted(folder: Path, model: str, owner: dict, updated: str, accuracy: float) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"classification": {"accuracy": accuracy, "n": 40}}))
    (folder / "run.json").write_text(json.dumps({
        "model": model, "settings": {"model": model, "lang": "zh"}, "updated_at": updated,
        "dataset": {"source": "us/diningbench"}, "identity": {"model": model, "lang": "zh"},
        "submission": {"status": "verified", "source": "zip upload", "owner": owner}}))


def test_submissions_of_one_model_and_settings_by_two_owners_are_never_merged(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _submitted(results / "a", "openai:x", {"kind": "hf-user", "who": "alice"}, "2026-01-01T00:00:00Z", 0.6)
    _submitted(results / "b", "openai:x", {"kind": "secret", "sha256": "0" * 64}, "2026-02-01T00:00:00Z", 0.9)
    _submitted(results / "c", "openai:x", {"kind": "hf-user", "who": "alice"}, "2026-03-01T00:00:00Z", 0.7)
    rows = sorted((r["Cls acc %"], r["Source"]) for r in all_rows(None, results))
    # alice's newer run stands for her older one; the other owner's row stays its own
    assert rows == [(70.0, "submitted: zip upload · newest of 2 runs (earlier: submitted: zip upload)"),
                    (90.0, "submitted: zip upload")]


@pytest.mark.parametrize(("name", "why"), [
    ("vl-7b\u00a0", "it ends with a space"),
    (" vl-7b", "it starts with a space"),
    ("vl-7b\u200b", "it holds U+200B"),
    ("vl\u202e-7b", "it holds U+202E"),
    ("vl\u3000 7b", "it holds U+3000"),
])
def test_a_card_name_that_could_pass_for_another_is_refused_in_one_line(name: str, why: str) -> None:
    with pytest.raises(SubmissionError, match=re.escape(why)) as caught:
        self_reported(card(name), DATASET, "mallory/model")
    assert "\n" not in str(caught.value)
    assert self_reported(card("Acme VL 7B"), DATASET, "alice/model")["model"] == "Acme VL 7B"


@pytest.mark.parametrize("name", ["openai:gpt-4o\u00a0", "openai:gpt-4o ", "openai:gpt\u200d-4o"])
def test_a_submitted_run_whose_model_name_could_pass_for_another_is_refused(name: str) -> None:
    with pytest.raises(SubmissionError, match="run.json settings: the model name") as caught:
        _settings_of({"settings": {"model": name, "task": "classification"}})
    assert "\n" not in str(caught.value)
    assert _settings_of({"settings": {"model": "openai:gpt-4o", "task": "classification"}}).model == "openai:gpt-4o"
