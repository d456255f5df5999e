"""The construction pipeline end to end on the synthetic raw export, against a fake model that knows
the export's truth: every planted defect is dropped by the right stage for the right reason, nothing
sound is dropped, and the release validates and loads."""

from __future__ import annotations

import csv
import json
import shutil
import tarfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

import diningbench
from construct.__main__ import main
from construct.context import Context
from construct.models import Models
from construct.raw import load_raw
from construct.review import get_item, list_items, record_decision, released_rows
from construct.work import Stage, load_settings
from synthetic.raw_export import PLAN, write_raw_export
from tests.fakes.construct_server import construct_server

FILTERS = ("openai:judge-a", "openai:judge-b")
FDC = Path(__file__).parents[1] / "data" / "fdc_sr28_sample"


def verdicts(work: Path, stage: str) -> dict[str, tuple[str, str]]:
    return {d["item"]: (d["verdict"], d["reason"]) for d in Stage(work, stage).decisions()}


@pytest.fixture(scope="module")
def built(tmp_path_factory, monkeypatch_module):
    root = tmp_path_factory.mktemp("construct")
    truth = write_raw_export(root / "raw")
    server, oracle = construct_server(truth, FILTERS)
    monkeypatch_module.setenv("OPENAI_API_KEY", "test-key")
    with server:
        args = ["run", str(root / "raw"), "--out", str(root / "work"), "--model", "openai:gen",
                "--filter-models", ",".join(FILTERS), "--base-url", server.base_url, "--fdc", str(FDC)]
        assert main(args) == 0  # stops at the base-dish review
        stopped_at = {t for t in oracle.calls}
        approve_csv(root / "work", root / "dishes.csv", "--stage", "dishes")
        assert main(args) == 0  # the same command continues after the review
        calls = len(oracle.calls)
        assert main(args) == 0  # a rerun of a finished build asks nothing again
        rerun_calls = len(oracle.calls) - calls
        approve_csv(root / "work", root / "review.csv")
        release_rc = main(["release", str(root / "work"), "--out", str(root / "release")])
    return SimpleNamespace(root=root, raw=root / "raw", work=root / "work", release=root / "release", truth=truth,
                           oracle=oracle, rerun_calls=rerun_calls, release_rc=release_rc, server=server,
                           stopped_at=stopped_at)


def approve_csv(work: Path, path: Path, *flags: str) -> None:
    """Export, approve every row as reviewer "ana", import."""
    assert main(["review", str(work), *flags, "--export", str(path)]) == 0
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["decision"] = "approve"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["review", str(work), *flags, "--import", str(path), "--reviewer", "ana"]) == 0


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


PHOTO_DEFECTS = {
    "merchant-01-d0-p4": "low_quality", "merchant-01-d1-p4": "not_matching_reference",
    "merchant-02-d1-p4": "near_duplicate", "merchant-02-d2-p4": "too_small", "merchant-02-d2-p5": "undecodable",
    "merchant-03-d1-p0": "low_quality", "merchant-03-d1-p1": "no_reference", "merchant-03-d1-p2": "no_reference",
    "merchant-03-d1-p3": "no_reference",
}


def test_the_run_stops_at_the_base_dish_review_before_any_task_item(built):
    assert any(t.startswith("Task: same dish check.") for t in built.stopped_at)
    assert not any(t.startswith(("Task: hard-negative", "Task: nutrition", "Task: VQA", "Task: classification"))
                   for t in built.stopped_at)
    reviewed = Stage(built.work, "dish_review").decisions()
    kept_dishes = [d["dish_id"] for d in Stage(built.work, "dishes").items()]
    assert [d["item"] for d in reviewed] == kept_dishes
    assert all(d["verdict"] == "kept" and d["detail"]["reviewer"] == "ana" for d in reviewed)
    card = (built.release / "README.md").read_text(encoding="utf-8")
    assert "| base dishes (before task generation) | 10 | 10 | 0 | 0 | 0 | ana |" in card
    assert "No person reviewed" not in card and "Audit: none" in card


