"""Gemini finish reasons, read from the installed google-genai SDK's own `FinishReason` enum and
parsed by its own response model: a reason that ends the answer for good is recorded as blocked on
the first attempt, never retried as an "empty answer"."""

from __future__ import annotations

import pytest
from google.genai import types

from eval.backends import gemini
from eval.types import BackendError
from tests.helpers_backends import opts

SDK_REASONS = set(types.FinishReason.__members__)


def backend() -> gemini.GeminiBackend:
    return gemini.GeminiBackend("gemini-2.5-pro", opts(api_key="AIza-test-finish-0000"))


def response(finish: str, text: str | None = None) -> types.GenerateContentResponse:
    content = {"role": "model", "parts": [{"text": text}]} if text is not None else {"role": "model"}
    return types.GenerateContentResponse.model_validate(
        {"candidates": [{"content": content, "finishReason": finish, "index": 0}],
         "usageMetadata": {"promptTokenCount": 10}})


def test_every_reason_of_the_installed_sdk_is_classified():
    blocking = {reason for reason in SDK_REASONS if gemini.is_blocking_finish(reason)}
    assert SDK_REASONS - blocking <= gemini.ANSWERED_FINISH | gemini.RETRYABLE_FINISH
    # google-genai 3.6's image and Model Armor reasons are among the blocking ones.
    assert {"IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER", "MODEL_ARMOR", "SAFETY"} <= blocking
    assert not blocking & (gemini.ANSWERED_FINISH | gemini.RETRYABLE_FINISH)


@pytest.mark.parametrize("finish", sorted(SDK_REASONS - {"STOP", "MAX_TOKENS", "CONTINUATION", "FINISH_REASON_UNSPECIFIED",
                                                         "OTHER", "MALFORMED_RESPONSE"}))
def test_a_blocking_reason_without_text_is_blocked_not_retried(finish):
    with pytest.raises(BackendError) as raised:
        backend()._response(response(finish))
    assert raised.value.retryable is False and finish in str(raised.value) and "blocked" in str(raised.value)


@pytest.mark.filterwarnings("ignore:SOME_FUTURE_REASON is not a valid")
def test_a_reason_newer_than_the_sdk_is_blocked_not_retried():
    # The SDK keeps an unknown enum value as text; it is still no reason to ask again.
    with pytest.raises(BackendError) as raised:
        backend()._response(response("SOME_FUTURE_REASON"))
    assert raised.value.retryable is False and "SOME_FUTURE_REASON" in str(raised.value)


@pytest.mark.parametrize("finish", ["OTHER", "MALFORMED_RESPONSE", "FINISH_REASON_UNSPECIFIED"])
def test_a_transient_reason_without_text_is_retried(finish):
    with pytest.raises(BackendError) as raised:
        backend()._response(response(finish))
    assert raised.value.retryable is True and "empty answer" in str(raised.value)


@pytest.mark.parametrize(("finish", "contract"), [("STOP", "stop"), ("MAX_TOKENS", "length"), ("CONTINUATION", "length")])
def test_normal_and_truncated_answers_are_answers(finish, contract):
    got = backend()._response(response(finish, "Calories: 400 kcal"))
    assert (got.text, got.finish_reason) == ("Calories: 400 kcal", contract)
