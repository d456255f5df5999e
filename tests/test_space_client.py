"""The launched Space through gradio_client, as an API user sees it: browse, evaluate, keys.

One `python space/app.py` process on 127.0.0.1 serves every test of this module.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from helpers_space import fake_openai_server, launched_space

import diningbench
from space.diningspace.evaluation import OWN_KEY, supports_own_keys

FAKE_KEY = "sk-visitor-0123456789abcdef"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    run = folder / "baseline-first-classification"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"classification": {"accuracy": 0.25, "n": 8,
                                                                      "accuracy_ci95": [0.05, 0.5]}}))
    (run / "run.json").write_text(json.dumps({"model": "baseline:first", "lang": "zh"}))
    return folder


@pytest.fixture(scope="module")
def space(results_dir: Path) -> Iterator[tuple[Client, list[str]]]:
    env = {"DININGBENCH_SPACE_ALLOWED_HOSTS": "127.0.0.1", "DININGBENCH_SPACE_MAX_ITEMS": "6",
           "DININGBENCH_SPACE_RESULTS": str(results_dir)}
    with launched_space(env) as (url, log):
        yield Client(url, verbose=False, download_files=str(results_dir.parent / "downloads")), log


def _evaluate(client: Client, task: str, model: str, n: int, **own: str) -> tuple:
    return client.predict(task, model, n, own.get("provider", "openai"), own.get("own_model", ""),
                          own.get("api_key", ""), own.get("base_url", ""), "zh", api_name="/evaluate")


def test_browse_returns_the_items_fields_and_its_captioned_views(space) -> None:
    client, _ = space
    dataset = diningbench.load("vqa", decode_images=False)
    expected = dataset[len(dataset) - 1]
    views, fields = client.predict("vqa", expected["id"], api_name="/browse")
    assert fields["id"] == expected["id"]
    for key in ("question", "question_en", "answer_en", "rationale", "vqa_category", "image_roles"):
        assert fields[key] == expected[key]
    assert "images" not in fields
    assert len(views) == len(expected["images"])
    assert [v["caption"] for v in views] == [f"{role} · view {i + 1}" for i, role in enumerate(expected["image_roles"])]
    assert all(Path(v["image"]).is_file() and Path(v["image"]).stat().st_size > 0 for v in views)


def test_browse_of_an_unknown_item_is_a_clear_error(space) -> None:
    client, _ = space
    with pytest.raises(AppError, match="no item 'nope' in the nutrition config"):
        client.predict("nutrition", "nope", api_name="/browse")


def test_a_baseline_evaluation_streams_items_and_ends_with_the_metrics(space) -> None:
    client, _ = space
    answers = diningbench.load("classification", decode_images=False)["answer"]
    n = min(5, len(answers))
    status, table, metrics, records = _evaluate(client, "classification", "baseline:first", n)
    expected = sum(a == "A" for a in answers[:n]) / n  # baseline:first always answers A
    assert metrics["n"] == n and metrics["accuracy"] == pytest.approx(expected)
    assert f"**{expected * 100:.2f} [" in status or f"**{expected * 100:.2f}**" in status \
        or f"**{expected * 100:.2f} (no interval: one merchant)**" in status  # 5 items of one merchant: says why
    assert len(records) == n and all(r["parsed"] == "A" for r in records)
    assert [r["correct"] for r in sorted(records, key=lambda r: r["id"])] == [
        a == "A" for _, a in sorted(zip(diningbench.load("classification")["id"][:n], answers[:n], strict=True))]
    per_item = table[table.index('<table class="db-results">'):]
    assert per_item.count("<tr>") == n + 1 and table.count("data:image/jpeg;base64,") == n


def test_the_zero_baseline_has_exactly_100_percent_mape(space) -> None:
    client, _ = space
    _, _, metrics, records = _evaluate(client, "nutrition", "baseline:zero", 3)
    assert metrics["avg_mape"] == pytest.approx(1.0) and metrics["n"] == 3
    assert len(records) == 3


def test_requests_beyond_the_operators_limits_are_refused(space) -> None:
    client, _ = space
    with pytest.raises(AppError, match="maximum value 6|between 1 and 6"):
        _evaluate(client, "classification", "baseline:first", 7)
    with pytest.raises(AppError, match="not in the list of choices|not offered"):
        _evaluate(client, "classification", "openai:gpt-4o", 1)  # not configured by the operator


def test_the_leaderboard_lists_reported_rows_and_local_runs(space) -> None:
    client, _ = space
    table = client.predict(api_name="/leaderboard")
    rows = [dict(zip(table["headers"], row, strict=True)) for row in table["data"]]
    local = [r for r in rows if r["Source"] == "local run: baseline-first-classification"]
    assert len(local) == 1 and local[0]["Cls acc %"] == 25.0 and local[0]["Cls 95% CI"] == "[5.00, 50.00]"
    assert local[0]["Data"] == "synthetic" and [r["#"] for r in rows][:3] == [1, 2, 3]
    if (Path(__file__).resolve().parents[1] / "eval" / "data" / "table2_reported.csv").is_file():
        assert any(r["Source"] == "reported (paper)" and r["Model"] == "GPT-4o" for r in rows)


OWN_KEYS = pytest.mark.skipif(not supports_own_keys("openai"),
                              reason="the openai backend's make() takes no api_key, so own keys are not offered")


@OWN_KEYS
def test_a_base_url_outside_the_allow_list_is_refused(space) -> None:
    client, log = space
    with pytest.raises(AppError, match="host '169.254.169.254' is not allowed") as refused:
        _evaluate(client, "classification", OWN_KEY, 1, own_model="gpt-4o", api_key=FAKE_KEY,
                  base_url="http://169.254.169.254/v1")
    assert FAKE_KEY not in str(refused.value) and FAKE_KEY not in "".join(log)


@OWN_KEYS
@pytest.mark.parametrize("mode", ["echo", "reject"])
def test_a_pasted_key_is_used_but_never_shown_or_logged(space, mode: str) -> None:
    client, log = space
    with fake_openai_server(mode) as server:
        base_url = f"http://127.0.0.1:{server.server_port}/v1"
        outputs = []
        try:
            outputs = _evaluate(client, "classification", OWN_KEY, 2, own_model="fake-vlm", api_key=FAKE_KEY,
                                base_url=base_url)
        except AppError as exc:
            outputs = [str(exc)]
        assert any(FAKE_KEY in seen for seen in server.seen_keys)  # the key did reach the model server
    shown = json.dumps(outputs, ensure_ascii=False, default=str)
    assert FAKE_KEY not in shown
    if mode == "echo":  # the model's answer quoted the key: shown scrubbed, and still scored
        assert "[redacted]" in shown and outputs[2]["n"] == 2
    assert FAKE_KEY not in "".join(log)


def test_an_operator_model_and_judge_answer_vqa_without_showing_the_operators_key(tmp_path: Path) -> None:
    operator_key = "sk-operator-fedcba9876543210"
    with fake_openai_server("echo") as server:
        env = {"DININGBENCH_SPACE_MODELS": "openai:fake-vlm", "DININGBENCH_SPACE_JUDGE": "openai:fake-judge",
               "OPENAI_API_KEY": operator_key, "OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_port}/v1",
               "DININGBENCH_SPACE_RESULTS": str(tmp_path)}
        with launched_space(env) as (url, log):
            client = Client(url, verbose=False, download_files=str(tmp_path / "downloads"))
            status, table, metrics, records = _evaluate(client, "vqa", "openai:fake-vlm", 3)
        assert any(operator_key in seen for seen in server.seen_keys)
    assert metrics["n"] == 3 and len(records) == 3
    assert all(r["error"] is None and r["correct"] is not None for r in records)  # judged, by rule or judge
    assert "openai:fake-vlm" in status and "accuracy" in status
    shown = json.dumps([status, table, metrics, records], ensure_ascii=False)
    assert operator_key not in shown and "[redacted]" in shown
    assert operator_key not in "".join(log)


def test_a_space_stopped_by_its_platform_takes_the_views_it_showed_with_it(tmp_path: Path) -> None:
    """A platform stops a Space with SIGTERM: the server closes as on Ctrl-C, and the folder of the views it
    showed goes with it instead of staying in the temporary folder after every stop."""
    with launched_space({"DININGBENCH_SPACE_RESULTS": str(tmp_path)}) as (url, _):
        client = Client(url, verbose=False, download_files=False)
        item = diningbench.load("classification", decode_images=False)[0]["id"]
        views, _ = client.predict("classification", item, api_name="/browse")
        shown = Path(views[0]["image"]["path"]).parent
        assert shown.name.startswith("diningbench-views-") and any(shown.glob("*.jpg"))
    assert not shown.exists()


async def test_the_evaluation_streams_one_update_per_item_then_the_metrics(tmp_path: Path) -> None:
    from helpers_space import tiny_release

    from space.diningspace.evaluation import EvalRequest, stream_evaluation
    from space.diningspace.limits import RequestSlots
    from space.diningspace.settings import SpaceSettings

    release = tiny_release(tmp_path / "release")  # 3 items per config
    settings = SpaceSettings.from_env({"DININGBENCH_SOURCE": str(release)}, repo_root=tmp_path)
    before = set(Path(tempfile.gettempdir()).glob("diningbench-space-*"))
    updates = [u async for u in stream_evaluation(EvalRequest(task="nutrition", model="baseline:zero", n_items=5),
                                                  settings, RequestSlots(settings.max_requests), available=3)]
    assert [len(u.results) for u in updates] == [0, 1, 2, 3, 3]
    assert all(u.total == 3 for u in updates) and [u.metrics is None for u in updates] == [True] * 4 + [False]
    final = updates[-1]
    assert final.metrics["n"] == 3 and final.metrics["avg_mape"] == pytest.approx(1.0)
    assert sorted(r.id for r in final.results) == ["nut-1", "nut-2", "nut-3"]
    assert all(r.ape == pytest.approx(1.0) for r in final.results)  # per item, from the scorer
    assert [r.reference["calories"] for r in sorted(final.results, key=lambda r: r.id)] == [500.0, 501.0, 502.0]
    assert set(Path(tempfile.gettempdir()).glob("diningbench-space-*")) <= before  # nothing written to disk


def test_the_views_a_page_links_are_served_and_nothing_beside_them(space, tmp_path: Path) -> None:
    """The strips of pictures link files of the views folder, which Gradio serves as static files: that
    folder only, never a file beside it, above it or elsewhere on the machine."""
    import urllib.error
    import urllib.request
    from urllib.parse import quote

    client, _ = space
    raw = Client(client.src, verbose=False, download_files=False)
    item = diningbench.load("classification", decode_images=False)[0]["id"]
    views, _ = raw.predict("classification", item, api_name="/browse")
    served = Path(views[0]["image"]["path"])
    assert served.parent.name.startswith("diningbench-views-") and served.suffix == ".jpg"

    def status(path: str) -> int:
        try:
            with urllib.request.urlopen(client.src.rstrip("/") + "/gradio_api/file=" + quote(path, safe="/"),
                                        timeout=10) as response:
                assert response.headers["content-type"] == "image/jpeg"
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert status(str(served)) == 200
    beside = served.parent.parent / f"{served.parent.name}-beside.jpg"  # same prefix, not in the folder
    beside.write_bytes(served.read_bytes())
    try:
        assert status(str(beside)) == 403
        assert status(f"{served.parent}/../{beside.name}") == 403
        assert status("/etc/passwd") == 403
        assert status(str(Path(diningbench.__file__).resolve())) == 403
    finally:
        beside.unlink()