def test_each_planted_photo_defect_is_dropped_by_the_photo_filters(built):
    got = verdicts(built.work, "photos")
    assert {p: got[p] for p in PHOTO_DEFECTS} == {p: ("dropped", r) for p, r in PHOTO_DEFECTS.items()}
    sound = [p for p in got if p not in PHOTO_DEFECTS]
    # A sound photo of a dish that fails a free rule (too few user photos, a vague ingredient list) is
    # never sent to a model: dropped as its dish is ruled out, the dish's reason beside it.
    ruled = {p for p in sound if p.startswith(("merchant-01-d2-", "merchant-01-d3-"))}
    assert ruled and all(got[p] == ("dropped", "dish_ruled_out") for p in ruled)
    assert all(got[p] == ("kept", "ok") for p in set(sound) - ruled)
    calls = (built.work / "photos" / "calls.jsonl").read_text(encoding="utf-8")
    asked = {json.loads(line)["item"] for line in calls.splitlines()}
    assert asked and not asked & ruled


def test_dish_selection_drops_thin_vague_duplicate_and_badly_photographed_dishes(built):
    got = verdicts(built.work, "dishes")
    assert got["merchant-01-d2"] == ("dropped", "too_few_user_photos")
    assert got["merchant-01-d3"] == ("dropped", "vague_ingredients")
    assert got["merchant-03-d1"] == ("dropped", "no_good_reference")
    assert got["merchant-03-d7"] == ("dropped", "near_duplicate_dish")
    dup = next(d for d in Stage(built.work, "dishes").decisions() if d["item"] == "merchant-03-d7")
    assert dup["detail"]["of"] == "merchant-01-d1"
    expected = {d for d in PLAN} - {"merchant-01-d2", "merchant-01-d3", "merchant-03-d1", "merchant-03-d7"}
    assert {d for d, v in got.items() if v[0] == "kept"} == expected
    # Menu-only dishes (distractors, no photos) never become items.
    assert all(v == ("dropped", "too_few_user_photos") for d, v in got.items() if d not in PLAN)


def test_dish_dedupe_asks_the_model_only_about_candidate_pairs_and_keeps_its_verdicts(built):
    """The renamed twin (merchant-03-d7 = merchant-01-d1, "家常" added) is a candidate and confirmed."""
    pairs = [json.loads(line) for line in (built.work / "dishes" / "pairs.jsonl").read_text().splitlines()]
    twin = next(p for p in pairs if p["pair"] == ["merchant-01-d1", "merchant-03-d7"])
    assert twin["same_dish"] is True and "concepts" in twin["via"] and twin["model"] == "openai:gen"
    assert sum(p["same_dish"] for p in pairs) == 1  # every other candidate pair was judged distinct
    dup = next(d for d in Stage(built.work, "dishes").decisions() if d["item"] == "merchant-03-d7")
    assert dup["detail"]["model"] == "openai:gen" and dup["detail"]["model_reason"]
    survivors = 11  # dishes past the photo and ingredient rules, across 4 merchants
    assert 0 < len(pairs) < survivors * (survivors - 1) // 2


def test_classification_items_have_same_menu_look_alikes_and_the_filters_drop_planted_items(built):
    got = verdicts(built.work, "classification")
    assert got["merchant-02-d3"] == ("dropped", "ambiguous")
    assert got["merchant-03-d3"] == ("dropped", "too_easy")
    assert got["merchant-04-d0"] == ("dropped", "too_few_candidates")
    details = {d["item"]: d["detail"] for d in Stage(built.work, "classification").decisions()}
    assert details["merchant-02-d3"]["filter_pass"] == 1 and details["merchant-03-d3"]["filter_pass"] == 2
    raw = load_raw(built.raw)
    items = Stage(built.work, "classification").items()
    assert len(items) == 7
    for item in items:
        target = raw.dishes[item["dish_id"]]
        assert item["option_dish_ids"][ord(item["answer"]) - 65] == item["dish_id"]
        for other in item["option_dish_ids"]:
            dish = raw.dishes[other]
            assert (dish.merchant_id, dish.menu_category) == (target.merchant_id, target.menu_category)
            assert not dish.name.startswith("招牌") and dish.name != "冰镇酸梅汤"  # same name / obviously different
        assert len(set(item["options"])) == 8


