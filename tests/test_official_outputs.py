"""Runs under the authors' protocol, read by every output that carries a figure out of the toolkit: the
model card (Markdown and its `model-index`), `--format yaml/json`, `eval view`, `eval analyze` and sweeps.
Each shows the authors' figure first (what their scripts print: tests/helpers_official.py), ours beside it
with the count of answers the two readings read differently, the protocol, the image indices sent and the
release's fingerprint; and every interval says what it resampled, as the run recorded it.

The corpus answers are read differently by the two readings (classification: theirs 6 of 12 right, ours 8
of 12, "The answer is B" and "答案：C" being the two they disagree on), so a swap of the readings fails.
"""

from __future__ import annotations

import json

import pytest
import yaml
from helpers_report import cls_item, report_args, table_rows, write_run
from huggingface_hub import ModelCard

from eval import api
from eval.analysis import analyze
from eval.report import report
from eval.report.items import item_detail, run_items, run_summary
from eval.settings import RunSettings
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_official import (
    AUTHORS_PRINTED,
    answers,
    corpus_rows,
    image_bytes,
    image_paths,
    judge_replies,
    write_folder,
)
from tests.test_official_protocol import _judge_oracle, _model_oracle

# Theirs (their scripts' printed figures, as percentages with 2 decimals)
THEIR_ACC = "50.00"  # acc 0.5000: 6 of 12
THEIR_AVG_MAPE = round(sum(AUTHORS_PRINTED["nutrition"][k]["mape"]
                           for k in ("calories", "protein", "carbohydrates", "fat")) / 4, 2)  # 68.31
THEIR_VQA = "57.14"  # model_evaluate_accuracy 4 of 7
# Ours of the same answers: B, "The answer is B", "答案：C", D, c, (E), h, **A** right; "", a failed
# request, 42 and Z not: 8 of 12; their first-letter rule misreads the 2nd and 3rd.
OUR_ACC, CLS_DIFFER = "66.67", 2


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """Three runs of one model on a release in the authors' layout: classification with image indices
    0,1, nutrition with their default (0), VQA judged; the fingerprint each run.json recorded."""
    root = tmp_path_factory.mktemp("official")
    folder = write_folder(root / "release")
    runs = {}
    for task, indices in (("classification", "0,1"), ("nutrition", None)):
        with FakeOpenAIServer(_model_oracle(folder, task)) as server:
            runs[task] = api.run(RunSettings(task=task, model="openai:plain-model", base_url=server.base_url,
                                             dataset=str(folder), image_indices=indices, n_boot=200,
                                             out=root / f"run-{task}"), progress=False)
    with FakeOpenAIServer(_model_oracle(folder, "vqa")) as model, FakeOpenAIServer(_judge_oracle) as judge:
        runs["vqa"] = api.run(RunSettings(task="vqa", model="openai:plain-model", base_url=model.base_url,
                                          dataset=str(folder), judge="openai:judge", judge_base_url=judge.base_url,
                                          n_boot=200, out=root / "run-vqa"), progress=False)
    prints = {task: json.loads((path / "run.json").read_text())["dataset"]["fingerprints"][task]
              for task, path in runs.items()}
    return {"root": root, "release": folder, "runs": runs, "fingerprints": prints}


