"""A deliberately minimal chat client (aiohttp, no SDK) that isolates the runner's own cost.

Not a harness backend: the concurrency bench runs the same requests through it and through the
real `openai:` backend, so the table shows what the runner achieves and what the SDK adds.
It uses the harness's one message converter, so the bytes on the wire are the same.
"""

from __future__ import annotations

import json
from typing import Any

from eval.backends.openai_chat import to_openai_messages
from eval.types import BackendError, Request, Response


class LeanChatClient:
    """POST /chat/completions with aiohttp; the session is opened inside the running event loop."""

    spec = "bench:lean"

    def __init__(self, base_url: str) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._session: Any = None

    async def generate(self, request: Request) -> Response:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        body = {"model": "bench", "messages": to_openai_messages(request.messages),
                "temperature": request.config.temperature, "max_tokens": request.config.max_tokens,
                "seed": request.config.seed}
        async with self._session.post(self.url, data=json.dumps(body),
                                      headers={"Content-Type": "application/json"}) as reply:
            payload = await reply.read()
            if reply.status != 200:
                raise BackendError(f"HTTP {reply.status}", retryable=reply.status >= 500, status=reply.status)
        completion = json.loads(payload)
        return Response(text=completion["choices"][0]["message"]["content"], usage=completion.get("usage"))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def describe(self) -> dict[str, Any]:
        return {"backend": "bench-lean"}
