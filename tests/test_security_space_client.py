"""The launched Space under a flood, driven through gradio_client against a slow model server on
127.0.0.1: a cancelled job stops its requests, one visitor cannot hold several evaluations, and
requests in flight stay under the Space-wide cap."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from helpers_space import launched_space

from space.diningspace.evaluation import OWN_KEY
from tests.fakes.hostile_openai import HostileServer

KEY = "sk-visitor-0123456789abcdef"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, HostileServer, Path]]:
    folder = tmp_path_factory.mktemp("space")
    env = {"DININGBENCH_SPACE_ALLOWED_HOSTS": "127.0.0.1", "DININGBENCH_SPACE_MAX_ITEMS": "20",
           "DININGBENCH_SPACE_EVAL_CONCURRENCY": "4", "DININGBENCH_SPACE_MAX_REQUESTS": "6",
           "DININGBENCH_SPACE_RESULTS": str(folder)}
    with HostileServer("slow", delay=60) as server, launched_space(env) as (url, log):
        yield url, server, folder
    assert KEY not in "".join(log)


def _client(url: str, folder: Path) -> Client:
    return Client(url, verbose=False, download_files=str(folder / "downloads"))


def _args(server: HostileServer, n: int = 12) -> tuple:
    return ("classification", OWN_KEY, n, "openai", "fake-vlm", KEY, server.url, "zh")


def test_a_flood_from_one_visitor_is_capped_and_cancelling_stops_every_request(space) -> None:
    url, server, folder = space
    first, second, third = (_client(url, folder) for _ in range(3))
    job_a = first.submit(*_args(server), api_name="/evaluate")
    assert server.wait_for(lambda s: s.in_flight == 4, timeout=60), server.in_flight
    with pytest.raises(AppError, match="at most 1 per visitor"):  # the same session again
        first.predict(*_args(server), api_name="/evaluate")
    job_b = second.submit(*_args(server), api_name="/evaluate")  # another tab, same address
    assert server.wait_for(lambda s: s.received >= 6, timeout=60)
    with pytest.raises(AppError, match="from your address \\(at most 2\\)"):
        third.predict(*_args(server), api_name="/evaluate")
    assert server.wait_for(lambda s: s.in_flight == 6, timeout=30), server.in_flight
    time.sleep(1.0)
    assert (server.in_flight, server.peak, server.received) == (6, 6, 6)  # 2 jobs x 4 would be 8
    job_a.cancel()
    job_b.cancel()
    assert server.wait_for(lambda s: s.in_flight == 0, timeout=10), server.in_flight
    sent = server.received
    time.sleep(2.0)
    assert server.received == sent  # nothing more was sent after the cancel
    # The visitor's places are free again: a new evaluation starts at once.
    job_c = third.submit(*_args(server, 2), api_name="/evaluate")
    assert server.wait_for(lambda s: s.in_flight == 2, timeout=30)
    job_c.cancel()
    assert server.wait_for(lambda s: s.in_flight == 0, timeout=10)
