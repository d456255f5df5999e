"""Fake Gemini API: POST /v1beta/models/{model}:generateContent, as google-genai sends it.

With `thinking_tokens=N` it is a thinking model (gemini-2.5-pro, gemini-3-pro-preview): it thinks N
tokens (at most its thinkingBudget) before answering, and thoughts count against maxOutputTokens: a
limit below thoughts + answer gives finishReason MAX_TOKENS and no text part, with
usageMetadata.thoughtsTokenCount. Like the real API it refuses a thinkingLevel on models before
Gemini 3, and a thinkingBudget together with a thinkingLevel.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.base import FakeServer, RecordedRequest, decode_base64

ANSWER_TOKENS = 5


class FakeGeminiServer(FakeServer):
    """Use `server.url` as `HttpOptions.base_url` (the SDK appends /v1beta/models/...)."""

    def __init__(self, oracle: Any = None, *, thinking_tokens: int = 0) -> None:
        super().__init__(oracle)
        self.thinking_tokens = thinking_tokens

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
        # The API reads proto3 JSON, which takes either spelling; google-genai sends thinking_budget.
        thinking = config.get("thinkingConfig") or config.get("thinking_config") or {}
        request.extra = {"thinking_budget": thinking.get("thinkingBudget", thinking.get("thinking_budget")),
                         "thinking_level": thinking.get("thinkingLevel", thinking.get("thinking_level")),
                         "include_thoughts": thinking.get("includeThoughts", thinking.get("include_thoughts"))}

    def refuse(self, request: RecordedRequest) -> tuple[int, dict[str, Any]] | None:
        budget, level = request.extra["thinking_budget"], request.extra["thinking_level"]
        if budget is not None and level is not None:
            return 400, self.error_body(400, "You can only set only one of thinking budget and thinking level.")
        if level is not None and ":generateContent" in request.path and "gemini-3" not in request.path:
            return 400, self.error_body(400, "Thinking level is not supported for this model.")
        return None

    def _thoughts(self, request: RecordedRequest) -> int:
        budget = request.extra["thinking_budget"]
        if budget is not None and budget >= 0:
            return min(self.thinking_tokens, budget)
        return self.thinking_tokens

    def success(self, request: RecordedRequest, text: str) -> dict[str, Any]:
        prompt = 10 + 258 * len(request.images)
        thoughts, limit = self._thoughts(request), request.max_tokens
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                                     "index": 0}
        answer = ANSWER_TOKENS
        if limit is not None and thoughts + ANSWER_TOKENS > limit:
            # Thinking used the limit: the candidate has no text part at all.
            candidate = {"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}
            thoughts, answer = min(thoughts, limit), 0
        usage: dict[str, Any] = {"promptTokenCount": prompt, "totalTokenCount": prompt + answer + thoughts}
        if answer:
            usage["candidatesTokenCount"] = answer
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "fake"}

    def fault_body(self, kind: str, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        if kind == "empty":
            return 200, {"candidates": [], "usageMetadata": {"promptTokenCount": 10}}
        return 200, {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 10}}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
        return {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}
