"""`vllm:MODEL` — offline batched inference with `vllm.LLM` on local GPUs (no server). Requests are built
by pure functions (shared with `openai:`), tested without a GPU; `make` imports vllm only when asked for."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from eval.backends._local import (
    EngineUnavailable,
    LocalEngineOptions,
    generate_isolated,
    generate_one,
    short_error,
)
from eval.backends.openai_chat import to_openai_messages
from eval.backends.policy import refuse_options
from eval.types import BackendError, BackendOptions, BackendTraits, GenerationConfig, Request, Response

INSTALL_HINT = "vllm is not installed: pip install -r requirements-vllm.txt (needs a CUDA GPU)"
DEFAULT_IMAGE_LIMIT = 8  # when the run sends every view: DiningBench items carry ~5 photos


def build_engine_args(model: str, options: LocalEngineOptions) -> dict[str, Any]:
    """Keyword arguments for `vllm.LLM(...)`, following the paper's protocol. vLLM reserves memory for exactly
    `limit_mm_per_prompt` images per prompt and refuses prompts with more, so it is the run's image count.
    `mm_processor_kwargs` carries the pixel budget of Qwen-VL-style processors (fewer pixels → fewer visual
    tokens → more prompts fit in 16k).

    >>> build_engine_args("Qwen/Qwen3-VL-8B-Instruct", LocalEngineOptions(images_per_prompt=4))["limit_mm_per_prompt"]
    {'image': 4}
    """
    if options.data_parallel_size > 1:
        # vllm.LLM runs one data-parallel rank per process (VLLM_DP_RANK...); one harness process
        # cannot drive several. A server spreads requests over its DP ranks by itself.
        raise EngineUnavailable(
            f"vllm: offline data parallelism needs one process per rank; for --data-parallel-size "
            f"{options.data_parallel_size} start `vllm serve {model} --data-parallel-size "
            f"{options.data_parallel_size} ...` and run with --model openai:{model} "
            f"--base-url http://localhost:8000/v1 (see the README)")
    args: dict[str, Any] = {
        "model": model, "limit_mm_per_prompt": {"image": options.images_per_prompt or DEFAULT_IMAGE_LIMIT},
        "max_model_len": options.max_model_len, "tensor_parallel_size": options.tensor_parallel_size,
        "seed": options.seed, "dtype": options.dtype, "trust_remote_code": options.trust_remote_code,
    }
    pixels = {name: value for name, value in (("max_pixels", options.max_pixels),
                                              ("min_pixels", options.min_pixels)) if value is not None}
    if pixels:
        args["mm_processor_kwargs"] = pixels
    return args


def build_sampling_params_kwargs(config: GenerationConfig) -> dict[str, Any]:
    """Keyword arguments for `vllm.SamplingParams`: temperature 0 is greedy decoding in vLLM. The engine
    itself stops a sequence at max_model_len (finish reason "length"), so the default limit needs no fitting
    under the context here; `max_tokens` None means "up to the context".

    >>> build_sampling_params_kwargs(GenerationConfig(max_tokens=16, seed=3))
    {'temperature': 0.0, 'max_tokens': 16, 'seed': 3}
    """
    return {"temperature": float(config.temperature), "max_tokens": config.max_tokens, "seed": config.seed}


def response_from_output(output: Any) -> Response:
    """A vLLM `RequestOutput` (first completion) → Response with token usage."""
    completion = output.outputs[0]
    usage = {"prompt_tokens": len(output.prompt_token_ids or []),
             "completion_tokens": len(completion.token_ids or [])}
    return Response(text=completion.text, usage=usage, finish_reason=completion.finish_reason)


class VLLMBackend:
    """An offline vLLM engine behind the Backend protocol. `engine` is a `vllm.LLM` (anything with its
    `chat(messages, sampling_params=, use_tqdm=)`), `sampling_params` builds one `vllm.SamplingParams` per
    request."""

    def __init__(self, model: str, options: LocalEngineOptions, engine: Any,
                 sampling_params: Callable[..., Any], engine_args: dict[str, Any],
                 versions: dict[str, str]) -> None:
        self.spec = f"vllm:{model}"
        self.model = model
        self.options = options
        self.engine = engine
        self._sampling_params = sampling_params
        self.engine_args = engine_args
        self._versions = versions
        self._lock = threading.Lock()  # LLM.chat is not re-entrant

    def describe(self) -> dict[str, Any]:
        return {"backend": "vllm", "model": self.model, "engine": "vllm",
                "engine_versions": dict(self._versions),
                "engine_args": {k: v for k, v in self.engine_args.items() if k != "model"},
                "decoding": "greedy (temperature 0)"}

    async def generate(self, request: Request) -> Response:
        return await generate_one(self.generate_batch, request)

    def generate_batch(self, requests: list[Request]) -> list[Response | BackendError]:
        """All requests in one `LLM.chat` call (vLLM schedules them itself), results in order."""
        return generate_isolated(requests, self._prepare, self._run)

    def _prepare(self, request: Request) -> list[dict[str, Any]]:
        limit = self.engine_args["limit_mm_per_prompt"]["image"]
        count = sum(len(m.images) for m in request.messages)
        if count > limit:
            raise BackendError(f"{request.id}: {count} images but the engine was started for at most "
                               f"{limit} (--images)", retryable=False)
        return to_openai_messages(request.messages)

    def _run(self, requests: list[Request], conversations: list[list[dict[str, Any]]]) -> list[Response]:
        params = [self._sampling_params(**build_sampling_params_kwargs(r.config)) for r in requests]
        with self._lock:
            outputs = self.engine.chat(conversations, sampling_params=params, use_tqdm=False)
        if len(outputs) != len(requests):
            raise BackendError(f"vllm returned {len(outputs)} outputs for {len(requests)} prompts", retryable=False)
        return [response_from_output(o) for o in outputs]


TRAITS = BackendTraits(open_weights=True, packages=("vllm",))


def make(model: str, options: BackendOptions) -> VLLMBackend:
    """Start the engine (loads the weights onto the GPUs); one-line errors when it cannot. `reasoning_effort`
    and `thinking_budget` are API settings with nothing to map to in `vllm.LLM`: refused before the engine
    starts. A thinking checkpoint thinks in its output (`<think>...`)."""
    refuse_options(f"vllm:{model}", reasoning_effort=options.generation.reasoning_effort,
                   thinking_budget=options.generation.thinking_budget)
    opts = LocalEngineOptions.of(options)
    engine_args = build_engine_args(model, opts)
    try:
        import vllm
    except ImportError:
        raise EngineUnavailable(INSTALL_HINT) from None
    try:
        engine = vllm.LLM(**engine_args)
    except Exception as exc:  # noqa: BLE001 - no GPU, out of memory, unknown model: all fatal here
        raise EngineUnavailable(f"vllm could not start {model}: {short_error(exc)}") from None
    versions = {"vllm": getattr(vllm, "__version__", "unknown")}
    try:
        import torch
        import transformers

        versions.update(torch=torch.__version__, transformers=transformers.__version__)
    except ImportError:
        pass
    return VLLMBackend(model, opts, engine, vllm.SamplingParams, engine_args, versions)
