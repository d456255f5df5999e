"""`gemini:MODEL`: Google's Gemini API through google-genai (`client.aio.models.generate_content`), images
as inline bytes parts, the SDK's retries off (attempts=1: the runner retries)."""

from __future__ import annotations

import re
from typing import Any

from eval.backends._retry import is_retryable_status, parse_retry_after, parse_retry_delay
from eval.backends.policy import EFFORT_HINT, refuse_options
from eval.endpoints import host_of, require_http_url, resolve_api_key
from eval.limiter import Pacing
from eval.redact import redact
from eval.types import (
    BackendError,
    BackendOptions,
    BackendTraits,
    ConfigError,
    ImagePart,
    Message,
    Request,
    Response,
)

# Finish reasons: an answer ended normally (STOP) or at the limit (MAX_TOKENS); a few say nothing about the
# content, so asking again may answer. Every other reason of the installed SDK's `FinishReason` enum
# (SAFETY, RECITATION, IMAGE_PROHIBITED_CONTENT, MODEL_ARMOR, ... and those a newer SDK adds) ends the answer
# for a reason asking again does not change: it is recorded as blocked, never retried as "empty".
# CONTINUATION is MAX_TOKENS for a response that could be continued: a truncated answer. So is a limit
# used up by thinking (MAX_TOKENS and no text), never an error.
TRUNCATED_FINISH = frozenset({"MAX_TOKENS", "CONTINUATION"})
ANSWERED_FINISH = frozenset({"STOP"}) | TRUNCATED_FINISH
RETRYABLE_FINISH = frozenset({"FINISH_REASON_UNSPECIFIED", "OTHER", "MALFORMED_RESPONSE"})


def is_blocking_finish(finish: str | None) -> bool:
    """Whether a finish reason ends the answer for good: any reason but the normal and transient ones,
    including one the installed SDK does not know yet.

    >>> [is_blocking_finish(f) for f in ("STOP", "MAX_TOKENS", "OTHER", None, "SAFETY", "MODEL_ARMOR", "NEW_REASON")]
    [False, False, False, False, True, True, True]
    """
    return finish is not None and finish not in ANSWERED_FINISH and finish not in RETRYABLE_FINISH
FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "CONTINUATION": "length"}  # Gemini's words -> the Response contract's
ANSWER_ROOM = 1024  # tokens a fixed thinking budget must leave under max_output_tokens for the answer
_GEMINI_3 = re.compile(r"^gemini-3")  # thinking levels (minimal/low/medium/high) instead of budgets


def thinking_config(model: str, *, thinking_budget: int | None, reasoning_effort: str | None,
                    max_tokens: int | None) -> dict[str, Any]:
    """The ThinkingConfig fields to send, or {} to leave thinking at the model's default. `thinking_budget`
    (tokens; -1 dynamic, 0 off) goes as is. `reasoning_effort` becomes Gemini 3's `thinking_level` (Google's
    own OpenAI-compatible endpoint maps it so); earlier models have no levels. Thinking counts against
    max_output_tokens, so a fixed budget must leave room to answer. Raises ConfigError (one line) for what the
    API would refuse.

    >>> thinking_config("gemini-3-pro-preview", thinking_budget=None, reasoning_effort="low", max_tokens=16384)
    {'thinking_level': 'LOW'}
    """
    name = model.rsplit("/", 1)[-1].lower()
    if reasoning_effort is not None and thinking_budget is not None:
        raise ConfigError("gemini: give --reasoning-effort (Gemini 3's thinking level) or --thinking-budget, not both")
    if reasoning_effort is not None:
        if not _GEMINI_3.match(name):
            raise ConfigError(f"{EFFORT_HINT}; gemini:{model} has no thinking levels (use --thinking-budget)")
        return {"thinking_level": reasoning_effort.upper()}
    if thinking_budget is None:
        return {}
    if thinking_budget > 0 and max_tokens is not None and max_tokens < thinking_budget + ANSWER_ROOM:
        raise ConfigError(f"--thinking-budget {thinking_budget} leaves no room to answer under --max-tokens "
                          f"{max_tokens} (Gemini counts thinking against the limit): raise --max-tokens to at "
                          f"least {thinking_budget + ANSWER_ROOM} or lower the budget")
    return {"thinking_budget": thinking_budget}


