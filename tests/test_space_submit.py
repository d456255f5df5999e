"""Submissions without a server: a hostile zip opened with care, a run folder checked against the
release and re-scored, claims compared, the kept folder and its history, model cards, rate limits."""

from __future__ import annotations

import json
import shutil
import stat
import zipfile
from pathlib import Path

import pytest
from helpers_space import write_baseline_run

from space.diningspace.guard import GuardError
from space.diningspace.leaderboard import leaderboard_html, leaderboard_rows, local_rows
from space.diningspace.limits import HourlyQuota
from space.diningspace.submissions import (
    Caps,
    Releases,
    SubmissionError,
    Submissions,
    open_zip,
    parse_json,
    self_reported,
    submit,
)

DEMO_MODEL = "baseline:category-mean"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo run: every task of the embedded sample, answered by a baseline and scored."""
    return write_baseline_run(tmp_path_factory.mktemp("runs"), "demo", "all", DEMO_MODEL)


@pytest.fixture(scope="module")
def releases() -> Releases:
    return Releases(None)  # the embedded sample, loaded once for the module


def zip_folder(folder: Path, out: Path, prefix: str = "demo/") -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file():
                archive.write(path, prefix + path.name)
    return out


def edited_copy(folder: Path, dest: Path, name: str, edit) -> Path:
    shutil.copytree(folder, dest)
    text = (dest / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        (dest / name).write_text(json.dumps(edit(json.loads(text))), encoding="utf-8")
    else:
        lines = [json.loads(line) for line in text.splitlines() if line]
        (dest / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in edit(lines)),
                                 encoding="utf-8")
    return dest


def run_json(folder: Path) -> dict:
    return json.loads((folder / "run.json").read_text(encoding="utf-8"))


def _submit(path: Path, results: Path, releases: Releases, **kw) -> dict:
    return submit(zip_path=path, hub_repo=None, repo_type="model", store=Submissions(results),
                  release_for=releases.get, caps=kw.pop("caps", Caps()), judge=None, dataset_id=None, **kw)


# ---------------------------------------------------------------- accepted, verified
def test_the_demo_run_is_verified_and_reaches_the_leaderboard(demo_run, releases, tmp_path: Path) -> None:
    scores = [json.loads(line) for line in (demo_run / "scores.jsonl").read_text().splitlines()]
    cls = [s for s in scores if s["task"] == "classification"]
    expected = sum(s["correct"] for s in cls) / len(cls)  # what the harness scored, item by item
    record = _submit(zip_folder(demo_run, tmp_path / "demo.zip"), tmp_path / "results", releases)
    assert record["status"] == "verified" and record["mismatch"] is False and record["partial"] is False
    tasks = {t["task"]: t for t in record["tasks"]}
    assert tasks["classification"]["rescored"] == pytest.approx(expected)
    assert tasks["classification"]["claimed"] == tasks["classification"]["claimed_metrics"] == tasks[
        "classification"]["rescored"]
    assert (tasks["classification"]["items"], tasks["classification"]["release_items"]) == (len(cls), len(cls))
    assert tasks["vqa"]["verified"] is False and tasks["vqa"]["rescored"] is None  # no judge configured
    assert any("VQA not verified" in note for note in record["notes"])
    kept = tmp_path / "results" / "submissions" / record["key"]
    assert {"run.json", "predictions.jsonl", "scores.jsonl", "metrics.json", "submission.json"} <= {
        p.name for p in kept.iterdir()}
    assert run_json(kept)["judge"] is None and run_json(kept)["submission"]["status"] == "verified"
    # the kept run.json comes from the harness's one builder: the fields of a run's own, and the submitter's
    # packages rather than the Space's
    # (less the limiter's trace: what the submitter's run learnt of its own server is not kept)
    assert set(run_json(kept)) - {"submission"} == set(run_json(demo_run)) - {"concurrency"}
    assert run_json(kept)["packages"] == {k: str(v) for k, v in run_json(demo_run)["packages"].items() if v is not None}

    (row,) = local_rows(tmp_path / "results")
    assert row["Status"] == "verified" and row["Model"] == DEMO_MODEL
    assert row["Cls acc %"] == round(expected * 100, 2) and row["VQA acc %"] is None
    assert row["Source"] == "submitted: zip upload" and row["Run"] == f"submissions/{record['key']}"
    page = leaderboard_html(leaderboard_rows(None, tmp_path / "results"), "Cls acc %")
    assert f"href='?run=submissions%2F{record['key']}'" in page and "db-status-verified" in page


def test_an_edited_scores_file_shows_the_rescored_figure_and_a_mismatch(demo_run, releases, tmp_path: Path) -> None:
    def flip(rows: list[dict]) -> list[dict]:
        wrong = [r for r in rows if r["task"] == "classification" and not r["correct"]]
        for r in wrong[:3]:
            r["correct"] = True  # three wrong answers claimed as right
        return rows

    folder = edited_copy(demo_run, tmp_path / "edited", "scores.jsonl", flip)
    scores = [json.loads(line) for line in (demo_run / "scores.jsonl").read_text().splitlines()]
    cls = [s for s in scores if s["task"] == "classification"]
    truth = sum(s["correct"] for s in cls) / len(cls)
    record = _submit(zip_folder(folder, tmp_path / "edited.zip"), tmp_path / "results", releases)
    (check,) = [t for t in record["tasks"] if t["task"] == "classification"]
    assert check["rescored"] == pytest.approx(truth)
    assert check["claimed"] == pytest.approx(truth + 3 / len(cls))
    assert check["claimed_metrics"] == pytest.approx(truth)  # metrics.json was left alone
    assert check["mismatch"] is True and check["differing_items"] == 3 and record["mismatch"] is True
    nutrition = [t for t in record["tasks"] if t["task"] == "nutrition"][0]
    assert nutrition["mismatch"] is False  # only the edited task is flagged
    (row,) = local_rows(tmp_path / "results")
    assert row["Status"] == "verified · claims differ" and row["Cls acc %"] == round(truth * 100, 2)


def test_edited_raw_answers_are_scored_as_they_are_now(demo_run, releases, tmp_path: Path) -> None:
    """Changing an answer keeps the request hash (the question is the same) but not the claims."""
    scores = {(s["task"], s["id"]): s for s in map(json.loads, (demo_run / "scores.jsonl").read_text().splitlines())}

    def answer_right(rows: list[dict]) -> list[dict]:
        for r in rows:
            if r["task"] == "classification":
                r["raw"] = scores[("classification", r["id"])]["reference"]
        return rows

    folder = edited_copy(demo_run, tmp_path / "raw", "predictions.jsonl", answer_right)
    record = _submit(zip_folder(folder, tmp_path / "raw.zip"), tmp_path / "results", releases)
    (check,) = [t for t in record["tasks"] if t["task"] == "classification"]
    assert check["rescored"] == 1.0 and check["mismatch"] is True


# ---------------------------------------------------------------- refused: foreign or tampered
def test_a_run_on_another_release_is_refused(demo_run, releases, tmp_path: Path) -> None:
    def foreign(info: dict) -> dict:
        info["dataset"]["fingerprints"]["nutrition"] = "0123456789abcdef"
        return info

    folder = edited_copy(demo_run, tmp_path / "foreign", "run.json", foreign)
    with pytest.raises(SubmissionError, match=r"foreign release: the nutrition answers were made on data "
                                              r"'0123456789abcdef', this Space's release is"):
        _submit(zip_folder(folder, tmp_path / "f.zip"), tmp_path / "results", releases)
    assert not (tmp_path / "results" / "submissions").exists()  # nothing kept


@pytest.mark.parametrize("edit, reason", [
    (lambda rows: [{**r, "request_hash": "0" * 32} if i == 0 else r for i, r in enumerate(rows)],
     r"tampered: 1 of \d+ request hashes do not match .*\(first: classification/classification-00001\)"),
    (lambda rows: [{**r, "id": "classification-99999"} if i == 0 else r for i, r in enumerate(rows)],
     r"predictions\.jsonl line 1: item classification/classification-99999 is not in this release"),
], ids=["hash", "unknown-id"])
def test_tampered_predictions_are_refused(demo_run, releases, tmp_path: Path, edit, reason: str) -> None:
    folder = edited_copy(demo_run, tmp_path / "t", "predictions.jsonl", edit)
    with pytest.raises(SubmissionError, match=reason):
        _submit(zip_folder(folder, tmp_path / "t.zip"), tmp_path / "results", releases)


def test_settings_changed_after_the_run_no_longer_match_the_hashes(demo_run, releases, tmp_path: Path) -> None:
    def english(info: dict) -> dict:
        info["settings"]["lang"] = "en"  # claims English prompts; the requests were Chinese
        return info

    folder = edited_copy(demo_run, tmp_path / "en", "run.json", english)
    with pytest.raises(SubmissionError, match=r"tampered: \d+ of \d+ request hashes do not match"):
        _submit(zip_folder(folder, tmp_path / "en.zip"), tmp_path / "results", releases)


def test_a_partial_run_is_accepted_and_marked_partial(releases, tmp_path: Path) -> None:
    run = write_baseline_run(tmp_path / "runs", "few", "classification", "baseline:first", "--limit", "5")
    record = _submit(zip_folder(run, tmp_path / "few.zip", prefix=""), tmp_path / "results", releases)
    assert record["partial"] is True and record["tasks"][0]["items"] == 5
    (row,) = leaderboard_rows(None, tmp_path / "results")
    assert row["Data"] == "synthetic" and row["#"] is None  # the sample: shown, not ranked


def test_a_run_missing_items_of_the_release_is_partial(demo_run, releases, tmp_path: Path) -> None:
    def drop(rows: list[dict]) -> list[dict]:
        return [r for r in rows if r["id"] != "classification-00002"]

    folder = edited_copy(demo_run, tmp_path / "gap", "predictions.jsonl", drop)
    record = _submit(zip_folder(folder, tmp_path / "gap.zip"), tmp_path / "results", releases)
    cls = next(t for t in record["tasks"] if t["task"] == "classification")
    assert record["partial"] is True and (cls["items"], cls["release_items"]) == (39, 40)
    (row,) = local_rows(tmp_path / "results")
    assert row["Data"] == "synthetic"  # the embedded sample says so first
    from eval.report.runs import RunData
    from space.diningspace.leaderboard import data_kind

    info = {"dataset": {"source": "org/diningbench"}, "settings": {}, "submission": record}
    assert data_kind(RunData(tmp_path, info)) == "partial"  # on a real release, a gap makes it partial
    assert data_kind(RunData(tmp_path, {**info, "submission": {**record, "partial": False}})) == "full release"


def test_vqa_is_verified_with_the_operators_judge(demo_run, releases, tmp_path: Path, monkeypatch) -> None:
    from helpers_space import fake_openai_server

    with fake_openai_server() as server:  # answers every judge prompt with `GRADE: C`
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-operator-judge-key")
        record = submit(zip_path=zip_folder(demo_run, tmp_path / "d.zip"), hub_repo=None, repo_type="model",
                        store=Submissions(tmp_path / "results"), release_for=releases.get, caps=Caps(),
                        judge="openai:judge-model", dataset_id=None)
        judged = len(server.seen_keys)
    vqa = next(t for t in record["tasks"] if t["task"] == "vqa")
    scores = [json.loads(line) for line in (tmp_path / "results" / "submissions" / record["key"] / "scores.jsonl")
              .read_text().splitlines()]
    verdicts = [s["verdict"] for s in scores if s["task"] == "vqa"]
    assert vqa["verified"] is True and len(verdicts) == 16 and None not in verdicts
    assert vqa["rescored"] == pytest.approx(verdicts.count("C") / 16)
    assert judged == sum(s["decided_by"] == "judge" for s in scores if s["task"] == "vqa") > 0
    assert not record["notes"]
    (row,) = local_rows(tmp_path / "results")
    assert row["VQA acc %"] == round(vqa["rescored"] * 100, 2)


def test_a_run_imported_from_another_framework_is_verified(releases, tmp_path: Path) -> None:
    """`python -m eval import` names the model as lmms-eval did (no backend spec) and keeps the hashes."""
    from test_adapters_import import classification_answer, write_samples

    from eval.importer import import_run

    write_samples(tmp_path / "logs", "classification", classification_answer)
    run = import_run(tmp_path / "logs", "lmms-eval", tmp_path / "runs" / "imported")
    record = _submit(zip_folder(run, tmp_path / "imported.zip"), tmp_path / "results", releases)
    (check,) = record["tasks"]
    assert (record["model"], record["status"], record["mismatch"]) == ("fake-vlm", "verified", False)
    assert check["rescored"] == pytest.approx(14 / 40) and check["items"] == 40  # as the import scored it


def test_a_model_name_that_is_not_a_name_is_refused(demo_run, releases, tmp_path: Path) -> None:
    def rename(info: dict) -> dict:
        info["settings"]["model"] = "x`\n<img src=//evil>"
        return info

    folder = edited_copy(demo_run, tmp_path / "n", "run.json", rename)
    with pytest.raises(SubmissionError, match=r"^run.json settings: the model name must be letters, digits"):
        _submit(zip_folder(folder, tmp_path / "n.zip"), tmp_path / "results", releases)


# ---------------------------------------------------------------- one per model + settings
def test_a_newer_submission_replaces_the_older_which_is_kept_in_history(demo_run, releases, tmp_path: Path) -> None:
    first = _submit(zip_folder(demo_run, tmp_path / "a.zip"), tmp_path / "results", releases)
    assert len(first["owner_secret"]) >= 20 and first["owner_secret"] not in json.dumps(
        json.loads((tmp_path / "results" / "submissions" / first["key"] / "submission.json").read_text()))
    folder = edited_copy(demo_run, tmp_path / "b", "scores.jsonl", lambda rows: rows[:-1])
    second = _submit(zip_folder(folder, tmp_path / "b.zip"), tmp_path / "results", releases,
                     secret=first["owner_secret"])  # its owner: replaces the row
    assert first["key"] == second["key"] and "owner_secret" not in second
    base = tmp_path / "results" / "submissions"
    assert [p.name for p in base.iterdir()] == [first["key"]]
    (past,) = (base / first["key"] / "history").iterdir()
    assert json.loads((past / "submission.json").read_text())["submitted_at"] == first["submitted_at"]
    assert len(local_rows(tmp_path / "results")) == 1  # history is not a second row
    other = write_baseline_run(tmp_path / "runs", "en", "nutrition", DEMO_MODEL, "--lang", "en")
    third = _submit(zip_folder(other, tmp_path / "c.zip"), tmp_path / "results", releases)
    assert third["key"] != first["key"] and len(list(base.iterdir())) == 2  # other settings: another row


# ---------------------------------------------------------------- hostile zips
def _zip(path: Path, members: dict[str, bytes], *, link: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return path


def test_hostile_zips_are_refused_in_one_line(tmp_path: Path) -> None:
    ok = {"run/run.json": b"{}", "run/predictions.jsonl": b""}
    cases = {
        "dotdot": (_zip(tmp_path / "1.zip", {**ok, "run/../../evil.json": b"x"}), r"'run/\.\./\.\./evil\.json' leaves the folder"),
        "absolute": (_zip(tmp_path / "2.zip", {**ok, "/etc/cron.d/x": b"x"}), r"'/etc/cron\.d/x' is an absolute path"),
        "symlink": (_zip(tmp_path / "3.zip", ok, link="run/scores.jsonl"), r"'run/scores\.jsonl' is a symbolic link"),
        "members": (_zip(tmp_path / "4.zip", {**ok, **{f"run/f{i}": b"" for i in range(70)}}),
                    r"the zip has 72 entries; at most 64"),
        "two-runs": (_zip(tmp_path / "5.zip", {**ok, "b/run.json": b"{}"}), r"one run folder \(one run.json\); found 2"),
        "no-answers": (_zip(tmp_path / "6.zip", {"run/run.json": b"{}"}), r"no predictions\.jsonl"),
    }
    (tmp_path / "7.zip").write_bytes(b"PK\x03\x04 not really")
    cases["not-zip"] = (tmp_path / "7.zip", r"not a zip file")
    for name, (path, reason) in cases.items():
        with pytest.raises(SubmissionError, match=reason) as refused:
            open_zip(path, Caps(), tmp_path / "in")
        assert "\n" not in str(refused.value), name


def gigabyte_bomb(path: Path) -> Path:
    """A zip whose predictions.jsonl declares 1 GB unpacked (as a bomb's central directory does)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("run/run.json", b"{}")
        archive.writestr("run/predictions.jsonl", b"\n" * 1024)
        archive.infolist()[-1].file_size = 1 << 30  # written into the central directory on close
    return path


def test_a_gigabyte_member_is_refused_without_inflating_it(tmp_path: Path) -> None:
    bomb = gigabyte_bomb(tmp_path / "bomb.zip")
    assert bomb.stat().st_size < 4096
    with pytest.raises(SubmissionError, match=r"'run/predictions\.jsonl' unpacks to 1024\.0 MB; at most 200\.0 MB"):
        open_zip(bomb, Caps(), tmp_path / "in")


def test_a_member_that_inflates_past_its_declared_size_stops_there(tmp_path: Path) -> None:
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("run/run.json", b"{}")
        archive.writestr("run/predictions.jsonl", b"\n" * (3 << 20))
        archive.infolist()[-1].file_size = 1000  # the header lies small
    with pytest.raises(SubmissionError, match=r"'run/predictions\.jsonl' (unpacks to more than its header says|is corrupt)"):
        open_zip(path, Caps(), tmp_path / "in")


def test_ratio_count_and_size_caps(tmp_path: Path) -> None:
    zeros = _zip(tmp_path / "zeros.zip", {"run/run.json": b"{}", "run/predictions.jsonl": b"\n" * (4 << 20)})
    with pytest.raises(SubmissionError, match=r"compressed \d+:1 \(at most 100:1\)"):
        open_zip(zeros, Caps(), tmp_path / "in")
    with pytest.raises(SubmissionError, match=r"the zip is 0\.0 MB; at most 0\.0 MB"):
        open_zip(zeros, Caps(zip_bytes=100), tmp_path / "in")
    assert open_zip(zeros, Caps(ratio=100_000), tmp_path / "in")["predictions.jsonl"].read_bytes() == b"\n" * (4 << 20)


def test_json_is_bounded_in_depth() -> None:
    with pytest.raises(SubmissionError, match="run.json: nested deeper than 32 levels"):
        parse_json(b"[" * 40 + b"]" * 40, "run.json")
    with pytest.raises(SubmissionError, match="run.json: nested deeper than 32 levels"):
        parse_json(b"[" * 200_000 + b"]" * 200_000, "run.json")  # deeper than the parser's recursion
    assert parse_json(b"[" * 30 + b"]" * 30, "run.json") is not None


# ---------------------------------------------------------------- self-reported, and limits
CARD = """---
model-index:
- name: Acme-VL-7B
  results:
  - task: {type: image-classification}
    dataset: {name: DiningBench, type: %s, config: classification, split: test, args: {lang: zh}}
    metrics: [{type: accuracy, value: 61.25}]
  - task: {type: image-text-to-text}
    dataset: {name: DiningBench, type: %s, config: nutrition, split: test, args: {lang: zh}}
    metrics: [{type: avg_mape, value: 40.5}, {type: calories_mape, value: 30.0}]
  - task: {type: image-classification}
    dataset: {name: Other, type: someone/other, config: classification, split: test}
    metrics: [{type: accuracy, value: 99.0}]
---
# Acme
"""


def test_a_model_card_gives_a_self_reported_row_only_for_this_dataset(tmp_path: Path) -> None:
    found = self_reported(CARD % ("us/diningbench", "us/diningbench"), "us/diningbench", "acme/vl-7b")
    assert found == {"model": "Acme-VL-7B", "lang": "zh", "metrics": {
        "classification": {"accuracy": 0.6125}, "nutrition": {"avg_mape": 0.405, "calories_mape": 0.3}}}
    with pytest.raises(SubmissionError, match="no model-index result with dataset.type 'us/diningbench'"):
        self_reported(CARD % ("someone/else", "someone/else"), "us/diningbench", "acme/vl-7b")
    with pytest.raises(SubmissionError, match="DININGBENCH_SPACE_DATASET_ID"):
        self_reported(CARD, None, "acme/vl-7b")
    Submissions(tmp_path / "results").keep_self_reported(found, "acme/vl-7b")
    (row,) = local_rows(tmp_path / "results")
    assert (row["Model"], row["Status"], row["Cls acc %"], row["Avg MAPE %"], row["kcal MAPE %"]) == (
        "Acme-VL-7B", "self-reported", 61.25, 40.5, 30.0)
    assert row["Size (B)"] == 7.0 and row["Run"] is None


def test_submissions_per_visitor_are_rate_limited_per_hour() -> None:
    now = [1000.0]
    quota = HourlyQuota(2, 2, 0, clock=lambda: now[0], noun="submission")  # as the Submit tab makes it
    quota.take("a", "1.2.3.4")
    quota.take("a", "1.2.3.4")
    with pytest.raises(GuardError, match=r"^your address already started 2 submission\(s\) in the last hour"):
        quota.take("b", "1.2.3.4")  # a new session from the same address counts too
    quota.take("c", "5.6.7.8")  # another visitor is not held up
    now[0] += 3600
    quota.take("a", "1.2.3.4")  # an hour later


def test_one_submission_at_a_time_per_visitor() -> None:
    from space.diningspace.limits import VisitorJobs

    jobs = VisitorJobs(per_session=1, per_address=1, noun="submission")
    with jobs.hold("s1", "1.2.3.4"):
        with pytest.raises(GuardError, match=r"^1 submission\(s\) are already running from your address"):
            with jobs.hold("s2", "1.2.3.4"):
                pass
    with jobs.hold("s2", "1.2.3.4"):  # once the first is done
        assert jobs.running() == 1


# ---------------------------------------------------------------- round three: bounded by the run and the release
def _with_epochs(rows: list[dict], epochs: range) -> list[dict]:
    return [{**r, "epoch": e} for r in rows if r["task"] == "vqa" for e in epochs]


def test_epochs_beyond_the_runs_own_settings_are_refused_before_any_judge_call(demo_run, releases, tmp_path: Path) -> None:
    # The judge amplification: VQA answers in epochs 0-63 of a run whose settings say 1 epoch.
    folder = edited_copy(demo_run, tmp_path / "e", "predictions.jsonl", lambda rows: _with_epochs(rows, range(64)))
    with pytest.raises(SubmissionError, match=r"epoch 1 is outside the run's own settings \(0 to 0\)"):
        _submit(zip_folder(folder, tmp_path / "e.zip"), tmp_path / "results", releases)
    many = edited_copy(demo_run, tmp_path / "m", "run.json",
                       lambda info: {**info, "settings": {**info["settings"], "epochs": 64}})
    with pytest.raises(SubmissionError, match="run.json asks 64 epochs; this Space re-scores at most 8"):
        _submit(zip_folder(many, tmp_path / "m.zip"), tmp_path / "results", releases)


def test_a_zip_of_millions_of_lines_is_refused_as_it_is_read_in_bounded_memory(demo_run, releases, tmp_path: Path) -> None:
    import random
    import tracemalloc

    rows = [json.loads(line) for line in (demo_run / "predictions.jsonl").read_text().splitlines()]
    rng = random.Random(0)
    path = tmp_path / "big.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(demo_run / "run.json", "demo/run.json")
        with archive.open("demo/predictions.jsonl", "w") as out:  # 600k valid lines, ~60 MB unpacked
            for k in range(600_000):
                row = rows[k % len(rows)]
                out.write((json.dumps({**row, "raw": f"{rng.getrandbits(64):x}"}) + "\n").encode())
    tracemalloc.start()
    try:
        with pytest.raises(SubmissionError, match=r"predictions\.jsonl: more than [\d,]+ lines"):
            _submit(path, tmp_path / "results", releases, caps=Caps(unpacked_bytes=400 << 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, peak  # the lines are read one by one and refused past what the run could hold


def test_a_submission_past_its_time_budget_is_refused_in_one_line(demo_run, releases, tmp_path: Path) -> None:
    with pytest.raises(SubmissionError, match=r"took over 0\.001 s of this Space's time") as info:
        _submit(zip_folder(demo_run, tmp_path / "d.zip"), tmp_path / "results", releases, budget=0.001)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "results" / "submissions").exists() or not any((tmp_path / "results" / "submissions").iterdir())


def test_a_row_belongs_to_its_first_submitter(demo_run, releases, tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = _submit(zip_folder(demo_run, tmp_path / "a.zip"), results, releases)
    # Visitor B: the same model and settings, a worse run, no secret (or a wrong one): a row of its own.
    worse = edited_copy(demo_run, tmp_path / "w", "predictions.jsonl",
                        lambda rows: [{**r, "raw": "I do not know"} if r["task"] == "classification" else r for r in rows])
    second = _submit(zip_folder(worse, tmp_path / "b.zip"), results, releases)
    third = _submit(zip_folder(worse, tmp_path / "c.zip"), results, releases, secret="a guess")
    assert len({first["key"], second["key"], third["key"]}) == 3
    kept = json.loads((results / "submissions" / first["key"] / "submission.json").read_text())
    assert kept["tasks"] == first["tasks"]  # A's row is as A left it
    # The signed-in user owns the row by name, with no secret.
    by_user = _submit(zip_folder(demo_run, tmp_path / "u.zip"), results, releases, user="alice")
    again = _submit(zip_folder(worse, tmp_path / "v.zip"), results, releases, user="alice")
    assert by_user["key"] == again["key"] and "owner_secret" not in by_user
    assert (results / "submissions" / again["key"] / "history").is_dir()


def test_perfect_or_reference_repeating_answers_are_flagged_on_the_board(releases, tmp_path: Path) -> None:
    from space.diningspace.submissions import review_flags

    run = write_baseline_run(tmp_path / "runs", "cheat", "nutrition", DEMO_MODEL)
    scores = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
    refs = {s["id"]: s["reference"] for s in scores}

    def exact(rows):
        return [{**r, "raw": json.dumps(refs[r["id"]])} for r in rows]

    cheat = edited_copy(run, tmp_path / "cheat", "predictions.jsonl", exact)
    record = _submit(zip_folder(cheat, tmp_path / "cheat.zip"), tmp_path / "results", releases)
    assert any("equal the reference exactly" in f for f in record["flags"]) and \
        any("perfect re-scored figure" in f for f in record["flags"])
    (row,) = local_rows(tmp_path / "results")
    assert row["Status"].startswith("verified") and row["Status"].endswith("· flagged for review")
    assert review_flags([], [], {}) == []


@pytest.mark.parametrize("metric, value, message", [
    ("accuracy", 250, r"classification accuracy of 250 % is outside its range \(0 to 100 %\)"),
    ("accuracy", -5, r"accuracy of -5 % is outside"),
])
def test_self_reported_figures_outside_their_range_are_refused(metric: str, value: float, message: str) -> None:
    card = CARD.replace("{type: accuracy, value: 61.25}", f"{{type: {metric}, value: {value}}}")
    with pytest.raises(SubmissionError, match=message):
        self_reported(card % ("us/diningbench", "us/diningbench"), "us/diningbench", "acme/vl-7b")


def test_a_negative_self_reported_mape_is_refused_and_a_card_updates_only_its_own_repos_row(tmp_path: Path) -> None:
    card = CARD.replace("{type: avg_mape, value: 40.5}", "{type: avg_mape, value: -50}")
    with pytest.raises(SubmissionError, match=r"nutrition avg_mape of -50 % is outside its range"):
        self_reported(card % ("us/diningbench", "us/diningbench"), "us/diningbench", "acme/vl-7b")
    store = Submissions(tmp_path / "results")
    found = self_reported(CARD % ("us/diningbench", "us/diningbench"), "us/diningbench", "acme/vl-7b")
    store.keep_self_reported(found, "acme/vl-7b")
    store.keep_self_reported({**found, "metrics": {"classification": {"accuracy": 0.99}}}, "mallory/copy")
    rows = sorted((r["Source"], r["Cls acc %"]) for r in local_rows(tmp_path / "results"))
    assert rows == [("submitted: hub:acme/vl-7b", 61.25), ("submitted: hub:mallory/copy", 99.0)]


def test_uploads_never_submitted_are_swept_by_age_and_total_size(tmp_path: Path) -> None:
    import os

    from space.diningspace.submit_tab import sweep_uploads

    for k in range(30):  # 30 x 2 MB uploads, the oldest first
        path = tmp_path / f"u{k}" / "run.zip"
        path.parent.mkdir()
        path.write_bytes(b"x" * (2 << 20))
        os.utime(path, (1000 + k, 1000 + k))
    assert sweep_uploads(tmp_path, max_bytes=20 << 20, max_age=10_000, now=2000) == 20  # down to 10 x 2 MB
    assert len(list(tmp_path.rglob("*.zip"))) == 10
    assert sweep_uploads(tmp_path, max_bytes=1 << 30, max_age=100, now=20_000) == 10  # all too old


def test_the_outcome_shows_every_claim_and_what_a_resubmission_replaced(demo_run, releases, tmp_path: Path) -> None:
    from space.diningspace.submit_tab import report_markdown

    claims = edited_copy(demo_run, tmp_path / "c", "metrics.json",
                         lambda m: {**m, "classification": {**m["classification"], "accuracy": 0.95}})
    first = _submit(zip_folder(claims, tmp_path / "c.zip"), tmp_path / "results", releases)
    text = report_markdown(first)
    cls = next(t for t in first["tasks"] if t["task"] == "classification")
    assert f"| 95.00 (metrics.json) · {cls['claimed'] * 100:.2f} (scores.jsonl) |" in text  # the 95 is shown
    vqa = next(t for t in first["tasks"] if t["task"] == "vqa")
    assert vqa["claimed"] is None and not vqa["mismatch"]  # made without a judge: nothing claimed
    again = _submit(zip_folder(demo_run, tmp_path / "d.zip"), tmp_path / "results", releases,
                    secret=first["owner_secret"])
    text = report_markdown(again)
    assert f"This replaces your row submitted {first['submitted_at']}" in text
    assert "history keeps 1 earlier version(s)" in text
