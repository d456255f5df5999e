"""The one key scrubber catches every form a key travels in, for the backends and the Space alike."""

from __future__ import annotations

import json

import pytest

from eval.redact import redact
from eval.types import Prediction
from space.diningspace.evaluation import _sample_result
from space.diningspace.guard import REDACTED

KEY = "sk-test-0123456789abcdefXYZW"
PLUS = "sk-test+key/123456"


@pytest.mark.parametrize(("text", "expected"), [
    (f"bad key {KEY}", "bad key ***"),
    ("bad key sk-test-0123456789abcdefXYZ!", "bad key ***!"),  # 27 of 28 echoed
    ("Incorrect API key provided: sk-tes********************XYZW.", "Incorrect API key provided: ***."),
    ("key sk-tes...XYZW given", "key *** given"),  # masked, keeping the prefix and suffix
    ("key …abcdefXYZW given", "key *** given"),  # masked, keeping only the suffix
    ("?key=sk-test%2Bkey%2F123456&x=1", "?key=***&x=1"),  # URL-encoded (quote)
    ("?key=sk-test%2Bkey%2F123456", "?key=***"),
    ("body key=sk-test%2Bkey%2F1234 (cut)", "body key=*** (cut)"),  # a URL-encoded echo of 8+ characters
])
def test_every_form_of_the_key_is_redacted(text: str, expected: str) -> None:
    assert redact(text, [KEY, PLUS]) == expected


def test_ordinary_text_and_short_or_placeholder_secrets_are_left_alone() -> None:
    text = "HTTP 400: max_tokens is too large: 20000 > 16384 (see docs...) ****"
    assert redact(text, KEY) == text
    assert redact("nothing to hide", ["", None, "ab", "EMPTY"]) == "nothing to hide"
    assert redact("", KEY) == "" and redact("x", None) == "x"
    assert json.loads(redact(json.dumps({"k": KEY}), KEY)) == {"k": "***"}


def test_the_mark_is_the_callers() -> None:
    assert redact(f"401 for {PLUS} at ?key=sk-test%2Bkey%2F123456", PLUS, mark=REDACTED) == \
        "401 for [redacted] at ?key=[redacted]"


def test_the_space_scrubs_masked_and_encoded_keys_from_model_output() -> None:
    raw = f"echo sk-tes****XYZW and ?k=sk-test%2Bkey%2F123456 and {KEY[2:20]}"
    prediction = Prediction(id="c1", task="classification", raw=raw, parsed="A", error=None, attempts=1,
                            latency_s=0.0, usage=None, request_hash="h")
    shown = _sample_result({"id": "c1", "parsed": "A", "reference": "A"}, prediction, [KEY, PLUS], 10_000)
    assert shown.raw == "echo [redacted] and ?k=[redacted] and [redacted]"


def test_a_long_hostile_answer_is_scrubbed_in_one_pass() -> None:
    """A model answer of megabytes with no space, full of mask-like runs and near-echoes, is read in
    linear time (a backtracking pattern would not finish) and the key in it is still found."""
    filler = ("x" * 7 + "*" * 3 + KEY[:7] + "...") * 60_000  # ~1.4 MB: masks everywhere, echoes of 7 only
    shown = redact(filler + KEY + filler, [KEY, PLUS], mark=REDACTED)
    assert KEY not in shown and shown.count(REDACTED) >= 1 and len(shown) < 2 * len(filler) + len(KEY)