def test_nutrition_uses_merchant_values_only_when_they_pass_the_gates(built):
    kept = {d["item"]: d["detail"] for d in Stage(built.work, "nutrition").decisions() if d["verdict"] == "kept"}
    assert set(kept) == {d for d, v in verdicts(built.work, "dishes").items() if v[0] == "kept"}
    assert kept["merchant-02-d0"]["source"] == "merchant"  # per 100 g, converted with the portion
    truth = built.truth["dishes"]["merchant-02-d0"]["nutrition"]
    assert kept["merchant-02-d0"]["values"]["calories"] == pytest.approx(truth["calories"], rel=0.01)
    assert kept["merchant-01-d4"]["checks"]["merchant_rejected"] == "atwater_gap"
    assert kept["merchant-02-d2"]["checks"]["merchant_rejected"] == "macro_density"
    assert kept["merchant-03-d2"]["checks"]["merchant_rejected"] == "implausible"
    for dish in ("merchant-01-d4", "merchant-02-d2", "merchant-03-d2"):
        assert kept[dish]["source"] == "estimated"
    # The USDA check, from the export's own ingredient grams (no model): every synthetic entry is an FDC food.
    usda = {d: v["checks"]["usda"] for d, v in kept.items()}
    assert all(u["coverage"] == 1.0 and u["judged"] for u in usda.values())
    assert usda["merchant-01-d0"]["gap"] < 0.05 and not any(u["flag"] for u in usda.values())
    assert usda["merchant-03-d2"]["label_gap"] > 0.2  # the under-reported label is far from the computed values
    rows = {r["dish_id"]: r for r in Stage(built.work, "nutrition").items()}
    assert {r["nutrition_source"] for r in rows.values()} <= {"merchant", "estimated"}


def test_vqa_rules_dedupe_and_audits_drop_the_planted_drafts(built):
    got = verdicts(built.work, "vqa")
    # 10 dishes, the paper's mix: 6.62/2.72/0.44/0.22 by largest remainder -> 7 technique, 3 dietary.
    drafted = Counter(item.split(":")[1] for item in got)
    assert drafted == {"cuisine_technique": 7, "dietary_suggestion": 3}
    assert len({item.split(":")[0] for item in got}) == len(got) == 10  # one item per dish
    assert got["merchant-01-d0:cuisine_technique"] == ("dropped", "multiple_questions")
    assert got["merchant-01-d1:cuisine_technique"] == ("dropped", "describes_image")
    assert got["merchant-02-d0:cuisine_technique"] == ("dropped", "near_duplicate_question")
    dup = next(d for d in Stage(built.work, "vqa").decisions() if d["item"] == "merchant-02-d0:cuisine_technique")
    assert dup["detail"]["of"] == "merchant-01-d4:cuisine_technique" and dup["detail"]["model"] == "openai:gen"
    assert got["merchant-01-d4:cuisine_technique"] == ("kept", "ok")
    assert got["merchant-04-d0:dietary_suggestion"] == ("dropped", "false_premise")
    assert got["merchant-02-d1:cuisine_technique"] == ("dropped", "trivial")
    assert sum(v[0] == "kept" for v in got.values()) == len(got) - 5
    technique = [r for r in Stage(built.work, "vqa").items() if r["vqa_category"] == "cuisine_technique"]
    assert technique and all(r["image_roles"] == ["reference"] for r in technique)