def to_gemini_contents(messages: tuple[Message, ...], types: Any) -> tuple[list[Any], str | None]:
    """One converter: our Messages -> (google-genai Contents, system instruction)."""
    contents, system = [], None
    for message in messages:
        if message.role == "system":
            system = message.text
            continue
        parts = [types.Part.from_bytes(data=p.data, mime_type=p.mime_type) if isinstance(p, ImagePart)
                 else types.Part.from_text(text=p) for p in message.content]
        contents.append(types.Content(role="model" if message.role == "assistant" else "user", parts=parts))
    return contents, system


def _name(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "name", value)).rsplit(".", 1)[-1]


class GeminiBackend:
    """generateContent at temperature 0 with max_output_tokens, seed and the thinking configuration."""

    def __init__(self, model: str, options: BackendOptions | None = None) -> None:
        options = options or BackendOptions()
        base_url, timeout, api_key, asked = options.base_url, options.timeout, options.api_key, options.generation
        try:
            from google import genai
            from google.genai import errors, types
        except ImportError:
            raise ConfigError("the google-genai package is not installed: pip install -r requirements.txt") from None
        require_http_url(base_url)
        self.spec = f"gemini:{model}"
        self.model = model
        self.base_url = base_url
        self._types, self._errors, self._version = types, errors, getattr(genai, "__version__", None)
        self._key = resolve_api_key(("GEMINI_API_KEY", "GOOGLE_API_KEY"), base_url=base_url, what="gemini:", explicit=api_key)
        # No redirects, with either of the SDK's HTTP clients: a 307 would re-send the request and its
        # x-goog-api-key header to wherever the server points.
        http = types.HttpOptions(base_url=base_url, timeout=int(timeout * 1000),
                                 retry_options=types.HttpRetryOptions(attempts=1),
                                 client_args={"follow_redirects": False},
                                 async_client_args={"allow_redirects": False, "follow_redirects": False})
        self.client = genai.Client(api_key=self._key, http_options=http)
        self._thinking = thinking_config(model, thinking_budget=asked.thinking_budget,
                                         reasoning_effort=asked.reasoning_effort, max_tokens=asked.max_tokens)
        if "thinking_level" in self._thinking and "thinking_level" not in types.ThinkingConfig.model_fields:
            raise ConfigError(f"google-genai {self._version} has no thinking_level: pip install -U google-genai")
        self._max_tokens = asked.max_tokens
        self._requested: dict[str, Any] = {}
        self._truncated = 0

    async def generate(self, request: Request) -> Response:
        types = self._types
        contents, system = to_gemini_contents(request.messages, types)
        asked = request.config
        try:
            thinking = thinking_config(self.model, thinking_budget=asked.thinking_budget,
                                       reasoning_effort=asked.reasoning_effort, max_tokens=asked.max_tokens)
        except ConfigError as exc:
            raise BackendError(str(exc), retryable=False) from None
        if not self._requested:
            self._requested = {"temperature": asked.temperature, "max_tokens": asked.max_tokens, "seed": asked.seed,
                               **thinking}
        config = types.GenerateContentConfig(
            temperature=asked.temperature, max_output_tokens=asked.max_tokens, seed=asked.seed,
            system_instruction=system, thinking_config=types.ThinkingConfig(**thinking) if thinking else None)
        try:
            result = await self.client.aio.models.generate_content(model=self.model, contents=contents, config=config)
        except self._errors.APIError as exc:
            status = exc.code if isinstance(exc.code, int) else None
            retry_after = parse_retry_after(getattr(getattr(exc, "response", None), "headers", None))
            if retry_after is None:
                retry_after = parse_retry_delay(str(exc.details))
            if status is not None and 300 <= status < 400:
                raise BackendError(f"HTTP {status}: the server redirected; not followed", retryable=False,
                                   status=status) from None
            # A quota error (429 RESOURCE_EXHAUSTED) names its wait in google.rpc.RetryInfo: the endpoint pauses for it.
            raise BackendError(f"HTTP {status} from the Gemini API: {_short(redact(exc.message or '', self._key))}",
                               retryable=is_retryable_status(status), status=status, retry_after=retry_after,
                               pacing=Pacing(retry_after) if retry_after is not None else None) from None
        except TimeoutError:
            raise BackendError("request timed out", retryable=True, timed_out=True) from None
        except (OSError, ConnectionError) as exc:
            raise BackendError(f"cannot reach the Gemini API ({type(exc).__name__})", retryable=True,
                               unreachable=True) from None
        except Exception as exc:  # transport errors of aiohttp/httpx, malformed bodies
            kind = type(exc).__name__
            if "Timeout" in kind:
                raise BackendError("request timed out", retryable=True, timed_out=True) from None
            if kind in ("ConnectError", "ClientConnectorError", "ClientConnectorDNSError"):  # no connection made
                raise BackendError(f"cannot reach the Gemini API ({kind})", retryable=True, unreachable=True) from None
            raise BackendError(f"bad or no response from the Gemini API ({kind})", retryable=True) from None
        return self._response(result)

    def _response(self, result: Any) -> Response:
        feedback = getattr(result, "prompt_feedback", None)
        if feedback is not None and getattr(feedback, "block_reason", None):
            raise BackendError(f"content blocked ({_name(feedback.block_reason)})", retryable=False)
        candidates = getattr(result, "candidates", None)
        if not candidates:
            raise BackendError("the Gemini API returned no candidates", retryable=True)
        finish = _name(candidates[0].finish_reason)
        if is_blocking_finish(finish):
            raise BackendError(f"content blocked (finish reason {finish})", retryable=False)
        content = candidates[0].content
        texts = [p.text for p in (content.parts or []) if getattr(p, "text", None) and not getattr(p, "thought", False)] \
            if content is not None else []
        if not texts and finish not in TRUNCATED_FINISH:
            raise BackendError("the Gemini API returned an empty answer", retryable=True)
        if finish in TRUNCATED_FINISH:
            self._truncated += 1  # thinking (or the answer) used the limit: asking again ends the same way
        meta = getattr(result, "usage_metadata", None)
        usage = None
        if meta is not None:
            thoughts = meta.thoughts_token_count
            usage = {"prompt_tokens": meta.prompt_token_count or 0,
                     "completion_tokens": (meta.candidates_token_count or 0) + (thoughts or 0)}
            if thoughts is not None:
                usage["reasoning_tokens"] = thoughts
        return Response(text="".join(texts), usage=usage, finish_reason=FINISH.get(finish or "", finish))

    def describe(self) -> dict[str, Any]:
        asked = self._requested or {"max_tokens": self._max_tokens, **self._thinking}
        limit = asked.get("max_tokens")
        policy: dict[str, Any] = {
            "token_limit_param": "max_output_tokens (thinking and answer together)",
            "token_limit": limit if limit is not None else "none sent (the model's own maximum)",
            "temperature": asked.get("temperature", 0.0),
            "seed": asked.get("seed", "as requested"),
            "thinking_budget": asked.get("thinking_budget"),
            "thinking_level": asked.get("thinking_level"),
        }
        if "thinking_budget" not in asked and "thinking_level" not in asked:
            policy["thinking"] = "the model's default"
        if self._truncated:
            policy["truncated_by_limit"] = self._truncated
        return {"backend": "gemini", "model": self.model, "base_url_host": host_of(self.base_url),
                "sdk": "google-genai", "sdk_version": self._version, "request_policy": policy}


def _short(text: str) -> str:
    return " ".join(str(text).split())[:200]


TRAITS = BackendTraits(closed_weights=True, key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
                       public_endpoint="https://generativelanguage.googleapis.com/", packages=("google-genai",))


def make(model: str, options: BackendOptions) -> GeminiBackend:
    """`options.api_key` overrides the environment for this instance only; it is never recorded.
    `reasoning_effort` is accepted for Gemini 3 only (as its thinking level); thinking settings the API would
    refuse are refused here, before any request."""
    asked = options.generation
    refuse_options(f"gemini:{model}", reasoning_effort=asked.reasoning_effort, thinking_budget=asked.thinking_budget,
                   usable=("thinking_budget", "reasoning_effort"))
    return GeminiBackend(model, options)
