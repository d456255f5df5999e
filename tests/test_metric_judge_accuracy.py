"""judge_accuracy: rule, judge, cache and unscored verdicts, through the functions and evaluate.load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gradio as gr
import pytest

from eval.judge import make_judge
from metrics.judge_accuracy.core import (
    JUDGE_PROMPT_VERSION,
    VerdictCache,
    judge_items,
    score_verdicts,
)
from tests.helpers_metrics import ROOT, load_app, load_metric, run_doctests

QUESTIONS = [
    "该菜品是否符合素食者的饮食要求？",            # closed form: the rule decides
    "What cooking technique is used for the pork?",  # open: the judge decides
    "Which sauce is on the noodles?",               # open: the judge's reply is unreadable
    "Is the dish spicy?",                           # no answer (failed generation)
]
REFERENCES = ["不符合。酱汁含有猪油。", "Twice-cooked: boiled, then stir-fried.", "Sesame paste.", "Yes."]
CANDIDATES = ["不符合，有猪油。", "It is boiled first and then stir-fried.", "Peanut sauce, I think.", None]


class ScriptedJudge:
    """A judge callable with canned replies keyed by a phrase of the candidate; counts its calls."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if "stir-fried" in prompt.split("<<<CANDIDATE")[1]:
            return "Both say boiled then stir-fried.\nGRADE: C"
        return "Hard to say."  # no GRADE line: unscored


def test_rule_judge_unreadable_and_missing_answers(tmp_path):
    judge = ScriptedJudge()
    results = judge_items(QUESTIONS, REFERENCES, CANDIDATES, judge, "scripted-v1", tmp_path)
    assert [(v, d) for v, d, _ in results] == [("C", "rule"), ("C", "judge"), (None, "judge"), ("I", "no_answer")]
    assert len(judge.prompts) == 2  # the rule and the missing answer never reach the judge
    scores = score_verdicts([v for v, _, _ in results], [d for _, d, _ in results])
    # correct: items 0 and 1 -> 2 / 4 = 0.5; scored: 3 -> 2 / 3; unscored: item 2
    assert scores["accuracy"] == 0.5
    assert scores["accuracy_scored"] == pytest.approx(2 / 3)
    assert (scores["n"], scores["unscored"], scores["decided_by_rule"]) == (4, 1, 1)
    assert scores["verdicts"] == ["C", "C", None, "I"]


def test_cached_verdicts_are_never_requested_again(tmp_path):
    first = ScriptedJudge()
    judge_items(QUESTIONS, REFERENCES, CANDIDATES, first, "scripted-v1", tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 1  # only the readable verdict is stored
    assert rows[0]["judge_model"] == "scripted-v1" and rows[0]["prompt_version"] == JUDGE_PROMPT_VERSION
    assert rows[0]["prompt_sha256"] == VerdictCache.prompt_hash(first.prompts[0])

    second = ScriptedJudge()
    results = judge_items(QUESTIONS, REFERENCES, CANDIDATES, second, "scripted-v1", tmp_path)
    assert results[1][:2] == ("C", "cache")
    assert len(second.prompts) == 1  # only the unreadable one is asked again

    other_model = ScriptedJudge()
    judge_items(QUESTIONS, REFERENCES, CANDIDATES, other_model, "another-judge", tmp_path)
    assert len(other_model.prompts) == 2  # the cache key includes the judge model


def test_a_failing_judge_leaves_items_unscored(tmp_path):
    def broken(prompt: str) -> str:
        raise TimeoutError("judge did not answer")

    results = judge_items(QUESTIONS[1:2], REFERENCES[1:2], CANDIDATES[1:2], broken, "broken", tmp_path)
    assert results[0][0] is None and results[0][1] == "judge_error" and "TimeoutError" in results[0][2]
    assert not (tmp_path / "verdicts.jsonl").exists()


def test_without_a_judge_only_the_rule_decides(tmp_path):
    results = judge_items(QUESTIONS, REFERENCES, CANDIDATES, None, None, tmp_path)
    assert [(v, d) for v, d, _ in results] == [("C", "rule"), (None, "none"), (None, "none"), ("I", "no_answer")]


def test_concurrent_callable_judge_keeps_item_order(tmp_path):
    questions = [f"Which sauce is on dish {i}?" for i in range(12)]
    references = [f"Sauce {i}." for i in range(12)]
    candidates = [f"Sauce {i}." if i % 3 else f"Sauce {i + 1}." for i in range(12)]

    def judge(prompt: str) -> str:
        reference = prompt.split("Reference answer:\n")[1].split("\n")[0]
        candidate = prompt.split("<<<CANDIDATE\n")[1].split("\n")[0]
        return f"GRADE: {'C' if reference == candidate else 'I'}"

    results = judge_items(questions, references, candidates, judge, None, tmp_path, concurrency=4)
    assert [v for v, _, _ in results] == ["I" if i % 3 == 0 else "C" for i in range(12)]
    assert not (tmp_path / "verdicts.jsonl").exists()  # an unnamed callable is not cached


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="same length"):
        judge_items(["q"], ["r", "s"], ["c"], None)
    with pytest.raises(ValueError, match="concurrency"):
        judge_items(["q"], ["r"], ["c"], None, concurrency=0)
    with pytest.raises(ValueError, match="judge must be"):
        judge_items(["q"], ["r"], ["c"], 42)
    with pytest.raises(ValueError, match="judge 'nosuch:model'") as info:
        judge_items(["q"], ["r"], ["c"], "nosuch:model", cache_dir=tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="verdict 0"):
        score_verdicts(["maybe"], ["judge"])


