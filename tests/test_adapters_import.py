"""`python -m eval import --from lmms-eval`: samples files as the lmms-eval task writes them become run folders.

Needs no framework: the lines are built by adapters/lmms_eval/utils.py (the functions lmms-eval calls)
around scripted answers, in the layout of lmms-eval's `--log_samples` output, then imported, re-parsed
and re-scored by the normal scoring path. Expected figures are computed by hand from the script.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import diningbench
from adapters.lmms_eval import utils as lmms_utils
from eval import requests, tasks
from eval.cli import main as cli_main
from eval.importer import ImportRefused, import_run
from eval.report.runs import load_run
from space.diningspace.leaderboard import local_rows

STAMP = "20260101_000000"
SAMPLE = str(Path(__file__).resolve().parents[1] / "diningbench")  # the embedded sample, the YAMLs' dataset_path


@pytest.fixture(autouse=True)
def _default_options(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DININGBENCH_SOURCE", "DININGBENCH_LANG", "DININGBENCH_VIEWS", "DININGBENCH_COT", "DININGBENCH_JUDGE",
                 "DININGBENCH_PROTOCOL", "DININGBENCH_IMAGE_INDICES"):
        monkeypatch.delenv(name, raising=False)


def docs(task: str) -> list[dict[str, Any]]:
    """The docs lmms-eval hands the task functions: the loaded rows after process_docs (each row's id
    and position in the release)."""
    process = getattr(lmms_utils, f"{task}_process_docs")
    return list(process(diningbench.load(task, SAMPLE, decode_images=True)))  # what the YAML's dataset_path gives


def row_of(task: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The release row a doc names."""
    row = diningbench.load(task, decode_images=False)[doc["position"]]
    assert str(row["id"]) == doc["id"]
    return row


def classification_answer(i: int, doc: dict[str, Any]) -> str:
    """Right for every third item (0, 3, 6, ...), the next letter for the next, no answer for the third."""
    reference = row_of("classification", doc)["answer"]
    if i % 3 == 0:
        return reference
    if i % 3 == 1:
        return "A" if reference != "A" else "B"
    return "I cannot tell from these photos."


def nutrition_answer(i: int, doc: dict[str, Any]) -> str:
    """Every component 10% over the reference: APE 0.1 wherever the reference is above zero."""
    row = row_of("nutrition", doc)
    return json.dumps({k: round(row[k] * 1.1, 6) for k in ("calories", "protein", "carbohydrates", "fat")})


