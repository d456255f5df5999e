"""Model calls of the construction stages, through the harness backends, cached on disk."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from construct.callstore import LOG, CallStore, rows
from construct.prefilter import read_photo
from construct.work import BuildSettings, comma_list, read_json, write_json
from eval.backends import make_backend, release
from eval.endpoints import host_of
from eval.images import encode_for_transport
from eval.limiter import MAX_CONCURRENCY, START, Limits
from eval.runner import BUILD_THREADS, RetryPolicy, built_ahead, execute
from eval.store import JsonlLog
from eval.types import (
    DEFAULT_MAX_TOKENS,
    Backend,
    BackendOptions,
    GenerationConfig,
    ImagePart,
    Message,
    Request,
    Response,
)

MAX_SIDE = 1024  # the harness's transport bound: photos larger than this are shrunk once before sending
SAME = object()  # `base_url` not given: the build's --base-url
TRUNCATED = "truncated: the token limit cut the answer"
CALL_SECONDS = "call_seconds.json"

PhotoRef = tuple[str, str, str]  # (file path, role, photo id)


@dataclass(frozen=True)
class Ask:
    """One question to a model. `photos` names the photo files; they are read and encoded only when a worker
    is about to send the ask, and let go once it is answered; `images` holds them already encoded. An ask with
    only `photos` is plain data: it travels to a Ray actor as a row (`to_row`)."""

    item: str
    prompt: str
    images: tuple[ImagePart, ...] = ()
    photos: tuple[PhotoRef, ...] = ()

    def loaded(self) -> Ask:
        if not self.photos:
            return self
        return Ask(self.item, self.prompt, tuple(photo_part(Path(path), role, pid) for path, role, pid in self.photos))

    def to_row(self) -> dict[str, Any]:
        if self.images:
            raise ValueError(f"ask {self.item}: encoded images do not travel; name the photo files instead")
        return {"item": self.item, "prompt": self.prompt, "photos": [list(ref) for ref in self.photos]}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Ask:
        return cls(str(row["item"]), str(row["prompt"]),
                   photos=tuple((str(p), str(r), str(i)) for p, r, i in (row.get("photos") or ())))


@dataclass
class Answer:
    item: str
    text: str | None
    error: str | None
    usage: dict[str, int] | None
    cached: bool = False  # no call was made for it (answered from the store, or its photo was unusable)


def photo_part(path: Path, role: str, item: str = "", index: int = 0) -> ImagePart:
    """A photo file, encoded for transport as the harness does (as stored when already small enough)."""
    return encode_for_transport(read_photo(path), max_side=MAX_SIDE, role=role, item_id=item or path.name, index=index)


def call_key(stage: str, spec: str, version: str, ask: Ask) -> str:
    """Never the base URL: answers cached against one set of replicas are reused with another."""
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
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    # Why from the end: a model that reasons first puts its final object last. Objects nested in a later one
    # are skipped: the answer is the last top-level object.
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
    urls: list[str | None] = [*comma_list(value or "")]
    return urls or [None]


class RoundRobin:
    """One backend per replica; request i goes to replica i mod N (a retry goes to the next one)."""

    def __init__(self, backends: list[Backend], hosts: list[str | None]) -> None:
        self.backends, self.hosts, self.spec = backends, hosts, backends[0].spec
        self.sent = [0] * len(backends)
        self._next = 0

    async def generate(self, request: Request) -> Response:
        i = self._next
        self._next = (i + 1) % len(self.backends)
        return await self.generate_at(i, request)

    def endpoints(self) -> list[str | None]:
        """The replicas' hosts: under --concurrency auto the runner gives each its own limiter and sends
        to each as its limiter allows (`generate_at`), so a faster replica takes more of the calls."""
        return list(self.hosts)

    async def generate_at(self, i: int, request: Request) -> Response:
        self.sent[i] += 1
        return await self.backends[i].generate(request)

    def describe(self) -> dict[str, Any]:
        return {**self.backends[0].describe(), "replicas": self.hosts}

    async def aclose(self) -> None:
        for backend in self.backends:
            await release(backend)


@dataclass(frozen=True)
class Phase:
    """What every call of one call phase shares: the stage, the model, the prompt version and the limits."""

    stage: str
    spec: str
    version: str
    max_tokens: int
    seed: int
    concurrency: int | str  # N, or "auto" (eval.limiter)
    timeout: float
    max_concurrency: int = MAX_CONCURRENCY

    @property
    def build_ahead(self) -> int:
        """Asks read and encoded ahead of need: as many as calls in flight (under auto, a few rounds' worth)."""
        wanted = self.concurrency if isinstance(self.concurrency, int) else min(self.max_concurrency, 4 * START)
        return max(BUILD_THREADS, wanted)

    def config(self) -> GenerationConfig:
        return GenerationConfig(temperature=0.0, max_tokens=self.max_tokens, seed=self.seed)


async def answer_asks(backend: Backend, asks: Iterable[Ask], phase: Phase, store: CallStore, log: JsonlLog,
                      on_answer: Callable[[Answer], None], limits: Limits | None = None) -> None:
    """Answer each ask from the store, or by a call whose row is appended to `log`; `on_answer` gets each
    answer (in completion order). The one call loop of both engines: the driver's (local engine) and each Ray
    actor's.

    The asks flow through one bounded producer/consumer: a worker takes the next ask as soon as its call
    returns (no batch waits for its slowest call), and an ask's photos are read and encoded in a build thread
    just ahead of need, so at most 2 x `concurrency` (or `concurrency` + BUILD_THREADS) asks hold image bytes;
    `asks` itself is read as lazily. `limits` (one per endpoint: `eval.limiter`) may outlive the call, so what
    a Ray actor learnt of its endpoints carries over to its next batch."""
    config = phase.config()
    lock = threading.Lock()  # one store connection, shared by the build threads

    def build(ask: Ask) -> Request | Answer:  # in a build thread: read, encode, hash; an Answer when no call is due
        try:
            ask = ask.loaded()
        except (OSError, ValueError) as exc:  # a photo gone or unusable since the filters: this item fails
            return Answer(ask.item, None, f"photo unusable: {' '.join(str(exc).split())[:200]}", None, cached=True)
        key = call_key(phase.stage, phase.spec, phase.version, ask)
        with lock:
            row = store.lookup(key, phase.max_tokens)
        if row is not None:
            error = None if row.get("text") is not None else TRUNCATED
            return Answer(ask.item, row.get("text"), error, row.get("usage"), cached=True)
        return Request(id=ask.item, task=phase.stage, config=config, request_hash=key,
                       messages=(Message("user", (*ask.images, ask.prompt)),),
                       metadata={"stage": phase.stage, "n_images": len(ask.images)})

    async def requests() -> AsyncIterator[Request]:
        # Every `on_answer` runs on the event loop's thread, never in a build thread.
        async for built in built_ahead((partial(build, a) for a in asks), threads=phase.build_ahead):  # type: ignore[misc]
            if isinstance(built, Answer):
                on_answer(built)
            else:
                yield built

    policy = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=30.0, request_timeout=phase.timeout)
    async for outcome in execute(backend, requests(), limits=limits or Limits.of(phase), policy=policy):
        item, response = outcome.request.id, outcome.response
        truncated = response is not None and response.truncated
        text = response.text if response is not None and not truncated else None
        error = outcome.error or (TRUNCATED if truncated else None)
        usage = response.usage if response is not None else None
        log.append({"key": outcome.request.request_hash, "stage": phase.stage, "item": item, "model": phase.spec,
                    "prompt_version": phase.version, "text": text, "error": error, "truncated": truncated,
                    "max_tokens": phase.max_tokens, "usage": usage, "seconds": round(outcome.latency_s, 4)})
        on_answer(Answer(item, text, error, usage))