class _FakeOpenAI(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible chat server: first a 500, then a graded reply."""

    requests: list[dict] = []
    fail_first = True

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if type(self).fail_first:
            type(self).fail_first = False
            self._send(500, {"error": {"message": "overloaded"}}, {"Retry-After": "0"})
            return
        prompt = body["messages"][0]["content"]
        grade = "C" if "boiled first" in prompt else "I"
        self._send(200, {
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"Reasoning.\nGRADE: {grade}"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        })

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def openai_server() -> Iterator[str]:
    _FakeOpenAI.requests, _FakeOpenAI.fail_first = [], True
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_harness_judge_through_a_local_server(openai_server, tmp_path, monkeypatch):
    metric = load_metric("judge_accuracy", monkeypatch)
    judge = make_judge("openai:judge-model", openai_server, retry_base_delay=0.01)
    try:
        result = metric.compute(predictions=CANDIDATES[:2], references=REFERENCES[:2], questions=QUESTIONS[:2],
                                judge=judge, judge_model="openai:judge-model", cache_dir=str(tmp_path))
        # item 0 by rule (C); item 1 by the judge after one retried 500 (C) -> 2 / 2
        assert result["verdicts"] == ["C", "C"] and result["decided_by"] == ["rule", "judge"]
        assert result["accuracy"] == 1.0 and result["judge_prompt_version"] == JUDGE_PROMPT_VERSION
        assert len(_FakeOpenAI.requests) == 2
        sent = _FakeOpenAI.requests[-1]
        assert sent["model"] == "judge-model" and sent["temperature"] == 0.0
        assert "It is boiled first and then stir-fried." in sent["messages"][0]["content"]

        again = metric.compute(predictions=CANDIDATES[:2], references=REFERENCES[:2], questions=QUESTIONS[:2],
                               judge=judge, judge_model="openai:judge-model", cache_dir=str(tmp_path))
        assert again["decided_by"] == ["rule", "cache"] and len(_FakeOpenAI.requests) == 2
    finally:
        judge.close()


async def test_harness_judge_from_inside_a_running_event_loop(openai_server, tmp_path):
    _FakeOpenAI.fail_first = False
    judge = make_judge("openai:judge-model", openai_server)
    try:  # the judge runs its own loop thread, so a caller that runs a loop can use it
        results = judge_items(QUESTIONS[1:3], REFERENCES[1:3], CANDIDATES[1:3], judge, None, tmp_path,
                              concurrency=2)
    finally:
        judge.close()
    assert [v for v, _, _ in results] == ["C", "I"]


def test_metric_and_harness_judge_the_same_text_of_a_cot_answer(tmp_path):
    # A chain-of-thought answer: the metric (raw text) and the harness (its VQA parser, then
    # scoring) must ask the judge the same prompt, so they agree and share one cache entry.
    from eval import scoring, tasks

    raw = "1. 观察：红油。\n2. 成分：辣椒、花椒。\n最终答案：It is boiled first and then stir-fried."
    asked: list[list[str]] = [[], []]
    judge_items([QUESTIONS[1]], [REFERENCES[1]], [raw], lambda p: asked[0].append(p) or "GRADE: C", None, tmp_path)
    record = {"reference": REFERENCES[1], "error": None, "merchant_id": "m", "parsed": tasks.parse_output(
        "vqa", raw, {}, "zh")}
    scoring.score_judged(tasks.get("vqa"), [record], [raw], [QUESTIONS[1]], lambda p: asked[1].append(p) or "GRADE: C", None,
                      tmp_path / "cache", concurrency=1, n_boot=10)
    assert asked[0] == asked[1] and len(asked[0]) == 1
    assert "最终答案" not in asked[0][0] and "It is boiled first and then stir-fried." in asked[0][0]
    assert record["parsed"] == "It is boiled first and then stir-fried." and record["verdict"] == "C"


def test_through_evaluate_load_with_a_callable(monkeypatch, tmp_path):
    metric = load_metric("judge_accuracy", monkeypatch)
    result = metric.compute(predictions=CANDIDATES, references=REFERENCES, questions=QUESTIONS,
                            judge=ScriptedJudge(), judge_model="scripted-v1", cache_dir=str(tmp_path))
    assert (result["accuracy"], result["unscored"], result["decided_by_rule"]) == (0.5, 1, 1)


def test_app_builds_and_decides_by_rule():
    app = load_app("judge_accuracy")
    assert isinstance(app.demo, gr.Blocks)
    result = app.score("是否符合素食要求？\nIs it safe for a peanut allergy?", "不符合。\nNo.", "不符合。\nYes.", "")
    assert result["verdicts"] == ["C", "I"] and result["accuracy"] == 0.5
    assert "error" in app.score("q1\nq2", "r1", "c1", "")


def test_a_spec_string_judge_is_a_one_line_error_pointing_at_make_judge(tmp_path):
    # The metric folder alone (as on the Hub): `eval` is not importable, a spec-string judge cannot work.
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import core as judge_accuracy\n"
        "try:\n"
        "    judge_accuracy.judge_items(['Q?'], ['Sesame.'], ['Peanut.'], 'openai:gpt-4o')\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    module_dir = str(ROOT / "metrics" / "judge_accuracy")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script, module_dir], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and "pass a callable" in lines[0] and "make_judge" in lines[0]


def test_class_docstring_example_runs_from_the_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    from metrics.judge_accuracy import judge_accuracy as module

    assert run_doctests(module, "JudgeAccuracy") == 4


def test_a_cache_line_cut_short_by_a_killed_run_is_skipped(tmp_path):
    judge_items(QUESTIONS, REFERENCES, CANDIDATES, ScriptedJudge(), "scripted-v1", tmp_path)
    with (tmp_path / "verdicts.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"judge_model": "scripted-v1", "prompt_sha')  # killed mid-write
    again = ScriptedJudge()
    results = judge_items(QUESTIONS, REFERENCES, CANDIDATES, again, "scripted-v1", tmp_path)
    assert results[1][:2] == ("C", "cache") and len(again.prompts) == 1
    # A new verdict written after the broken line is stored on a line of its own and found again.
    judge_items(QUESTIONS[1:2], REFERENCES[1:2], CANDIDATES[1:2], ScriptedJudge(), "new-judge", tmp_path)
    later = ScriptedJudge()
    judge_items(QUESTIONS[1:2], REFERENCES[1:2], CANDIDATES[1:2], later, "new-judge", tmp_path)
    assert later.prompts == []


def test_an_unusable_cache_dir_is_a_one_line_error(tmp_path):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot write the judge cache") as info:
        judge_items(QUESTIONS[1:2], REFERENCES[1:2], CANDIDATES[1:2], ScriptedJudge(), "scripted-v1", not_a_folder)
    assert "\n" not in str(info.value)