def write_samples(folder: Path, task: str, answer, *, edit=None,
                  model_args: str = "model_version=fake-vlm,base_url=http://127.0.0.1:9/v1,api_key=sk-x") -> Path:
    """A `{stamp}_samples_diningbench_{task}.jsonl` + `{stamp}_results.json` pair, as lmms-eval writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, doc in enumerate(docs(task)):
        raw = answer(i, doc)
        line = {"doc_id": i, "target": getattr(lmms_utils, f"{task}_doc_to_target")(doc), "filtered_resps": raw,
                "token_counts": [{"input_tokens": 400, "output_tokens": 5, "reasoning_tokens": 0}],
                "input": getattr(lmms_utils, f"{task}_doc_to_text")(doc),
                **getattr(lmms_utils, f"{task}_process_results")(doc, [raw])}
        lines.append(edit(i, line) if edit else line)
    path = folder / f"{STAMP}_samples_diningbench_{task}.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    (folder / f"{STAMP}_results.json").write_text(json.dumps({
        "lmms_eval_version": "0.7.3",
        "config": {"model": "openai", "model_args": model_args},
        "configs": {f"diningbench_{task}": {"generation_kwargs": {"max_new_tokens": 16384, "temperature": 0}}}}),
        encoding="utf-8")
    return path


def test_classification_samples_become_a_scored_run(tmp_path: Path) -> None:
    write_samples(tmp_path / "logs", "classification", classification_answer)
    out = import_run(tmp_path / "logs", "lmms-eval", tmp_path / "results" / "run")
    metrics = json.loads((out / "metrics.json").read_text())["classification"]
    # 40 items: i = 0, 3, ..., 39 are right -> 14 of 40; i = 2, 5, ..., 38 are unparsed -> 13
    assert metrics["n"] == 40
    assert metrics["accuracy"] == pytest.approx(14 / 40)
    assert metrics["parse_failures"] == 13
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [s["correct"] for s in scores] == [i % 3 == 0 for i in range(40)]
    assert scores[1]["parsed"] == ("A" if scores[1]["reference"] != "A" else "B")
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert predictions[2]["raw"] == "I cannot tell from these photos." and predictions[2]["parsed"] is None
    assert predictions[0]["usage"] == {"prompt_tokens": 400, "completion_tokens": 5}
    info = json.loads((out / "run.json").read_text())
    assert info["model"] == "fake-vlm" and info["imported"]["framework"] == "lmms-eval"
    assert info["backend"]["classification"]["model_args"] == {"model_version": "fake-vlm"}  # no URL, no key
    assert "127.0.0.1" not in (out / "run.json").read_text() and "sk-x" not in (out / "run.json").read_text()
    assert info["dataset"]["fingerprints"]["classification"] == diningbench.fingerprint("classification")
    run = load_run(out)  # what `eval report` and the model card read
    assert run.label.startswith("fake-vlm")
    [row] = local_rows(tmp_path / "results")  # the Space leaderboard
    assert (row["Model"], row["Cls acc %"]) == (run.label, 35.0)
    card = tmp_path / "README.md"
    assert cli_main(["report", str(out), "--model-card", "--allow-partial", "--out", str(card)]) == 0
    assert "fake-vlm" in card.read_text()


def test_only_allowed_settings_reach_run_json_and_credentials_are_named_as_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ("model_version=fake-vlm,authorization=Bearer abcdefghijkl,api_base=http://u:hunter22@h:8000/v1,"
            "hf_auth=hf_abcdefghijklmnop,temperature=0,pretrained=https://me:pw@models.example/x,dtype=sk-abcdefghijklmnop")
    write_samples(tmp_path / "logs", "classification", classification_answer, model_args=args)
    assert cli_main(["import", str(tmp_path / "logs"), "--from", "lmms-eval", "--out", str(tmp_path / "run")]) == 0
    text = (tmp_path / "run" / "run.json").read_text()
    for secret in ("abcdefghijkl", "hunter22", "hf_abcdefghijklmnop", "me:pw", "sk-abcdefghijklmnop"):
        assert secret not in text
    info = json.loads(text)
    assert info["backend"]["classification"]["model_args"] == {"model_version": "fake-vlm", "temperature": "0"}
    left = info["imported"]["left_out"]
    assert {"model_args.authorization", "model_args.api_base", "model_args.hf_auth", "model_args.pretrained",
            "model_args.dtype"} <= set(left)
    out = capsys.readouterr().out
    assert out.count("left out of run.json") == 1 and "model_args.hf_auth" in out and "hunter22" not in out


def test_nutrition_samples_score_through_the_nutrition_metric(tmp_path: Path) -> None:
    write_samples(tmp_path / "logs", "nutrition", nutrition_answer)
    out = import_run(tmp_path / "logs", "lmms-eval", tmp_path / "run")
    metrics = json.loads((out / "metrics.json").read_text())["nutrition"]
    assert metrics["avg_mape"] == pytest.approx(0.1, abs=1e-6)
    assert metrics["parse_failures"] == 0


def test_the_cli_imports_and_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_samples(tmp_path / "logs", "classification", classification_answer)
    assert cli_main(["import", str(tmp_path / "logs"), "--from", "lmms-eval", "--out", str(tmp_path / "run")]) == 0
    assert "| classification | 40 | accuracy | 35.00" in capsys.readouterr().out


def test_a_changed_prompt_is_refused_naming_the_first_item(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(i: int, line: dict[str, Any]) -> dict[str, Any]:
        if i in (4, 7):
            line["input"] = "Answer with the letter of the dish.\n" + line["input"]
        return line

    write_samples(tmp_path / "logs", "classification", classification_answer, edit=edit)
    code = cli_main(["import", str(tmp_path / "logs"), "--from", "lmms-eval", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert "item classification-00005: the prompt differs from DiningBench's" in err
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_an_item_not_in_the_release_is_refused(tmp_path: Path) -> None:
    def edit(i: int, line: dict[str, Any]) -> dict[str, Any]:
        if i == 2:
            line["dining_accuracy"]["id"] = "classification-99999"
        return line

    write_samples(tmp_path / "logs", "classification", classification_answer, edit=edit)
    with pytest.raises(ImportRefused, match="item classification-99999 is not in the classification release"):
        import_run(tmp_path / "logs", "lmms-eval", tmp_path / "run")


def test_an_item_asked_with_fewer_views_is_refused(tmp_path: Path) -> None:
    def edit(i: int, line: dict[str, Any]) -> dict[str, Any]:
        if i == 6:
            line["dining_accuracy"]["n_images"] = 1
        return line

    write_samples(tmp_path / "logs", "classification", classification_answer, edit=edit)
    n = len(row_of("classification", docs("classification")[6])["images"])
    with pytest.raises(ImportRefused, match=f"item classification-00007: 1 views were sent where DiningBench sends {n}"):
        import_run(tmp_path / "logs", "lmms-eval", tmp_path / "run")


def test_a_result_made_on_another_release_is_refused(tmp_path: Path) -> None:
    def edit(i: int, line: dict[str, Any]) -> dict[str, Any]:
        line["dining_accuracy"]["diningbench"]["fingerprint"] = "0123456789abcdef"
        return line

    write_samples(tmp_path / "logs", "classification", classification_answer, edit=edit)
    with pytest.raises(ImportRefused, match="made on another release of classification .fingerprint 0123456789abcdef"):
        import_run(tmp_path / "logs", "lmms-eval", tmp_path / "run")


def test_a_results_file_from_elsewhere_is_read_bounded_and_checked(tmp_path: Path) -> None:
    """The results file beside a samples file is the log folder's, which may come from anywhere: one of
    another shape is ignored (the model is then unknown), one linked out of its folder is not read."""
    write_samples(tmp_path / "logs", "classification", classification_answer)
    results = tmp_path / "logs" / f"{STAMP}_results.json"
    results.write_text(json.dumps({"config": ["openai"], "configs": 5, "lmms_eval_version": "0.7.3"}))
    info = json.loads((import_run(tmp_path / "logs", "lmms-eval", tmp_path / "a") / "run.json").read_text())
    assert info["model"] == "unknown" and info["backend"]["classification"]["model_args"] == {}
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"config": {"model": "openai", "model_args": "model_version=secret-model"}}))
    results.unlink()
    results.symlink_to(outside)
    assert "secret-model" not in (import_run(tmp_path / "logs", "lmms-eval", tmp_path / "b") / "run.json").read_text()


def test_a_file_the_adapter_did_not_write_is_refused(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{STAMP}_samples_diningbench_classification.jsonl").write_text(
        json.dumps({"doc_id": 0, "filtered_resps": "A", "exact_match": 1.0}) + "\n")
    with pytest.raises(ImportRefused, match="no DiningBench record"):
        import_run(tmp_path / "logs", "lmms-eval", tmp_path / "run")


def test_the_lmms_task_functions_ask_what_the_harness_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """doc_to_text is eval/prompts.py's prompt; doc_to_visual is every view, in the harness's order."""
    from eval.settings import RunSettings

    doc = docs("classification")[0]
    row = row_of("classification", doc)
    settings = RunSettings(task="classification", model="x")
    request = requests.build_request(tasks.get("classification"), row, settings)
    assert lmms_utils.classification_doc_to_text(doc) == request.messages[0].text
    visuals = lmms_utils.classification_doc_to_visual(doc)
    assert len(visuals) == len(row["images"]) == request.metadata["n_images"]
    monkeypatch.setenv("DININGBENCH_VIEWS", "2")
    monkeypatch.setenv("DININGBENCH_LANG", "en")
    monkeypatch.setenv("DININGBENCH_COT", "1")
    assert len(lmms_utils.doc_to_visual(doc)) == 2
    en = RunSettings(task="classification", model="x", lang="en", cot=True, images=2)
    assert lmms_utils.classification_doc_to_text(doc) == requests.build_request(tasks.get("classification"), row, en).messages[0].text
    monkeypatch.setenv("DININGBENCH_VIEWS", "two")
    with pytest.raises(ValueError, match="DININGBENCH_VIEWS='two'"):
        lmms_utils.doc_to_visual(doc)


def test_the_frameworks_per_item_scores_are_the_harness_scores() -> None:
    """What the inspect and lmms-eval scorers record for an answer (adapters.common.score_answer) is
    the harness's score of it: a right letter is correct, a nutrition answer 10% over has APE 0.1."""
    cls = docs("classification")[:6]
    records = [lmms_utils.classification_process_results(doc, [classification_answer(i, doc)])["dining_accuracy"]
               for i, doc in enumerate(cls)]
    assert [r["correct"] for r in records] == [True, False, False, True, False, False]  # by hand: i % 3 == 0
    answers = [row_of("classification", doc)["answer"] for doc in cls[:2]]
    assert [r["parsed"] for r in records][:2] == [answers[0], "A" if answers[1] != "A" else "B"]
    nutrition = docs("nutrition")[0]
    over = json.dumps({k: row_of("nutrition", nutrition)[k] * 1.1 for k in ("calories", "protein", "carbohydrates", "fat")})
    record = lmms_utils.nutrition_process_results(nutrition, [over])["avg_mape"]
    assert record["ape"] == pytest.approx({k: 0.1 for k in ("calories", "protein", "carbohydrates", "fat")})