def test_the_card_reports_the_realized_vqa_mix_beside_the_target(built):
    card = (built.release / "README.md").read_text(encoding="utf-8")
    # 5 released: technique d4, d3 (merchant-02), d3 (merchant-03); dietary merchant-02-d2, merchant-03-d2.
    assert "| cuisine_technique | 66.2% | 60.0% | 3 |" in card
    assert "| dietary_suggestion | 27.2% | 40.0% | 2 |" in card
    assert "| multi_image_analysis | 4.4% | 0.0% | 0 |" in card


def test_translation_uses_one_glossary_per_merchant(built):
    rows = Stage(built.work, "translate").items()
    glossary = json.loads((built.work / "translate" / "glossary.json").read_text(encoding="utf-8"))
    for row in rows:
        if row["task"] == "classification":
            assert row["options_en"] == [glossary[row["merchant_id"]][o] for o in row["options"]]
        if row["task"] == "vqa":
            assert row["question_en"] and "(untranslated)" not in row["question_en"]
    assert all(v == ("kept", "ok") for v in verdicts(built.work, "translate").values())


def test_release_validates_and_loads_with_option_dish_ids(built):
    assert built.release_rc == 0
    assert [p for p in diningbench.validate(built.release) if p.level == "error"] == []
    cls = diningbench.load("classification", built.release)
    assert len(cls) == 7 and len(cls[0]["option_dish_ids"]) == 8
    assert len(diningbench.load("nutrition", built.release)) == 10
    vqa = diningbench.load("vqa", built.release)
    assert len(vqa) == 5 and vqa[0]["images"][0].size == (192, 192)
    card = (built.release / "README.md").read_text(encoding="utf-8")
    assert "## How this release was built" in card and "near_duplicate_dish 1" in card


def test_a_finished_build_reruns_without_model_calls(built):
    assert built.rerun_calls == 0


def test_funnel_report_counts_reasons_tokens_and_draws_the_plot(built):
    md = (built.work / "funnel.md").read_text(encoding="utf-8")
    assert "| photos | all | 60 |" in md and "not_matching_reference 1" in md
    assert "| nutrition |" in md and (built.work / "funnel.png").stat().st_size > 10_000
    tokens = [line for line in md.splitlines() if line.startswith("| **all** |")][0]
    assert int(tokens.split("|")[4].strip().replace(",", "")) > 0


def test_the_cuisine_ratio_caps_the_largest_cuisine_relative_to_the_next(built, tmp_path):
    from construct import dishes

    work = tmp_path / "work"
    shutil.copytree(built.work, work)
    settings = load_settings(work)
    settings.cuisine_ratio = 1.0  # kept before the caps: chinese 5, western 4, japanese 1
    dishes.run(Context(load_raw(built.raw), work, settings, Models(settings, work)))
    capped = [d for d in Stage(work, "dishes").decisions() if d["reason"] == "cuisine_cap"]
    assert [(d["detail"]["cuisine"], d["detail"]["cap"], d["detail"]["rule"]) for d in capped] == [("chinese", 4, "ratio")]
    assert len(capped) == 1  # the chinese dish with the fewest user photos (then the last id) goes


def test_the_card_states_the_cuisine_rule_and_the_usda_cross_check(built):
    card = (built.release / "README.md").read_text(encoding="utf-8")
    assert "Cuisine balance: a cuisine keeps at most 7.3 times the dishes of the largest other cuisine" in card
    assert "Capped in this build: none." in card  # 5 chinese, 4 western: the default ratio caps nothing here
    assert "USDA check (computed by code from each dish's ingredient grams" in card and "`fdc_sr28_sample`" in card
    assert "0 sent to review flagged" in card
    assert "Near-duplicate dishes across merchants: compared on concepts" in card and "1 dish(es) dropped" in card
    assert f"Filter and audit passes: {FILTERS[0]}, then {FILTERS[1]} (two different models" in card


