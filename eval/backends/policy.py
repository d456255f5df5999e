"""What each backend may be asked for, and what the `openai:` backend actually sends (its request policy):
a run asks for one `GenerationConfig`, servers differ in what they accept, and `ChatPolicy` adapts once."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eval.types import ConfigError, GenerationConfig, ImagePart, Message

# --- options a backend cannot use: refused at make(), in one line ------------------------------

EFFORT_HINT = "--reasoning-effort is for OpenAI reasoning models (openai:o3, openai:gpt-5...) and Gemini 3"
BUDGET_HINT = "--thinking-budget is for Gemini thinking models (gemini:gemini-2.5-pro...)"


def refuse_options(spec: str, *, reasoning_effort: str | None = None, thinking_budget: int | None = None,
                   usable: Iterable[str] = ()) -> None:
    """ConfigError when the run asks `spec` for a setting it cannot send (rather than silently dropping it)."""
    usable = set(usable)
    if reasoning_effort is not None and "reasoning_effort" not in usable:
        raise ConfigError(f"{EFFORT_HINT}; {spec} cannot use it")
    if thinking_budget is not None and "thinking_budget" not in usable:
        raise ConfigError(f"{BUDGET_HINT}; {spec} cannot use it"
                          + (" (OpenAI reasoning models take --reasoning-effort)" if spec.startswith("openai:") else ""))


# --- OpenAI reasoning models --------------------------------------------------------------------

# OpenAI's reasoning models take `max_completion_tokens` (thinking and answer together), refuse
# `max_tokens` and any temperature or top_p but the default, and accept `reasoning_effort`:
#   o1, o1-mini, o1-pro, o3, o3-mini, o3-pro, o4-mini (any dated snapshot), codex-mini,
#   gpt-5, gpt-5-mini, gpt-5-nano, gpt-5.1, gpt-5-pro... but not gpt-5-chat(-latest), the chat model.
# A model missing here is still served: its first refusal teaches the policy (see ChatPolicy.adapt).
_REASONING_NAME = re.compile(r"^(o[134](-|$)|gpt-5(?!-chat)|codex-mini)")


def is_openai_reasoning_model(model: str) -> bool:
    """By name, after any router prefix (`openai/o3`).

    >>> [is_openai_reasoning_model(m) for m in ("o4-mini", "gpt-5.1", "gpt-5-chat-latest", "gpt-4o", "openai/o3")]
    [True, True, False, False, True]
    """
    return bool(_REASONING_NAME.match(model.rsplit("/", 1)[-1].lower()))


# --- what a 400 says ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Refusal:
    """A 400 that names a request field the server will not take (OpenAI: error.param/error.code)."""

    param: str
    message: str


_UNSUPPORTED = re.compile(r"Unsupported (?:parameter|value): '([A-Za-z_.]+)'")
_ADAPTABLE = {"max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "reasoning_effort"}


def error_message(payload: bytes) -> str:
    """The server's own words: OpenAI's {"error": {"message"}}, vLLM's {"message"}, or the text."""
    try:
        data = json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", "replace") or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for key in ("message", "detail", "error"):
            if data.get(key):
                return str(data[key])
    return str(data)


def parse_refusal(payload: bytes) -> Refusal | None:
    """The field an OpenAI-style 400 refuses, when it is one the policy can adapt.

    >>> parse_refusal(b'{"error": {"message": "Unsupported parameter: \\'max_tokens\\' is not supported with this '
    ...               b'model.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}').param
    'max_tokens'
    """
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    message = str(error.get("message") or "")
    param = error.get("param")
    match = _UNSUPPORTED.search(message)
    if not isinstance(param, str) or param not in _ADAPTABLE:
        param = match.group(1) if match else None
    if param in _ADAPTABLE and (match or error.get("code") in ("unsupported_parameter", "unsupported_value")):
        return Refusal(param, message)
    return None


