"""The `backend:model` spec: which backends exist (name -> module) and how a spec is read, below the
backends, so settings check `--model` / `--judge` without importing the registry."""

from __future__ import annotations

from eval.types import UserError

# The backends: the name a spec's `backend:` part must be -> its module, relative to the `eval.backends`
# package, which loads it by this name (eval/backends/__init__.py:provider_module). The one list: it lives
# here, below the settings that check a spec, and a relative name is no import of this module's.
BACKENDS: dict[str, str] = {
    "openai": ".openai_chat",
    "gemini": ".gemini",
    "baseline": ".baseline",
    "hf": ".hf",
    "vllm": ".vllm_offline",
}


class SpecError(UserError):
    """A malformed or unknown `backend:model` spec (one-line message)."""


def parse_spec(spec: str) -> tuple[str, str]:
    """Split `backend:model`; the model part may itself contain ':' or '/'.

    >>> parse_spec("openai:Qwen/Qwen3-VL-8B-Instruct")
    ('openai', 'Qwen/Qwen3-VL-8B-Instruct')
    """
    backend, sep, model = spec.partition(":")
    if not sep or not backend or not model:
        raise SpecError(f"model spec {spec!r} is not of the form backend:model "
                        f"(backends: {', '.join(sorted(BACKENDS))}), e.g. openai:gpt-4o or baseline:zero")
    if backend not in BACKENDS:
        raise SpecError(f"unknown backend {backend!r} in {spec!r}; choose one of {', '.join(sorted(BACKENDS))}")
    return backend, model
