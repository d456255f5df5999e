"""The `vllm:` offline backend: engine arguments, sampling parameters and chat messages as vLLM
receives them, batching behaviour, and the one-line errors when vLLM cannot run here.

vLLM needs a CUDA GPU and is not installed in CI; the request building is pure functions, and the
batch logic is driven through an engine object with `vllm.LLM.chat`'s signature.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from eval.backends import make_backend
from eval.backends._local import EngineUnavailable, LocalEngineOptions
from eval.backends.openai_chat import to_openai_messages
from eval.backends.vllm_offline import (
    INSTALL_HINT,
    VLLMBackend,
    build_engine_args,
    build_sampling_params_kwargs,
    response_from_output,
)
from eval.types import BackendError, ConfigError, GenerationConfig, ImagePart, Message, Request
from tests.helpers_backends import opts

HAS_VLLM = importlib.util.find_spec("vllm") is not None
ROOT = Path(__file__).resolve().parents[1]


def photo(color: tuple[int, int, int], fmt: str = "JPEG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 24), color).save(buffer, fmt)
    return buffer.getvalue()


def request(item_id: str, images: int = 2, max_tokens: int = 64, seed: int = 0) -> Request:
    parts = (*(ImagePart(photo((40 * i, 120, 60)), role="reference" if i == 0 else "user")
               for i in range(images)), "这道菜是什么？只回答一个字母。")
    return Request(id=item_id, task="classification",
                   messages=(Message("system", ("你是美食专家。",)), Message("user", parts)),
                   config=GenerationConfig(max_tokens=max_tokens, seed=seed), request_hash=f"h-{item_id}")


# --- engine arguments -------------------------------------------------------------------------

def test_engine_args_follow_the_paper_protocol() -> None:
    args = build_engine_args("Qwen/Qwen3-VL-8B-Instruct",
                             LocalEngineOptions.from_options({"images_per_prompt": 4, "tensor_parallel_size": 2, "seed": 7}))
    assert args == {
        "model": "Qwen/Qwen3-VL-8B-Instruct",
        "limit_mm_per_prompt": {"image": 4},
        "max_model_len": 16384,
        "tensor_parallel_size": 2,
        "seed": 7,
        "dtype": "auto",
        "trust_remote_code": False,
    }


def test_pixel_budget_goes_to_the_multimodal_processor() -> None:
    both = build_engine_args("m", LocalEngineOptions.from_options({"max_pixels": 602112, "min_pixels": 3136}))
    assert both["mm_processor_kwargs"] == {"max_pixels": 602112, "min_pixels": 3136}
    only_max = build_engine_args("m", LocalEngineOptions.from_options({"max_pixels": 602112}))
    assert only_max["mm_processor_kwargs"] == {"max_pixels": 602112}
    assert "mm_processor_kwargs" not in build_engine_args("m", LocalEngineOptions())


def test_cli_options_override_defaults_and_unknown_ones_are_ignored() -> None:
    opts = LocalEngineOptions.from_options({"max_model_len": "8192", "dtype": "bfloat16", "base_url": None,
                                            "timeout": 30.0, "lang": "zh", "trust_remote_code": "true",
                                            "images_per_prompt": None})
    args = build_engine_args("m", opts)
    assert args["max_model_len"] == 8192 and args["dtype"] == "bfloat16" and args["trust_remote_code"] is True
    assert args["limit_mm_per_prompt"] == {"image": 8}  # every view: room for a DiningBench item's photos


def test_data_parallel_points_to_vllm_serve() -> None:
    with pytest.raises(EngineUnavailable) as caught:
        build_engine_args("Qwen/Qwen3-VL-8B-Instruct", LocalEngineOptions.from_options({"data_parallel_size": 2}))
    message = str(caught.value)
    assert "vllm serve Qwen/Qwen3-VL-8B-Instruct --data-parallel-size 2" in message
    assert "openai:Qwen/Qwen3-VL-8B-Instruct" in message and "\n" not in message


@pytest.mark.parametrize(("options", "flag"), [
    ({"tensor_parallel_size": 0}, "--tensor-parallel-size"),
    ({"max_model_len": "lots"}, "--max-model-len"),
    ({"images_per_prompt": -1}, "--images"),
    ({"dtype": "int8"}, "--dtype"),
    ({"max_pixels": 1000, "min_pixels": 5000}, "--min-pixels"),
    ({"trust_remote_code": "maybe"}, "--trust-remote-code"),
])
def test_bad_engine_options_name_the_flag(options: dict, flag: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_backend("vllm:Qwen/Qwen3-VL-8B-Instruct", opts(**options))
    assert flag in str(caught.value) and "\n" not in str(caught.value)


def test_sampling_is_greedy_with_the_requests_budget_and_seed() -> None:
    assert build_sampling_params_kwargs(GenerationConfig(max_tokens=1024, seed=42)) == {
        "temperature": 0.0, "max_tokens": 1024, "seed": 42}


# --- chat messages ----------------------------------------------------------------------------

def test_messages_are_openai_style_with_data_uri_images_in_order() -> None:
    png = photo((250, 10, 10), "PNG")
    req = Request(id="n1", task="nutrition", config=GenerationConfig(), request_hash="h", messages=(
        Message("system", ("Answer in JSON.",)),
        Message("user", ("Reference photo:", ImagePart(photo((1, 2, 3))), "Customer photo:",
                         ImagePart(png, mime_type="image/png", role="user"), "Estimate per serving.")),
    ))
    system, user = to_openai_messages(req.messages)
    assert system == {"role": "system", "content": "Answer in JSON."}
    assert user["role"] == "user"
    assert [p["type"] for p in user["content"]] == ["text", "image_url", "text", "image_url", "text"]
    second = user["content"][3]["image_url"]["url"]
    assert second.startswith("data:image/png;base64,")
    assert base64.b64decode(second.split(",", 1)[1]) == png  # the bytes the harness encoded, untouched
    assert user["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_response_keeps_text_finish_reason_and_token_counts() -> None:
    output = SimpleNamespace(prompt_token_ids=list(range(812)), outputs=[
        SimpleNamespace(text="C", token_ids=[34, 151645], finish_reason="stop")])
    response = response_from_output(output)
    assert (response.text, response.finish_reason) == ("C", "stop")
    assert response.usage == {"prompt_tokens": 812, "completion_tokens": 2}


# --- batching, through an engine with LLM.chat's signature -------------------------------------

class ScriptedEngine:
    """Answers each conversation with its image count; fails on conversations containing 'boom'."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list]] = []

    def chat(self, messages: list, sampling_params: list, use_tqdm: bool = True) -> list:
        assert not use_tqdm  # the harness draws its own progress bar
        assert len(sampling_params) == len(messages)  # one SamplingParams per conversation
        self.calls.append((len(messages), sampling_params))
        outputs = []
        for conversation in messages:
            parts = [p for m in conversation if isinstance(m["content"], list) for p in m["content"]]
            if any(p.get("text") == "boom" for p in parts):
                raise RuntimeError("CUDA error: device-side assert triggered\nmore detail")
            n_images = sum(p["type"] == "image_url" for p in parts)
            outputs.append(SimpleNamespace(prompt_token_ids=[0] * 10, outputs=[
                SimpleNamespace(text=f"{n_images} images", token_ids=[1, 2], finish_reason="stop")]))
        return outputs


