"""`openai:MODEL`: any OpenAI-compatible chat server (OpenAI, `vllm serve`, ...) over plain HTTP.

The chat-completions wire format is small and stable, so this backend speaks it directly with
aiohttp (one keep-alive connection pool per event loop) and orjson. The openai SDK cost 2.5-3.5 ms
of CPU per request (request and response models, an httpx connection pool scanned on every
request): at concurrency 64 against a 100 ms server that alone made a run 1.6x its ideal time
(`bench.concurrency`); this client costs about 0.4 ms. What the SDK gave is kept: Bearer auth
(`OPENAI_API_KEY`), `OPENAI_BASE_URL` when there is no `--base-url`, the `OPENAI_ORG_ID` /
`OPENAI_PROJECT_ID` headers, proxies from the environment, TLS verified against SSL_CERT_FILE or
certifi's CA bundle, the server's own error message, `Retry-After`. run.json records the host
that answered, wherever it came from.

Images travel as data-URI `image_url` parts. The runner retries (one place counts attempts and
backoff), so this client never does.
"""

from __future__ import annotations

import asyncio
import base64
import os
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

OPENAI_URL = "https://api.openai.com/v1"
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
    """POST {base_url}/chat/completions at temperature 0 with max_tokens and seed."""

    def __init__(self, model: str, *, base_url: str | None = None, timeout: float = 120.0,
                 api_key: str | None = None) -> None:
        try:
            import aiohttp
            import orjson
        except ImportError as exc:
            raise ConfigError(f"the {exc.name} package is not installed: pip install -r requirements.txt") from None
        # Like the openai SDK: --base-url, else OPENAI_BASE_URL (how a Space operator points its
        # models at a `vllm serve`), else OpenAI. A key may be left out only with --base-url.
        explicit_url = base_url
        base_url = base_url or os.environ.get("OPENAI_BASE_URL", "").strip() or None
        check_base_url(base_url)
        self.spec = f"openai:{model}"
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self._aiohttp, self._orjson = aiohttp, orjson
        self._key = resolve_api_key(("OPENAI_API_KEY",), base_url=explicit_url, what="openai:", explicit=api_key)
        self._url = (base_url or OPENAI_URL).rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {self._key}", "Content-Type": "application/json",
                         "Accept": "application/json"}
        for header, name in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if value := os.environ.get(name, "").strip():
                self._headers[header] = value
        self._proxy = _proxy_for(self._url)
        self._session: Any = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> Any:
        """This event loop's session: connections are bound to the loop that opened them."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            aiohttp = self._aiohttp
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=_ssl_context()),  # the runner bounds concurrency
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=self.timeout),
            )
            self._session_loop = loop
        return self._session

    async def aclose(self) -> None:
        """Close this loop's connections (the runner calls it when a run's event loop is done)."""
        session, self._session = self._session, None
        if session is not None and not session.closed and self._session_loop is asyncio.get_running_loop():
            await session.close()

    async def generate(self, request: Request) -> Response:
        aiohttp, orjson = self._aiohttp, self._orjson
        body = orjson.dumps({"model": self.model, "messages": to_openai_messages(request.messages),
                             "temperature": request.config.temperature, "max_tokens": request.config.max_tokens,
                             "seed": request.config.seed})
        try:
            async with self._client().post(self._url, data=body, headers=self._headers, proxy=self._proxy) as reply:
                payload = await reply.read()
                status, headers = reply.status, reply.headers
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise BackendError("request timed out", retryable=True) from None
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-body, DNS, TLS, proxy
            # Scrub before shortening: a cut through the key would leave part of it behind.
            raise BackendError(f"cannot reach the model server ({_short(scrub(_describe(exc), self._key))})",
                               retryable=True) from None
        if not 200 <= status < 300:
            message = f"HTTP {status} from the model server: {_short(scrub(_error_message(payload), self._key))}"
            if status == 400 and "image" in message[len(f"HTTP {status}"):].lower():
                message += f" ({VLLM_HINT})"
            raise BackendError(message, retryable=is_retryable_status(status), status=status,
                               retry_after=parse_retry_after(headers))
        try:
            completion = orjson.loads(payload)
            choices = completion.get("choices")
            choice = choices[0] if choices else None
            message_obj = choice.get("message") if choice else None
            finish = choice.get("finish_reason") if choice else None
            text = message_obj.get("content") if isinstance(message_obj, dict) else None
            usage = completion.get("usage")
        except (orjson.JSONDecodeError, AttributeError, TypeError, KeyError, IndexError) as exc:
            raise BackendError(f"malformed response from the model server ({type(exc).__name__})",
                               retryable=True) from None
        if not choices:
            raise BackendError("the server returned no choices", retryable=True)
        if finish == "content_filter":
            raise BackendError("content blocked by the provider's filter", retryable=False)
        if not isinstance(text, str):
            raise BackendError("the server returned an empty message", retryable=True)
        tokens = None
        if isinstance(usage, dict):
            tokens = {k: usage[k] for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)}
        return Response(text=text, usage=tokens or None, finish_reason=finish)

    def describe(self) -> dict[str, Any]:
        return {"backend": "openai", "model": self.model, "base_url_host": host_of(self.base_url),
                "client": "aiohttp", "client_version": self._aiohttp.__version__}


_SSL: Any = None


def _ssl_context() -> Any:
    """TLS verified against SSL_CERT_FILE / SSL_CERT_DIR when set (a company's CA behind a TLS proxy),
    else certifi's bundle (as requests and httpx do), else the system's."""
    global _SSL
    if _SSL is None:
        import ssl

        if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
            _SSL = ssl.create_default_context()  # OpenSSL reads both variables
        else:
            try:
                import certifi

                _SSL = ssl.create_default_context(cafile=certifi.where())
            except ImportError:
                _SSL = ssl.create_default_context()
    return _SSL


def _proxy_for(url: str) -> str | None:
    """HTTPS_PROXY / HTTP_PROXY for this URL unless NO_PROXY exempts it, looked up once, not per request."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _error_message(payload: bytes) -> str:
    """The server's own words: OpenAI's {"error": {"message"}}, vLLM's {"message"}, or the text."""
    import json

    try:
        data = json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", "replace") or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for key in ("message", "detail", "error"):
            if data.get(key):
                return str(data[key])
    return str(data)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _short(text: str) -> str:
    return " ".join(str(text).split())[:200]


def make(model: str, *, base_url: str | None = None, timeout: float = 120.0,
         api_key: str | None = None, **_: Any) -> OpenAIChatBackend:
    """`api_key` overrides the environment for this instance only; it is never recorded."""
    return OpenAIChatBackend(model, base_url=base_url, timeout=timeout, api_key=api_key)
