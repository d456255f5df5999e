"""The metric demos: headline figures first (percentages with 2 decimals), raw keys folded below."""

from __future__ import annotations

import json

import gradio as gr
import pytest

from tests.helpers_metrics import load_app, run_doctests

APPS = ("dining_accuracy", "nutrition_error", "judge_accuracy")


@pytest.fixture(scope="module")
def apps():
    return {name: load_app(name) for name in APPS}


def _components(demo: gr.Blocks) -> list[gr.components.Component]:
    return list(demo.blocks.values())


@pytest.mark.parametrize("name", APPS)
def test_each_app_builds_with_the_raw_keys_folded_and_one_public_score_endpoint(apps, name):
    demo = apps[name].demo
    assert isinstance(demo, gr.Blocks)
    blocks = _components(demo)
    (raw,) = [b for b in blocks if isinstance(b, gr.JSON)]
    folded = [b for b in blocks if isinstance(b, gr.Accordion) and b.label == "All result keys"]
    assert len(folded) == 1 and folded[0].open is False and raw.parent is folded[0]
    endpoints = demo.get_api_info()["named_endpoints"]
    assert list(endpoints) == ["/score"]  # the formatting step is not a second endpoint
    assert [r["component"] for r in endpoints["/score"]["returns"]] == ["Json"]


@pytest.mark.parametrize("name", APPS)
def test_formatting_docstring_examples_run(apps, name):
    names = ("headline", "nutrient_rows") if name == "nutrition_error" else ("headline",)
    assert run_doctests(apps[name], *names) >= len(names)


@pytest.mark.parametrize("name", APPS)
def test_an_error_is_one_line_and_nothing_else(apps, name):
    app = apps[name]
    assert app.headline({"error": "2 predictions but 1 references"}) == "**Error:** 2 predictions but 1 references"
    if name == "nutrition_error":
        assert app.present({"error": "x"}) == ("**Error:** x", [])


def test_dining_headline_hand_computed(apps):
    app = apps["dining_accuracy"]
    # 11 of 45 right: 24.444...% shows as 24.44; 2 unparsed
    result = {"accuracy": 11 / 45, "n": 45, "parse_failures": 2, "correct": [True] * 11 + [False] * 34}
    text = app.headline(result)
    assert text.splitlines()[0] == "**Accuracy: 24.44%** (11 of 45 correct)"
    assert "n = 45 · parse failures: 2" in text
    # the app's own example: C and D right of 4, "It could be A or E." unparsed
    live = app.headline(app.score("C\nAnswer: B\n答案：D\nIt could be A or E.", "C\nA\nD\nE", 8))
    assert live.startswith("**Accuracy: 50.00%** (2 of 4 correct)") and "parse failures: 1" in live
    assert app.headline(app.score("A\nB", "A", 8)).count("\n") == 0


def test_nutrition_headline_and_table_hand_computed(apps):
    app = apps["nutrition_error"]
    result = {
        "n": 2, "parse_failures": 0, "avg_mape": 0.2445, "avg_mape_parsed_only": 0.2445, "zero_gt_exclusions": 1,
        "calories_mae": 50.0, "calories_rmse": 70.71067811865476, "calories_mape": 0.1,
        "protein_mae": 5.0, "protein_rmse": 5.0, "protein_mape": 0.2,
        "carbohydrates_mae": 0.0, "carbohydrates_rmse": 0.0, "carbohydrates_mape": 0.0,
        "fat_mae": 2.125, "fat_rmse": 3.0, "fat_mape": None,  # every fat reference was 0
    }
    text = app.headline(result)
    assert text.splitlines()[0] == "**Average MAPE: 24.45%** (lower is better)"
    assert "parse failures: 0" in text and "1 reference values of 0 left out of MAPE" in text
    assert app.TABLE_HEADERS == ["Nutrient", "Unit", "MAE", "RMSE", "MAPE (%)"]
    assert app.nutrient_rows(result) == [
        ["calories", "kcal", "50.00", "70.71", "10.00"],
        ["protein", "g", "5.00", "5.00", "20.00"],
        ["carbohydrates", "g", "0.00", "0.00", "0.00"],
        ["fat", "g", "2.12", "3.00", "—"],
    ]


