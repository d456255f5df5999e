"""The `hf:` backend on a real (tiny, random) vision-language model, on CPU: real processors,
chat templates and `generate` calls with several images per prompt.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from eval.api import score
from eval.backends import make_backend
from eval.backends.hf import HFBackend, to_hf_conversation
from eval.types import BackendError, ConfigError, GenerationConfig, ImagePart, Message, Request, Response
from tests.helpers_backends import opts
from tests.helpers_tiny_vlm import tiny_vlm_dir

HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None
TOKENS_PER_IMAGE = 4 + 2  # tiny LLaVA: 4 visual tokens, plus <|vision_start|> and <|vision_end|>


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_vlm_dir(tmp_path_factory, "llava")


@pytest.fixture(scope="module")
def backend(tiny_llava: Path) -> HFBackend:
    return make_backend(f"hf:{tiny_llava}", opts(images_per_prompt=3, batch_size=4, device="cpu", max_tokens=8, seed=0,
                        base_url=None, timeout=30.0))


def photo(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "JPEG")
    return buffer.getvalue()


def request(item_id: str, images: int = 2, max_tokens: int = 8, question: str = "这是什么菜？只回答字母。") -> Request:
    parts = (*(ImagePart(photo((60 * i, 140, 90 + 10 * len(item_id)))) for i in range(images)), question)
    return Request(id=item_id, task="classification", config=GenerationConfig(max_tokens=max_tokens),
                   messages=(Message("system", ("你是美食专家。",)), Message("user", parts)),
                   request_hash=f"h-{item_id}")


def test_conversation_keeps_text_and_images_in_request_order() -> None:
    first, second = object(), object()
    messages = (Message("system", ("Be brief.",)),
                Message("user", ("Merchant photo:", ImagePart(b""), "", "Customer photo:", ImagePart(b""), "Which?")))
    conversation = to_hf_conversation(messages, [first, second])
    assert conversation[0] == {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}
    assert conversation[1]["content"] == [
        {"type": "text", "text": "Merchant photo:"}, {"type": "image", "image": first},
        {"type": "text", "text": "Customer photo:"}, {"type": "image", "image": second},
        {"type": "text", "text": "Which?"}]


def test_multi_image_batch_generates_one_response_per_request(backend: HFBackend) -> None:
    results = backend.generate_batch([request("two", 2), request("one", 1), request("three", 3, max_tokens=3)])
    assert all(isinstance(r, Response) for r in results)
    two, one, three = results
    # Each image adds exactly its visual tokens to the prompt: the images really reached the model.
    assert two.usage["prompt_tokens"] - one.usage["prompt_tokens"] == TOKENS_PER_IMAGE
    assert three.usage["prompt_tokens"] - two.usage["prompt_tokens"] == TOKENS_PER_IMAGE
    assert 1 <= two.usage["completion_tokens"] <= 8 and 1 <= three.usage["completion_tokens"] <= 3
    assert {r.finish_reason for r in results} <= {"stop", "length"}
    assert all(isinstance(r.text, str) for r in results)


def test_batching_with_left_padding_does_not_change_answers(backend: HFBackend) -> None:
    requests = [request("a", 1), request("bb", 3, question="热量是多少？请以 JSON 回答。"), request("ccc", 2)]
    batched = [r.text for r in backend.generate_batch(requests)]
    alone = [backend.generate_batch([r])[0].text for r in requests]
    assert batched == alone


def test_temperature_zero_is_greedy_despite_the_checkpoints_sampling_defaults(backend: HFBackend) -> None:
    import torch

    assert backend.model.generation_config.do_sample  # the tiny checkpoint ships Qwen3-VL's sampling defaults
    req = request("greedy", 2, max_tokens=4)
    response = backend.generate_batch([req])[0]
    # Decode by hand: argmax of the next-token logits, four times.
    prepared = backend._prepare(req)
    prompt = backend.processor.apply_chat_template(prepared.conversation, add_generation_prompt=True, tokenize=False)
    inputs = backend.processor(text=[prompt], images=[prepared.images], return_tensors="pt", add_special_tokens=False)
    ids, tokens = inputs["input_ids"], []
    with torch.inference_mode():
        for _ in range(4):
            logits = backend.model(input_ids=ids, attention_mask=torch.ones_like(ids),
                                   pixel_values=inputs["pixel_values"]).logits
            token = int(logits[0, -1].argmax())
            if token == backend.tokenizer.eos_token_id:
                break
            tokens.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    assert response.text == backend.tokenizer.decode(tokens, skip_special_tokens=True)


def test_sampling_at_a_temperature_is_reproducible_with_the_seed(backend: HFBackend) -> None:
    def sampled(seed: int) -> str:
        req = request("warm", 1, max_tokens=6)
        req = dataclasses.replace(req, config=GenerationConfig(temperature=1.0, max_tokens=6, seed=seed))
        return backend.generate_batch([req])[0].text

    assert sampled(3) == sampled(3)


def test_text_only_prompts_work_too(backend: HFBackend) -> None:
    only_text = Request(id="t", task="vqa", config=GenerationConfig(max_tokens=3), request_hash="t",
                        messages=(Message("user", ("一份宫保鸡丁大约多少千卡？",)),))
    response, = backend.generate_batch([only_text])
    assert isinstance(response, Response) and response.usage["completion_tokens"] <= 3


def test_a_corrupt_image_fails_only_its_sample(backend: HFBackend) -> None:
    broken = Request(id="dish-17", task="nutrition", config=GenerationConfig(max_tokens=4), request_hash="b",
                     messages=(Message("user", (ImagePart(b"not a jpeg"), "热量？")),))
    good, bad = backend.generate_batch([request("fine"), broken])
    assert isinstance(good, Response)
    assert isinstance(bad, BackendError) and not bad.retryable
    assert str(bad) == "dish-17: image 0 cannot be decoded (UnidentifiedImageError)"


def test_prompts_longer_than_max_model_len_are_refused(tiny_llava: Path) -> None:
    short_context = make_backend(f"hf:{tiny_llava}", opts(device="cpu", max_model_len=40))
    long_prompt, = short_context.generate_batch([request("long", 3)])
    assert isinstance(long_prompt, BackendError) and "max_model_len is 40" in str(long_prompt)


async def test_generate_runs_one_request_off_the_event_loop(backend: HFBackend) -> None:
    response = await backend.generate(request("async", 2, max_tokens=2))
    assert response.usage["completion_tokens"] <= 2
    broken = Request(id="bad", task="vqa", config=GenerationConfig(), request_hash="b",
                     messages=(Message("user", (ImagePart(b"\xff\xd8garbage"), "?")),))
    with pytest.raises(BackendError):
        await backend.generate(broken)


def test_describe_records_what_ran(backend: HFBackend, tiny_llava: Path) -> None:
    info = backend.describe()
    assert info["backend"] == "hf" and info["model"] == str(tiny_llava)
    assert info["model_class"] == "LlavaForConditionalGeneration"
    assert set(info["engine_versions"]) == {"transformers", "torch"}
    assert (info["device"], info["dtype"], info["batch_size"], info["max_model_len"]) == ("cpu", "float32", 4, 16384)


@pytest.mark.parametrize(("spec", "options", "expected"), [
    ("hf:/no/such/model-folder", {}, "hf: model folder /no/such/model-folder does not exist"),
    ("hf:TINY", {"dtype": "int4"}, "--dtype 'int4' is not one of auto, bfloat16, float16, float32"),
    ("hf:TINY", {"batch_size": 0}, "--batch-size must be at least 1 (got 0)"),
    ("hf:TINY", {"max_pixels": 50176}, "--max-pixels/--min-pixels apply to Qwen-VL-style image processors"),
    ("hf:TINY", {"tensor_parallel_size": 2}, "hf: runs on one device"),
    ("hf:TINY", {"device": "no-such-device"}, "hf: cannot put"),
])
def test_setup_problems_are_one_line(tiny_llava: Path, spec: str, options: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_backend(spec.replace("TINY", str(tiny_llava)), opts(**{"device": "cpu", **options}))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.skipif(HAS_TORCHVISION, reason="torchvision is installed: the Qwen-VL path runs instead")
def test_a_qwen_vl_model_without_torchvision_is_a_one_line_hint(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Qwen-VL processors need torchvision: without it, a one-line hint naming the install."""
    folder = tiny_vlm_dir(tmp_path_factory, "qwen2_vl")
    with pytest.raises(ConfigError) as caught:
        make_backend(f"hf:{folder}", opts(device="cpu"))
    assert "needs torchvision" in str(caught.value) and "pip install torchvision" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.skipif(not HAS_TORCHVISION, reason="torchvision is not installed (no build on the package index "
                    "matches the pinned CPU torch), so the Qwen-VL processor cannot load")
