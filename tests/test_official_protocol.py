"""`--protocol official`: the authors' scoring reproduced to the figure, and their requests to the byte.

The golden figures (tests/helpers_official.py AUTHORS_PRINTED) are what the authors' three scripts
printed for the hand-built answers of tests/corpus/official/, which exercise every rule: first-letter
misreads, letters I-Z, Chinese characters, the prediction file's own gt_answer, penalised nutrition
(prose, units, a missing nutrient, a list, a failed request), a zero reference, an unreadable ground
truth, Chinese and English keys, the JSON fence rule, the judge's keyword rule (是 / 否 / 不是 / Yes /
a reply that says neither), an empty and a failed VQA answer, an empty VQA reference.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from eval import api, official
from eval.official_io import export_official, import_official
from eval.settings import RunSettings, UsageError
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_official import (
    AUTHORS_JUDGE_PROMPTS,
    AUTHORS_PRINTED,
    CORPUS,
    answers,
    corpus_rows,
    image_bytes,
    image_paths,
    judge_replies,
    write_folder,
)


def _preds(name: str) -> dict[int, dict]:
    return {p["idx"]: p for p in corpus_rows(name)}


def _close(found: dict, expected: dict) -> None:
    """Every figure their script printed, to its fourth decimal (counts exactly)."""
    for key, value in expected.items():
        if isinstance(value, dict):
            _close(found[key], value)
        elif isinstance(value, int):
            assert found[key] == value, key
        else:
            assert round(found[key], 4) == pytest.approx(value, abs=1e-9), key


# ------------------------------------------------------------------ the rules, on their files
def test_classification_figures_equal_the_authors_script():
    _close(official.classification_figures(corpus_rows("classification.jsonl"), _preds("classification_pred.jsonl")),
           AUTHORS_PRINTED["classification"])


def test_a_prediction_files_own_gt_answer_wins_over_the_datasets():
    _close(official.classification_figures(corpus_rows("classification.jsonl"),
                                           _preds("classification_pred_gt_override.jsonl")),
           AUTHORS_PRINTED["classification_gt_override"])


def test_nutrition_figures_equal_the_authors_script_and_averages_are_the_four_nutrients_means():
    found = official.nutrition_figures(corpus_rows("nutrition.jsonl"), _preds("nutrition_pred.jsonl"))
    _close(found, AUTHORS_PRINTED["nutrition"])
    for name in ("mae", "rmse", "mape"):
        assert found[f"avg_{name}"] == pytest.approx(sum(found[k][name] for k in official.NUTRIENTS) / 4)
    assert found["gt_missing_count"] == 1  # the row whose ground truth is not JSON is left out


def test_vqa_rouge_and_judge_figures_equal_the_authors_script():
    rows, preds = corpus_rows("vqa.jsonl"), _preds("vqa_pred.jsonl")
    _close(official.vqa_rouge_figures(rows, preds), AUTHORS_PRINTED["vqa_rouge"])
    replies = judge_replies()
    verdicts = {i: False if failed else official.keyword_verdict(replies.get(answer, "无法判断"))
                for i, answer, _, _, failed in official.vqa_tasks(rows, preds)}
    _close(official.vqa_judge_figures(verdicts), AUTHORS_PRINTED["vqa_judge"])


def test_judge_prompts_are_the_authors_byte_for_byte():
    rows, preds = corpus_rows("vqa.jsonl"), _preds("vqa_pred.jsonl")
    prompts = {hashlib.sha256(official.judge_prompt(q, ref, a).encode()).hexdigest()[:16]
               for _, a, ref, q, failed in official.vqa_tasks(rows, preds) if not failed}
    assert prompts == AUTHORS_JUDGE_PROMPTS


def test_a_placeholder_inside_an_answer_is_not_filled_again():
    prompt = official.judge_prompt("Q {gt_answer}", "R", "{question}")
    assert "Q {gt_answer}" in prompt and "【预测答案】：\n{question}" in prompt


@pytest.mark.parametrize(("text", "model", "expected"), [
    ("<think>A</think>\n\nC", "minicpm-v-4.5", "C"),
    ("I think A.</think>\n\nB", "qwen-3-vl-8b-thinking", "B"),
    ("<analysis>x</analysis><answer> D </answer>", "keye-vl-1.5-8b", "D"),
    ("<think>A</think>C", "some-other-model", "<think>A</think>C"),
    ("so the answer is \\boxed{E}.", "some-other-model", "E"),
])
def test_thinking_is_removed_only_for_the_models_on_their_lists(text, model, expected):
    assert official.clean_thinking(text, model) == expected


@pytest.mark.parametrize(("answer", "letter", "unreadable"), [
    ("The answer is B", "T", False), ("答案：C", "答", True), ("Z", "Z", False), ("", "", True),
    ("**b**", "B", False), ("42", "", True),
])
def test_the_first_alphabetic_character_is_the_choice(answer, letter, unreadable):
    _, cannot, read = official.classification_item(answer, "B")
    assert (read, cannot) == (letter, unreadable)


def test_keyword_rule_reads_negative_words_first_and_the_strict_reading_differs_where_it_misreads():
    assert official.keyword_verdict("不是") is True and official.strict_verdict("不是") is False
    assert official.keyword_verdict("Not sure") is False  # "no" inside "not"
    assert official.strict_verdict("是。") is True and official.strict_verdict("无法判断") is None


def test_protocol_facts_are_read_from_the_data_file_with_their_provenance():
    facts = official.facts()
    assert facts["source"]["commit"] == "9c9bdf7" and facts["generation"]["max_tokens"] == 14336
    assert facts["vqa"]["fixed_ending_zh"].startswith("\n仅输出最终答案")


# ------------------------------------------------------------------ a run, end to end, on a folder of theirs
def _model_oracle(folder: Path, task: str):
    """A fake model that replays the hand-built answers, found by the prompt and image it was sent."""
    rows = corpus_rows(Path(folder / {"classification": "classification.jsonl", "nutrition": "nutrition.jsonl",
                                      "vqa": "vqa.jsonl"}[task]).name)
    said = answers(task)
    by_key = {}
    for row, text in zip(rows, said, strict=True):
        by_key.setdefault(row["prompt"], []).append((image_paths(row), text))

    def oracle(request):
        for paths, text in by_key.get(request.prompt, []):
            if task == "vqa" or image_bytes(folder, paths[0]) == request.images[0]:
                return text
        raise AssertionError("the fake model got a request no row asks")
    return oracle


def _judge_oracle(request):
    answer = request.prompt.split("【预测答案】：\n", 1)[1].split("\n\n### 输出", 1)[0]
    return judge_replies().get(answer, "无法判断")


@pytest.mark.parametrize("tarball", [False, True])
def test_a_run_reproduces_the_authors_figures_and_requests(tmp_path, tarball):
    folder = write_folder(tmp_path / "release", tarball=tarball)
    for task in ("classification", "nutrition"):
        with FakeOpenAIServer(_model_oracle(folder, task)) as server:
            out = api.run(RunSettings(task=task, model="openai:plain-model", base_url=server.base_url,
                                      dataset=str(folder), out=tmp_path / f"run-{task}-{tarball}"), progress=False)
            sent = list(server.requests)
        metrics = json.loads((out / "metrics.json").read_text())
        _close(metrics[task]["official"], AUTHORS_PRINTED[task])
        info = json.loads((out / "run.json").read_text())
        assert info["settings"]["protocol"] == "official"
        rows = corpus_rows(f"{task}.jsonl")
        assert len(sent) == len(rows)
        for request in sent:
            assert request.body["temperature"] == 0.0 and request.body["max_tokens"] == 14336
            assert "seed" not in request.body
            content = request.body["messages"][0]["content"]
            assert [part["type"] for part in content] == ["image_url", "text"]  # images first, then the prompt
            assert content[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
        prompts = sorted(r.prompt for r in sent)
        assert prompts == sorted(r["prompt"] for r in rows)
        # the merchant's photo alone (their default index 0), its bytes as stored
        assert all(len(r.images) == 1 for r in sent)
        assert {r.images[0] for r in sent} == {image_bytes(folder, image_paths(r)[0]) for r in rows}


def test_vqa_run_asks_their_judge_their_way_and_reproduces_both_vqa_figures(tmp_path):
    folder = write_folder(tmp_path / "release")
    with FakeOpenAIServer(_model_oracle(folder, "vqa")) as model, FakeOpenAIServer(_judge_oracle) as judge:
        out = api.run(RunSettings(task="vqa", model="openai:plain-model", base_url=model.base_url,
                                  dataset=str(folder), judge="openai:judge", judge_base_url=judge.base_url,
                                  out=tmp_path / "run"), progress=False)
        judged = list(judge.requests)
    metrics = json.loads((out / "metrics.json").read_text())["vqa"]
    _close(metrics["official"], {**AUTHORS_PRINTED["vqa_rouge"], **AUTHORS_PRINTED["vqa_judge"]})
    official_prompts = [r for r in judged if "【预测答案】" in r.prompt]
    assert {hashlib.sha256(r.prompt.encode()).hexdigest()[:16] for r in official_prompts} == AUTHORS_JUDGE_PROMPTS
    for request in official_prompts:
        assert isinstance(request.body["messages"][0]["content"], str)  # a plain string, as their client sends
        assert request.body["temperature"] == 0.0 and request.body["max_tokens"] == 100
        assert "seed" not in request.body
    assert len(judged) == len(AUTHORS_JUDGE_PROMPTS)  # one call per judged answer: ours reads the same reply
    assert metrics["official_disagreements"] == 1  # 不是: their keywords say right, the strict reading wrong


def test_export_writes_their_files_and_import_reads_them_back_to_the_same_figures(tmp_path):
    folder = write_folder(tmp_path / "release")
    with FakeOpenAIServer(_model_oracle(folder, "classification")) as server:
        run = api.run(RunSettings(task="classification", model="openai:plain-model", base_url=server.base_url,
                                  dataset=str(folder), out=tmp_path / "run"), progress=False)
    [path] = export_official(run, tmp_path / "export")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["idx"] for line in lines] == list(range(12))
    assert set(lines[0]) >= {"idx", "gt_answer", "model_pred", "model_full_pred", "model_input", "image_path"}
    _close(official.classification_figures(corpus_rows("classification.jsonl"), {x["idx"]: x for x in lines}),
           AUTHORS_PRINTED["classification"])
    back = import_official(path, "classification", tmp_path / "imported", dataset=str(folder))
    _close(json.loads((back / "metrics.json").read_text())["classification"]["official"],
           AUTHORS_PRINTED["classification"])


@pytest.mark.parametrize(("task", "file", "expected"), [
    ("classification", "classification_pred.jsonl", AUTHORS_PRINTED["classification"]),
    ("classification", "classification_pred_gt_override.jsonl", AUTHORS_PRINTED["classification_gt_override"]),
    ("nutrition", "nutrition_pred.jsonl", AUTHORS_PRINTED["nutrition"]),
    ("vqa", "vqa_judged_pred.jsonl", AUTHORS_PRINTED["vqa_judge"]),
])
def test_their_prediction_files_import_scored_by_both_readings(tmp_path, task, file, expected):
    folder = write_folder(tmp_path / "release")
    out = import_official(CORPUS / file, task, tmp_path / "run", dataset=str(folder))
    metrics = json.loads((out / "metrics.json").read_text())[task]
    _close(metrics["official"], expected)
    assert "official_disagreements" in metrics
    assert (out / "report.md").is_file()


def test_official_on_our_own_release_is_refused_in_one_line():
    with pytest.raises(UsageError, match="not the authors' release"):
        data = api.load_task_data(RunSettings(task="classification", model="baseline:zero"))
        api.resolve_protocol(RunSettings(task="classification", model="baseline:zero", protocol="official"), data)


@pytest.mark.parametrize("flags", [{"images": 2}, {"cot": True}, {"circular": True}])
def test_our_protocol_flags_are_refused_under_official(flags):
    from eval import protocols

    with pytest.raises(UsageError, match="--protocol official"):
        settings = RunSettings(task="classification", model="baseline:zero", protocol="official", **flags)
        settings.validate()
        protocols.of(settings).check(settings)


@pytest.mark.parametrize(("published", "indices", "fails"), [
    ({"standard_image": "s.jpg", "user_images": "u.jpg"}, (0,), False),
    ({"standard_image": "s.jpg", "user_images": "u.jpg"}, (0, 1), True),  # user_images[0] is the character "u"
    ({"standard_image": "", "user_images": "u.jpg"}, (0,), True),  # their fallback: the string's first character
    ({"standard_image": "s.jpg", "user_images": ["u.jpg"]}, (0, 1), False),
])
def test_a_nutrition_row_whose_user_images_is_one_string_fails_where_their_script_fails(published, indices, fails):
    from eval.protocols.official import rules_for

    found = rules_for("nutrition").fails({"published": published}, indices)
    assert (found is not None) == fails
    if fails:
        assert official.is_error(official.infer_error(found))


def test_a_vqa_row_whose_images_is_one_string_fails_where_their_script_fails():
    from eval.protocols.official import rules_for

    assert rules_for("vqa").fails({"published": {"images": "images/1.jpg"}}, (0,)) is not None
    assert rules_for("vqa").fails({"published": {"images": ["images/1.jpg"]}}, (0,)) is None
    assert rules_for("vqa").fails({"published": json.dumps({"images": "x.jpg"})}, (0,)) is not None


def test_their_headline_has_an_item_bootstrap_interval_around_it(tmp_path):
    import numpy as np

    from eval.protocols.official import item_interval, rules_for
    from eval.stats import mean_of_column_means

    for task, file in (("classification", "classification_pred.jsonl"), ("nutrition", "nutrition_pred.jsonl"),
                       ("vqa", "vqa_judged_pred.jsonl")):
        folder = write_folder(tmp_path / task / "release")
        out = import_official(CORPUS / file, task, tmp_path / task / "run", dataset=str(folder))
        entry = json.loads((out / "metrics.json").read_text())[task]
        name, value = rules_for(task).headline(entry["official"])
        low, high = entry["official_ci95"]
        assert entry["official_resampled"] == "items"
        assert low <= value <= high and low < high, (task, value, entry["official_ci95"])
        # the resampled values are their figure's own: all items give exactly the headline
        rows = corpus_rows(f"{task}.jsonl")
        values = rules_for(task).item_values(rows, _preds(file))
        whole = mean_of_column_means(values / 100)(np.arange(len(values))) if values.ndim == 2 else values.mean()
        assert whole == pytest.approx(value)
    assert item_interval(np.array([1.0, 1.0, 1.0, 1.0]), 100) == pytest.approx([0.05 ** (1 / 4), 1.0])