def test_review_api_records_decisions_that_release_respects(built, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(built.work, work)
    items = list_items(work, task="vqa")
    assert items and all(Path(p).is_file() for p, _ in items[0].photos)
    first = get_item(work, items[0].item_id)
    assert first.decision == "approve"
    record_decision(work, first.item_id, "reject", "answer too vague")
    assert first.item_id not in {r["id"] for r in released_rows(work)}
    assert get_item(work, first.item_id).decision == "reject"
    with pytest.raises(ValueError):
        record_decision(work, first.item_id, "maybe")


def test_cuisine_caps_drop_the_dishes_over_the_cap(built, tmp_path):
    from construct import dishes

    work = tmp_path / "work"
    shutil.copytree(built.work, work)
    settings = load_settings(work)
    settings.cuisine_caps = {"chinese": 2}
    dishes.run(Context(load_raw(built.raw), work, settings, Models(settings, work)))
    got = verdicts(work, "dishes")
    chinese = [d for d, v in got.items() if v[0] == "kept" and d.startswith(("merchant-01", "merchant-03"))]
    assert len(chinese) == 2
    assert sum(v == ("dropped", "cuisine_cap") for v in got.values()) == 3


def test_a_portion_stated_in_kilograms_is_read_by_the_build(built, tmp_path, monkeypatch_module):
    from construct import nutrition

    raw, work = tmp_path / "raw", tmp_path / "work"
    shutil.copytree(built.raw, raw)
    shutil.copytree(built.work, work)
    lines = (raw / "dishes.jsonl").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        row = json.loads(line)
        if row["dish_id"] == "merchant-02-d0":  # per 100 g; its portion "1份，约357克" written in kilograms
            assert row["portion"] == "1份，约357克"
            row["portion"] = "1 serving, about 0.357 kg"
            lines[i] = json.dumps(row, ensure_ascii=False)
    (raw / "dishes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    server, _ = construct_server(built.truth, FILTERS)
    with server:
        settings = load_settings(work)
        settings.base_url = server.base_url
        nutrition.run(Context(load_raw(raw), work, settings, Models(settings, work)))
    got = {d["item"]: d for d in Stage(work, "nutrition").decisions()}["merchant-02-d0"]
    assert (got["verdict"], got["detail"]["source"]) == ("kept", "merchant")
    assert got["detail"]["values"]["calories"] == pytest.approx(144.87 * 3.57, abs=0.05)


def test_every_stage_redone_from_the_cached_answers_asks_nothing_and_decides_alike(built, tmp_path, monkeypatch_module):
    """A work folder whose stages must all run again (no done.json: e.g. one made by an earlier version)
    is rebuilt from its cached answers alone: every prompt and cache key the stages build is the same,
    and so is every decision and item."""
    work = tmp_path / "work"
    shutil.copytree(built.work, work)
    for done in work.rglob("done.json"):
        done.unlink()
    server, _ = construct_server(built.truth, FILTERS)
    with server:
        assert main(["run", str(built.raw), "--out", str(work), "--model", "openai:gen", "--filter-models",
                     ",".join(FILTERS), "--base-url", server.base_url, "--fdc", str(FDC)]) == 0
    assert server.requests == []
    for name in ("photos", "dishes", "dish_review", "classification", "nutrition", "vqa", "translate", "review"):
        for file in ("decisions.jsonl", "items.jsonl", "pairs.jsonl"):
            before, after = built.work / name / file, work / name / file
            assert before.exists() == after.exists(), (name, file)
            if before.exists():
                assert after.read_bytes() == before.read_bytes(), (name, file)
    assert all((work / name / "done.json").exists() for name in ("photos", "classification", "vqa", "translate"))
    glossary = [(w / "translate" / "glossary.json").read_bytes() for w in (built.work, work)]
    assert glossary[0] == glossary[1]  # merchants in order, not in the order their answers came
    assert list(json.loads(glossary[1])) == sorted({r["merchant_id"] for r in Stage(work, "translate").items()})


def test_release_rows_are_stored_as_datasets_would_store_them(built):
    """The release stage writes without `datasets`: each row it hands the writer is stored as
    `datasets`' own encoder would store it (classification with option_dish_ids)."""
    from construct.release import release_row

    raw, rows = load_raw(load_settings(built.work).raw), released_rows(built.work)
    assert {r["task"] for r in rows} == set(diningbench.CONFIGS)
    for item in rows:
        row, optional = release_row(raw, item), item["task"] == "classification"
        assert all(isinstance(image["bytes"], bytes) for image in row["images"])
        ours = diningbench.encode_row(item["task"], row, optional=optional)
        assert ours == diningbench.features(item["task"], optional=optional).encode_example(row)


def test_release_in_the_authors_layout_reads_back_scores_and_repeats_byte_for_byte(built, tmp_path):
    """`release --layout official`: the six JSON-lines files, `images/` and `images.tar.gz`, the same
    items, texts and photo bytes as the Parquet release in both languages; `eval run` scores it with the
    authors' protocol; a second release of the same work folder is the same bytes."""
    from eval.cli import main as eval_main

    first, second = tmp_path / "official", tmp_path / "again"
    for out in (first, second):
        assert main(["release", str(built.work), "--out", str(out), "--layout", "official"]) == 0
    names = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert {*diningbench.OFFICIAL_FILES.values(), "images.tar.gz", "README.md"} <= set(names)
    assert names == sorted(p.relative_to(second).as_posix() for p in second.rglob("*") if p.is_file())
    assert [n for n in names if (first / n).read_bytes() != (second / n).read_bytes()] == []
    with tarfile.open(first / "images.tar.gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == [n for n in names if n.startswith("images/")]
    assert {(m.mtime, m.uid, m.gid, m.mode) for m in members} == {(0, 0, 0, 0o644)}
    assert (first / "images.tar.gz").read_bytes()[4:8] == b"\0\0\0\0"  # the gzip header's mtime
    (first / "images" / "from-an-earlier-build.jpg").write_bytes(b"stale")
    assert main(["release", str(built.work), "--out", str(first), "--layout", "official"]) == 0  # into itself
    assert sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file()) == names

    for config in diningbench.CONFIGS:
        english = {"options": "options_en", "dish_name": "dish_name_en", "question": "question_en",
                   **({"answer": "answer_en"} if config == "vqa" else {})}
        ours = diningbench.read_release(config, built.release)
        ours_rows = list(ours.iter_rows(range(len(ours))))
        for lang in diningbench.LANGS:
            theirs = diningbench.read_release(config, first, lang=lang)
            assert [r["id"] for r in theirs.rows] == [r["id"] for r in ours_rows]
            for got, want in zip(theirs.iter_rows(range(len(theirs))), ours_rows, strict=True):
                assert [i["bytes"] for i in got["images"]] == [i["bytes"] for i in want["images"]]
                if config != "vqa":  # a VQA row lists its photos as `images`, no standard one
                    assert got["has_standard_image"] == (want["image_roles"][0] == "reference")
                for column in {"options", "answer", "dish_name", "calories", "question"} & set(got):
                    assert got[column] == want[english.get(column, column) if lang == "en" else column], column
    assert [p for p in diningbench.validate(first, lang="en") if p.level == "error"] == []

    run = tmp_path / "run"
    assert eval_main(["run", "--task", "classification", "--model", "baseline:first", "--dataset", str(first),
                      "--out", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))["classification"]
    assert metrics["official"]["total_eval"] == metrics["n"] == 7 and metrics["official_disagreements"] == 0
    assert '"protocol": "official"' in (run / "run.json").read_text(encoding="utf-8")


def test_release_refuses_a_folder_holding_the_other_layout(built, tmp_path, capsys):
    parquet = tmp_path / "parquet"
    shutil.copytree(built.release, parquet)
    assert main(["release", str(built.work), "--out", str(parquet), "--layout", "official"]) == 2
    assert "holds a Parquet release" in capsys.readouterr().err
    assert not (parquet / "classification.jsonl").exists()
