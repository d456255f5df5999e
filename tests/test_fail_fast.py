"""A dead network is not retried for minutes: when no request of a run has reached a server (DNS, refused)
for FAIL_FAST_SECONDS, the run stops with one line naming the host; an HTTP error (a server that answers)
never triggers it, and neither does a server that answered once."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from eval.cli import main as cli_main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: connecting is refused


def test_a_dead_endpoint_stops_the_run_within_seconds_with_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr("eval.runner.FAIL_FAST_SECONDS", 1.0)
    port = _closed_port()
    # No --base-url (which is checked before the run): the endpoint comes from the environment, as the
    # public one does when the network is down.
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent-anywhere")
    start = time.monotonic()
    code = cli_main(["run", "--task", "classification", "--model", "openai:gpt-4o", "--out", str(tmp_path / "run")])
    took = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2 and took < 20, (code, took)
    line = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and f"cannot reach the model server at 127.0.0.1:{port}" in line[0]
    assert "none connected" in line[0] and "run the same command again" in line[0]
    assert "sk-test" not in err and "Traceback" not in err


async def test_an_http_error_or_an_earlier_answer_never_stops_a_run() -> None:
    from eval.runner import Reachability, ServerUnreachable
    from eval.types import BackendError

    refused = BackendError("cannot reach the model server (refused)", retryable=True, unreachable=True)
    reach = Reachability()
    reach.failed(BackendError("HTTP 503", retryable=True, status=503), "h:1")
    reach.first_failure = time.monotonic() - 60
    reach.reached = True  # an answer came: a later outage is retried item by item
    reach.failed(refused, "h:1")
    fresh = Reachability()
    fresh.failed(refused, "h:1")
    fresh.first_failure = time.monotonic() - 11
    with pytest.raises(ServerUnreachable, match="at h:1"):
        fresh.failed(refused, "h:1")
