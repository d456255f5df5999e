"""The harness's small parts on their own: prompts, views, request identity, runner, store, progress."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image

from eval import prompts, requests, tasks
from eval.backends._retry import MAX_SERVER_WAIT, parse_retry_after, parse_retry_delay
from eval.endpoints import host_of
from eval.images import ImageError, encode_for_transport, jpeg_frame, select_views
from eval.progress import Progress
from eval.runner import RetryPolicy, built_ahead, execute
from eval.settings import RunSettings
from eval.store import PredictionStore, read_predictions
from eval.types import BackendError, GenerationConfig, Message, Prediction, Request, Response
from metrics.judge_accuracy.core import final_answer
from tests.helpers_harness import classification_rows, jpeg, png

# ---------------------------------------------------------------- prompts and requests


def test_classification_prompt_lists_letters_and_demands_one_letter():
    zh = prompts.classification_prompt(["宫保鸡丁", "鱼香肉丝"], "zh")
    assert "A. 宫保鸡丁\nB. 鱼香肉丝" in zh and "只能是一个大写英文字母" in zh
    en = prompts.classification_prompt(["a", "b", "c"], "en")
    assert "(one of A, B, C)" in en and "single uppercase English letter" in en


def test_cot_prompts_put_three_steps_first_and_never_forbid_the_reasoning():
    for task, kwargs in (("classification", {"options": ["a", "b", "c"]}), ("nutrition", {}),
                         ("vqa", {"question": "Is it vegan?"})):
        text = tasks.task_prompt(task, "en", cot=True, **kwargs)
        assert text.index("Visual observation") < text.index("Ingredient breakdown") < text.index("Comprehensive answer")
        assert "without any description" not in text and "only one JSON object" not in text.lower()
        assert tasks.task_prompt(task, "en", cot=False, **kwargs) != text


def test_request_has_views_then_text_and_a_stable_hash():
    row = classification_rows()[0]
    settings = RunSettings(model="openai:m", images=2)
    request = requests.build_request(tasks.get("classification"), row, settings)
    message = request.messages[0]
    assert [p.role for p in message.images] == ["reference", "user"]  # reference-first
    assert isinstance(message.content[-1], str) and request.config == GenerationConfig(0.0, 16384, 0)  # the paper's budget
    assert request.metadata == {"n_images": 2, "epoch": 0, "rotation": 0}  # what the prediction keeps
    assert requests.build_request(tasks.get("classification"), row, settings).request_hash == request.request_hash
    for change in ({"lang": "en"}, {"cot": True}, {"images": 1}, {"max_tokens": 9}, {"seed": 1},
                   {"reasoning_effort": "high"}, {"thinking_budget": 512},
                   {"model": "openai:other"}):
        changed = RunSettings(**{**settings.__dict__, **change})
        assert requests.build_request(tasks.get("classification"), row, changed).request_hash != request.request_hash, change


def test_final_answer_for_vqa():
    assert final_answer("<think>hmm</think>\n1. 观察……\n最终答案：不符合，含有奶酪。") == "不符合，含有奶酪。"
    assert final_answer("  plain answer ") == "plain answer"


# ---------------------------------------------------------------- views


def test_view_order_and_selection():
    roles = ["user", "reference", "user", "user"]
    assert select_views(roles, None, "reference-first", seed=0, item_id="x") == [1, 0, 2, 3]
    assert select_views(roles, 2, "user-first", seed=0, item_id="x") == [0, 2]
    a = select_views(roles, None, "random", seed=5, item_id="x")
    assert sorted(a) == [0, 1, 2, 3] and a == select_views(roles, None, "random", seed=5, item_id="x")
    assert len({tuple(select_views(roles, None, "random", seed=s, item_id="x")) for s in range(20)}) > 1


def test_small_jpeg_is_sent_as_stored_and_large_images_are_shrunk_once():
    small = jpeg((200, 30, 30), (64, 48))
    assert encode_for_transport({"bytes": small}, max_side=128, role="user", item_id="i", index=0).data == small
    big = encode_for_transport({"bytes": png((10, 200, 10), (300, 200))}, max_side=128, role="reference",
                               item_id="i", index=0)
    image = Image.open(io.BytesIO(big.data))
    assert image.format == "JPEG" and image.size == (128, 85) and big.role == "reference"


@pytest.mark.parametrize("mode", ["RGB", "L", "CMYK"])
@pytest.mark.parametrize("progressive", [False, True])
def test_jpeg_frame_reads_what_pillow_reads(mode, progressive):
    out = io.BytesIO()
    Image.new(mode, (70, 45), "white").save(out, "JPEG", progressive=progressive,
                                            exif=Image.Exif().tobytes() if mode == "RGB" else b"")
    with Image.open(io.BytesIO(out.getvalue())) as image:
        assert jpeg_frame(out.getvalue()) == (*image.size, len(image.getbands())) == (70, 45, len(mode))


def test_only_colour_jpegs_within_bounds_skip_pillow():
    assert jpeg_frame(png((1, 2, 3), (10, 10))) is None
    assert jpeg_frame(b"\xff\xd8\xff") is None  # cut short inside the first marker
    grey = io.BytesIO()
    Image.new("L", (20, 20)).save(grey, "JPEG")
    sent = encode_for_transport({"bytes": grey.getvalue()}, max_side=64, role="user", item_id="g", index=0)
    assert sent.data != grey.getvalue() and Image.open(io.BytesIO(sent.data)).mode == "RGB"
    wide = jpeg((9, 9, 9), (200, 20))
    assert encode_for_transport({"bytes": wide}, max_side=200, role="user", item_id="w", index=0).data == wide
    assert Image.open(io.BytesIO(encode_for_transport({"bytes": wide}, max_side=100, role="user", item_id="w",
                                                      index=0).data)).size == (100, 10)


def test_a_row_is_cheap_to_build_only_when_every_view_it_sends_goes_out_as_stored():
    small, large = {"bytes": jpeg((1, 1, 1), (64, 48))}, {"bytes": jpeg((1, 1, 1), (300, 200))}
    row = {"id": "r", "images": [large, small], "image_roles": ["user", "reference"]}
    first_only = RunSettings(model="m", images=1, max_image_side=128)  # reference-first: the small one
    assert requests.views_sent_as_stored(row, first_only)
    assert not requests.views_sent_as_stored(row, RunSettings(model="m", images=2, max_image_side=128))
    assert requests.views_sent_as_stored(row, RunSettings(model="m", images=2, max_image_side=300))
    assert not requests.views_sent_as_stored({**row, "image_roles": ["user"]}, first_only)  # the builder will say why
    assert not requests.views_sent_as_stored({**row, "images": []}, first_only)


def test_undecodable_and_empty_images_name_the_item():
    with pytest.raises(ImageError, match="item d7: image 2 cannot be decoded"):
        encode_for_transport({"bytes": b"garbage"}, max_side=64, role="user", item_id="d7", index=2)
    with pytest.raises(ImageError, match="item d7: image 0 is empty"):
        encode_for_transport({"bytes": b""}, max_side=64, role="user", item_id="d7", index=0)


# ---------------------------------------------------------------- retries and headers


def test_retry_after_forms_and_backoff_bounds():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_delay('{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}') == 12.0
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0)
    # The server's wait is the least a refused request waits; a jittered share of the backoff comes on
    # top (refused requests never all come back at once), never past the server's wait or max_delay.
    waits = {policy.delay(1, 4.0) for _ in range(50)}
    assert min(waits) >= 4.0 and max(waits) <= 6.0 and len(waits) > 1
    # A longer wait than a run allows one pause (MAX_SERVER_WAIT) is capped here; the runner fails such an
    # attempt naming the header (tests/test_security_waits.py).
    assert policy.delay(1, 99.0) == MAX_SERVER_WAIT == 60.0
    for attempt in range(1, 8):
        assert min(10.0, 2 ** (attempt - 1)) / 2 <= policy.delay(attempt, None) <= min(10.0, 2 ** (attempt - 1))
    assert host_of("http://user:pw@10.0.0.5:8000/v1?key=x") == "10.0.0.5:8000"


# ---------------------------------------------------------------- runner (in-process test backends)


def request(i: int) -> Request:
    return Request(id=str(i), task="classification", messages=(Message("user", ("q",)),),
                   config=GenerationConfig(), request_hash=f"h{i}")


class SlowBackend:
    """Answers after a delay and remembers the most requests it saw at once."""

    spec = "test:slow"

    def __init__(self, failures: dict[str, list[BackendError]] | None = None) -> None:
        self.in_flight = self.peak = self.calls = 0
        self.failures = failures or {}

    async def generate(self, req: Request) -> Response:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            if self.failures.get(req.id):
                raise self.failures[req.id].pop(0)
            return Response(text=f"answer {req.id}")
        finally:
            self.in_flight -= 1

    def describe(self) -> dict:
        return {}


async def collect(backend, requests, **kw):
    return [o async for o in execute(backend, requests, **kw)]


async def test_requests_are_built_in_threads_a_bounded_way_ahead_and_kept_in_order():
    loop_thread, threads_seen, built, taken = threading.get_ident(), set(), [], []

    def builder(i: int) -> Callable[[], Request]:
        def build() -> Request:
            threads_seen.add(threading.get_ident())
            built.append(i)
            return request(i)
        return build

    async for req in built_ahead((builder(i) for i in range(30)), threads=3):
        await asyncio.sleep(0.002)  # a consumer slower than the builders
        taken.append(int(req.id))
        assert len(built) - len(taken) <= 3  # never more than `threads` held ahead
    assert taken == list(range(30)) and sorted(built) == taken
    assert loop_thread not in threads_seen


async def test_a_failing_build_surfaces_in_order_and_stops_the_rest(caplog):
    def builder(i: int) -> Callable[[], Request]:
        def build() -> Request:
            if i >= 5:
                raise ValueError(f"item {i}: image 0 cannot be decoded")
            return request(i)
        return build

    taken = []
    with pytest.raises(ValueError, match="item 5: image 0"):
        async for req in built_ahead((builder(i) for i in range(100)), threads=4):
            taken.append(int(req.id))
    assert taken == [0, 1, 2, 3, 4]
    await asyncio.sleep(0.05)
    assert "exception was never retrieved" not in caplog.text  # items 6-8 failed too, unreported


async def test_the_first_request_goes_out_before_the_last_worker_builds_its_own():
    """Workers start one loop iteration apart, so the network sees request 0 while later ones are
    still being built (all 16 built first would delay every request of the first round)."""
    events: list[tuple[str, int]] = []

    def built() -> Iterator[Request]:
        for i in range(40):
            events.append(("built", i))
            yield request(i)

    class Wire(SlowBackend):
        async def generate(self, req: Request) -> Response:
            await asyncio.sleep(0)  # the socket write happens on a later loop iteration
            events.append(("on the wire", int(req.id)))
            return await super().generate(req)

    outcomes = await collect(Wire(), built(), concurrency=16)
    assert sorted(int(o.request.id) for o in outcomes) == list(range(40))
    assert events.index(("on the wire", 0)) < events.index(("built", 15))


async def test_concurrency_is_bounded_and_every_request_ends_once():
    backend = SlowBackend()
    outcomes = await collect(backend, [request(i) for i in range(40)], concurrency=5)
    assert sorted(int(o.request.id) for o in outcomes) == list(range(40))
    assert backend.peak == 5


async def test_retryable_errors_retry_and_others_fail_at_once():
    retry = [BackendError("busy", retryable=True, status=503, retry_after=0.0)] * 2
    backend = SlowBackend({"1": list(retry), "2": [BackendError("bad key", retryable=False, status=401)],
                           "3": [BackendError("busy", retryable=True, retry_after=0.0)] * 5})
    outcomes = {o.request.id: o for o in await collect(backend, [request(i) for i in range(4)],
                                                        policy=RetryPolicy(max_attempts=3, base_delay=0.01))}
    assert (outcomes["1"].attempts, outcomes["1"].error) == (3, None)
    assert outcomes["2"].attempts == 1 and outcomes["2"].error == "HTTP 401: bad key"
    assert outcomes["3"].attempts == 3 and outcomes["3"].response is None and "busy" in outcomes["3"].error


class HangingBackend:
    """Never answers request "slow" (until cancelled); answers the others at once."""

    spec = "test:hanging"

    def __init__(self) -> None:
        self.cancelled = 0

    async def generate(self, req: Request) -> Response:
        if req.id == "slow":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return Response(text="A")

    def describe(self) -> dict:
        return {}


async def test_a_request_past_its_timeout_is_cancelled_retried_and_failed_alone():
    backend = HangingBackend()
    policy = RetryPolicy(max_attempts=2, base_delay=0.01, request_timeout=0.05)
    outcomes = {o.request.id: o for o in await collect(backend, [request("slow"), request(1)], policy=policy)}
    assert outcomes["slow"].error == "timed out after 0.05 s" and outcomes["slow"].attempts == 2
    assert backend.cancelled == 2  # each attempt's call was stopped, not left running
    assert outcomes["1"].error is None


async def test_a_run_stopped_while_a_request_waits_is_cancelled_not_timed_out():
    from eval.runner import call_with_retries

    backend = HangingBackend()
    call = asyncio.ensure_future(call_with_retries(backend, request("slow"), RetryPolicy(request_timeout=30)))
    await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert backend.cancelled == 1


class BatchBackend:
    """A local engine: answers whole batches; the first time it sees id 2, that item is retryable."""

    spec = "test:batch"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def generate_batch(self, requests: list[Request]) -> list[Response | BackendError]:
        self.batches.append([r.id for r in requests])
        first_time = sum(b.count("2") for b in self.batches) == 1
        return [BackendError("oom", retryable=True) if r.id == "2" and first_time else Response(text="A")
                for r in requests]

    async def generate(self, req: Request) -> Response:  # pragma: no cover - the runner prefers batches
        raise AssertionError("generate_batch should be used")

    def describe(self) -> dict:
        return {}


async def test_local_engines_get_chunks_of_batch_size_in_a_thread():
    backend = BatchBackend()
    outcomes = await collect(backend, [request(i) for i in range(7)], batch_size=3,
                             policy=RetryPolicy(base_delay=0.0))
    assert backend.batches == [["0", "1", "2"], ["2"], ["3", "4", "5"], ["6"]]
    assert {o.request.id: o.attempts for o in outcomes}["2"] == 2 and all(o.error is None for o in outcomes)


# ---------------------------------------------------------------- store and progress


def prediction(item_id: str, error: str | None = None) -> Prediction:
    return Prediction(id=item_id, task="nutrition", raw=None if error else "{}", parsed=None, error=error,
                      attempts=1, latency_s=0.1, usage=None, request_hash="h")


def test_store_repairs_a_torn_tail_and_keeps_the_latest_line(tmp_path: Path):
    with PredictionStore(tmp_path) as store:
        store.append(prediction("a", error="HTTP 503"))
        store.append(prediction("b"))
    path = tmp_path / "predictions.jsonl"
    path.write_text(path.read_text() + '{"id": "c", "task": "nutri')  # killed mid-write
    with PredictionStore(tmp_path) as store:
        assert not store.is_answered("nutrition", "a", "h")  # failed: asked again
        assert store.is_answered("nutrition", "b", "h") and not store.is_answered("nutrition", "b", "other")
        store.append(prediction("a"))
        store.compact()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(p["id"] for p in lines) == ["a", "b"] and all(p["error"] is None for p in lines)
    assert set(read_predictions(path)) == {("nutrition", "a", 0, 0), ("nutrition", "b", 0, 0)}


def test_progress_logs_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    bar = Progress(4, label="m", stream=stream, log_every_s=0.0)
    bar.skip()
    bar.retry()
    bar.advance(failed=True)
    time.sleep(0.01)
    bar.advance()
    bar.close()
    last = stream.getvalue().strip().splitlines()[-1]
    assert "\r" not in stream.getvalue()
    assert "3/4 (1 resumed)" in last and "failures 1" in last and "retries 1" in last and "ETA" in last
