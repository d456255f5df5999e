"""`openai:MODEL`: any OpenAI-compatible chat server (OpenAI, `vllm serve`, ...) over plain HTTP,
spoken directly (aiohttp, orjson): the openai SDK's CPU per request slowed whole runs (bench/README.md)."""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
from typing import Any

import orjson
import pybase64

from eval.backends._retry import is_retryable_status, parse_retry_after
from eval.backends.policy import ChatPolicy, error_message, refuse_options, rough_prompt_tokens
from eval.endpoints import host_of, require_http_url, resolve_api_key
from eval.limiter import pacing_from_headers
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

OPENAI_URL = "https://api.openai.com/v1"
# A completion body larger than this is refused unread (an endless or hostile server must not take the
# process's memory); 4 MiB holds any real answer many times over. DININGBENCH_MAX_RESPONSE_BYTES changes it.
MAX_RESPONSE_BYTES = int(os.environ.get("DININGBENCH_MAX_RESPONSE_BYTES") or 4 * 1024 * 1024)
FIRST_REQUEST_WAIT_S = 2.0  # under a tight context: the first answer calibrates the prompt estimate
VLLM_HINT = ("if this is a `vllm serve` endpoint, start it with --limit-mm-per-prompt '{\"image\": N}' "
             "(N >= the images sent) and a pixel cap (--mm-processor-kwargs '{\"max_pixels\": ...}')")


def to_openai_messages(messages: tuple[Message, ...], *, deferred: list[ImagePart] | None = None
                       ) -> list[dict[str, Any]]:
    """Our Messages -> OpenAI chat messages, text and images in order. The one converter for every server or
    engine that reads the OpenAI chat format (`openai:`, and `vllm:` through `LLM.chat`). A text-only message
    stays a plain string, which every chat template reads; images travel as data-URI `image_url` parts. With
    `deferred`, each image's URL is a mark and the image is appended there, for `body_bytes` to write its data
    URI in place."""
    converted: list[dict[str, Any]] = []
    for message in messages:
        if not message.images:
            converted.append({"role": message.role, "content": message.text})
            continue
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, ImagePart):
                if deferred is not None:
                    url = _view_mark(len(deferred))
                    deferred.append(part)
                else:
                    url = _data_uri(part)
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif part:
                parts.append({"type": "text", "text": part})
        converted.append({"role": message.role, "content": parts})
    return converted


def _data_uri(part: ImagePart) -> str:
    # pybase64 (SIMD) encodes a view about 40x faster than the standard library, same text
    return f"data:{part.mime_type};base64,{pybase64.b64encode_as_string(part.data)}"


# Marks a deferred view's place in a body until it is serialized. Random per process, so no text
# a release or a model gives can know it; `body_bytes` still checks each mark is found once.
_MARK = secrets.token_hex(12)


def _view_mark(k: int) -> str:
    return f"\x00{_MARK}:{k}\x00"


def body_bytes(body: dict[str, Any], deferred: list[ImagePart]) -> bytes:
    """The JSON of `body`, its deferred views' data URIs written where their marks are: the same bytes
    as `orjson.dumps` of the body with the URIs in it, without orjson scanning and copying the base64
    text (for five 20 KB views about 8x faster: 15 against 125 microseconds)."""
    raw = orjson.dumps(body)
    if not deferred:
        return raw
    pieces, rest = [], raw
    for k, part in enumerate(deferred):
        mark = orjson.dumps(_view_mark(k))
        before, found, rest = rest.partition(mark)
        if not found or mark in before or mark in rest:  # never, short of a text that holds the mark
            return orjson.dumps(_with_uris(body, deferred))
        pieces += [before, orjson.dumps(f"data:{part.mime_type};base64,")[:-1], pybase64.b64encode(part.data), b'"']
    pieces.append(rest)
    return b"".join(pieces)


def _with_uris(body: dict[str, Any], deferred: list[ImagePart]) -> dict[str, Any]:
    """`body` with the deferred views' data URIs in its image parts, in order (the slow path of `body_bytes`)."""
    views = iter(deferred)
    messages = [{**m, "content": [{**p, "image_url": {"url": _data_uri(next(views))}} if p.get("type") == "image_url"
                                  else p for p in m["content"]]} if isinstance(m.get("content"), list) else m
                for m in body["messages"]]
    return {**body, "messages": messages}


