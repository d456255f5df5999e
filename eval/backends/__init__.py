"""Backend registry: `backend:model` spec → Backend instance, importing heavy SDKs lazily.

Adding a backend = one module here with a `make(model, **options) -> Backend` function, plus one
line in `_REGISTRY`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from eval.types import Backend

_REGISTRY: dict[str, str] = {
    "openai": "eval.backends.openai_chat",
    "gemini": "eval.backends.gemini",
    "baseline": "eval.backends.baseline",
    "hf": "eval.backends.hf",
    "vllm": "eval.backends.vllm_offline",
}


class SpecError(ValueError):
    """A malformed or unknown `backend:model` spec (one-line message)."""


def parse_spec(spec: str) -> tuple[str, str]:
    """Split `backend:model`; the model part may itself contain ':' or '/'.

    >>> parse_spec("openai:Qwen/Qwen3-VL-8B-Instruct")
    ('openai', 'Qwen/Qwen3-VL-8B-Instruct')
    """
    backend, sep, model = spec.partition(":")
    if not sep or not backend or not model:
        raise SpecError(
            f"model spec {spec!r} is not of the form backend:model "
            f"(backends: {', '.join(sorted(_REGISTRY))}), e.g. openai:gpt-4o or baseline:zero"
        )
    if backend not in _REGISTRY:
        raise SpecError(f"unknown backend {backend!r} in {spec!r}; choose one of {', '.join(sorted(_REGISTRY))}")
    return backend, model


async def release(backend: Any) -> None:
    """Close what a backend holds open on the running event loop (HTTP connections), if anything.

    Called by whoever runs the loop, before it ends: a later loop gets fresh connections.
    """
    close = getattr(backend, "aclose", None)
    if close is not None:
        await close()


def provider_module(name: str) -> ModuleType:
    """The module that implements backend `name` (imported now), e.g. to inspect what its make() takes."""
    if name not in _REGISTRY:
        raise SpecError(f"unknown backend {name!r}; choose one of {', '.join(sorted(_REGISTRY))}")
    return importlib.import_module(_REGISTRY[name])


def make_backend(spec: str, **options: Any) -> Backend:
    """Build the backend for `spec`. Options (base_url, image count, ...) go to the module's `make`."""
    backend, model = parse_spec(spec)
    module = importlib.import_module(_REGISTRY[backend])
    return module.make(model, **options)
