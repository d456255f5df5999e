"""`openai:MODEL`: any OpenAI-compatible chat server (OpenAI, `vllm serve`, ...) via AsyncOpenAI.

Images travel as data-URI `image_url` parts. The client's own retries are off (max_retries=0):
the runner retries, so attempts and backoff are counted in one place.
"""

from __future__ import annotations

import base64
from typing import Any

from eval.backends._retry import (
    check_base_url,
    host_of,
    is_retryable_status,
    parse_retry_after,
    resolve_api_key,
    scrub,
)
from eval.types import BackendError, ConfigError, ImagePart, Message, Request, Response

VLLM_HINT = ("if this is a `vllm serve` endpoint, start it with --limit-mm-per-prompt '{\"image\": N}' "
             "(N >= the images sent) and a pixel cap (--mm-processor-kwargs '{\"max_pixels\": ...}')")


def to_openai_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Our Messages -> OpenAI chat messages, text and images in order.

    The one converter for every server or engine that reads the OpenAI chat format (`openai:`,
    and `vllm:` through `LLM.chat`). A text-only message stays a plain string, which every chat
    template reads; images travel as data-URI `image_url` parts.
    """
    converted = []
    for message in messages:
        if not message.images:
            converted.append({"role": message.role, "content": message.text})
            continue
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, ImagePart):
                url = f"data:{part.mime_type};base64,{base64.b64encode(part.data).decode('ascii')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif part:
                parts.append({"type": "text", "text": part})
        converted.append({"role": message.role, "content": parts})
    return converted


class OpenAIChatBackend:
    """Chat completions at temperature 0 with max_tokens and seed."""

    def __init__(self, model: str, *, base_url: str | None = None, timeout: float = 120.0,
                 api_key: str | None = None) -> None:
        try:
            import openai
        except ImportError:
            raise ConfigError("the openai package is not installed: pip install -r requirements.txt") from None
        check_base_url(base_url)
        self.spec = f"openai:{model}"
        self.model = model
        self.base_url = base_url
        self._openai = openai
        self._key = resolve_api_key(("OPENAI_API_KEY",), base_url=base_url, what="openai:", explicit=api_key)
        self.client = openai.AsyncOpenAI(api_key=self._key, base_url=base_url, timeout=timeout, max_retries=0)

    async def generate(self, request: Request) -> Response:
        openai = self._openai
        try:
            # `chat.completions.create` would first walk the whole body (base64 images included)
            # through the SDK's type-driven transform, a no-op for these plain fields that cost
            # about a third of the client's CPU per request; `post` sends the same JSON to the same
            # endpoint with the same auth, errors and typed ChatCompletion result.
            completion = await self.client.post(
                "/chat/completions",
                body={"model": self.model, "messages": to_openai_messages(request.messages),
                      "temperature": request.config.temperature, "max_tokens": request.config.max_tokens,
                      "seed": request.config.seed},
                cast_to=self._openai.types.chat.ChatCompletion,
            )
        except openai.APIStatusError as exc:
            status = exc.status_code
            message = f"HTTP {status} from the model server: {scrub(_short(exc.message), self._key)}"
            if status == 400 and "image" in str(exc.message).lower():
                message += f" ({VLLM_HINT})"
            raise BackendError(message, retryable=is_retryable_status(status), status=status,
                               retry_after=parse_retry_after(exc.response.headers)) from None
        except openai.APITimeoutError:
            raise BackendError("request timed out", retryable=True) from None
        except openai.APIConnectionError as exc:
            raise BackendError(f"cannot reach the model server ({_short(str(exc.__cause__ or exc))})",
                               retryable=True) from None
        except (openai.APIError, ValueError) as exc:  # malformed body: worth another try
            raise BackendError(f"malformed response from the model server ({type(exc).__name__})",
                               retryable=True) from None
        choices = getattr(completion, "choices", None)
        if not choices:
            raise BackendError("the server returned no choices", retryable=True)
        choice = choices[0]
        if choice.finish_reason == "content_filter":
            raise BackendError("content blocked by the provider's filter", retryable=False)
        text = choice.message.content if choice.message is not None else None
        if text is None:
            raise BackendError("the server returned an empty message", retryable=True)
        usage = None
        if completion.usage is not None:
            usage = {"prompt_tokens": completion.usage.prompt_tokens,
                     "completion_tokens": completion.usage.completion_tokens}
        return Response(text=text, usage=usage, finish_reason=choice.finish_reason)

    def describe(self) -> dict[str, Any]:
        return {"backend": "openai", "model": self.model, "base_url_host": host_of(self.base_url),
                "sdk": "openai", "sdk_version": self._openai.__version__}


def _short(text: str) -> str:
    return " ".join(str(text).split())[:200]


def make(model: str, *, base_url: str | None = None, timeout: float = 120.0,
         api_key: str | None = None, **_: Any) -> OpenAIChatBackend:
    """`api_key` overrides the environment for this instance only; it is never recorded."""
    return OpenAIChatBackend(model, base_url=base_url, timeout=timeout, api_key=api_key)
