"""The data contracts of the harness, on one screen.

A dataset row becomes a `Request` (task side), a backend turns it into a `Response` (model side),
the runner writes a `Prediction` per sample to predictions.jsonl, and scoring reads those back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Task = Literal["classification", "nutrition", "vqa"]
TASKS: tuple[Task, ...] = ("classification", "nutrition", "vqa")


@dataclass(frozen=True)
class ImagePart:
    """One image, already resized and encoded once for transport (JPEG or PNG bytes)."""

    data: bytes
    mime_type: str = "image/jpeg"
    role: str = "user"  # `reference` (merchant photo) or `user` (customer photo)


Part = str | ImagePart


@dataclass(frozen=True)
class Message:
    """One chat turn: text and images in the order the model should see them."""

    role: Literal["system", "user", "assistant"]
    content: tuple[Part, ...]

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return tuple(p for p in self.content if isinstance(p, ImagePart))

    @property
    def text(self) -> str:
        return "".join(p for p in self.content if isinstance(p, str))


@dataclass(frozen=True)
class GenerationConfig:
    """Decoding settings; the paper's protocol is greedy decoding (temperature 0)."""

    temperature: float = 0.0
    max_tokens: int = 4096
    seed: int = 0


@dataclass(frozen=True)
class Request:
    """Everything a backend needs for one sample, and nothing about the task."""

    id: str
    task: Task
    messages: tuple[Message, ...]
    config: GenerationConfig
    request_hash: str  # identity of (model, prompt, images, settings): the resume key
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass
class Response:
    """What a backend returns for one request."""

    text: str
    usage: dict[str, int] | None = None
    finish_reason: str | None = None


class ConfigError(ValueError):
    """A setup problem the user must fix (missing package or key, bad option): a one-line message
    that says what to install or set. The CLI prints it as `error: ...` without a traceback."""


class BackendError(Exception):
    """A failed generation. `retryable` errors are retried by the runner with backoff.

    Messages must be short and must never contain a key or token.
    """

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


@runtime_checkable
class Backend(Protocol):
    """A model behind one of the `backend:model` specs.

    API backends implement `generate` (called concurrently by the runner). Local engines
    (`vllm:`, `hf:`) may also implement `generate_batch`, which the runner prefers when present.
    A backend that keeps connections open on the event loop also has `async aclose()`; whoever
    runs the loop calls it (`eval.backends.release`) before the loop ends.
    """

    spec: str

    async def generate(self, request: Request) -> Response: ...

    def describe(self) -> dict[str, Any]:
        """Settings and versions for run.json (never a key)."""
        ...


@dataclass
class Prediction:
    """One line of predictions.jsonl."""

    id: str
    task: Task
    raw: str | None
    parsed: Any
    error: str | None
    attempts: int
    latency_s: float
    usage: dict[str, int] | None
    request_hash: str

    def to_json(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its deep copy of `parsed` and `usage` was a tenth of the runner's
        # CPU per sample, for a dict that is serialised at once.
        return {"id": self.id, "task": self.task, "raw": self.raw, "parsed": self.parsed, "error": self.error,
                "attempts": self.attempts, "latency_s": self.latency_s, "usage": self.usage,
                "request_hash": self.request_hash}

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Prediction:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: row.get(k) for k in names})
