"""The bench scripts at a tiny size on the embedded sample: well-formed rows, consistent counts.

No timed assertions: the figures themselves are machine-dependent and live in bench/README.md.
"""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

import pytest

import diningbench
from bench import common, concurrency, memory, metric_cost, overhead, run_all
from bench.server import DEFAULT_ANSWER, BenchServer

SAMPLE = diningbench.SAMPLE_DIR


def well_formed(row: dict) -> None:
    assert row["name"] and row["unit"] in ("s", "ms", "MiB")
    assert math.isfinite(row["measured"]) and row["measured"] >= 0
    if row["reference"] is not None:
        assert row["reference"] > 0 and row["ratio"] == pytest.approx(row["measured"] / row["reference"])
    json.dumps(row)  # every row can go into the --json file


def test_bench_server_answers_a_chat_completion_and_counts_images():
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "how many calories?"}]}]}).encode()
    with BenchServer() as server:
        request = urllib.request.Request(server.base_url + "/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            completion = json.loads(reply.read())
        stats = server.stats()
    assert completion["choices"][0]["message"]["content"] == DEFAULT_ANSWER
    assert stats["requests"] == 1 and stats["images"] == 2 and stats["bytes"] == len(body)


def test_overhead_runs_the_harness_and_the_bare_loop_on_the_same_views():
    rows = overhead.run(SAMPLE, limit=3, images=2, concurrency=2)
    headline = rows[0]
    for row in rows:
        well_formed(row)
    assert headline["target"] == 1.5
    assert headline["harness"]["predictions"] == headline["bare"]["items"] == 3
    assert headline["harness"]["failed"] == 0 and headline["harness"]["avg_mape"] is not None
    assert headline["server"]["images"] == headline["bare"]["views"] == 6
    assert "3 nutrition items x 2 views" in headline["note"]


def test_concurrency_sends_every_request_and_never_exceeds_the_limit():
    rows = concurrency.run(SAMPLE, requests=12, latency=0.01, concurrency=4)
    listed, bare, share, timeline, unlisted, bare_unlisted, share_unlisted, timeline_unlisted, floor, end_to_end = rows
    for row in rows:
        well_formed(row)
    for row in (timeline, timeline_unlisted):  # one more run, each call's start and end recorded
        t = row["timeline"]
        assert "where the time" in row["name"] and "4 first sends spread over" in row["note"]
        assert 0 <= t["first_sends_spread_s"] <= row["measured"] and t["over_latency_median_s"] > -0.01
        assert t["over_latency_p90_s"] >= t["over_latency_median_s"] and t["wait_median_s"] >= 0
    for client, ratio, runner in ((bare, share, listed), (bare_unlisted, share_unlisted, unlisted)):
        assert "bare client" in client["name"] and len(client["runs_s"]) == 3
        assert client["reference"] == listed["reference"] and client["measured"] == sorted(client["runs_s"])[1]
        assert client["measured"] >= 3 * 0.01  # the bare client waits the same three rounds of latency
        assert ratio["measured"] == runner["measured"] and ratio["reference"] == client["measured"]
    assert "reports its context" in listed["name"] and "404" in unlisted["name"]
    assert listed["reference"] == unlisted["reference"] == floor["reference"] == pytest.approx(12 * 0.01 / 4)
    assert listed["target"] == unlisted["target"] == 1.05 and floor["target"] is None and end_to_end["target"] is None
    assert floor["measured"] >= 3 * 0.01  # three whole rounds of 4 sleeps: a floor no runner can beat
    assert "whole rounds alone take 0.03 s" in floor["note"]
    for runner in (listed, unlisted):
        assert runner["server"]["requests"] == 12  # per timed run
        assert len(runner["runs_s"]) == 3 and runner["measured"] == sorted(runner["runs_s"])[1]  # the median
        assert 1 < runner["server"]["max_in_flight"] <= 4


def test_a_small_release_is_cycled_with_fresh_ids_to_reach_the_request_count():
    rows = concurrency.nutrition_rows(SAMPLE, 60)
    assert len(rows) == 60 and len({r["id"] for r in rows}) == 60


def test_memory_measures_each_config_in_its_own_process():
    rows = memory.run(SAMPLE, limit=2, configs=("vqa",))
    growth, iterate = rows[0], rows[1]
    for row in rows:
        well_formed(row)
    assert growth["unit"] == "MiB" and growth["warm"]["rows"] == 2 and growth["warm"]["images"] >= 2
    assert growth["warm"]["peak_rss_mib"] >= growth["warm"]["rss_after_imports_mib"] > 0
    assert iterate["name"].strip().startswith("iterate vqa")


def test_metric_cost_scores_the_same_figures_both_ways():
    rows = metric_cost.run(n_nutrition=12, n_classification=12)
    assert [r["name"].strip().split(":")[0] for r in rows] == [
        "metric nutrition_error", "nutrition_error", "metric dining_accuracy", "dining_accuracy"]
    for row in rows:
        well_formed(row)
    assert "12 predictions, 2 unparsed" in rows[0]["note"]  # one in six is not an answer


def test_run_all_prints_a_table_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "bench.json"
    assert run_all.main(["--quick", "--dataset", str(SAMPLE), "--only", "metrics", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("machine: ") and "metric nutrition_error" in printed
    saved = json.loads(out.read_text())
    assert saved["quick"] is True and saved["machine"]["cpus"] >= 1 and len(saved["results"]) == 4


def test_run_all_rejects_an_unknown_bench_in_one_line(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        run_all.main(["--only", "overhead,warp-drive"])
    assert "unknown bench warp-drive" in capsys.readouterr().err


def test_table_marks_targets_met_and_missed():
    rows = [common.result("fast", 1.2, 1.0, target=1.5), common.result("slow", 2.0, 1.0, target=1.5),
            common.result("info", 3.0, None)]
    lines = common.table(rows).splitlines()
    assert "1.20x" in lines[2] and lines[2].rstrip().endswith("ok")
    assert "2.00x" in lines[3] and "MISSED" in lines[3]
    assert common.verdict(rows[2]) == ""


def test_run_all_also_measures_the_re_encoding_path():
    rows = run_all.run(SAMPLE, quick=True, only=("overhead",))
    names = [row["name"] for row in rows]
    assert names[0].startswith("harness overhead") and names[-1].endswith(f"(--max-image-side {run_all.REENCODE_SIDE})")
    stored, reencoded = rows[0], rows[-1]
    assert reencoded["server"]["images"] == reencoded["bare"]["views"] == stored["bare"]["views"]
    # Re-encoded views are smaller than the stored ones the first run sent byte for byte.
    assert reencoded["server"]["bytes"] < stored["server"]["bytes"]


def test_construct_bench_times_the_prefilter_and_the_model_calls_side_by_side(tmp_path: Path):
    from bench import construct_prefilter

    rows = construct_prefilter.run(n_photos=40, n_calls=30, folder=tmp_path)
    names = [row["name"] for row in rows]
    assert names == ["construct prefilter vs bare decode", "construct model calls vs harness runner"]
    assert all(row["reference"] > 0 and row["ratio"] is not None for row in rows)
    assert "40 photos" in rows[0]["note"] and "30 calls" in rows[1]["note"]


def test_scaling_runs_a_fresh_process_per_size_and_fits_an_exponent():
    from bench import scaling

    rows = scaling.run(SAMPLE, sizes=(30, 60), repeat=2)
    runs = [r for r in rows if r["name"].endswith("requests: wall s (CPU ms per request)")]
    assert [r["predictions"] for r in runs] == [30, 60]  # 60 items from the sample's 24, cycled with fresh ids
    assert all(len(r["cpu_s_runs"]) == 2 and min(r["cpu_s_runs"]) <= r["cpu_s"] <= max(r["cpu_s_runs"]) for r in runs)
    assert all(r["cpu_s"] > 0 and r["peak_anon_mib"] > 0 and r["parquet_mib"] > 0 for r in runs)
    exponents = [r for r in rows if "fitted exponent" in r["name"]]
    assert len(exponents) == 3 and all(math.isfinite(r["measured"]) for r in exponents)
    assert scaling.plan(16000) == (4000, 4) and scaling.plan(1000) == (1000, 1)


def test_adaptive_bench_runs_fixed_and_auto_side_by_side_on_each_server_kind():
    from bench import adaptive

    rows = adaptive.run(12, sweep=(8,), only=("vllm",))
    assert [r["concurrency"] for r in rows] == ["8", "default"]
    assert all(r["lost"] == 0 and r["exit"] == 0 and r["wall_s"] for r in rows)
    assert "auto (default)" in adaptive.table(rows)


def test_official_cost_runs_both_protocols_on_one_release_and_ours_on_its_parquet_copy(tmp_path: Path):
    from bench import official_cost

    rows = official_cost.run(30, repeat=1, release=tmp_path / "authors")
    for row in rows[:4]:
        well_formed(row)
    runs = rows[0]["runs"]
    assert sorted(runs) == ["official on official", "ours on official", "ours on parquet"]
    assert all(r["predictions"] == 30 and not r["failed"] for found in runs.values() for r in found)
    assert len(official_cost.authors_release(tmp_path / "authors", 30).joinpath("nutrition.jsonl")
               .read_text(encoding="utf-8").splitlines()) == 30
    images = sum(1 for _ in (tmp_path / "authors" / "images").iterdir())
    assert images > 30  # each row its own photos
    assert rows[-1]["measured"] < images  # paths are checked without resolving each one (once, if at all)
