"""`gemini:MODEL`: Google's Gemini API through google-genai (`client.aio.models.generate_content`).

Images travel as inline bytes parts. `--base-url` sets `HttpOptions.base_url` (a proxy, or a
local server in tests). The SDK's retries are off (attempts=1): the runner retries.
"""

from __future__ import annotations

from typing import Any

from eval.backends._retry import (
    check_base_url,
    host_of,
    is_retryable_status,
    parse_retry_after,
    parse_retry_delay,
    resolve_api_key,
    scrub,
)
from eval.types import BackendError, ConfigError, ImagePart, Message, Request, Response

BLOCKING_FINISH = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY"}


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
    if value is None:
        return None
    return str(getattr(value, "name", value)).rsplit(".", 1)[-1]


class GeminiBackend:
    """generateContent at temperature 0 with max_output_tokens and seed."""

    def __init__(self, model: str, *, base_url: str | None = None, timeout: float = 120.0,
                 api_key: str | None = None) -> None:
        try:
            from google import genai
            from google.genai import errors, types
        except ImportError:
            raise ConfigError("the google-genai package is not installed: pip install -r requirements.txt") from None
        check_base_url(base_url)
        self.spec = f"gemini:{model}"
        self.model = model
        self.base_url = base_url
        self._types, self._errors, self._version = types, errors, getattr(genai, "__version__", None)
        self._key = resolve_api_key(("GEMINI_API_KEY", "GOOGLE_API_KEY"), base_url=base_url, what="gemini:", explicit=api_key)
        options = types.HttpOptions(base_url=base_url, timeout=int(timeout * 1000),
                                    retry_options=types.HttpRetryOptions(attempts=1))
        self.client = genai.Client(api_key=self._key, http_options=options)

    async def generate(self, request: Request) -> Response:
        types = self._types
        contents, system = to_gemini_contents(request.messages, types)
        config = types.GenerateContentConfig(
            temperature=request.config.temperature, max_output_tokens=request.config.max_tokens,
            seed=request.config.seed, system_instruction=system)
        try:
            result = await self.client.aio.models.generate_content(model=self.model, contents=contents, config=config)
        except self._errors.APIError as exc:
            status = exc.code if isinstance(exc.code, int) else None
            retry_after = parse_retry_after(getattr(getattr(exc, "response", None), "headers", None))
            if retry_after is None:
                retry_after = parse_retry_delay(str(exc.details))
            raise BackendError(f"HTTP {status} from the Gemini API: {_short(scrub(exc.message or '', self._key))}",
                               retryable=is_retryable_status(status), status=status,
                               retry_after=retry_after) from None
        except TimeoutError:
            raise BackendError("request timed out", retryable=True) from None
        except (OSError, ConnectionError) as exc:
            raise BackendError(f"cannot reach the Gemini API ({type(exc).__name__})", retryable=True) from None
        except Exception as exc:  # transport errors of aiohttp/httpx, malformed bodies
            kind = type(exc).__name__
            if "Timeout" in kind:
                raise BackendError("request timed out", retryable=True) from None
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
        if finish in BLOCKING_FINISH:
            raise BackendError(f"content blocked (finish reason {finish})", retryable=False)
        content = candidates[0].content
        texts = [p.text for p in (content.parts or []) if getattr(p, "text", None) and not getattr(p, "thought", False)] \
            if content is not None else []
        if not texts:
            raise BackendError("the Gemini API returned an empty answer", retryable=True)
        meta = getattr(result, "usage_metadata", None)
        usage = None
        if meta is not None:
            usage = {"prompt_tokens": meta.prompt_token_count or 0,
                     "completion_tokens": meta.candidates_token_count or 0}
        return Response(text="".join(texts), usage=usage, finish_reason=finish)

    def describe(self) -> dict[str, Any]:
        return {"backend": "gemini", "model": self.model, "base_url_host": host_of(self.base_url),
                "sdk": "google-genai", "sdk_version": self._version}


def _short(text: str) -> str:
    return " ".join(str(text).split())[:200]


def make(model: str, *, base_url: str | None = None, timeout: float = 120.0,
         api_key: str | None = None, **_: Any) -> GeminiBackend:
    """`api_key` overrides the environment for this instance only; it is never recorded."""
    return GeminiBackend(model, base_url=base_url, timeout=timeout, api_key=api_key)
