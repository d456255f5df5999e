"""Backend registry: `backend:model` spec → Backend instance, importing heavy SDKs lazily.

Adding a backend = one module here with a `make(model, **options) -> Backend` function, its line in
MODULES below, and its name in `eval/specs.py:BACKENDS` (the names live there, below the settings that
check them; tests/test_architecture.py holds the two lists to each other and reads MODULES' strings as
this package's imports, so the layer check sees the modules it loads by name).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from eval.specs import BACKENDS, SpecError, parse_spec
from eval.types import Backend

__all__ = ["SpecError", "make_backend", "parse_spec", "provider_module", "release"]

MODULES: dict[str, str] = {
    "openai": "eval.backends.openai_chat",
    "gemini": "eval.backends.gemini",
    "baseline": "eval.backends.baseline",
    "hf": "eval.backends.hf",
    "vllm": "eval.backends.vllm_offline",
}
_REGISTRY = MODULES


async def release(backend: Any) -> None:
    """Close what a backend holds open on the running event loop (HTTP connections), if anything.

    Called by whoever runs the loop, before it ends: a later loop gets fresh connections.
    """
    close = getattr(backend, "aclose", None)
    if close is not None:
        await close()


def provider_module(name: str) -> ModuleType:
    """The module that implements backend `name` (imported now), e.g. to inspect what its make() takes."""
    if name not in BACKENDS:
        raise SpecError(f"unknown backend {name!r}; choose one of {', '.join(sorted(_REGISTRY))}")
    return importlib.import_module(_REGISTRY[name])


def make_backend(spec: str, **options: Any) -> Backend:
    """Build the backend for `spec`. Options (base_url, image count, ...) go to the module's `make`."""
    backend, model = parse_spec(spec)
    module = importlib.import_module(_REGISTRY[backend])
    return module.make(model, **options)
