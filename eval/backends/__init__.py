"""Backend registry: `backend:model` spec → Backend instance, importing heavy SDKs lazily (adding a
backend: ARCHITECTURE.md)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from eval.specs import BACKENDS, SpecError, parse_spec
from eval.types import Backend, BackendOptions, BackendTraits

__all__ = ["BackendOptions", "SpecError", "make_backend", "parse_spec", "provider_module", "release", "traits"]

async def release(backend: Any) -> None:
    """Close what a backend holds open on the running event loop (HTTP connections), if anything. Called by
    whoever runs the loop, before it ends: a later loop gets fresh connections."""
    close = getattr(backend, "aclose", None)
    if close is not None:
        await close()


def provider_module(name: str) -> ModuleType:
    """The module that implements backend `name` (imported now)."""
    if name not in BACKENDS:
        raise SpecError(f"unknown backend {name!r}; choose one of {', '.join(sorted(BACKENDS))}")
    return importlib.import_module(BACKENDS[name], __name__)


def traits(name: str) -> BackendTraits:
    """What backend `name` declares of itself (open weights, the key it takes, its public endpoint)."""
    found = getattr(provider_module(name), "TRAITS", None)
    return found if isinstance(found, BackendTraits) else BackendTraits()


def make_backend(spec: str, options: BackendOptions | None = None) -> Backend:
    """Build the backend for `spec` from one options type (its module's `make`)."""
    backend, model = parse_spec(spec)
    return provider_module(backend).make(model, options or BackendOptions())
