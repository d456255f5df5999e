"""What the two local engines (`hf:` transformers, `vllm:` offline vLLM) share: engine options as the CLI
passes them (validated once, unknown ones ignored), the error a user sees when an engine cannot start, and
the batch runner that keeps one bad sample from failing its chunk."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from eval.types import BackendError, BackendOptions, ConfigError, Request, Response

DEFAULT_MAX_MODEL_LEN = 16384  # the paper's protocol: 16,384 tokens of context
DTYPES = ("auto", "bfloat16", "float16", "float32")

T = TypeVar("T")


class EngineUnavailable(ConfigError):
    """A local engine cannot start here: a package is missing, no GPU, a bad engine option. A ConfigError: one
    line that says what to install or change, printed as `error: ...`."""


@dataclass(frozen=True)
class LocalEngineOptions:
    """The settings a local engine is built with; each is recorded in run.json via describe().
    `images_per_prompt` is the most images one prompt may carry (vLLM reserves memory for exactly that many);
    `max_pixels`/`min_pixels` bound the pixel budget of Qwen-VL-style image processors."""

    images_per_prompt: int | None = None
    seed: int = 0
    batch_size: int = 8
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    max_pixels: int | None = None
    min_pixels: int | None = None
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    dtype: str = "auto"
    device: str = "auto"
    trust_remote_code: bool = False

    @classmethod
    def of(cls, options: BackendOptions) -> LocalEngineOptions:
        """The engine's settings from the backend options: its own flags, the view count, the batch size
        and the run's seed (the limit travels with each request)."""
        return cls.from_options({**options.engine, "images_per_prompt": options.images_per_prompt,
                                 "batch_size": options.batch_size, "seed": options.generation.seed})

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> LocalEngineOptions:
        """Read the CLI's options; None means "use the default"; unknown keys are ignored.

        >>> LocalEngineOptions.from_options({"images_per_prompt": 2, "dtype": None, "base_url": "x"}).images_per_prompt
        2
        """
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in options.items():
            if name not in known or value is None:
                continue
            default = getattr(cls, name)
            if name in ("dtype", "device"):
                values[name] = str(value)
            elif name == "trust_remote_code":
                values[name] = _as_bool(name, value)
            elif isinstance(default, int) or default is None:
                values[name] = _positive_int(name, value, allow_zero=name == "seed")
        opts = cls(**values)
        if opts.dtype not in DTYPES:
            raise EngineUnavailable(f"--dtype {opts.dtype!r} is not one of {', '.join(DTYPES)}")
        if opts.min_pixels and opts.max_pixels and opts.min_pixels > opts.max_pixels:
            raise EngineUnavailable(
                f"--min-pixels ({opts.min_pixels}) is larger than --max-pixels ({opts.max_pixels})")
        return opts


_FLAGS = {"images_per_prompt": "--images"}  # the engine limit comes from the run's view count


def _positive_int(name: str, value: Any, *, allow_zero: bool = False) -> int:
    flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise EngineUnavailable(f"{flag} must be an integer (got {value!r})")
    try:
        number = int(value)
    except ValueError:
        raise EngineUnavailable(f"{flag} must be an integer (got {value!r})") from None
    if number < (0 if allow_zero else 1):
        raise EngineUnavailable(f"{flag} must be at least {0 if allow_zero else 1} (got {number})")
    return number


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise EngineUnavailable(f"--{name.replace('_', '-')} must be true or false (got {value!r})")


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most `size` items (the engine's own batch size)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def short_error(exc: BaseException, limit: int = 200) -> str:
    """An exception as one bounded line: engines raise multi-line, very long messages."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def generate_one(generate_batch: Callable[[list[Request]], list[Response | BackendError]],
                       request: Request) -> Response:
    """`Backend.generate` for a local engine: a batch of one, off the event loop."""
    result = (await asyncio.to_thread(generate_batch, [request]))[0]
    if isinstance(result, BackendError):
        raise result
    return result


def generate_isolated(requests: Sequence[Request], prepare: Callable[[Request], T],
                      run_batch: Callable[[list[Request], list[T]], list[Response]]
                      ) -> list[Response | BackendError]:
    """Run `run_batch` on the prepared requests; one failure never takes its neighbours down. A request whose
    preparation fails (a corrupt image, too many images) gets its own BackendError. If the batch call itself
    raises, each request is retried alone so that the error lands on the sample that caused it. Engine errors
    are not retryable: the same input would fail the same way, and the runner records them as failed
    samples."""
    results: list[Response | BackendError | None] = [None] * len(requests)
    ready: list[tuple[int, Request, T]] = []
    for index, request in enumerate(requests):
        try:
            ready.append((index, request, prepare(request)))
        except BackendError as exc:
            results[index] = exc
        except Exception as exc:  # noqa: BLE001 - any preparation failure belongs to this sample
            results[index] = BackendError(f"{request.id}: {short_error(exc)}", retryable=False)
    if ready:
        try:
            responses = run_batch([r for _, r, _ in ready], [p for _, _, p in ready])
            for (index, _, _), response in zip(ready, responses, strict=True):
                results[index] = response
        except Exception as batch_exc:  # noqa: BLE001 - fall back to one request at a time
            if len(ready) == 1:
                index, request, _ = ready[0]
                results[index] = _as_backend_error(request, batch_exc)
            else:
                for index, request, prepared in ready:
                    try:
                        results[index] = run_batch([request], [prepared])[0]
                    except Exception as exc:  # noqa: BLE001
                        results[index] = _as_backend_error(request, exc)
    return [r if r is not None else BackendError("no result", retryable=False) for r in results]


def _as_backend_error(request: Request, exc: BaseException) -> BackendError:
    if isinstance(exc, BackendError):
        return exc
    return BackendError(f"{request.id}: {type(exc).__name__}: {short_error(exc)}", retryable=False)
