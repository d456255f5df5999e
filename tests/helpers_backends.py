"""Backend options as the tests write them: flags by name, as the CLI's settings would give them."""

from __future__ import annotations

from typing import Any

from eval.types import DEFAULT_MAX_TOKENS, BackendOptions, GenerationConfig

_GENERATION = ("temperature", "max_tokens", "seed", "reasoning_effort", "thinking_budget", "fit_to_context")
_OPTIONS = ("base_url", "timeout", "api_key", "images_per_prompt", "batch_size", "lang", "dataset_items")


def opts(**flags: Any) -> BackendOptions:
    """`BackendOptions` from flags: generation settings into its config (a limit other than the default
    counts as the user's, as `--max-tokens` does), a local engine's flags into `engine`."""
    generation = {name: flags.pop(name) for name in _GENERATION if name in flags}
    if "max_tokens" in generation:
        generation.setdefault("fit_to_context", generation["max_tokens"] == DEFAULT_MAX_TOKENS)
    options = {name: flags.pop(name) for name in _OPTIONS if name in flags}
    return BackendOptions(generation=GenerationConfig(**generation), engine=flags, **options)