# vLLM has worded its context refusal differently in almost every release; what stays is the two numbers.
# So the refusal is read by meaning: one phrase that gives the context (N) and one that gives the prompt's
# tokens (M), wherever they stand. Every wording below is rendered from the f-strings of the released wheels
# (path inside the package, version) in tests/test_reasoning_vllm_server.py:
#   "This model's maximum context length is N tokens. However, you requested T tokens (M in the messages, K in
#    the completion)."  / "... you requested M tokens in the messages, ..." (no limit)
#                                               entrypoints/openai/serving_engine.py, 0.9.2
#   "This model's maximum context length is N tokens. However, your request has M input tokens."   (prompt alone)
#   "'max_tokens' or 'max_completion_tokens' is too large: K. This model's maximum context length is N tokens
#    and your request has M input tokens (K > N - M)."
#                                               entrypoints/openai/serving_engine.py 0.11.0-0.14.0,
#                                               entrypoints/openai/engine/serving.py 0.17.0
#   "You passed M input tokens and requested K output tokens. However, the model's context length is only N
#    tokens, resulting in a maximum input length of N - K tokens."    renderers/params.py, 0.17.0
#   "This model's maximum context length is N tokens. However, you requested K output tokens and your prompt
#    contains [at least] M input tokens, for a total of [at least] T tokens."    renderers/params.py, 0.20.0
#   "This model's maximum context length is N tokens. However, your prompt contains [at least] M input tokens,
#    which exceeds this limit even without any output tokens."        renderers/params.py, 0.33.0
#   "Input length (M) exceeds model's maximum context length (N)."    entrypoints/utils.py 0.20.0,
#                                               entrypoints/serve/utils/api_utils.py 0.33.0 (get_max_tokens)
#   "The decoder prompt (length M) is longer than the maximum model length of N."  (also "... (length M) plus
#    the number of requested output tokens (at least 1) is longer ...", 0.33.0)    v1 engine processor
# Since 0.12 a VLLMValidationError's message ends "(parameter=input_tokens, value=M)"; it changes nothing here.
# Not read as a context overflow: a refusal that counts characters ("your prompt contains C characters", "You
# passed C input characters") gives no token count, and the *encoder* prompt's refusal names the encoder cache,
# not the context. A limit above the whole context ("max_tokens=K cannot be greater than max_model_len=N",
# renderers/params.py 0.20.0 and 0.33.0) names the context alone: `parse_limit_over_context`.
_CONTEXT_NUMBER = re.compile(
    r"(?:maximum\s+context\s+length|context\s+length|maximum\s+model\s+length)(?:\s+is)?(?:\s+only)?(?:\s+of)?"
    r"\s*\(?\s*(\d[\d,]*)", re.IGNORECASE)
_PROMPT_NUMBER = re.compile(
    r"\(\s*(\d[\d,]*)\s+in\s+the\s+messages"
    r"|(?:request|prompt|messages?)\s+(?:has|contains|resulted\s+in)(?:\s+at\s+least)?\s+(\d[\d,]*)\s*(?:input\s+)?tokens"
    r"|you\s+requested\s+(\d[\d,]*)\s+tokens\s+in\s+the\s+messages"
    r"|you\s+passed\s+(\d[\d,]*)\s+input\s+tokens"
    r"|input\s+length\s*\(\s*(\d[\d,]*)\s*\)"
    r"|(?<!encoder\s)prompt\s*\(\s*length\s+(\d[\d,]*)\s*\)", re.IGNORECASE)