class OpenAIChatBackend:
    """POST {base_url}/chat/completions with what the request policy says (temperature 0, a limit, seed)."""

    def __init__(self, model: str, options: BackendOptions | None = None) -> None:
        options = options or BackendOptions()
        base_url, timeout, api_key = options.base_url, options.timeout, options.api_key
        try:
            import aiohttp
        except ImportError as exc:
            raise ConfigError(f"the {exc.name} package is not installed: pip install -r requirements.txt") from None
        # Like the openai SDK: --base-url, else OPENAI_BASE_URL (how a Space operator points its
        # models at a `vllm serve`), else OpenAI. A key may be left out only with --base-url.
        explicit_url = base_url
        base_url = base_url or os.environ.get("OPENAI_BASE_URL", "").strip() or None
        require_http_url(base_url)
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
        self._tls = self._url.lower().startswith("https:") or (self._proxy or "").lower().startswith("https:")
        self._session: Any = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        # A self-hosted server (vllm serve...) is asked for its context once; OpenAI itself is not.
        local = base_url is not None and host_of(base_url) != "api.openai.com"
        self.policy = ChatPolicy(model, options.generation, local=local)
        self._models_url = (base_url or OPENAI_URL).rstrip("/") + "/models"
        self._probed = not local
        self._probe: asyncio.Task[None] | None = None
        self._probe_loop: asyncio.AbstractEventLoop | None = None
        self._settled = False  # no request needs to wait for a first answer any more
        self._first: asyncio.Event | None = None
        self._first_loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> Any:
        """This event loop's session: connections are bound to the loop that opened them."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            aiohttp = self._aiohttp
            self._session = aiohttp.ClientSession(
                # The runner bounds concurrency. Building a verifying TLS context reads the CA bundle
                # (tens of ms): only for a server or proxy reached over https; plain http never uses one.
                connector=aiohttp.TCPConnector(limit=0, ssl=_ssl_context() if self._tls else True),
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
        """One answer, sent at once: nothing waits for another request's answer, except under a tight
        context. A self-hosted server is asked its context first (one GET, shared by the requests that
        arrive meanwhile); OpenAI's own API is not asked. A refusal is adapted by the policy and only
        the refused request is sent again (`_generate`).

        Under a tight reported context (the limit would not fit a prompt several times the rough
        estimate) the first request goes ahead alone for a moment: its answer calibrates the estimate
        the limit is fitted with. That wait is short and bounded: it counts against the attempt timeout."""
        if not self._probed:
            loop = asyncio.get_running_loop()
            if self._probe is None or self._probe_loop is not loop:  # a Task belongs to one event loop
                self._probe, self._probe_loop = loop.create_task(self._probe_context()), loop
            await asyncio.shield(self._probe)  # one waiter cancelled must not cancel the others' probe
        if self._settled:
            return await self._generate(request)
        if not (self.policy.local and self.policy.context is not None) or self.policy.limit_fits_unseen(
                request.config.max_tokens, rough_prompt_tokens(request.messages)):
            self._settled = True  # no context reported (nothing to calibrate), or room to spare
            return await self._generate(request)
        loop = asyncio.get_running_loop()
        first = self._first
        if first is None or self._first_loop is not loop:  # an Event belongs to one event loop
            first = self._first = asyncio.Event()
            self._first_loop = loop
            try:
                return await self._generate(request)
            finally:
                self._settled = True
                first.set()
        try:
            await asyncio.wait_for(first.wait(), timeout=min(FIRST_REQUEST_WAIT_S, self.timeout / 4))
        except TimeoutError:
            pass  # a slow first answer (a model thinking): go ahead with the estimate as it is
        return await self._generate(request)

    async def check(self) -> None:
        """Start-up check the harness may call before a run: ConfigError (one line) when the asked
        --max-tokens cannot fit the server's context. Costs one GET {base_url}/models on a local server."""
        await self._probe_context()
        if self.policy.fatal:
            raise ConfigError(self.policy.fatal)

    async def _probe_context(self) -> None:
        """Ask a self-hosted server once for the model's context (vLLM reports `max_model_len`)."""
        if self._probed:
            return
        aiohttp, orjson = self._aiohttp, self._orjson
        try:
            async with self._client().get(self._models_url, headers=self._headers, proxy=self._proxy,
                                          allow_redirects=False,
                                          timeout=aiohttp.ClientTimeout(total=min(self.timeout, 10.0))) as reply:
                if reply.status != 200:
                    return
                listing = orjson.loads(await read_bounded(reply, MAX_RESPONSE_BYTES))
        except (TimeoutError, ValueError, aiohttp.ClientError, orjson.JSONDecodeError, BackendError):
            return  # no listing: the limit is sent as asked, and a context refusal is adapted
        finally:
            self._probed = True
        models = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(models, list):
            return
        entries = [m for m in models if isinstance(m, dict)]
        mine = [m for m in entries if m.get("id") == self.model] or (entries if len(entries) == 1 else [])
        context = mine[0].get("max_model_len") if mine else None
        if isinstance(context, int) and not isinstance(context, bool):
            self.policy.set_context(context, "GET /models max_model_len")

    async def _generate(self, request: Request) -> Response:
        if self.policy.fatal:
            raise BackendError(self.policy.fatal, retryable=False)
        views: list[ImagePart] = []
        messages = to_openai_messages(request.messages, deferred=views)
        prompt_size = rough_prompt_tokens(request.messages)
        limit: int | None = None
        for _ in range(6):  # each pass adapts one refused field; a model refuses at most a few
            body, version = self.policy.body(self.model, messages, request.config, prompt_size, limit)
            status, headers, payload = await self._post(body_bytes(body, views))
            if status != 400:
                break
            verdict, detail = self.policy.adapt(payload, version, prompt_size, request.config.max_tokens)
            if verdict == "fail":
                if self.policy.fatal:  # a setting the server will never take: the same line for every item
                    raise BackendError(self.policy.fatal, retryable=False)
                raise BackendError(detail or self._http_error(status, payload), retryable=False, status=status)
            if verdict != "retry":
                break
            self.policy.count_resent()
            limit = detail if isinstance(detail, int) else None
        retry_after = parse_retry_after(headers) if status >= 400 else None
        if not 200 <= status < 300:
            raise BackendError(self._http_error(status, payload), retryable=is_retryable_status(status),
                               status=status, retry_after=retry_after,
                               pacing=pacing_from_headers(headers, retry_after))
        response = self._response(payload, prompt_size)
        response.pacing = pacing_from_headers(headers)
        return response

    async def _post(self, body: bytes) -> tuple[int, Any, bytes]:
        aiohttp = self._aiohttp
        try:
            # Never follow a redirect: a 307 would re-send the request (images, key) to wherever the
            # server points, and no chat API redirects a completion.
            async with self._client().post(self._url, data=body, headers=self._headers,
                                           proxy=self._proxy, allow_redirects=False) as reply:
                if 300 <= reply.status < 400:
                    raise BackendError(f"HTTP {reply.status}: the server redirected (to "
                                       f"{host_of(reply.headers.get('Location')) or 'elsewhere'}); not followed",
                                       retryable=False, status=reply.status)
                return reply.status, reply.headers, await read_bounded(reply, MAX_RESPONSE_BYTES)
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise BackendError("request timed out", retryable=True, timed_out=True) from None
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-body, DNS, TLS, proxy
            # Scrub before shortening: a cut through the key would leave part of it behind.
            raise BackendError(f"cannot reach the model server ({_short(redact(_describe(exc), self._key))})",
                               retryable=True, unreachable=isinstance(exc, aiohttp.ClientConnectorError)) from None

    def _http_error(self, status: int, payload: bytes) -> str:
        message = f"HTTP {status} from the model server: {_short(redact(error_message(payload), self._key))}"
        if status == 400 and "image" in message[len(f"HTTP {status}"):].lower():
            message += f" ({VLLM_HINT})"
        return message

    def _response(self, payload: bytes, prompt_size: int) -> Response:
        """A completion -> Response: the answer text only; a cut answer is a truncated Response. Reasoning
        that a server returns apart (vLLM's `reasoning_content` / `reasoning` with a reasoning parser) is not
        the answer: it is counted (`reasoning_tokens`, when the server says) and left out of the text, so
        parsers read the answer alone. Reasoning inline in the content (`<think>...</think>` without a parser)
        stays in the text; parsers drop it themselves."""
        orjson = self._orjson
        try:
            completion = orjson.loads(payload)
            choices = completion.get("choices")
            choice = choices[0] if choices else None
            message_obj = choice.get("message") if choice else None
            finish = choice.get("finish_reason") if choice else None
            text = message_obj.get("content") if isinstance(message_obj, dict) else None
            reasoning = (message_obj.get("reasoning_content") or message_obj.get("reasoning")
                         if isinstance(message_obj, dict) else None)
            usage = completion.get("usage")
        except (orjson.JSONDecodeError, AttributeError, TypeError, KeyError, IndexError) as exc:
            raise BackendError(f"malformed response from the model server ({type(exc).__name__})",
                               retryable=True) from None
        if not choices:
            raise BackendError("the server returned no choices", retryable=True)
        if finish == "content_filter":
            raise BackendError("content blocked by the provider's filter", retryable=False)
        if not isinstance(text, str):
            # Thinking that used the whole limit (finish "length"), or a model that never closed its
            # thinking: asking again would give the same (greedy) answer, so it is an empty answer.
            if finish != "length" and not reasoning:
                raise BackendError("the server returned an empty message", retryable=True)
            text = ""
        tokens: dict[str, int] = {}
        if isinstance(usage, dict):
            tokens = {k: usage[k] for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)}
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
                tokens["reasoning_tokens"] = details["reasoning_tokens"]
            self.policy.learn_prompt_size(prompt_size, tokens.get("prompt_tokens"))
        return Response(text=text, usage=tokens or None, finish_reason=finish)

    def describe(self) -> dict[str, Any]:
        return {"backend": "openai", "model": self.model, "base_url_host": host_of(self.base_url),
                "client": "aiohttp", "client_version": self._aiohttp.__version__,
                "request_policy": self.policy.describe()}