def test_nutrition_app_example_shows_its_figures(apps):
    app = apps["nutrition_error"]
    text, rows = app.present(app.score(app.EXAMPLE_PREDICTIONS, app.EXAMPLE_REFERENCES))
    # calories APEs 0.1, 0.0625, 1.0 -> 38.75%; |errors| 50, 40, 300 -> MAE 130
    assert rows[0][:3] == ["calories", "kcal", "130.00"] and rows[0][4] == "38.75"
    assert "parse failures: 1" in text
    # parsed only: calories (0.1 + 0.0625) / 2, protein (0.2 + 1/6) / 2, carbohydrates 0, fat (0.1 + 0.2) / 2
    assert "parsed answers only: 10.36%" in text


def test_all_unparsed_nutrition_shows_a_dash_not_a_crash(apps):
    app = apps["nutrition_error"]
    result = app.score('["no idea"]', '{"calories": 500, "protein": 25, "carbohydrates": 50, "fat": 20}')
    text, rows = app.present(result)
    assert "**Average MAPE: 100.00%**" in text and "parsed answers only: —" in text
    assert rows[0] == ["calories", "kcal", "500.00", "500.00", "100.00"]


def test_judge_headline_hand_computed(apps):
    app = apps["judge_accuracy"]
    result = {"accuracy": 0.4, "accuracy_scored": 2 / 3, "n": 5, "unscored": 2, "decided_by_rule": 1,
              "verdicts": ["C", None, "I", "C", None], "injection_suspected": 1}
    lines = app.headline(result).split("\n\n")
    assert lines[0] == "**Judge accuracy: 40.00%** (2 of 5 correct; unscored counts as not correct)"
    assert lines[1] == "n = 5 · scored: 3 · unscored: 2 · decided by rule: 1 · accuracy on scored items: 66.67%"
    assert lines[2] == "1 answers carry text aimed at the judge"
    # without a judge a free-text reference stays unscored; the closed-form one is decided by rule
    live = app.headline(app.score("是否符合素食要求？\nWhat is in the sauce?", "不符合。\nLard and soy.",
                                  "不符合。\nLard.", ""))
    assert live.startswith("**Judge accuracy: 50.00%** (1 of 2 correct")
    assert "scored: 1 · unscored: 1 · decided by rule: 1 · accuracy on scored items: 100.00%" in live


def test_the_judge_app_calls_an_openai_compatible_endpoint_on_its_own(apps, monkeypatch, tmp_path):
    from tests.fakes.openai_server import FakeOpenAIServer

    app = apps["judge_accuracy"]
    key = "sk-judge-0123456789abcdef"
    monkeypatch.setenv("HOME", str(tmp_path))  # the verdict cache goes under ~/.cache
    monkeypatch.setenv("OPENAI_API_KEY", key)
    seen = []

    def oracle(request):
        seen.append(request)
        return "GRADE: C" if "Lard and soy." in request.prompt else "GRADE: I"

    with FakeOpenAIServer(oracle) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = app.score("What is in the sauce?\nWhat is on top?", "Lard and soy.\nPeanuts.",
                           "Lard and soy sauce.\nSesame.", "openai:judge-x")
        server.inject("401", times=10)
        failed = app.score("What is in the sauce?", "Garlic.", "Ginger.", "openai:judge-x")
    assert result["verdicts"] == ["C", "I"] and result["accuracy"] == 0.5
    assert [r.body["model"] for r in seen] == ["judge-x", "judge-x"] and seen[0].temperature == 0
    assert all(r.headers.get("authorization") == f"Bearer {key}" for r in seen)
    assert key not in json.dumps(failed)
    assert app.score("q", "a", "b", "gemini:flash") == {
        "error": "judge 'gemini:flash': this app calls an OpenAI-compatible endpoint; use openai:MODEL"}
