"""`hf:MODEL` — a vision-language model run locally with transformers (any device, no server): the model's
own chat template, batched greedy decoding with left padding; slower than vLLM, but needs only torch and
transformers."""

from __future__ import annotations

import copy
import io
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataset.cache import hub_reachable
from eval.backends._local import (
    EngineUnavailable,
    LocalEngineOptions,
    chunks,
    generate_isolated,
    generate_one,
    short_error,
)
from eval.backends.policy import refuse_options
from eval.types import BackendError, BackendOptions, BackendTraits, Message, Request, Response

INSTALL_HINT = "pip install -r requirements-dev.txt (torch + transformers)"


def decode_images(request: Request) -> list[Any]:
    """The request's images as RGB PIL images, decoded once, in prompt order; a BackendError (not retryable)
    naming the sample and image for undecodable bytes."""
    from PIL import Image

    images = []
    for index, part in enumerate(part for message in request.messages for part in message.images):
        try:
            with Image.open(io.BytesIO(part.data)) as opened:
                images.append(opened.convert("RGB"))
        except Exception as exc:  # noqa: BLE001 - PIL raises many kinds for bad bytes
            raise BackendError(f"{request.id}: image {index} cannot be decoded ({type(exc).__name__})",
                               retryable=False) from None
    return images


def to_hf_conversation(messages: Sequence[Message], images: Sequence[Any]) -> list[dict[str, Any]]:
    """Messages → the transformers chat format, images as `{"type": "image", "image": PIL}` parts. Images are
    consumed from `images` in the order they appear, so the i-th ImagePart of the request becomes the i-th
    image the processor sees. Every content is a list of typed parts: the multimodal chat templates (Qwen-VL,
    LLaVA, Idefics...) all accept that form."""
    remaining = iter(images)
    conversation = []
    for message in messages:
        content: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, str):
                if part:
                    content.append({"type": "text", "text": part})
            else:
                content.append({"type": "image", "image": next(remaining)})
        conversation.append({"role": message.role, "content": content})
    return conversation


def resolve_device(device: str, torch: Any) -> str:
    """`auto` → cuda, then mps, then cpu; anything else is used as given (`cpu`, `cuda:1`)."""
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def resolve_dtype(dtype: str, device: str, torch: Any) -> Any:
    """`auto` keeps the checkpoint's dtype on accelerators; on CPU it is float32 (bf16 is slow there)."""
    if dtype == "auto":
        return "auto" if not device.startswith("cpu") else torch.float32
    return getattr(torch, dtype)


@dataclass
class _Prepared:
    conversation: list[dict[str, Any]]
    images: list[Any]