_LIMIT_OVER_CONTEXT = re.compile(
    r"max_(?:completion_)?tokens\s*=\s*\d[\d,]*\s*cannot\s+be\s+greater\s+than\s+max_model_len\s*="
    r"(?:\s*max_total_tokens\s*=)?\s*(\d[\d,]*)", re.IGNORECASE)


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def parse_context_overflow(message: str) -> tuple[int, int] | None:
    """(context, prompt tokens) from a server's refusal for passing its context, in any of vLLM's wordings.

    >>> parse_context_overflow("This model's maximum context length is 16384 tokens. However, you requested "
    ...                        "17000 tokens (616 in the messages, 16384 in the completion).")
    (16384, 616)
    >>> parse_context_overflow("This model's maximum context length is 8192 tokens. However, your prompt contains "
    ...                        "9000 input tokens, which exceeds this limit even without any output tokens.")
    (8192, 9000)
    >>> parse_context_overflow("Input length (66001) exceeds model's maximum context length (65536).")
    (65536, 66001)
    >>> parse_context_overflow("You passed 40000 input characters and requested 64 output tokens. However, the "
    ...                        "model's context length is only 8192 tokens.") is None  # characters, not tokens
    True
    """
    message = message[:4000]  # a refusal is one sentence or two; a long body is something else
    context = _CONTEXT_NUMBER.search(message)
    prompt = _PROMPT_NUMBER.search(message)
    if context is None or prompt is None:
        return None
    return _count(context.group(1)), _count(next(g for g in prompt.groups() if g))


def parse_limit_over_context(message: str) -> int | None:
    """The context a server names when it refuses a limit larger than the whole context (vLLM 0.20+).

    >>> parse_limit_over_context("max_tokens=16384 cannot be greater than max_model_len=8192. Please request "
    ...                          "fewer output tokens. (parameter=max_tokens, value=16384)")
    8192
    """
    match = _LIMIT_OVER_CONTEXT.search(message[:4000])
    return _count(match.group(1)) if match else None


