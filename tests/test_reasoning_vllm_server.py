"""`openai:` against a `vllm serve`-like endpoint: the default limit (16,384) is fitted under the
server's context, a context refusal is adapted once, a limit the user chose that cannot fit is one
clear error, and reasoning returned apart (`reasoning_content` / `reasoning`) stays out of the answer.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from eval import api
from eval.backends import openai_chat, release
from eval.backends.policy import parse_context_overflow, parse_limit_over_context
from eval.settings import RunSettings, UsageError
from eval.types import ConfigError, GenerationConfig, Message, Request
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_backends import opts
from tests.helpers_harness import make_release, model_oracle, read_jsonl

ITEMS = 6 + 4 + 3
MODEL = "Qwen/Qwen3-VL-8B-Thinking"


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def run(release_dir: Path, server: FakeOpenAIServer, out: Path, **overrides) -> tuple[Path, list[dict]]:
    base = dict(task="all", model=f"openai:{MODEL}", base_url=server.base_url, dataset=str(release_dir), out=out,
                concurrency=4, timeout=10.0, max_attempts=3, retry_base_delay=0.05, n_boot=100)
    s = RunSettings(**{**base, **overrides})
    server.oracle = model_oracle(release_dir, s)
    folder = api.run(s, progress=False)
    return folder, read_jsonl(folder / "predictions.jsonl")


def server(**options) -> FakeOpenAIServer:
    return FakeOpenAIServer(model_id=MODEL, prompt_tokens_per_image=600, **options)


def test_a_default_run_fits_a_16k_context_and_reads_the_answer_not_the_reasoning(release_dir, tmp_path):
    with server(max_model_len=16384, reasoning_field="reasoning_content", context_error="0.33") as fake:
        out, predictions = run(release_dir, fake, tmp_path / "run")
    assert fake.gets == ["/v1/models"]  # asked once
    assert len(fake.requests) == ITEMS and not any(r.fault for r in fake.requests)
    # The limit is sent, lowered to the room the (estimated) prompt leaves: never dropped, never above 16,384.
    assert all(r.max_tokens is not None and 1 <= r.max_tokens < 16384 for r in fake.requests)
    assert all(p["error"] is None and p["finish_reason"] == "stop" and "noodles" not in p["raw"] for p in predictions)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["classification"]["accuracy"] == 1.0 and metrics["nutrition"]["avg_mape"] == 0.0
    policy = json.loads((out / "run.json").read_text())["backend"]["request_policy"]
    assert policy["server_context"] == 16384 and policy["requests_with_limit_fitted"] == ITEMS
    assert policy["token_limit_param"] == "max_tokens" and policy["temperature"] == 0.0


def test_a_server_that_refuses_prompt_plus_limit_is_sent_a_limit_that_fits(release_dir, tmp_path):
    """Before vLLM 0.33 prompt + limit above the context is refused: the first refusal calibrates the
    prompt estimate, and every later request carries min(limit, room) and is answered. The first request
    goes alone while the context is tight (the others wait for it, boundedly), so at most the requests
    sent before it came back (one per concurrent slot) are refused."""
    with server(max_model_len=16384) as fake:
        _, predictions = run(release_dir, fake, tmp_path / "run", concurrency=4)
    refused = [r for r in fake.requests if r.fault == "refused"]
    answered = [r for r in fake.requests if r.fault is None]
    assert len(refused) <= 4 and len(answered) == ITEMS
    assert all(r.max_tokens is not None and r.max_tokens + fake.prompt_tokens(r) <= 16384 for r in answered)
    assert all(p["error"] is None for p in predictions)


def test_only_a_tight_context_holds_the_others_back_until_the_first_answer():
    from eval.backends.policy import ChatPolicy

    tight, roomy = ChatPolicy(MODEL, local=True), ChatPolicy(MODEL, local=True)
    tight.set_context(16384, "GET /models max_model_len")
    roomy.set_context(262144, "GET /models max_model_len")
    # A 2-image prompt is roughly 600 tokens by the estimate; it may be 8 times that before calibration.
    assert not tight.limit_fits_unseen(16384, 600) and roomy.limit_fits_unseen(16384, 600)
    assert not ChatPolicy(MODEL, local=True).limit_fits_unseen(16384, 600)  # no context known yet


def test_a_large_context_gets_the_limit_as_asked(release_dir, tmp_path):
    with server(max_model_len=262144) as fake:
        run(release_dir, fake, tmp_path / "run", task="nutrition")
    assert [r.max_tokens for r in fake.requests] == [16384] * 4


@pytest.mark.parametrize("wording", ["new", "old"])
def test_a_context_refusal_is_adapted_once_not_per_item(release_dir, tmp_path, wording):
    """A proxy whose model listing says nothing of the context: the first refusal teaches it. Nothing
    waits for it: the first round (concurrency 4) is refused, and only those requests are resent."""
    with server(max_model_len=17000, report_context=False, context_error=wording) as fake:
        out, predictions = run(release_dir, fake, tmp_path / "run")
    refused = [r for r in fake.requests if r.fault == "refused"]
    assert 1 <= len(refused) <= 4 and len(fake.requests) == ITEMS + len(refused)
    assert all(p["error"] is None and p["attempts"] == 1 for p in predictions)
    answered = [r for r in fake.requests if r.fault is None]
    assert all(r.max_tokens is None or r.max_tokens + fake.prompt_tokens(r) <= 17000 for r in answered)
    policy = json.loads((out / "run.json").read_text())["backend"]["request_policy"]
    assert policy["server_context"] == 17000 and "refusal" in policy["server_context_source"]
    assert policy["resent"] == len(refused)


def test_a_limit_the_user_chose_beyond_the_context_is_one_clear_error(release_dir, tmp_path):
    with server(max_model_len=8192) as fake:
        # the run stops at start, in one line, before any request (and before any file is written)
        with pytest.raises(UsageError, match="--max-tokens 20000 does not fit the server's context of 8192") as info:
            run(release_dir, fake, tmp_path / "run", task="classification", max_tokens=20000)
        assert "--max-model-len" in str(info.value) and not (tmp_path / "run" / "predictions.jsonl").exists()
        backend = openai_chat.make(MODEL, opts(base_url=fake.base_url, max_tokens=20000))

        async def check():
            try:
                await backend.check()
            finally:
                await release(backend)

        with pytest.raises(ConfigError, match="--max-tokens 20000 does not fit the server's context of 8192"):
            asyncio.run(check())
    assert fake.requests == []


@pytest.mark.parametrize("wording", ["old", "new", "0.33", "input_length"])
def test_a_prompt_larger_than_the_context_fails_that_item_with_what_to_change(wording):
    request = Request(id="x", task="vqa", messages=(Message("user", ("Hi",)),), config=GenerationConfig(max_tokens=4),
                      request_hash="x")
    with server(max_model_len=8, report_context=False, context_error=wording) as fake:
        backend = openai_chat.make(MODEL, opts(base_url=fake.base_url, max_tokens=4))

        async def ask():
            try:
                return await backend.generate(request)
            finally:
                await release(backend)

        with pytest.raises(Exception, match="prompt is 10 tokens, the server's context 8.*--images") as info:
            asyncio.run(ask())
    assert "\n" not in str(info.value) and "HTTP 400" not in str(info.value)  # one line, not the raw refusal


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_returned_apart_is_not_the_answer(field):
    request = Request(id="x", task="vqa", messages=(Message("user", ("Is it fried?",)),), config=GenerationConfig(),
                      request_hash="x")

    async def ask(backend):
        try:
            return await backend.generate(request)
        finally:
            await release(backend)

    with server(oracle=lambda r: "Yes, deep-fried.", reasoning_field=field, reasoning_text="golden crust...") as fake:
        response = asyncio.run(ask(openai_chat.make(MODEL, opts(base_url=fake.base_url))))
    assert (response.text, response.finish_reason, response.truncated) == ("Yes, deep-fried.", "stop", False)


def test_thinking_cut_by_the_limit_is_a_truncated_empty_answer():
    """vLLM with a reasoning parser: thinking that never ended has content null and finish "length"."""
    class StillThinking(FakeOpenAIServer):
        def success(self, request, text):
            body = super().success(request, text)
            body["choices"][0].update(message={"role": "assistant", "content": None, "reasoning_content": "hmm " * 50},
                                      finish_reason="length")
            return body

    request = Request(id="x", task="vqa", messages=(Message("user", ("Is it fried?",)),),
                      config=GenerationConfig(max_tokens=50), request_hash="x")

    async def ask(backend):
        try:
            return await backend.generate(request)
        finally:
            await release(backend)

    with StillThinking() as fake:
        response = asyncio.run(ask(openai_chat.make(MODEL, opts(base_url=fake.base_url))))
    assert (response.text, response.truncated) == ("", True)


def test_inline_think_blocks_stay_in_the_raw_text_for_the_parsers():
    request = Request(id="x", task="classification", messages=(Message("user", ("A or B?",)),),
                      config=GenerationConfig(), request_hash="x")

    async def ask(backend):
        try:
            return await backend.generate(request)
        finally:
            await release(backend)

    with server(oracle=lambda r: "<think>A? no, B.</think>B") as fake:
        response = asyncio.run(ask(openai_chat.make(MODEL, opts(base_url=fake.base_url))))
    from metrics.dining_accuracy.core import parse_choice

    assert response.text == "<think>A? no, B.</think>B" and parse_choice(response.text) == "B"


def test_both_vllm_wordings_of_the_context_refusal_are_read():
    new = ("'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 "
           "tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None")
    old = ("This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the "
           "messages, 10000 in the completion). Please reduce the length of the messages or completion.")
    assert parse_context_overflow(new) == (4096, 2778)
    assert parse_context_overflow(old) == (16384, 112946)
    assert parse_context_overflow("injected 400") is None


# Each wording of vLLM's context refusal (the message of its 400), rendered from the f-string in the released
# wheel (path inside the package, version) with the numbers it gives. Since 0.12 the message is
# str(VLLMValidationError), which appends "(parameter=..., value=...)" (vllm/exceptions.py).
VLLM_CONTEXT_REFUSALS = [
    # vllm/entrypoints/openai/serving_engine.py, 0.9.2: prompt + limit, and the prompt alone when no limit is sent
    ("This model's maximum context length is 16384 tokens. However, you requested 17000 tokens (616 in the messages, "
     "16384 in the completion). Please reduce the length of the messages or completion.", (16384, 616)),
    ("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens in the messages, Please "
     "reduce the length of the messages.", (8192, 9000)),
    # vllm/entrypoints/openai/serving_engine.py, 0.11.0 (and 0.14.0): the prompt alone, then prompt + limit
    ("This model's maximum context length is 8192 tokens. However, your request has 8192 input tokens. Please reduce "
     "the length of the input messages.", (8192, 8192)),
    ("'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's maximum context length is 16384 tokens "
     "and your request has 616 input tokens (16384 > 16384 - 616).", (16384, 616)),
    # vllm/entrypoints/openai/engine/serving.py, 0.17.0: the same, as VLLMValidationError
    ("'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's maximum context length is 16384 tokens "
     "and your request has 616 input tokens (16384 > 16384 - 616). (parameter=max_tokens, value=16384)", (16384, 616)),
    # vllm/renderers/params.py, 0.17.0 (_token_len_check)
    ("You passed 8200 input tokens and requested 64 output tokens. However, the model's context length is only 8192 "
     "tokens, resulting in a maximum input length of 8128 tokens. Please reduce the length of the input prompt. "
     "(parameter=input_tokens, value=8200)", (8192, 8200)),
    # vllm/renderers/params.py, 0.20.0 (_token_len_check; "at least" when the tokenizer stopped at the bound)
    ("This model's maximum context length is 8192 tokens. However, you requested 64 output tokens and your prompt "
     "contains at least 8129 input tokens, for a total of at least 8193 tokens. Please reduce the length of the input "
     "prompt or the number of requested output tokens. (parameter=input_tokens, value=8129)", (8192, 8129)),
    # vllm/renderers/params.py, 0.33.0 (_token_len_check): the prompt alone
    ("This model's maximum context length is 8192 tokens. However, your prompt contains 9000 input tokens, which "
     "exceeds this limit even without any output tokens. Please reduce the length of the input prompt. "
     "(parameter=input_tokens, value=9000)", (8192, 9000)),
    ("This model's maximum context length is 8192 tokens. However, your prompt contains at least 8193 input tokens, "
     "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. "
     "(parameter=input_tokens, value=8193)", (8192, 8193)),
    # vllm/entrypoints/serve/utils/api_utils.py, 0.33.0 (get_max_tokens; vllm/entrypoints/utils.py in 0.20.0)
    ("Input length (66001) exceeds model's maximum context length (65536).", (65536, 66001)),
    # vllm/v1/engine/processor.py 0.9.2 and 0.11.0, vllm/v1/engine/input_processor.py 0.33.0 (_validate_prompt_len)
    ("The decoder prompt (length 12324) is longer than the maximum model length of 8192. Make sure that "
     "`max_model_len` is no smaller than the number of text tokens.", (8192, 12324)),
    ("The decoder prompt (length 8192) plus the number of requested output tokens (at least 1) is longer than the "
     "maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of text tokens "
     "(prompt + requested output tokens).", (8192, 8192)),
]


@pytest.mark.parametrize(("message", "numbers"), VLLM_CONTEXT_REFUSALS, ids=range(len(VLLM_CONTEXT_REFUSALS)))
def test_every_vllm_wording_of_the_context_refusal_is_read(message, numbers):
    assert parse_context_overflow(message) == numbers


# Refusals that give no token count of the prompt, rendered the same way.
VLLM_REFUSALS_WITHOUT_A_PROMPT_COUNT = [
    # characters, not tokens (vllm/renderers/params.py _text_len_check: 0.17.0, 0.20.0, 0.33.0)
    "You passed 40000 input characters and requested 64 output tokens. However, the model's context length is only "
    "8192 tokens, resulting in a maximum input length of 8128 tokens (at most 32512 characters). Please reduce the "
    "length of the input prompt. (parameter=input_text, value=40000)",
    "This model's maximum context length is 8192 tokens. However, you requested 64 output tokens and your prompt "
    "contains 40000 characters (more than 32512 characters, which is the upper bound for 8128 input tokens). Please "
    "reduce the length of the input prompt or the number of requested output tokens. (parameter=input_text, value=40000)",
    "This model's maximum context length is 8192 tokens. However, your prompt contains 40000 characters (more than "
    "32768 characters, which is the upper bound for 8192 input tokens). Please reduce the length of the input prompt. "
    "(parameter=input_text, value=40000)",
    # the encoder's cache, not the context (vllm/v1/engine/input_processor.py, 0.33.0)
    "The encoder prompt (length 12324) is longer than the maximum model length of 8192. Make sure that "
    "`max_model_len` is no smaller than the number of text tokens.",
    # a limit above the whole context (vllm/renderers/params.py TokenizeParams, 0.20.0 then 0.33.0)
    "max_tokens=20000 cannot be greater than max_model_len=max_total_tokens=8192. Please request fewer output "
    "tokens. (parameter=max_tokens, value=20000)",
    "max_tokens=20000 cannot be greater than max_model_len=8192. Please request fewer output tokens. "
    "(parameter=max_tokens, value=20000)",
    "Unsupported parameter: 'max_tokens' is not supported with this model.",
]


@pytest.mark.parametrize("message", VLLM_REFUSALS_WITHOUT_A_PROMPT_COUNT)
def test_refusals_without_both_numbers_are_not_read_as_context_overflows(message):
    assert parse_context_overflow(message) is None


@pytest.mark.parametrize(("message", "context"), [(m, 8192) for m in VLLM_REFUSALS_WITHOUT_A_PROMPT_COUNT[4:6]]
                         + [(VLLM_REFUSALS_WITHOUT_A_PROMPT_COUNT[0], None), (VLLM_CONTEXT_REFUSALS[0][0], None)])
def test_a_limit_above_the_whole_context_names_the_context(message, context):
    assert parse_limit_over_context(message) == context


def test_a_proxy_to_vllm_033_that_refuses_the_default_limit_learns_the_context_from_it(release_dir, tmp_path):
    """vLLM 0.33 refuses a limit above max_model_len (the default 16,384 on an 8,192 context) and names only the
    context; the policy takes it, and the refused requests are sent again with a limit under it."""
    with server(max_model_len=8192, report_context=False, context_error="0.33") as fake:
        out, predictions = run(release_dir, fake, tmp_path / "run")
    refused = [r for r in fake.requests if r.fault == "refused"]
    assert 1 <= len(refused) <= 4 and all(r.max_tokens == 16384 for r in refused)
    assert all(p["error"] is None for p in predictions) and len(predictions) == ITEMS
    assert all(r.max_tokens is not None and r.max_tokens <= 8192 for r in fake.requests if r.fault is None)
    policy = json.loads((out / "run.json").read_text())["backend"]["request_policy"]
    assert policy["server_context"] == 8192 and "limit above its context" in policy["server_context_source"]