class Models:
    """The backends of one build, made once per spec, the per-stage call stores, and the engine that runs the
    calls (`construct.engine`: in this process, or on Ray actors)."""

    def __init__(self, settings: BuildSettings, work: Path, factory: Callable[..., Backend] = make_backend,
                 engine: Any = None) -> None:
        self.settings, self.work, self._factory, self.engine = settings, work, factory, engine
        self._backends: dict[str, Backend] = {}
        # stage -> {"asked", "failed", "errors": Counter}: the calls this process made (not the cached ones)
        self.stats: dict[str, dict[str, Any]] = {}
        self.call_seconds: dict[str, float] = {}  # stage -> wall seconds of this process's asks that made calls

    def _url(self, base_url: str | None | object) -> str | None:
        url = self.settings.base_url if base_url is SAME else base_url
        return str(url) if url else None

    def backend(self, spec: str, base_url: str | None | object = SAME) -> Backend:
        url = self._url(base_url)
        key = f"{spec} @ {url or ''}"
        if key not in self._backends:
            self._backends[key] = make_pool(self._factory, spec, base_urls(url), self.settings)
            self._record_hosts(spec, url)
        return self._backends[key]

    def _record_hosts(self, spec: str, url: str | None) -> None:
        """WORK/hosts.json: {spec: [host:port, ...]} of the replicas each model was asked on (no path, no key)."""
        self._record("hosts.json", spec, [host_of(u) or "default" for u in base_urls(url)])

    def _record(self, name: str, key: str, value: Any) -> None:
        """Set `key` in the JSON record WORK/`name` (hosts.json, call_seconds.json), rewritten whole."""
        path = self.work / name
        recorded = read_json(path)
        self.work.mkdir(parents=True, exist_ok=True)
        write_json(path, {**recorded, key: value})

    def ask(self, stage: str, spec: str, version: str, asks: list[Ask], *,
            base_url: str | None | object = SAME) -> dict[str, Answer]:
        """Answers by item (`ask_each`, collected)."""
        answers: dict[str, Answer] = {}
        self.ask_each(stage, spec, version, asks, lambda a: answers.__setitem__(a.item, a), base_url=base_url)
        return answers

    def ask_each(self, stage: str, spec: str, version: str, asks: Iterable[Ask], on_answer: Callable[[Answer], None],
                 *, base_url: str | None | object = SAME) -> None:
        """Give each ask's answer to `on_answer`, in completion order: cached answers are reused; an answer
        the token limit cut is cached as cut and asked again only under a higher limit; failed calls are
        not cached (a rerun retries them). `asks` may be a generator: it is read as the calls go, so a
        phase over millions of photos holds only the asks in flight."""
        start = time.monotonic()
        url = self._url(base_url)
        stats = self.stats.setdefault(stage, {"asked": 0, "failed": 0, "errors": Counter()})
        asked = stats["asked"]
        s = self.settings
        phase = Phase(stage, spec, version, s.max_tokens, s.seed, s.concurrency, s.timeout, s.max_concurrency)

        def counted(answer: Answer) -> None:
            if not answer.cached:  # a call made (not a cached answer): counted, and its error when it failed
                stats["asked"] += 1
                if answer.error and answer.error != TRUNCATED:
                    stats["failed"] += 1
                    stats["errors"][answer.error[:120]] += 1
            on_answer(answer)

        store = CallStore(self.work / stage)
        try:
            remote = getattr(self.engine, "answer", None)  # the Ray engine's actors; the local engine has none
            here = remote(phase, url, asks, self.work, counted) if remote is not None else asks
            if here is None:  # answered on the actors
                self._record_hosts(spec, url)
            else:  # on this process's event loop (on Ray: a phase too small for an actor pool)
                asyncio.run(self._local(phase, url, here, store, counted))
        finally:
            store.close()
            if stats["asked"] > asked:  # a phase answered from the cache alone is no call phase
                self.call_seconds[stage] = self.call_seconds.get(stage, 0.0) + time.monotonic() - start
                # CALL_SECONDS: {stage: wall seconds of its call phases (reading and encoding photos, the
                # calls, logging the answers)} in this process's run (stage_seconds.json: the whole stage)
                self._record(CALL_SECONDS, stage, round(self.call_seconds[stage], 3))

    async def _local(self, phase: Phase, url: str | None, asks: Iterable[Ask], store: CallStore,
                     on_answer: Callable[[Answer], None]) -> None:
        pending = iter(asks)
        first = next(pending, None)
        if first is None:
            return
        backend = self.backend(phase.spec, url)  # made only when there is something to ask
        try:
            with JsonlLog(self.work / phase.stage / LOG) as log:  # a torn tail repaired; a kill loses only calls in flight
                await answer_asks(backend, itertools.chain((first,), pending), phase, store, log, on_answer)
        finally:
            await release(backend)


