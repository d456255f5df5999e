"""Fake OpenAI-compatible server: POST /v1/chat/completions (as `vllm serve` or OpenAI)."""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.base import FakeServer, RecordedRequest, decode_data_uri


class FakeOpenAIServer(FakeServer):
    """Use `server.base_url` as the client's base URL (it ends with /v1)."""

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

    def success(self, request: RecordedRequest, text: str) -> dict[str, Any]:
        return self._completion([{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}], request)

    def fault_body(self, kind: str, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        if kind == "empty":
            return 200, self._completion([], request)
        return 200, self._completion([{"index": 0, "message": {"role": "assistant", "content": None},
                                       "finish_reason": "content_filter"}], request)

    def _completion(self, choices: list[dict[str, Any]], request: RecordedRequest) -> dict[str, Any]:
        model = request.body.get("model", "fake") if isinstance(request.body, dict) else "fake"
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": choices,
                "usage": {"prompt_tokens": 10 + 100 * len(request.images), "completion_tokens": 5,
                          "total_tokens": 15 + 100 * len(request.images)}}