@functools.cache
def _ssl_context() -> Any:
    """TLS verified against SSL_CERT_FILE / SSL_CERT_DIR when set (a company's CA behind a TLS proxy),
    else certifi's bundle (as requests and httpx do), else the system's; built once per process."""
    import ssl

    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()  # OpenSSL reads both variables
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def _proxy_for(url: str) -> str | None:
    """HTTPS_PROXY / HTTP_PROXY for this URL unless NO_PROXY exempts it, looked up once, not per request."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    return proxy if proxy and not urllib.request.proxy_bypass(parts.hostname or "") else None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def read_bounded(reply: Any, limit: int) -> bytes:
    """The body, or a non-retryable BackendError once it passes `limit` bytes (read in chunks, so
    an endless body costs at most `limit` of memory)."""
    declared = reply.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise BackendError(f"the server's answer is {int(declared):,} bytes, over the {limit:,}-byte limit; "
                           "not read", retryable=False)
    chunks, size = [], 0
    async for chunk in reply.content.iter_chunked(65536):
        size += len(chunk)
        if size > limit:
            raise BackendError(f"the server's answer passed the {limit:,}-byte limit; not read", retryable=False)
        chunks.append(chunk)
    return b"".join(chunks)


def _short(text: str) -> str:
    return " ".join(str(text).split())[:200]


TRAITS = BackendTraits(key_env=("OPENAI_API_KEY",), public_endpoint=OPENAI_URL, packages=("aiohttp", "orjson"))


def make(model: str, options: BackendOptions) -> OpenAIChatBackend:
    """`options.api_key` overrides the environment for this instance only; it is never recorded.
    `options.generation` is the run's config: a local server's context is checked against its limit at
    start-up (`check`), and a setting the API cannot take is refused here."""
    refuse_options(f"openai:{model}", reasoning_effort=options.generation.reasoning_effort,
                   thinking_budget=options.generation.thinking_budget, usable=("reasoning_effort",))
    return OpenAIChatBackend(model, options)
