"""Fake OpenAI-compatible server: POST /v1/chat/completions, GET /v1/models (as `vllm serve` or OpenAI).

Three behaviours of real services, switched on by constructor arguments:
- `reasoning=True`: an OpenAI reasoning model (o3, o4-mini, gpt-5). It refuses `max_tokens` and any
  temperature but 1 with OpenAI's own 400 bodies, spends `thinking_tokens` reasoning tokens before
  answering (usage.completion_tokens_details.reasoning_tokens), and returns empty content with
  finish_reason "length" when max_completion_tokens is below its thinking need.
- `refuse_reasoning_effort=True`: a chat model (gpt-4o) that refuses `reasoning_effort`.
- `max_model_len=N`: a `vllm serve` endpoint with an N-token context: GET /v1/models reports
  `max_model_len`, and prompt + max_tokens > N is refused with vLLM's 400 (`context_error` picks the
  wording of vLLM 0.10+ "new" or before "old"). Without a limit it answers within its context.
  `context_error="0.33"` or `"input_length"` is vLLM 0.33: a limit is clamped to the room left, a limit above the
  whole context is refused, and a prompt that fills the context is refused in one of its two wordings.
  `report_context=False` leaves `max_model_len` out of the listing (a proxy in front of vLLM);
  `list_models=False` answers GET /v1/models with a 404 (a gateway that only routes completions).
  `reasoning_field` ("reasoning_content" or "reasoning") returns `reasoning_text` beside the answer,
  as vLLM does with a reasoning parser.
"""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.base import FakeServer, RecordedRequest, decode_data_uri

CLAMPING_WORDINGS = ("0.33", "input_length")  # vLLM 0.33's two refusals of a prompt that fills the context