def test_qwen2_vl_style_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A Qwen-VL model generates, and its image tokens follow the pixel budget."""
    folder = tiny_vlm_dir(tmp_path_factory, "qwen2_vl")
    qwen = make_backend(f"hf:{folder}", opts(device="cpu", max_pixels=56 * 56, min_pixels=56 * 56))
    one, two = qwen.generate_batch([request("q1", 1), request("q2", 2)])
    # 56x56 px → 4x4 patches of 14 px → 4 tokens after the 2x2 merge, + vision start/end.
    assert two.usage["prompt_tokens"] - one.usage["prompt_tokens"] == 6


# --- the whole harness, end to end --------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_cli_runs_all_three_tasks_and_scores_garbage_as_failures(tiny_llava: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "eval", "run", "--task", "all", "--model", f"hf:{tiny_llava}",
               "--limit", "3", "--images", "2", "--max-tokens", "8", "--out", str(out), "--no-progress"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]

    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(p["task"] for p in predictions) == ["classification"] * 3 + ["nutrition"] * 3 + ["vqa"] * 3
    assert all(p["error"] is None and p["attempts"] == 1 for p in predictions)  # the model answered each one
    assert all(p["usage"]["prompt_tokens"] > 2 * TOKENS_PER_IMAGE for p in predictions)  # 2 images + prompt
    assert all(1 <= p["usage"]["completion_tokens"] <= 8 for p in predictions)

    metrics = json.loads((out / "metrics.json").read_text())
    # Random text is not an answer: counted as unparsed and scored as wrong, never guessed.
    assert (metrics["classification"]["n"], metrics["classification"]["parse_failures"]) == (3, 3)
    assert metrics["classification"]["accuracy"] == 0.0
    assert (metrics["nutrition"]["n"], metrics["nutrition"]["parse_failures"]) == (3, 3)
    assert metrics["nutrition"]["avg_mape"] == 1.0  # an unparsed estimate counts as 100% error
    assert metrics["vqa"]["n"] == 3

    run_info = json.loads((out / "run.json").read_text())
    assert run_info["backend"]["engine_versions"]["transformers"]
    assert run_info["backend"]["model_class"] == "LlavaForConditionalGeneration"

    # The same tiny model as VQA judge: its verdicts are unreadable, so items are unscored, not wrong.
    vqa = score(out, judge=f"hf:{tiny_llava}")["vqa"]
    assert (vqa["n"], vqa["unscored"], vqa["accuracy"], vqa["accuracy_scored"]) == (3, 3, 0.0, None)
