"""A run's console and report speak of the run: a no-skill baseline sends no request to a server, so
nothing about requests in flight is said for it; a run against a server says where its limit settled."""

from __future__ import annotations

import json

from eval import api
from eval.limiter import Limits
from eval.settings import RunSettings


def test_a_baseline_run_says_nothing_about_requests_in_flight(tmp_path):
    out = api.run(RunSettings(task="classification", model="baseline:first", out=tmp_path / "run", limit=6,
                              n_boot=20), progress=False)
    assert "concurrency" not in json.loads((out / "run.json").read_text())
    assert "in flight" not in (out / "report.md").read_text()


def test_only_server_endpoints_are_described():
    limits = Limits("auto")
    limits.endpoint(None)
    assert limits.describe() is None
    limits.endpoint("127.0.0.1:8000")
    found = limits.describe()
    assert found is not None and [e["endpoint"] for e in found["endpoints"]] == ["127.0.0.1:8000"]


def test_the_progress_line_speaks_of_requests_in_flight_only_once_a_server_is_asked():
    import io

    from eval.progress import Progress

    limits = Limits("auto")
    limits.endpoint(None)  # a baseline's or a local engine's answers: no server
    bar = Progress(4, label="baseline:first", stream=io.StringIO(), limits=limits)
    assert "in flight" not in bar.line()
    limits.endpoint("127.0.0.1:8000")
    assert "in flight 0/" in bar.line()