def _openai_error(message: str, param: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


class FakeOpenAIServer(FakeServer):
    """Use `server.base_url` as the client's base URL (it ends with /v1)."""

    def __init__(self, oracle: Any = None, *, reasoning: bool = False, thinking_tokens: int = 3000,
                 refuse_reasoning_effort: bool = False, max_model_len: int | None = None,
                 context_error: str = "new", reasoning_field: str | None = None,
                 reasoning_text: str = "The plate shows noodles; option A fits best.",
                 prompt_tokens_per_image: int = 100, model_id: str | None = None,
                 report_context: bool = True, list_models: bool = True) -> None:
        super().__init__(oracle)
        self.reasoning = reasoning
        self.thinking_tokens = thinking_tokens
        self.refuse_reasoning_effort = refuse_reasoning_effort
        self.max_model_len = max_model_len
        self.context_error = context_error
        self.reasoning_field = reasoning_field
        self.reasoning_text = reasoning_text
        self.prompt_tokens_per_image = prompt_tokens_per_image
        self.model_id = model_id
        self.report_context = report_context  # False: a proxy whose /v1/models says nothing of the context
        self.list_models = list_models

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def parse(self, path: str, body: Any, request: RecordedRequest) -> None:
        texts, images = [], []
        for message in body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
                continue
            for part in content or []:
                if part.get("type") == "text":
                    texts.append(part["text"])
                elif part.get("type") == "image_url":
                    images.append(decode_data_uri(part["image_url"]["url"]))
        request.prompt = "".join(texts)
        request.images = images
        request.temperature = body.get("temperature")
        request.max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        request.seed = body.get("seed")
        request.extra = {k: body[k] for k in ("max_tokens", "max_completion_tokens", "reasoning_effort", "top_p")
                         if k in body}

    def prompt_tokens(self, request: RecordedRequest) -> int:
        return 10 + self.prompt_tokens_per_image * len(request.images)

    # -- what the real services refuse
    def refuse(self, request: RecordedRequest) -> tuple[int, dict[str, Any]] | None:
        body = request.body
        if self.reasoning:
            # OpenAI reports one refused field at a time, max_tokens first.
            if "max_tokens" in body:
                return 400, _openai_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                          "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
            if "temperature" in body and body["temperature"] != 1:
                value = body["temperature"]
                return 400, _openai_error(f"Unsupported value: 'temperature' does not support {value} with this "
                                          "model. Only the default (1) value is supported.", "temperature",
                                          "unsupported_value")
        if self.refuse_reasoning_effort and "reasoning_effort" in body:
            return 400, _openai_error("Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                                      "reasoning_effort", "unsupported_parameter")
        limit = request.max_tokens
        if self.max_model_len is not None and self.context_error in CLAMPING_WORDINGS:
            # vLLM 0.33: a limit above the whole context and a prompt that fills it are refused; a limit that
            # fits the context is clamped to the room left (vllm/renderers/params.py, TokenizeParams).
            if limit is not None and limit > self.max_model_len:
                message = (f"max_tokens={limit} cannot be greater than max_model_len={self.max_model_len}. "
                           f"Please request fewer output tokens. (parameter=max_tokens, value={limit})")
                return 400, {"error": {"message": message, "type": "BadRequestError", "param": "max_tokens",
                                       "code": 400}}
            prompt = self.prompt_tokens(request)
            if prompt >= self.max_model_len:
                return 400, self._context_error(prompt, 0)
        elif self.max_model_len is not None and limit is not None:
            prompt = self.prompt_tokens(request)
            if prompt + limit > self.max_model_len:
                return 400, self._context_error(prompt, limit)
        return None

    def _context_error(self, prompt: int, limit: int) -> dict[str, Any]:
        n = self.max_model_len
        if self.context_error in CLAMPING_WORDINGS:
            message = (f"This model's maximum context length is {n} tokens. However, your prompt contains {prompt} "
                       "input tokens, which exceeds this limit even without any output tokens. Please reduce the "
                       f"length of the input prompt. (parameter=input_tokens, value={prompt})"
                       if self.context_error == "0.33" else
                       f"Input length ({prompt}) exceeds model's maximum context length ({n}).")
            return {"error": {"message": message, "type": "BadRequestError", "param": "input_tokens", "code": 400}}
        if self.context_error == "old":
            message = (f"This model's maximum context length is {n} tokens. However, you requested {prompt + limit} "
                       f"tokens ({prompt} in the messages, {limit} in the completion). Please reduce the length of "
                       "the messages or completion.")
            return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
        message = (f"'max_tokens' or 'max_completion_tokens' is too large: {limit}. This model's maximum context "
                   f"length is {n} tokens and your request has {prompt} input tokens ({limit} > {n} - {prompt}). None")
        return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        if path.rstrip("/") != "/v1/models" or not self.list_models:
            return super().get(path)
        card: dict[str, Any] = {"id": self.model_id or "fake-vlm", "object": "model", "created": 0,
                                "owned_by": "vllm" if self.max_model_len else "openai"}
        if self.max_model_len is not None and self.report_context:
            card.update(root=card["id"], parent=None, max_model_len=self.max_model_len)
        return 200, {"object": "list", "data": [card]}

    # -- answers
    def success(self, request: RecordedRequest, text: str) -> dict[str, Any]:
        prompt = self.prompt_tokens(request)
        limit = request.max_tokens
        if self.max_model_len is not None and limit is None:
            limit = self.max_model_len - prompt  # vLLM's default: what remains of the context
        elif self.max_model_len is not None and self.context_error in CLAMPING_WORDINGS:
            limit = min(limit, self.max_model_len - prompt)  # vLLM 0.33 clamps the limit to the room left
        answer_tokens = 5
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish, reasoning_tokens = "stop", 0
        if self.reasoning:
            reasoning_tokens = self.thinking_tokens
            if limit is not None and limit < self.thinking_tokens + answer_tokens:
                # The budget ran out while thinking: no visible answer, billed up to the limit.
                message["content"], finish = "", "length"
                reasoning_tokens, answer_tokens = limit, 0
        if self.reasoning_field:
            message[self.reasoning_field] = self.reasoning_text
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": answer_tokens + reasoning_tokens,
                                 "total_tokens": prompt + answer_tokens + reasoning_tokens}
        if self.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens, "audio_tokens": 0,
                                                  "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        return self._completion([{"index": 0, "message": message, "finish_reason": finish}], request, usage)

    def fault_body(self, kind: str, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        if kind == "empty":
            return 200, self._completion([], request)
        return 200, self._completion([{"index": 0, "message": {"role": "assistant", "content": None},
                                       "finish_reason": "content_filter"}], request)

    def _completion(self, choices: list[dict[str, Any]], request: RecordedRequest,
                    usage: dict[str, Any] | None = None) -> dict[str, Any]:
        model = request.body.get("model", "fake") if isinstance(request.body, dict) else "fake"
        if usage is None:
            prompt = self.prompt_tokens(request)
            usage = {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": choices, "usage": usage}
