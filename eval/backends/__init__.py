"""Backend registry: `backend:model` spec → Backend instance, importing heavy SDKs lazily.

Adding a backend = one module here with a `make(model, **options) -> Backend` function, plus one
line in `eval/specs.py:BACKENDS` (the names live there, below the settings that check them).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from eval.specs import BACKENDS, SpecError, parse_spec
from eval.types import Backend

__all__ = ["SpecError", "make_backend", "parse_spec", "provider_module", "release"]

_REGISTRY = BACKENDS


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
