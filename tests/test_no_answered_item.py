"""A task with no answered item (the server refused every request) has no headline: "–" with the
failed count in the CLI table, report.md, metrics.json (null) and the Space, never 0% accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import api, tasks
from eval.numbers import headline, task_figures
from eval.report.tables import results_table
from space.diningspace.results_view import summary_line
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import make_release, model_oracle
from tests.test_harness_openai import settings_for


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def test_every_request_refused_gives_no_headline_anywhere(release, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-refused-0000")
    with FakeOpenAIServer() as server:
        s = settings_for(release, server, tmp_path / "run", task="all")
        server.oracle = model_oracle(release, s)
        server.inject("400", times=10_000)
        out = api.run(s, progress=False)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["classification"]["accuracy"] is None and metrics["classification"]["accuracy_ci95"] is None
    assert metrics["classification"]["generation_failures"] == 6
    assert metrics["nutrition"]["avg_mape"] is None and metrics["nutrition"]["generation_failures"] == 4
    table = results_table(metrics)
    assert "– (all 6 failed)" in table and "– (all 4 failed)" in table and "0.00 [0.00, 0.00]" not in table
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "– (all 6 failed)" in report and "– (all 4 failed)" in report
    assert "– (all 6 failed)" in summary_line(tasks.get("classification"), "openai:fake-vlm", metrics["classification"])


def test_vqa_all_failed_is_not_zero_accuracy_but_one_answered_item_is_a_headline():
    failed = [{"id": f"v{i}", "error": "HTTP 400: refused", "correct": False, "merchant_id": str(i)} for i in range(3)]
    figures = task_figures(tasks.get("vqa"), failed, {"accuracy": 0.0, "n": 3, "scored": True}, n_boot=50)
    assert headline(tasks.get("vqa"), failed) is None and figures["accuracy"] is None and figures["accuracy_ci95"] is None
    answered = failed[:2] + [{"id": "v2", "error": None, "correct": False, "merchant_id": "2"}]
    assert headline(tasks.get("vqa"), answered) == 0.0  # one real (wrong) answer: 0% is the model's score