def make_pool(factory: Callable[..., Backend], spec: str, urls: list[str | None], settings: BuildSettings,
              start: int = 0) -> Backend:
    """One backend per replica URL, behind a `RoundRobin` when there are several (its first request to
    replica `start`: Ray actors start at different replicas)."""
    generation = GenerationConfig(max_tokens=settings.max_tokens, seed=settings.seed,
                                  fit_to_context=settings.max_tokens == DEFAULT_MAX_TOKENS)
    made = [factory(spec, BackendOptions(base_url=url, timeout=settings.timeout, generation=generation,
                                         images_per_prompt=4)) for url in urls]
    if len(made) == 1:
        return made[0]
    pool = RoundRobin(made, [host_of(url) for url in urls])
    pool._next = start % len(made)
    return pool


def usage_table(work: Path, stages: tuple[str, ...]) -> dict[tuple[str, str], dict[str, Any]]:
    """(stage, model) -> calls, failed, prompt and completion tokens and seconds of model time spent
    (every call made, cached ones counted once, as recorded in the stage's call logs)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for stage in stages:
        for c in rows(work / stage):
            cell = out.setdefault((stage, str(c.get("model") or "?")), {
                "calls": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0})
            usage = c.get("usage") or {}
            cell["calls"] += 1
            cell["failed"] += c.get("text") is None
            cell["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            cell["completion_tokens"] += int(usage.get("completion_tokens") or 0)
            cell["seconds"] += float(c.get("seconds") or 0.0)
    return out

