"""Model calls of the construction stages, through the harness backends, cached on disk.

A stage hands over `Ask`s (item, prompt, images); each is sent with `eval.runner.execute` to the
backend of a `backend:model` spec, and the answer is appended to WORK/<stage>/calls.jsonl under a key
of (stage, item, model, prompt version, prompt text, image bytes): a rerun asks only what is missing
or failed, and a changed prompt version asks again. Token counts come from `Response.usage`.
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

from construct.work import BuildSettings, read_jsonl
from eval.backends import make_backend, release
from eval.images import encode_for_transport
from eval.runner import RetryPolicy, execute
from eval.types import DEFAULT_MAX_TOKENS, Backend, GenerationConfig, ImagePart, Message, Request

MAX_SIDE = 1024  # the harness's transport bound: photos larger than this are shrunk once before sending


@dataclass(frozen=True)
class Ask:
    item: str
    prompt: str
    images: tuple[ImagePart, ...] = ()


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
            self._backends[spec] = self._factory(spec, base_url=self.settings.base_url, timeout=self.settings.timeout,
                                                 max_tokens=DEFAULT_MAX_TOKENS, seed=self.settings.seed, images=4)
        return self._backends[spec]

    def ask(self, stage: str, spec: str, version: str, asks: list[Ask]) -> dict[str, Answer]:
        """Answers by item; cached answers are reused, failed calls are not cached (a rerun retries)."""
        path = self.work / stage / "calls.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        cache = {row["key"]: row for row in read_jsonl(path) if row.get("text") is not None}
        answers: dict[str, Answer] = {}
        pending: dict[str, tuple[str, Ask]] = {}
        for ask in asks:
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
            with path.open("a", encoding="utf-8") as fh:
                async for outcome in execute(backend, requests, concurrency=self.settings.concurrency, policy=policy):
                    item = outcome.request.id
                    response = outcome.response
                    text = response.text if response is not None and not response.truncated else None
                    error = outcome.error or (None if text is not None else "truncated: the token limit cut the answer")
                    usage = response.usage if response is not None else None
                    answers[item] = Answer(item, text, error, usage)
                    fh.write(json.dumps({"key": outcome.request.request_hash, "stage": stage, "item": item,
                                         "model": spec, "prompt_version": version, "text": text, "error": error,
                                         "usage": usage}, ensure_ascii=False) + "\n")
                    fh.flush()  # a kill loses only the calls in flight
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