def rough_prompt_tokens(messages: tuple[Message, ...]) -> int:
    """A cheap size of a prompt before the server counts it: ~4 characters per text token, 256 per image. Only
    its ratio to the server's count matters: ChatPolicy scales it by what the server reported."""
    chars = sum(len(part) for m in messages for part in m.content if isinstance(part, str))
    images = sum(1 for m in messages for part in m.content if isinstance(part, ImagePart))
    return max(1, chars // 4 + 256 * images)


PROMPT_MARGIN = 1.1  # a calibrated prompt estimate is taken 10% larger when fitting the limit under the context
UNSEEN_PROMPT_FACTOR = 8  # before any calibration, a prompt may count this many times the rough estimate

# --- the policy of one openai: backend instance -------------------------------------------------

class ChatPolicy:
    """What one `openai:` backend sends; shared by its concurrent requests, changed under a lock. Starts from
    the name table (reasoning models: `max_completion_tokens`, no temperature) and learns from refusals: each
    adaptation is made once, and every later request uses it."""

    def __init__(self, model: str, generation: GenerationConfig | None = None, *, local: bool = False) -> None:
        generation = generation or GenerationConfig()
        self.model = model
        self.reasoning = is_openai_reasoning_model(model)
        self.reasoning_effort = generation.reasoning_effort
        self.local = local  # a self-hosted server: ask it for its context once
        # The run's limit, as its requests carry it: the protocol's budget is fitted under a small
        # context; a limit the user chose is refused at start-up instead.
        self.max_tokens = generation.max_tokens
        self.max_tokens_explicit = not generation.fit_to_context
        self.token_param = "max_completion_tokens" if self.reasoning else "max_tokens"
        self.send_temperature = not self.reasoning
        self.send_seed = True
        self.context: int | None = None
        self.context_source: str | None = None
        self.fatal: str | None = None  # set once a refusal cannot be adapted: later requests fail at once
        self.resent = 0  # requests sent again after a refusal the policy adapted to
        self.adaptations: list[str] = []
        self.requested: dict[str, Any] = {}
        self._scale: float | None = None  # server prompt tokens / rough_prompt_tokens, the largest seen
        self._limits_fitted = 0
        self._version = 0
        self._lock = threading.Lock()

    # -- building a request
    def body(self, model: str, messages: list[dict[str, Any]], config: Any, prompt_size: int,
             limit: int | None = None) -> tuple[dict[str, Any], int]:
        """The JSON body for one request and the policy version it was built with. `limit` overrides the token
        limit for this request (after a context refusal that named its prompt)."""
        with self._lock:
            if not self.requested:
                self.requested = {"temperature": config.temperature, "max_tokens": config.max_tokens,
                                  "seed": config.seed}
            body: dict[str, Any] = {"model": model, "messages": messages}
            if self.send_temperature:
                body["temperature"] = config.temperature
            if self.send_seed and config.seed is not None:
                body["seed"] = config.seed
            if config.reasoning_effort is not None:
                body["reasoning_effort"] = config.reasoning_effort
            tokens = limit if limit is not None else self._fit(config.max_tokens, prompt_size)
            if tokens is not None:
                body[self.token_param] = tokens
            return body, self._version

    def _fit(self, requested: int | None, prompt_size: int) -> int | None:
        """The limit to send: the requested one, lowered to the room the prompt leaves in the context.

        What vLLM does with a limit, read in its released wheels:
        - 0.33.0: `get_max_tokens` (vllm/entrypoints/serve/utils/api_utils.py) generates
          min(max_model_len - prompt, the request's limit, --override-generation-config's max_new_tokens,
          the platform's cap), so a limit is clamped to the room left; `TokenizeParams` (vllm/renderers/params.py)
          refuses only a limit above max_model_len, and a prompt above it. Without a limit the request's place is
          taken by the checkpoint's generation_config `max_new_tokens` (`ModelConfig.get_diff_sampling_param`,
          vllm/config/model.py), which may be far below what was asked; only without one is it the room left.
        - 0.20.0: the same `get_max_tokens` (vllm/entrypoints/utils.py), but renderers/params.py refuses
          prompt + limit above max_model_len; 0.11.0-0.17.0 refuse it in the serving layer, and 0.11.0's
          `get_max_tokens` also caps a sent limit at generation_config's `max_new_tokens`.
        So the limit is never dropped, and min(limit, room) is what 0.33 would generate anyway and what the
        versions that refuse prompt + limit accept. The prompt is an estimate scaled by what the server counted;
        a refusal that names the prompt corrects it.
        """
        if requested is None or self.context is None:
            return requested
        # Once calibrated, the estimate keeps a 10% margin: prompts of other items (more images, less text)
        # scale a little differently from the one the server counted.
        estimate = prompt_size * self._scale * PROMPT_MARGIN if self._scale else prompt_size
        room = self.context - int(estimate)
        if requested > room:
            self._limits_fitted += 1
            return max(1, room)
        return requested

    def limit_fits_unseen(self, requested: int | None, prompt_size: int) -> bool:
        """Whether the limit fits the known context even if the prompt is UNSEEN_PROMPT_FACTOR times the
        rough estimate (images can cost far more tokens than it assumes): then nothing needs calibrating.

        >>> policy = ChatPolicy("qwen", local=True)
        >>> policy.set_context(262144, "GET /models max_model_len")
        >>> policy.limit_fits_unseen(16384, 1000), policy.limit_fits_unseen(260000, 1000)
        (True, False)
        """
        return self.context is not None and (
            requested is None or requested + prompt_size * UNSEEN_PROMPT_FACTOR <= self.context)

    def learn_prompt_size(self, prompt_size: int, server_tokens: int | None) -> None:
        """Calibrate the prompt estimate by what the server counted (usage or a refusal)."""
        if isinstance(server_tokens, int) and server_tokens > 0 and prompt_size > 0:
            with self._lock:
                self._scale = max(self._scale or 0.0, server_tokens / prompt_size)

    # -- the server's context
    def set_context(self, context: int | None, source: str) -> None:
        with self._lock:
            if context and context > 0 and self.context is None:
                self.context, self.context_source = int(context), source
                if self.max_tokens_explicit and self.max_tokens is not None and self.max_tokens >= context:
                    self.fatal = (f"--max-tokens {self.max_tokens} does not fit the server's context of {context} "
                                  f"tokens for {self.model} (prompt + limit must fit): lower --max-tokens, leave it "
                                  "at its default, or start the server with a larger --max-model-len")

    # -- refusals
    def adapt(self, payload: bytes, version: int, prompt_size: int, requested: int | None) -> tuple[str, Any]:
        """Answer a 400: ("retry", limit for this request or None), ("fail", message or None), or ("no", None).
        A refusal another request already adapted to (the version moved on) is simply retried."""
        message = error_message(payload)
        overflow = parse_context_overflow(message)
        if overflow is not None:
            return self._adapt_context(*overflow, prompt_size=prompt_size, requested=requested)
        whole_context = parse_limit_over_context(message)
        if whole_context is not None:  # the context, not the prompt: the next body fits the limit by estimate
            self.set_context(whole_context, "the server's refusal of a limit above its context")
            with self._lock:
                if self.fatal:
                    return "fail", None
                if self.context is None or requested is None or requested < self.context:
                    return "no", None  # it refused something else than the limit this policy sends
                if not any(a.startswith("context") for a in self.adaptations):
                    self._note(f"context refusal: prompt + limit kept under the server's {self.context} tokens")
            return "retry", None
        refusal = parse_refusal(payload)
        if refusal is None:
            return "no", None
        with self._lock:
            if version != self._version:
                return "retry", None
            param = refusal.param
            if param == "reasoning_effort":
                self.fatal = (f"the server refuses reasoning_effort for {self.model}: run without "
                              f"--reasoning-effort ({' '.join(refusal.message.split())[:100]})")
                return "fail", None
            if param == "max_tokens" and self.token_param == "max_tokens":
                self.token_param = "max_completion_tokens"
                self._note("max_tokens refused: the limit is sent as max_completion_tokens")
            elif param == "max_completion_tokens" and self.token_param == "max_completion_tokens":
                self.token_param = "max_tokens"
                self._note("max_completion_tokens refused: the limit is sent as max_tokens")
            elif param in ("temperature", "top_p") and self.send_temperature:
                self.send_temperature = False
                self._note("temperature refused: omitted (the model only samples at its default)")
            elif param == "seed" and self.send_seed:
                self.send_seed = False
                self._note("seed refused: omitted")
            else:
                return "no", None
            return "retry", None

    def _adapt_context(self, context: int, prompt: int, *, prompt_size: int, requested: int | None) -> tuple[str, Any]:
        self.set_context(context, "the server's context-length refusal")
        self.learn_prompt_size(prompt_size, prompt)
        with self._lock:
            if self.fatal:
                return "fail", None
            room = context - prompt
            if room < 1:  # the prompt alone fills the context: no limit can help this item
                return "fail", (f"the prompt is {prompt} tokens, the server's context {context}: send fewer "
                                "--images or a smaller --max-image-side, or give the server a larger --max-model-len")
            if not any(a.startswith("context") for a in self.adaptations):
                self._note(f"context refusal: prompt + limit kept under the server's {context} tokens")
            return "retry", room if requested is None else min(requested, room)

    def count_resent(self) -> None:
        """One refused request is sent again, as the policy now says."""
        with self._lock:
            self.resent += 1

    def _note(self, text: str) -> None:
        self.adaptations.append(text)
        self._version += 1

    # -- run.json
    def describe(self) -> dict[str, Any]:
        """Exactly what is sent, as learned so far (describe() is called again after the run)."""
        with self._lock:
            requested = self.requested or {}
            limit = requested.get("max_tokens", self.max_tokens)
            policy: dict[str, Any] = {
                "recognised_as": "reasoning model (name table)" if self.reasoning else "chat model",
                "token_limit_param": self.token_param,
                "token_limit": limit if limit is not None else "none sent (the server's default)",
                "temperature": (requested.get("temperature", 0.0) if self.send_temperature
                                else "omitted (the model only supports its default)"),
                "seed": requested.get("seed", "as requested") if self.send_seed else "omitted (refused by the server)",
                "reasoning_effort": self.reasoning_effort,
            }
            if self.context is not None:
                policy["server_context"] = self.context
                policy["server_context_source"] = self.context_source
                policy["token_limit_fit"] = "lowered to the room the prompt leaves when prompt + limit would pass the context"
                policy["requests_with_limit_fitted"] = self._limits_fitted
            if self.adaptations:
                policy["adapted"] = list(self.adaptations)
            policy["resent"] = self.resent
            return policy
