"""Fake Gemini API: POST /v1beta/models/{model}:generateContent, as google-genai sends it."""

from __future__ import annotations

from typing import Any

from tests.fakes.base import FakeServer, RecordedRequest, decode_base64


class FakeGeminiServer(FakeServer):
    """Use `server.url` as `HttpOptions.base_url` (the SDK appends /v1beta/models/...)."""

    def parse(self, path: str, body: Any, request: RecordedRequest) -> None:
        texts, images = [], []
        for content in body.get("contents", []):
            for part in content.get("parts", []):
                if "text" in part:
                    texts.append(part["text"])
                inline = part.get("inlineData") or part.get("inline_data")
                if inline:
                    images.append(decode_base64(inline["data"]))
        config = body.get("generationConfig") or body.get("generation_config") or {}
        request.prompt = "".join(texts)
        request.images = images
        request.temperature = config.get("temperature")
        request.max_tokens = config.get("maxOutputTokens", config.get("max_output_tokens"))
        request.seed = config.get("seed")

    def success(self, request: RecordedRequest, text: str) -> dict[str, Any]:
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": {"promptTokenCount": 10 + 258 * len(request.images), "candidatesTokenCount": 5,
                                  "totalTokenCount": 15 + 258 * len(request.images)},
                "modelVersion": "fake"}

    def fault_body(self, kind: str, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        if kind == "empty":
            return 200, {"candidates": [], "usageMetadata": {"promptTokenCount": 10}}
        return 200, {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 10}}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
        return {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}