def scripted_backend(images: int = 2) -> tuple[VLLMBackend, ScriptedEngine]:
    opts = LocalEngineOptions(images_per_prompt=images)
    engine = ScriptedEngine()
    return VLLMBackend("tiny", opts, engine, dict, build_engine_args("tiny", opts), {"vllm": "test"}), engine


def test_a_chunk_goes_to_the_engine_in_one_call_and_comes_back_in_order() -> None:
    backend, engine = scripted_backend()
    results = backend.generate_batch([request("a", 2, max_tokens=8), request("b", 1, seed=5), request("c", 0)])
    assert [r.text for r in results] == ["2 images", "1 images", "0 images"]
    assert len(engine.calls) == 1
    assert engine.calls[0][1][1] == {"temperature": 0.0, "max_tokens": 64, "seed": 5}
    assert engine.calls[0][1][0]["max_tokens"] == 8


def test_too_many_images_fails_only_that_sample() -> None:
    backend, engine = scripted_backend(images=2)
    results = backend.generate_batch([request("ok", 2), request("big", 3)])
    assert results[0].text == "2 images"
    assert isinstance(results[1], BackendError) and not results[1].retryable
    assert "big" in str(results[1]) and "--images" in str(results[1])


def test_an_engine_failure_lands_on_the_sample_that_caused_it() -> None:
    backend, _ = scripted_backend()
    bad = Request(id="bad", task="vqa", config=GenerationConfig(), request_hash="x",
                  messages=(Message("user", (ImagePart(photo((0, 0, 0))), "boom")),))
    results = backend.generate_batch([request("a"), bad, request("b")])
    assert [getattr(r, "text", None) for r in results] == ["2 images", None, "2 images"]
    assert isinstance(results[1], BackendError)
    assert str(results[1]) == "bad: RuntimeError: CUDA error: device-side assert triggered more detail"


async def test_generate_answers_one_request_and_raises_its_error() -> None:
    backend, _ = scripted_backend(images=1)
    assert (await backend.generate(request("one", 1))).text == "1 images"
    with pytest.raises(BackendError):
        await backend.generate(request("two", 2))


def test_describe_records_engine_args_and_versions() -> None:
    backend, _ = scripted_backend(images=3)
    info = backend.describe()
    assert info["engine_versions"] == {"vllm": "test"}
    assert info["engine_args"]["limit_mm_per_prompt"] == {"image": 3}
    assert info["engine_args"]["max_model_len"] == 16384


# --- without vLLM -----------------------------------------------------------------------------

@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here")
def test_missing_vllm_is_one_line_saying_what_to_install() -> None:
    with pytest.raises(ConfigError) as caught:
        make_backend("vllm:Qwen/Qwen3-VL-8B-Instruct", opts(images_per_prompt=4))
    assert str(caught.value) == INSTALL_HINT
    assert INSTALL_HINT == "vllm is not installed: pip install -r requirements-vllm.txt (needs a CUDA GPU)"


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here")
def test_cli_prints_the_install_hint_as_one_error_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "eval", "run", "--task", "classification", "--limit", "1", "--no-progress",
               "--model", "vllm:Qwen/Qwen3-VL-8B-Instruct", "--images", "4", "--out", str(tmp_path / "run")]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert finished.returncode != 0
    assert finished.stderr.strip() == f"error: {INSTALL_HINT}"
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
