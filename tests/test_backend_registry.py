"""The backend registry: a new backend is one module with `make(model, options)` and its `TRAITS`, plus its
name in the two lists; it runs end to end through the harness, and what it is (a key, open weights) is
asked of its traits, never of its name.

This very file is the toy backend's module: `make` and `TRAITS` below are what a backend module holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from eval import api, specs, tasks
from eval.backends import make_backend, traits
from eval.settings import RunSettings
from eval.types import BackendOptions, BackendTraits, GenerationConfig, Request, Response
from space.diningspace.evaluation import supports_own_keys

TRAITS = BackendTraits(open_weights=True)
SEEN: list[tuple[GenerationConfig, GenerationConfig]] = []  # (the options' config, each request's config)


class Echo:
    """Answers every task the same way: the first option, a fixed dish, a short sentence."""

    def __init__(self, model: str, options: BackendOptions) -> None:
        self.spec, self.options = f"toy:{model}", options

    async def generate(self, request: Request) -> Response:
        SEEN.append((self.options.generation, request.config))
        text = {"classification": "A", "nutrition": '{"calories": 400, "protein": 20, "fat": 15, '
                '"carbohydrates": 45}'}.get(str(request.task), "a plate of noodles")
        return Response(text=text, usage=None, finish_reason="stop")

    def describe(self) -> dict[str, Any]:
        return {"backend": "toy", "model": self.spec, "base_url_host": None}


def make(model: str, options: BackendOptions) -> Echo:
    return Echo(model, options)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(specs.BACKENDS, "toy", __name__)
    SEEN.clear()
    yield


def test_a_new_backend_runs_end_to_end_and_gets_the_protocols_config(toy, tmp_path):
    out = api.run(RunSettings(task="all", model="toy:echo", max_tokens=512, out=tmp_path / "run"), progress=False)
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {t.name for t in tasks.all_tasks()}
    assert metrics["classification"]["n"] == 40 and metrics["nutrition"]["n"] == 24
    info = json.loads((out / "run.json").read_text())
    assert info["backend"]["backend"] == "toy"
    # one road: the options' config is the one each request carries, the user's limit included
    assert SEEN and all(built == sent for built, sent in SEEN)
    assert {sent.max_tokens for _, sent in SEEN} == {512} and not SEEN[0][1].fit_to_context


def test_what_a_backend_is_comes_from_its_traits(toy):
    assert traits("toy").open_weights and not traits("toy").takes_key
    assert not supports_own_keys("toy")  # the Space offers a visitor's key only to a backend that takes one
    assert traits("openai").takes_key and traits("openai").public_endpoint == "https://api.openai.com/v1"
    assert traits("gemini").key_env == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert traits("hf").open_weights and traits("vllm").open_weights and not traits("baseline").takes_key


def test_a_backend_is_made_from_one_options_type(toy):
    backend = make_backend("toy:echo", BackendOptions(base_url=None, generation=GenerationConfig(max_tokens=7)))
    assert backend.options.generation.max_tokens == 7
    with pytest.raises(TypeError):
        make_backend("toy:echo", base_url="http://x")  # type: ignore[call-arg]  # no **kwargs road


def test_a_new_backend_touches_two_files():
    """Its module (here, this file) and its line in BACKENDS: nothing else names one."""
    from tests.tools.imports import ROOT

    for name, module in specs.BACKENDS.items():
        source = (ROOT / "eval/backends" / (module.removeprefix(".") + ".py")).read_text(encoding="utf-8")
        assert "\nTRAITS = BackendTraits(" in source and "\ndef make(model: str, options: BackendOptions)" in source, name
