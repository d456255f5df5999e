"""Model calls of the construction stages, through the harness backends, cached on disk.

A stage hands over `Ask`s (item, prompt, images); each is sent with `eval.runner.execute` to the
backend of a `backend:model` spec, and the answer is appended to WORK/<stage>/calls.jsonl under a key
of (stage, item, model, prompt version, prompt text, image bytes): a rerun asks only what is missing
or failed, and a changed prompt version asks again. Token counts come from `Response.usage`.

`--base-url URL1,URL2,...` (replicas of one `vllm serve`) makes one backend per URL behind a
`RoundRobin` that hands each request to the next replica; the replicas' hosts (never a path, query
or key) are recorded in WORK/hosts.json. The base URL is not part of a call's cache key, so answers
cached against one set of replicas are reused with another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from construct.work import BuildSettings, read_jsonl, write_json
from eval.backends import make_backend, release
from eval.backends._retry import host_of
from eval.images import encode_for_transport
from eval.runner import RetryPolicy, execute
from eval.store import JsonlLog
from eval.types import DEFAULT_MAX_TOKENS, Backend, GenerationConfig, ImagePart, Message, Request, Response

MAX_SIDE = 1024  # the harness's transport bound: photos larger than this are shrunk once before sending


CHUNK = 256  # asks whose photos are read and encoded at a time: a stage never holds every photo at once


@dataclass(frozen=True)
class Ask:
    """One question to a model. `photos` (a function) reads and encodes the images only when the ask's
    chunk comes up, and they are let go once it is answered; `images` holds them already encoded."""

    item: str
    prompt: str
    images: tuple[ImagePart, ...] = ()
    photos: Callable[[], tuple[ImagePart, ...]] | None = None

    def loaded(self) -> Ask:
        return Ask(self.item, self.prompt, self.photos()) if self.photos is not None else self


@dataclass
class Answer:
    item: str
    text: str | None
    error: str | None
    usage: dict[str, int] | None
    cached: bool = False


def photo_part(path: Path, role: str, item: str = "", index: int = 0) -> ImagePart:
    """A photo file, encoded for transport as the harness does (as stored when already small enough)."""
    return encode_for_transport(path.read_bytes(), max_side=MAX_SIDE, role=role, item_id=item or path.name, index=index)


def call_key(stage: str, spec: str, version: str, ask: Ask) -> str:
    digest = hashlib.sha256(json.dumps([stage, spec, version, ask.item, ask.prompt]).encode())
    for image in ask.images:
        digest.update(hashlib.sha256(image.data).digest())
    return digest.hexdigest()


def parse_json_object(text: str | None) -> dict[str, Any] | None:
    """The last JSON object in a model's answer, fenced or embedded in prose; None when there is none.

    >>> parse_json_object('Sure.\\n```json\\n{"same_dish": true}\\n```')
    {'same_dish': True}
    >>> parse_json_object('I think {"a": 1} then {"a": 2}')
    {'a': 2}
    >>> parse_json_object('{"picked": [{"id": 1}], "n": 1}')
    {'picked': [{'id': 1}], 'n': 1}
    >>> parse_json_object('no object here') is None
    True
    """
    if not text:
        return None
    fenced = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, flags=re.S)
    for candidate in reversed(fenced):
        try:
            value = json.loads(candidate)
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
    # Why from the end: a model that reasons first puts its final object last.
    # Objects nested in a later one are skipped: the answer is the last top-level object.
    decoder = json.JSONDecoder()
    found, end = None, 0
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        if start < end:
            continue
        try:
            value, length = decoder.raw_decode(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found, end = value, start + length
    return found


def base_urls(value: str | None) -> list[str | None]:
    """The replicas of `--base-url` (comma-separated); [None] when none is given (the backend's default).

    >>> base_urls("http://a:8000/v1, http://b:8000/v1")
    ['http://a:8000/v1', 'http://b:8000/v1']
    >>> base_urls(None)
    [None]
    """
    urls = [u.strip() for u in (value or "").split(",") if u.strip()]
    return urls or [None]


class RoundRobin:
    """One backend per replica; request i goes to replica i mod N (a retry goes to the next one)."""

    def __init__(self, backends: list[Backend], hosts: list[str | None]) -> None:
        self.backends = backends
        self.hosts = hosts
        self.spec = backends[0].spec
        self.sent = [0] * len(backends)
        self._next = 0

    async def generate(self, request: Request) -> Response:
        i = self._next
        self._next = (i + 1) % len(self.backends)
        self.sent[i] += 1
        return await self.backends[i].generate(request)

    def describe(self) -> dict[str, Any]:
        return {**self.backends[0].describe(), "replicas": self.hosts}

    async def aclose(self) -> None:
        for backend in self.backends:
            await release(backend)


class Models:
    """The backends of one build, made once per spec, and the per-stage call caches."""

    def __init__(self, settings: BuildSettings, work: Path,
                 factory: Callable[..., Backend] = make_backend) -> None:
        self.settings = settings
        self.work = work
        self._factory = factory
        self._backends: dict[str, Backend] = {}

    def backend(self, spec: str) -> Backend:
        if spec not in self._backends:
            urls = base_urls(self.settings.base_url)
            made = [self._factory(spec, base_url=url, timeout=self.settings.timeout, max_tokens=DEFAULT_MAX_TOKENS,
                                  seed=self.settings.seed, images_per_prompt=4) for url in urls]
            hosts = [host_of(url) for url in urls]
            self._backends[spec] = made[0] if len(made) == 1 else RoundRobin(made, hosts)
            self._record_hosts(spec, hosts)
        return self._backends[spec]

    def _record_hosts(self, spec: str, hosts: list[str | None]) -> None:
        """WORK/hosts.json: {spec: [host:port, ...]} of the replicas each model was asked on (no path, no key)."""
        path = self.work / "hosts.json"
        try:
            recorded = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except (OSError, ValueError):
            recorded = {}
        recorded[spec] = [h or "default" for h in hosts]
        self.work.mkdir(parents=True, exist_ok=True)
        write_json(path, recorded)

    def ask(self, stage: str, spec: str, version: str, asks: list[Ask]) -> dict[str, Answer]:
        """Answers by item; cached answers are reused, failed calls are not cached (a rerun retries)."""
        path = self.work / stage / "calls.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        cache = {row["key"]: row for row in read_jsonl(path) if row.get("text") is not None}
        answers: dict[str, Answer] = {}
        # Chunk by chunk: each chunk's photos are read, hashed, sent concurrently and dropped before the next.
        for start in range(0, len(asks), CHUNK):
            pending: dict[str, tuple[str, Ask]] = {}
            for ask in asks[start:start + CHUNK]:
                ask = ask.loaded()
                key = call_key(stage, spec, version, ask)
                if key in cache:
                    answers[ask.item] = Answer(ask.item, cache[key]["text"], None, cache[key].get("usage"), cached=True)
                else:
                    pending[ask.item] = (key, ask)
            if pending:
                answers.update(asyncio.run(self._run(stage, spec, version, pending, path)))
        return answers

    async def _run(self, stage: str, spec: str, version: str, pending: dict[str, tuple[str, Ask]],
                   path: Path) -> dict[str, Answer]:
        backend = self.backend(spec)
        config = GenerationConfig(temperature=0.0, max_tokens=DEFAULT_MAX_TOKENS, seed=self.settings.seed)
        requests = [Request(id=item, task="vqa", config=config, request_hash=key,
                            messages=(Message("user", (*ask.images, ask.prompt)),),
                            metadata={"stage": stage, "n_images": len(ask.images)})
                    for item, (key, ask) in pending.items()]
        answers: dict[str, Answer] = {}
        policy = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=30.0)
        try:
            with JsonlLog(path) as log:  # a torn last line is repaired first; a kill loses only the calls in flight
                async for outcome in execute(backend, requests, concurrency=self.settings.concurrency, policy=policy):
                    item = outcome.request.id
                    response = outcome.response
                    text = response.text if response is not None and not response.truncated else None
                    error = outcome.error or (None if text is not None else "truncated: the token limit cut the answer")
                    usage = response.usage if response is not None else None
                    answers[item] = Answer(item, text, error, usage)
                    log.append({"key": outcome.request.request_hash, "stage": stage, "item": item, "model": spec,
                                "prompt_version": version, "text": text, "error": error, "usage": usage})
        finally:
            await release(backend)
        return answers


def stage_usage(work: Path, stage: str) -> dict[str, Any]:
    """Calls and tokens a stage has spent (every call made, cached ones counted once)."""
    calls = read_jsonl(work / stage / "calls.jsonl")
    prompt = sum((c.get("usage") or {}).get("prompt_tokens", 0) for c in calls)
    completion = sum((c.get("usage") or {}).get("completion_tokens", 0) for c in calls)
    return {"calls": len(calls), "failed": sum(1 for c in calls if c.get("text") is None),
            "prompt_tokens": prompt, "completion_tokens": completion}
