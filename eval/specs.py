"""The `backend:model` spec: which backends exist (name -> module) and how a spec is read.

A contract, below the backends: settings validate `--model` / `--judge` with `parse_spec` without
importing the backend registry (`eval/backends/__init__.py`), which loads a backend's module by name.
"""

from __future__ import annotations

from eval.types import UserError

# The backends' names, which a spec's `backend:` part must be; the module of each is named in
# eval/backends/__init__.py (MODULES), which loads it: the names live here, below the settings that check them.
BACKENDS: tuple[str, ...] = ("openai", "gemini", "baseline", "hf", "vllm")


class SpecError(UserError):
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
            f"(backends: {', '.join(sorted(BACKENDS))}), e.g. openai:gpt-4o or baseline:zero"
        )
    if backend not in BACKENDS:
        raise SpecError(f"unknown backend {backend!r} in {spec!r}; choose one of {', '.join(sorted(BACKENDS))}")
    return backend, model
