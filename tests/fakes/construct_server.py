"""A fake VLM for the construction stages: the OpenAI-compatible fake (with its recorded requests and
switchable faults) answering each stage's prompt from the synthetic raw export's truth.

The answers come from `construct.standin.ConstructOracle`, the oracle behind the command-line
stand-in `python -m construct.standin` (see its docstring for what it answers and which defects
it plants), so the tests and the README's offline demo answer alike.
"""

from __future__ import annotations

from typing import Any

from construct.standin import CLASSIFICATION_PLANTS, VQA_PLANTS, ConstructOracle
from tests.fakes.openai_server import FakeOpenAIServer

__all__ = ["CLASSIFICATION_PLANTS", "VQA_PLANTS", "ConstructOracle", "construct_server"]


def construct_server(truth: dict[str, Any], filter_models: tuple[str, str]) -> tuple[FakeOpenAIServer, ConstructOracle]:
    oracle = ConstructOracle(truth, filter_models)
    return FakeOpenAIServer(oracle), oracle