# ---------------------------------------------------------------- the authors' release, under their protocol
def _official_lines(task: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """lmms-eval's samples file for the corpus answers on a release in the authors' layout, its lines made
    by the task functions lmms-eval calls (DININGBENCH_SOURCE names the release: their protocol by default)."""
    from tests.helpers_official import answers

    monkeypatch.setenv("DININGBENCH_SOURCE", str(folder))
    said = answers(task)
    return write_samples(folder.parent / "logs", task, lambda i, doc: said[i])


@pytest.mark.parametrize("task", ["classification", "nutrition"])
def test_on_the_authors_release_lmms_lines_import_to_their_scripts_figures(tmp_path: Path, task: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers_official import AUTHORS_PRINTED, corpus_rows, write_folder

    folder = write_folder(tmp_path / "release")
    path = _official_lines(task, folder, monkeypatch)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows = corpus_rows(f"{task}.jsonl")
    assert [line["input"] for line in lines] == [row["prompt"] for row in rows]  # each row's prompt verbatim
    assert getattr(lmms_utils, f"{task}_generation_kwargs")["max_new_tokens"] == 14336
    record = lines[0][tasks_metric(task)]
    assert (record["diningbench"]["protocol"], record["diningbench"]["image_indices"]) == ("official", None)
    # what lmms-eval's own summary shows: their figure (acc; Average MAPE, their four percentages' mean)
    figure = getattr(lmms_utils, f"{task}_aggregate")([line[tasks_metric(task)] for line in lines])
    assert figure == pytest.approx({"classification": 0.5, "nutrition": 0.683133}[task], abs=5e-7)
    out = import_run(path.parent, "lmms-eval", tmp_path / "run")
    metrics = json.loads((out / "metrics.json").read_text())[task]
    expected = AUTHORS_PRINTED[task]
    for key, value in expected.items():
        if isinstance(value, dict):
            assert {k: round(metrics["official"][key][k], 4) for k in value} == value, key
        else:
            assert round(metrics["official"][key], 4) == value, key
    info = json.loads((out / "run.json").read_text())
    assert (info["settings"]["protocol"], info["settings"]["image_indices"]) == ("official", None)
    # ours beside theirs, on the same answers: a swap of the readings would not give their figure
    headline = metrics["accuracy"] if task == "classification" else metrics["avg_mape"]
    assert headline != pytest.approx(figure, abs=1e-3)


def tasks_metric(task: str) -> str:
    from eval import tasks

    return tasks.get(task).adapter_metric


def test_the_lmms_settings_follow_the_protocol_and_refuse_a_bad_value(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers_official import corpus_rows, image_bytes, image_paths, write_folder

    folder = write_folder(tmp_path / "release")
    monkeypatch.setenv("DININGBENCH_SOURCE", str(folder))
    monkeypatch.setenv("DININGBENCH_IMAGE_INDICES", "0,1,2")
    [doc, *_] = docs("classification")
    row = corpus_rows("classification.jsonl")[0]
    paths = image_paths(row)
    sent = [image_bytes(folder, p) for p in paths[:3]]
    item = lmms_utils._item("classification", doc)  # the request the protocol builds for the doc
    assert [v.data for v in item.views] == sent and item.prompt == row["prompt"]
    assert len(lmms_utils.classification_doc_to_visual(doc)) == len(sent) > 1
    monkeypatch.setenv("DININGBENCH_PROTOCOL", "ours")
    monkeypatch.delenv("DININGBENCH_IMAGE_INDICES")
    assert lmms_utils.classification_generation_kwargs["max_new_tokens"] == 16384
    assert lmms_utils.classification_doc_to_text(doc) != row["prompt"]  # ours: this project's prompt
    monkeypatch.setenv("DININGBENCH_IMAGE_INDICES", "one")
    with pytest.raises(ValueError, match="DININGBENCH_IMAGE_INDICES='one'"):
        lmms_utils.classification_doc_to_text(doc)
    monkeypatch.setenv("DININGBENCH_IMAGE_INDICES", "0,1")
    with pytest.raises(ValueError, match="--image-indices chooses images under --protocol official"):
        lmms_utils.classification_doc_to_text(doc)  # ours takes --images, as `eval run` says
    monkeypatch.setenv("DININGBENCH_PROTOCOL", "nope")
    with pytest.raises(ValueError, match="unknown --protocol 'nope'"):
        lmms_utils.classification_doc_to_text(doc)


@pytest.mark.parametrize(("field", "value"), [("protocol", "nope"), ("protocol", 3), ("image_indices", "0;1"),
                                              ("image_indices", [0, 1])])
def test_a_log_naming_an_unknown_protocol_or_unreadable_indices_is_refused(tmp_path: Path, field: str,
                                                                            value: Any) -> None:
    def edit(i: int, line: dict[str, Any]) -> dict[str, Any]:
        line["dining_accuracy"]["diningbench"][field] = value
        return line

    write_samples(tmp_path / "logs", "classification", classification_answer, edit=edit)
    with pytest.raises(ImportRefused, match="unreadable DiningBench (settings|image indices)"):
        import_run(tmp_path / "logs", "lmms-eval", tmp_path / "run")
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_a_log_asked_our_way_is_refused_against_the_authors_prompts(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A log that says it was asked under their protocol but sent our prompt is refused, naming the item."""
    from tests.helpers_official import write_folder

    folder = write_folder(tmp_path / "release")
    monkeypatch.setenv("DININGBENCH_SOURCE", str(folder))

    def edit(i: int, line: dict[str, Any]) -> dict[str, Any]:
        if i == 3:
            line["input"] = "Which dish is this? Answer with a letter.\n" + line["input"]
        return line

    write_samples(tmp_path / "logs", "classification", lambda i, doc: "A", edit=edit)
    with pytest.raises(ImportRefused, match=r"item \S+: the prompt differs from DiningBench's .zh, the authors' "
                                            r"protocol, image indices 0"):
        import_run(tmp_path / "logs", "lmms-eval", tmp_path / "run")


def test_their_thinking_model_lists_know_a_framework_model_by_the_name_the_server_was_sent() -> None:
    """inspect names a model `provider/name`; their scripts strip the reasoning of the models on their lists,
    known by the name the server is sent, as `eval run --model openai:NAME` does."""
    from eval.protocols.official import served_name

    assert served_name("openai/qwen-3-vl-8b-thinking") == served_name("openai:qwen-3-vl-8b-thinking") \
        == "qwen-3-vl-8b-thinking"
    assert served_name("fake-vlm") == "fake-vlm"
