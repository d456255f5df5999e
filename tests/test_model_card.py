"""`python -m eval report DIR --model-card`: a card the Hub reads, for full-benchmark runs only."""

import json
from pathlib import Path

import yaml
from helpers_report import cls_item, nut_item, report_args, write_run
from huggingface_hub import EvalResult, ModelCard

from eval.report import report

REF = {"calories": 500.0, "protein": 25.0, "carbohydrates": 60.0, "fat": 20.0}
HUB = "acme/diningbench"
SHA = "0123456789abcdef0123456789abcdef01234567"


def on_source(folder: Path, source: str, *, fingerprint: str = "abc123", **settings) -> Path:
    """Rewrite a run folder's run.json as if it ran on `source` with these extra settings."""
    info = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    info["dataset"] = {"source": source, "fingerprints": {t: fingerprint for t in ("classification", "nutrition")}}
    info["settings"].update(settings)
    (folder / "run.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


def model_runs(root: Path, model: str = "openai:model-a") -> list[Path]:
    """Classification 3 of 4 right (75.00%); nutrition: every estimate 25% high (every MAPE 25.00%)."""
    cls = write_run(root / "cls", model, [cls_item("c0", "m0", True), cls_item("c1", "m1", False),
                                          cls_item("c2", "m1", True), cls_item("c3", "m2", True)])
    nut = write_run(root / "nut", model,
                    [nut_item(f"n{i}", f"m{i}", {k: v * 1.25 for k, v in REF.items()}, REF) for i in range(3)])
    return [cls, nut]


def release_card(folder: Path, *, classification: int, nutrition: int, note: str = "") -> Path:
    """A local release folder's README.md as `diningbench.write_release` writes it (header counts)."""
    folder.mkdir(parents=True, exist_ok=True)
    infos = [{"config_name": c, "splits": [{"name": "test", "num_bytes": 10, "num_examples": n}]}
             for c, n in (("classification", classification), ("nutrition", nutrition), ("vqa", 0))]
    header = yaml.safe_dump({"pretty_name": "DiningBench", "dataset_info": infos})
    (folder / "README.md").write_text(f"---\n{header}---\n\n# DiningBench\n\n{note}\n\n## Configs\n", encoding="utf-8")
    return folder


def export(capsys, *argv: str) -> tuple[int, str, str]:
    code = report.main(report_args(*argv, "--n-boot", "50"))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_written_card_loads_as_hub_eval_results_with_hand_computed_values(tmp_path, capsys):
    runs = [on_source(p, HUB, fingerprint=f"hub:{HUB}@{SHA}") for p in model_runs(tmp_path)]
    out = tmp_path / "card" / "README.md"
    code, _, err = export(capsys, *map(str, runs), "--model-card", "--out", str(out))
    assert code == 0, err
    assert out.read_text(encoding="utf-8").startswith("---\n")  # metadata first, then the body

    card = ModelCard.load(out)
    results = card.data.eval_results
    assert all(isinstance(r, EvalResult) for r in results)
    assert card.data.model_name == "openai:model-a"  # the spec as given, backend included
    assert card.data.datasets == [HUB]
    values = {(r.dataset_config, r.metric_type): r.metric_value for r in results}
    assert values == {("classification", "accuracy"): 75.0, ("nutrition", "avg_mape"): 25.0,
                      ("nutrition", "calories_mape"): 25.0, ("nutrition", "protein_mape"): 25.0,
                      ("nutrition", "carbohydrates_mape"): 25.0, ("nutrition", "fat_mape"): 25.0}
    assert {(r.dataset_type, r.dataset_split, r.dataset_revision, r.task_type) for r in results} == {
        (HUB, "test", SHA, "image-classification"), (HUB, "test", SHA, "image-text-to-text")}
    assert results[0].dataset_args == {"lang": "zh", "images": "all", "cot": False}
    assert "| openai:model-a | Fine-grained dish classification | zh, all views, no CoT | Accuracy (%) | 75.00 |" \
        in card.text
    assert "Not a full-benchmark result" not in card.text


def test_format_json_and_yaml_print_only_the_metadata_for_metadata_update(tmp_path, capsys):
    runs = [str(on_source(p, HUB)) for p in model_runs(tmp_path)]
    code, printed, _ = export(capsys, *runs, "--model-card", "--format", "json")
    assert code == 0
    meta = json.loads(printed)
    code, printed, _ = export(capsys, *runs, "--model-card", "--format", "yaml")
    assert code == 0 and yaml.safe_load(printed) == meta
    [entry] = meta["model-index"]
    assert [m["type"] for m in entry["results"][1]["metrics"]] == [
        "avg_mape", "calories_mape", "protein_mape", "carbohydrates_mape", "fat_mape"]


def test_baseline_keeps_its_spec_as_the_model_name(tmp_path, capsys):
    runs = [str(on_source(p, HUB)) for p in model_runs(tmp_path, "baseline:median")]
    code, printed, _ = export(capsys, *runs, "--model-card", "--format", "json")
    assert code == 0 and json.loads(printed)["model-index"][0]["name"] == "baseline:median"


def test_synthetic_sample_is_refused_in_one_error_line(tmp_path, capsys):
    runs = [str(p) for p in model_runs(tmp_path)]  # run.json source: the embedded sample
    out = tmp_path / "README.md"
    code, printed, err = export(capsys, *runs, "--model-card", "--out", str(out))
    assert code == 2 and printed == "" and not out.exists()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert "synthetic" in err and "--allow-partial" in err


def test_allow_partial_exports_a_synthetic_run_marked_in_args_and_markdown(tmp_path, capsys):
    runs = [str(p) for p in model_runs(tmp_path)]
    out = tmp_path / "README.md"
    code, _, err = export(capsys, *runs, "--model-card", "--allow-partial", "--out", str(out))
    assert code == 0, err
    card = ModelCard.load(out)
    result = card.data.eval_results[0]
    assert result.dataset_type == "synthetic"
    assert "synthetic" in result.dataset_args["partial"]
    assert "**Not a full-benchmark result** (synthetic sample" in card.text


def test_limit_or_ids_on_the_full_release_is_partial(tmp_path, capsys):
    cls, nut = model_runs(tmp_path)
    on_source(cls, HUB, limit=5)
    on_source(nut, HUB, ids=["n0", "n1", "n2"])
    code, _, err = export(capsys, str(cls), "--model-card")
    assert code == 2 and "--limit 5" in err
    code, _, err = export(capsys, str(nut), "--model-card")
    assert code == 2 and "--ids (3 ids)" in err
    code, printed, _ = export(capsys, str(cls), str(nut), "--model-card", "--allow-partial", "--format", "json")
    results = json.loads(printed)["model-index"][0]["results"]
    assert [r["dataset"]["args"]["partial"] for r in results] == ["--limit 5", "--ids (3 ids)"]


def test_fewer_items_than_the_local_release_declares_is_partial(tmp_path, capsys):
    cls, nut = model_runs(tmp_path)
    full = release_card(tmp_path / "release", classification=4, nutrition=3)
    on_source(cls, str(full))
    on_source(nut, str(release_card(tmp_path / "bigger", classification=4, nutrition=30)))
    code, printed, err = export(capsys, str(cls), "--model-card", "--format", "json", "--dataset", HUB)
    assert code == 0, err
    assert json.loads(printed)["model-index"][0]["results"][0]["dataset"]["type"] == HUB
    code, _, err = export(capsys, str(nut), "--model-card")
    assert code == 2 and "nutrition: 3 of 30 items" in err


def test_a_release_written_by_diningbench_sample_is_synthetic(tmp_path, capsys):
    cls, _ = model_runs(tmp_path)
    note = "> Synthetic data (scale `sample`, seed 0) rendered by `python diningbench.py sample`"
    on_source(cls, str(release_card(tmp_path / "release", classification=4, nutrition=3, note=note)))
    code, _, err = export(capsys, str(cls), "--model-card")
    assert code == 2 and "synthetic" in err


def test_one_model_per_card_and_a_hub_id_for_dataset(tmp_path, capsys):
    a = model_runs(tmp_path / "a", "openai:model-a")
    b = model_runs(tmp_path / "b", "openai:model-b")
    code, _, err = export(capsys, *map(str, a + b), "--model-card", "--allow-partial")
    assert code == 2 and "openai:model-a, openai:model-b" in err
    code, _, err = export(capsys, *map(str, a), "--model-card", "--allow-partial", "--dataset", "not a hub id")
    assert code == 2 and err.startswith("error: --dataset")


def test_the_revision_of_a_hub_release_read_in_the_authors_layout_is_named(tmp_path, capsys):
    runs = [on_source(p, HUB) for p in model_runs(tmp_path)]  # fingerprints name no Hub commit
    for folder in runs:
        info = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        info["dataset_revision"] = {"classification": SHA, "nutrition": SHA}  # what their release's reader records
        (folder / "run.json").write_text(json.dumps(info), encoding="utf-8")
    code, printed, _ = export(capsys, *map(str, runs), "--model-card")
    assert code == 0
    assert f"at revision {SHA[:12]}" in printed
    meta = yaml.safe_load(printed.split("---\n")[1])
    assert {r["dataset"]["revision"] for r in meta["model-index"][0]["results"]} == {SHA}