def _report(capsys, *argv: str) -> str:
    code = report.main(report_args(*argv, "--n-boot", "200"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _dirs(official) -> list[str]:
    return [str(official["runs"][t]) for t in ("classification", "nutrition", "vqa")]


# ------------------------------------------------------------------ the model card
def test_the_card_leads_with_the_authors_figures_named_as_theirs(official, capsys, tmp_path):
    out = tmp_path / "README.md"
    _report(capsys, *_dirs(official), "--model-card", "--out", str(out))
    card = ModelCard.load(out)
    values = {(r.dataset_config, r.metric_type): r.metric_value for r in card.data.eval_results}
    nutrition = AUTHORS_PRINTED["nutrition"]
    assert values == {("classification", "official_acc"): 50.0, ("nutrition", "official_avg_mape"): THEIR_AVG_MAPE,
                      **{("nutrition", f"official_{k}_mape"): round(nutrition[k]["mape"], 2)
                         for k in ("calories", "protein", "carbohydrates", "fat")},
                      ("vqa", "official_model_evaluate_accuracy"): 57.14}
    names = {r.metric_name for r in card.data.eval_results}
    assert all(name.endswith("the authors' protocol") for name in names)
    args = {r.dataset_config: r.dataset_args for r in card.data.eval_results}
    assert args["classification"] == {"lang": "zh", "protocol": "official", "image_indices": "0,1",
                                      "fingerprint": official["fingerprints"]["classification"]}
    assert args["nutrition"]["image_indices"] == "0" and args["vqa"]["image_indices"] == "0"  # their default
    assert args["nutrition"]["fingerprint"] == official["fingerprints"]["nutrition"]

    text = card.text
    [theirs] = table_rows(text, "openai:plain-model")[:1]
    assert theirs[2:5] == ["zh, the authors' protocol, image indices 0,1", "acc (%), the authors' protocol", THEIR_ACC]
    assert theirs[6] == "12"  # their total_eval
    rows = table_rows(text, "openai:plain-model")
    nut = next(r for r in rows if r[1] == "Nutrition estimation")
    # the items each of their figures reads: nutrition's 9 rows less the one whose ground truth is no JSON
    # (their gt_missing), VQA's answers their judge judged (4 of 7), not the 8 rows of their total_eval
    assert nut[4] == f"{THEIR_AVG_MAPE:.2f}" and nut[6] == str(len(corpus_rows("nutrition.jsonl")) - 1) == "8"
    vqa = next(r for r in rows if r[1] == "Dietary VQA")
    assert vqa[4] == THEIR_VQA and vqa[6] == str(AUTHORS_PRINTED["vqa_judge"]["model_evaluate_total"]) == "7"
    # ours beside, in its own table, with the answers read differently
    ours = [r for r in rows if len(r) == 7 and r[2] in ("Accuracy (%)", "Average MAPE (%, lower is better)")]
    cls = next(r for r in ours if r[1] == "Fine-grained dish classification")
    assert cls[3] == OUR_ACC and cls[6] == str(CLS_DIFFER)
    metrics = json.loads((official["runs"]["nutrition"] / "metrics.json").read_text())["nutrition"]
    assert next(r for r in ours if r[1] == "Nutrition estimation")[3] == f"{100 * metrics['avg_mape']:.2f}"
    assert f"{100 * metrics['avg_mape']:.2f}" != f"{THEIR_AVG_MAPE:.2f}"  # the two readings differ here too
    assert "read by this project's protocol" in text
    for task, fingerprint in official["fingerprints"].items():
        assert f"{task} {fingerprint}" in text  # the release, named by what the run recorded


def test_yaml_and_json_carry_the_same_figures_as_the_card(official, capsys):
    meta = json.loads(_report(capsys, *_dirs(official), "--model-card", "--format", "json"))
    assert yaml.safe_load(_report(capsys, *_dirs(official), "--model-card", "--format", "yaml")) == meta
    results = meta["model-index"][0]["results"]
    first = results[0]
    assert first["metrics"] == [{"type": "official_acc", "name": "acc (%), the authors' protocol", "value": 50.0}]
    assert first["dataset"]["args"]["protocol"] == "official"
    assert not any(m["type"] in ("accuracy", "avg_mape") for r in results for m in r["metrics"])  # ours stays out


def test_the_protocol_counts_the_items_its_headline_reads(official):
    from eval import protocols
    from eval.tasks import get as get_task

    theirs, ours = protocols.get("official"), protocols.get("ours")
    entries = {task: json.loads((path / "metrics.json").read_text())[task] for task, path in official["runs"].items()}
    counted = {task: theirs.counted(get_task(task), entry) for task, entry in entries.items()}
    assert counted == {"classification": 12, "nutrition": 8, "vqa": 7}  # total_eval 12, 9 − 1 gt_missing, judged 7
    assert entries["vqa"]["official"]["total_eval"] == 8  # what the card showed before: a row the judge never read
    assert all(ours.counted(get_task(task), entry) is None for task, entry in entries.items())  # ours: rows scored
    no_judge = {"official": {k: v for k, v in entries["vqa"]["official"].items() if not k.startswith("model_evaluate")}}
    assert theirs.counted(get_task("vqa"), no_judge) == no_judge["official"]["rouge_scored"] == 6  # ROUGE's count
    assert theirs.counted(get_task("classification"), {"official": {"acc": 0.5, "total_eval": "12"}}) is None


# ------------------------------------------------------------------ eval report (Table 2 layout)
def test_the_report_counts_their_items_and_marks_their_few_items_intervals(official, capsys):
    text = _report(capsys, *_dirs(official), "--no-reported")
    theirs, ours = table_rows(text, "openai:plain-model")[:2]  # Table 2: their row, then ours
    assert theirs[-1] == "12/8/7" and ours[-1] == "12/7/7"  # their counts; ours: the records scored
    assert theirs[2].startswith(f"{THEIR_ACC} [") and theirs[2].endswith("]‡")  # 12 items resampled, under 20
    assert theirs[-2].startswith(f"{THEIR_VQA} [") and theirs[-2].endswith("]‡")
    assert "‡ fewer than 20 items: a 95% interval that resamples so few items" in text


def test_the_report_reads_an_odd_disagreement_count_as_none(official, capsys, tmp_path):
    import shutil

    run = shutil.copytree(official["runs"]["classification"], tmp_path / "odd")
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["classification"]["official_disagreements"] = "many"  # a folder from elsewhere may hold anything
    (run / "metrics.json").write_text(json.dumps(metrics))
    text = _report(capsys, str(run), "--no-reported")
    assert "| ours' reading of the same answers (0 read differently) |" in text
    assert "(2 read differently)" not in text


def test_ours_on_their_release_says_one_item_where_nothing_can_be_resampled(official, capsys, tmp_path):
    out = api.run(RunSettings(task="classification", model="baseline:first", protocol="ours", limit=1,
                              dataset=str(official["release"]), out=tmp_path / "one"), progress=False)
    [row] = table_rows(_report(capsys, str(out), "--no-reported"), "baseline:first")
    assert row[2].endswith(" (no interval: one item)") and "merchant" not in row[2]


# ------------------------------------------------------------------ eval view
def test_the_viewer_shows_their_figure_with_ours_beside(official):
    run = official["runs"]["classification"]
    found = run_summary(run, [])
    led = found["tasks"]["classification"]["protocol"]
    assert (led["name"], round(100 * led["value"], 2), led["differ"], led["items"]) == ("acc", 50.0, CLS_DIFFER, 12)
    assert led["fingerprint"] == official["fingerprints"]["classification"] and led["resampled"] == "items"
    assert round(100 * found["tasks"]["classification"]["headline"], 2) == 66.67  # ours, beside
    assert found["asked"] == "the authors' protocol, image indices 0,1"

    pytest.importorskip("gradio")
    from eval.report import viewer

    text = viewer.summary(str(run), official["root"])
    assert f"the authors' protocol acc {THEIR_ACC}% [" in text and "(95% CI resampling items) on 12 items" in text
    assert f"release fingerprint {official['fingerprints']['classification']}" in text
    assert f"(ours: 12 items, accuracy {OUR_ACC}%; {CLS_DIFFER} read differently;" in text
    assert "image indices 0,1" in text.splitlines()[0]
    label = viewer.run_label("run-classification", run)
    assert f"classification official acc {THEIR_ACC}" in label and OUR_ACC not in label
    # each item: their reading first, ours beside ("The answer is B": their first letter is T)
    rows, _ = viewer.table(str(run), "all", "all", "all", problems=[])
    scores = {row[1]: row[6] for row in rows}
    assert scores["0"] == "correct (the authors' protocol) · ours correct"
    assert scores["1"] == "wrong (the authors' protocol) · ours correct"
    assert sum(s.startswith("correct") for s in scores.values()) == 6  # theirs: 6 of 12


def test_the_viewer_and_the_space_count_the_items_their_figure_reads(official):
    """Their judge's accuracy reads 7 answers (the row with an empty reference is in total_eval but never
    judged), their nutrition figures 8 (one row's reference is unreadable): not total_eval's 8 and 9."""
    from eval import tasks
    from eval.report.runs import load_run
    from space.diningspace.results_view import official_headline

    for task, items in (("classification", 12), ("nutrition", 8), ("vqa", 7)):
        assert run_summary(official["runs"][task], [])["tasks"][task]["protocol"]["items"] == items, task
        metrics = json.loads((official["runs"][task] / "metrics.json").read_text())[task]
        small = official_headline(tasks.get(task), {**metrics, "protocol": "official"})[2]
        assert small.endswith("‡"), task  # fewer than 20 items read: marked as rough
    run = load_run(official["runs"]["vqa"])
    assert run.protocol.counted(tasks.get("vqa"), run.entry("vqa")) == 7


def test_the_viewer_opens_an_item_as_the_authors_protocol_asked_it(official):
    run = official["runs"]["classification"]
    row = corpus_rows("classification.jsonl")[1]
    detail = item_detail(run, "classification", str(row["id"]))
    assert detail.prompt == row["prompt"] and detail.prompt_verified  # their prompt verbatim, hash checked
    sent = [image_bytes(official["release"], path) for path in image_paths(row)[:2]]  # image indices 0,1
    assert [view.data for view in detail.views] == sent
    vqa = corpus_rows("vqa.jsonl")[0]
    answer = answers("vqa")[0]
    assert item_detail(official["runs"]["vqa"], "vqa", str(vqa["id"])).judge_reply == judge_replies()[answer]
    word = row["prompt"].split()[0][:6]
    assert str(row["id"]) in {r["id"] for r in run_items(run, search=word, problems=[])}  # prompts are searched


def test_the_viewer_shows_ours_when_the_protocols_figures_are_unreadable(official, tmp_path):
    import shutil

    run = shutil.copytree(official["runs"]["classification"], tmp_path / "odd")
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["classification"].update(official={"acc": "half"}, official_ci95=["a", "b"], official_disagreements="many")
    (run / "metrics.json").write_text(json.dumps(metrics))
    found = run_summary(run, [])["tasks"]["classification"]
    assert "protocol" not in found and round(100 * found["headline"], 2) == 66.67
    assert all("protocol" not in item for item in run_items(run, problems=[]))


# ------------------------------------------------------------------ eval analyze
def test_analyze_reads_each_run_by_its_protocol(official):
    text = analyze(_dirs(official), n_boot=50)
    # their reading: 6 right and 6 wrong (ours would be 8 and 4)
    assert "| classification | 12 | 6 | 0 | 0 | 0 | 6 |" in text
    assert (f"the authors' protocol, image indices 0,1: classification acc {THEIR_ACC} [" in text
            and f"(ours {OUR_ACC}; {CLS_DIFFER} read differently; release fingerprint "
            f"{official['fingerprints']['classification']})" in text)
    assert f"vqa model_evaluate_accuracy {THEIR_VQA}" in text


def test_thinking_against_instruct_on_their_release_reads_theirs_and_resamples_items(official, tmp_path):
    folder, found = official["release"], []
    for model in ("openai:Fam-8B-Thinking", "openai:Fam-8B-Instruct"):  # the same answers from both
        with FakeOpenAIServer(_model_oracle(folder, "classification")) as server:
            found.append(api.run(RunSettings(task="classification", model=model, base_url=server.base_url,
                                             dataset=str(folder), n_boot=50, out=tmp_path / model[7:]),
                                 progress=False))
    text = analyze(found, n_boot=50)
    assert f"| openai:Fam-8B | classification | 12 | {THEIR_ACC} | {THEIR_ACC} | +0.00 |" in text
    assert "paired item bootstrap." in text and "merchant bootstrap" not in text


# ------------------------------------------------------------------ sweeps
def test_an_official_sweep_counts_views_by_the_indices_sent(official, tmp_path):
    folder = official["release"]
    with FakeOpenAIServer(_model_oracle(folder, "classification")) as server:
        base = RunSettings(task="classification", model="openai:plain-model", base_url=server.base_url,
                           dataset=str(folder), n_boot=50)
        cells = api.sweep_cells(base, models=["openai:plain-model"], langs=["zh"], cots=[False], images=[1, 2],
                                out=tmp_path / "sweep")
        text = api.run_sweep(cells, tmp_path / "sweep", progress=False)
    sweep = text.split("## Sweeps", 1)[1]
    [row] = table_rows(sweep, "openai:plain-model · the authors' protocol")
    assert [cell.split(" [")[0] for cell in row[1:]] == [THEIR_ACC, THEIR_ACC]
    assert all(cell.endswith(f"(ours {OUR_ACC}; {CLS_DIFFER} read differently)") for cell in row[1:])
    assert ("1 view: the authors' protocol, image indices 0, interval resampling items; "
            "2 views: the authors' protocol, image indices 0,1, interval resampling items.") in sweep
    assert (tmp_path / "sweep" / "views_classification.png").stat().st_size


# ------------------------------------------------------------------ what each interval resampled
def test_each_interval_says_what_the_run_resampled(official, capsys, tmp_path):
    # the authors' release names no merchant: items resampled, and no merchant counted anywhere
    card = _report(capsys, *_dirs(official), "--model-card")
    assert "Intervals: 95% bootstrap, resampling items (the release names no merchant)." in card
    assert "fewer than 20 items" in card and "merchant" not in card.replace("names no merchant", "")

    # ours on our release: whole merchants, and the merchants counted
    items = [cls_item(f"c{i}", f"m{i % 3}", i % 2 == 0) for i in range(6)]
    ours = write_run(tmp_path / "ours", "openai:model-a", items)
    card = _report(capsys, str(ours), "--model-card", "--allow-partial")
    assert "resampling whole merchants." in card and "| 6 (3 merchants) |" in card

    # what the run recorded wins over what the card could guess from its rows
    (ours / "metrics.json").write_text(json.dumps({"classification": {"resampled": "items"}}), encoding="utf-8")
    card = _report(capsys, str(ours), "--model-card", "--allow-partial")
    assert "resampling items (the release names no merchant)." in card and "whole merchants" not in card


def test_ours_on_their_release_counts_no_merchant(official, capsys, tmp_path):
    out = api.run(RunSettings(task="classification", model="baseline:random", protocol="ours",
                              dataset=str(official["release"]), out=tmp_path / "ours"), progress=False)
    card = _report(capsys, str(out), "--model-card")
    [row] = table_rows(card, "baseline:random")
    assert row[6] == "12"  # not "12 (1 merchants)": the rows name none
    assert "resampling items (the release names no merchant)." in card and "merchants" not in card