class HFBackend:
    """A transformers model behind the Backend protocol; `generate_batch` is what the runner calls."""

    def __init__(self, model_id: str, options: LocalEngineOptions) -> None:
        try:
            import torch
            import transformers
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ImportError as exc:
            raise EngineUnavailable(f"hf: needs torch and transformers ({exc.name} is missing): {INSTALL_HINT}") from None
        self.spec = f"hf:{model_id}"
        self.model_id = model_id
        self.options = options
        self._torch = torch
        self._versions = {"transformers": transformers.__version__, "torch": torch.__version__}
        self.device = resolve_device(options.device, torch)
        transformers.utils.logging.disable_progress_bar()  # the harness draws its own progress line
        if options.tensor_parallel_size > 1 or options.data_parallel_size > 1:
            raise EngineUnavailable("hf: runs on one device; --tensor-parallel-size and --data-parallel-size "
                                    "are for vllm: (or `vllm serve` with openai:)")
        source = str(Path(model_id).expanduser()) if model_id.startswith("~") else model_id
        if model_id.startswith((".", "/", "~")) and not Path(source).exists():
            raise EngineUnavailable(f"hf: model folder {model_id} does not exist")
        if not Path(source).exists() and not _cached_on_disk(source) and not hub_reachable():
            # transformers would retry the Hub for minutes before saying the same
            raise EngineUnavailable(f"hf:{model_id} is neither a folder nor in the Hugging Face cache, and the Hub "
                                    "is unreachable (offline?): download it first or pass a local folder")
        self.processor = self._load(lambda: AutoProcessor.from_pretrained(
            source, trust_remote_code=options.trust_remote_code))
        self._apply_pixel_budget()  # before the weights load: a bad flag should fail fast
        self.model = self._load(lambda: AutoModelForImageTextToText.from_pretrained(
            source, dtype=resolve_dtype(options.dtype, self.device, torch),
            trust_remote_code=options.trust_remote_code))
        try:
            self.model.to(self.device)
        except Exception as exc:  # noqa: BLE001 - no such device, out of memory
            raise EngineUnavailable(f"hf: cannot put {model_id} on device {self.device!r}: {short_error(exc)}") from None
        self.model.eval()
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.tokenizer.padding_side = "left"  # decoder-only batching: prompts end where generation starts
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._lock = threading.Lock()  # one generate at a time: the model is not thread-safe

    def _load(self, loader: Callable[[], Any]) -> Any:
        """Run a from_pretrained call; any failure becomes one line saying what to fix."""
        try:
            return loader()
        except ImportError as exc:
            if "torchvision" in str(exc).lower():
                # Qwen-VL processors build their video half too, which needs torchvision.
                raise EngineUnavailable(f"hf:{self.model_id} needs torchvision for its processor: "
                                        "pip install torchvision (the build matching your torch)") from None
            raise EngineUnavailable(f"hf:{self.model_id} needs a package that is not installed: "
                                    f"{short_error(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - OSError, ValueError, KeyError... all mean "cannot load"
            raise EngineUnavailable(f"hf: cannot load {self.model_id!r}: {short_error(exc)}") from None

    def _apply_pixel_budget(self) -> None:
        """Apply max/min pixels where the image processor has a pixel budget (Qwen-VL style)."""
        opts = self.options
        if opts.max_pixels is None and opts.min_pixels is None:
            return
        image_processor: Any = getattr(self.processor, "image_processor", None)
        size: Any = getattr(image_processor, "size", None)
        # transformers 5 keeps `size` as a SizeDict dataclass, older releases as a plain dict.
        fields = dict(size) if isinstance(size, dict) else {
            k: v for k, v in getattr(size, "__dict__", {}).items() if v is not None}
        if not {"shortest_edge", "longest_edge"} <= fields.keys() or not hasattr(image_processor, "merge_size"):
            raise EngineUnavailable(
                f"--max-pixels/--min-pixels apply to Qwen-VL-style image processors; "
                f"{type(image_processor).__name__} of {self.model_id} has no pixel budget")
        if opts.min_pixels is not None:
            fields["shortest_edge"] = opts.min_pixels
        if opts.max_pixels is not None:
            fields["longest_edge"] = opts.max_pixels
        image_processor.size = fields if isinstance(size, dict) else type(size)(**fields)

    def describe(self) -> dict[str, Any]:
        opts = self.options
        return {
            "backend": "hf", "model": self.model_id, "engine": "transformers",
            "engine_versions": dict(self._versions),
            "model_class": type(self.model).__name__, "processor_class": type(self.processor).__name__,
            "device": self.device, "dtype": str(self.model.dtype).removeprefix("torch."),
            "batch_size": opts.batch_size, "max_model_len": opts.max_model_len,
            "max_pixels": opts.max_pixels, "min_pixels": opts.min_pixels,
            "decoding": "greedy (do_sample=False) at temperature 0", "seed": opts.seed,
            "repetition_penalty": getattr(self.model.generation_config, "repetition_penalty", None),
            "trust_remote_code": opts.trust_remote_code,
        }

    async def generate(self, request: Request) -> Response:
        return await generate_one(self.generate_batch, request)

    def generate_batch(self, requests: list[Request]) -> list[Response | BackendError]:
        """One Response or BackendError per request, in order; runs `batch_size` prompts at a time."""
        results: list[Response | BackendError] = []
        for chunk in chunks(requests, self.options.batch_size):
            # Requests that sample differently cannot share one generate() call.
            groups: dict[tuple[float, int], list[int]] = {}
            for index, request in enumerate(chunk):
                groups.setdefault((request.config.temperature, request.config.seed or 0), []).append(index)
            chunk_results: list[Response | BackendError | None] = [None] * len(chunk)
            for indices in groups.values():
                group = [chunk[i] for i in indices]
                for index, result in zip(indices, generate_isolated(group, self._prepare, self._run), strict=True):
                    chunk_results[index] = result
            results.extend(r for r in chunk_results if r is not None)
        return results

    def _prepare(self, request: Request) -> _Prepared:
        images = decode_images(request)
        return _Prepared(to_hf_conversation(request.messages, images), images)

    def _run(self, requests: list[Request], prepared: list[_Prepared]) -> list[Response]:
        torch = self._torch
        prompts = [self.processor.apply_chat_template(p.conversation, add_generation_prompt=True, tokenize=False)
                   for p in prepared]
        images = [p.images for p in prepared]
        processor_args: dict[str, Any] = {"text": prompts, "padding": True, "return_tensors": "pt",
                                          "add_special_tokens": False}  # the template already has them
        if any(images):
            processor_args["images"] = images
        inputs = self.processor(**processor_args).to(self.device)
        prompt_lengths = inputs["attention_mask"].sum(dim=1).tolist()
        limits = []
        for request, length in zip(requests, prompt_lengths, strict=True):
            if length >= self.options.max_model_len:
                raise BackendError(f"{request.id}: prompt is {length} tokens, max_model_len is "
                                   f"{self.options.max_model_len}", retryable=False)
            room = self.options.max_model_len - length  # prompt + answer fit the context, like vLLM
            asked = request.config.max_tokens
            limits.append(room if asked is None else min(asked, room))
        config = requests[0].config
        with self._lock, torch.inference_mode():
            torch.manual_seed(config.seed or 0)
            output = self.model.generate(**inputs, generation_config=self._generation_config(
                config.temperature, max_new_tokens=max(limits)))
        generated = output[:, inputs["input_ids"].shape[1]:].tolist()
        return [self._response(tokens, limit, length)
                for tokens, limit, length in zip(generated, limits, prompt_lengths, strict=True)]

    def _generation_config(self, temperature: float, max_new_tokens: int) -> Any:
        """The checkpoint's generation config with the run's decoding on top. Instruct checkpoints often ship
        sampling defaults (Qwen3-VL: temperature 0.7, top_p 0.8, top_k 20); temperature 0 must mean greedy
        whatever they say. Other settings the authors chose (repetition_penalty...) are kept, and recorded by
        describe()."""
        config = copy.deepcopy(self.model.generation_config)
        if temperature > 0:
            config.do_sample, config.temperature = True, temperature
        else:
            # Neutral values rather than None: generate() refills None from the checkpoint's defaults.
            config.do_sample, config.temperature, config.top_p, config.top_k = False, 1.0, 1.0, 50
        config.pad_token_id = self.tokenizer.pad_token_id
        config.max_new_tokens = max_new_tokens
        return config

    def _response(self, tokens: list[int], limit: int, prompt_length: int) -> Response:
        """Cut one row at its first stop token (or its own max_tokens) and decode it."""
        stop_ids = self._stop_ids()
        kept: list[int] = []
        finish_reason = "length"
        for token in tokens[:limit]:
            if token in stop_ids:
                finish_reason = "stop"
                break
            kept.append(token)
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        usage = {"prompt_tokens": int(prompt_length),
                 "completion_tokens": len(kept) + (finish_reason == "stop")}
        return Response(text=text, usage=usage, finish_reason=finish_reason)

    def _stop_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids


TRAITS = BackendTraits(open_weights=True, packages=("transformers", "torch"))


def make(model: str, options: BackendOptions) -> HFBackend:
    """Build the `hf:` backend; options as the CLI passes them (unknown ones are ignored). A chat template's
    own thinking switch is the model's business: `reasoning_effort` and `thinking_budget` have nothing to map
    to here and are refused."""
    refuse_options(f"hf:{model}", reasoning_effort=options.generation.reasoning_effort,
                   thinking_budget=options.generation.thinking_budget)
    return HFBackend(model, LocalEngineOptions.of(options))


def _cached_on_disk(repo_id: str) -> bool:
    """True when the Hub cache already holds this model's config (an offline run can load it)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # noqa: BLE001 - a malformed id is for from_pretrained to name
        return False
