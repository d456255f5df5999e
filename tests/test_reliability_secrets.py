"""Keys never leave the process: with distinctive keys in the environment and servers that echo the
key back in their error bodies, nothing the harness writes or prints contains a key (run folder,
stdout, stderr with the progress line, re-scoring, reports), nor does the Space's evaluate stream.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval import api, cli
from tests.helpers_harness import make_release, model_oracle
from tests.helpers_reliability import (
    KeyEchoingGeminiServer,
    KeyEchoingOpenAIServer,
    assert_one_line_error,
    cli_env,
    files_containing,
    item_keys,
    run_cli,
)

KEYS = {
    "OPENAI_API_KEY": "sk-proj-LEAKCHECK-openai-9f2c41d7e8b3a6",
    "GEMINI_API_KEY": "AIzaLEAKCHECK-gemini-7c1e93",  # short enough not to pass for a real key
    "HF_TOKEN": "hf_LEAKCHECKtoken6a0d2e9b71c4",
}


def parts(key: str) -> tuple[str, str, str]:
    """The key, its last 12 characters (as masked echoes show them) and its first 12 (what a
    message cut short after the key began would keep)."""
    return key, key[-12:], key[:12]


def leaks(text: str) -> list[str]:
    """Which keys (or a telling part of one) appear in `text`."""
    return [name for name, key in KEYS.items() if any(part in text for part in parts(key))]


def file_leaks(folder: Path) -> dict[str, list[Path]]:
    found = {name: [p for part in parts(key) for p in files_containing(folder, part)] for name, key in KEYS.items()}
    return {name: paths for name, paths in found.items() if paths}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


@pytest.mark.parametrize("backend", ["openai", "gemini"])
def test_no_key_in_anything_written_or_printed(backend, release, tmp_path, capsys):
    server_class = KeyEchoingOpenAIServer if backend == "openai" else KeyEchoingGeminiServer
    out = tmp_path / "run"
    with server_class() as server:
        base_url = server.base_url if backend == "openai" else server.url
        s = api.RunSettings(task="all", model=f"{backend}:fake-vlm", base_url=base_url, dataset=str(release), out=out)
        prompt = s
        server.oracle = model_oracle(release, prompt)
        by_id = {item_id: key for key, (_, item_id) in item_keys(release, prompt).items()}
        # Errors whose bodies quote the key: fatal (401, 403), transient (500, 429) and a blocked answer.
        for item_id, kind in (("c1", "401"), ("c2", "500"), ("n1", "403"), ("n2", "429"), ("v1", "content_filter")):
            server.inject(kind, match=lambda r, k=by_id[item_id]: r.key == k)
        server.inject("malformed", match=lambda r, k=by_id["c3"]: r.key == k)
        server.inject("500", match=lambda r: not r.images)  # the judge's first call fails too
        env = cli_env(**KEYS)
        proc = run_cli(["run", "--task", "all", "--model", f"{backend}:fake-vlm", "--base-url", base_url,
                        "--dataset", str(release), "--out", str(out), "--judge", f"{backend}:fake-judge",
                        "--judge-base-url", base_url, "--timeout", "5", "--max-attempts", "3"], env=env)
        sent = [r.headers.get("authorization", "") + r.headers.get("x-goog-api-key", "") for r in server.requests]
        # The same folder re-scored and reported, in this process, with the keys in its environment.
        with pytest.MonkeyPatch.context() as mp:
            for name, key in KEYS.items():
                mp.setenv(name, key)
            assert cli.main(["score", str(out), "--judge", f"{backend}:fake-judge", "--judge-base-url", base_url]) == 0
            assert cli.main(["report", str(out), "--model-card"]) == 0
        printed = capsys.readouterr()

    assert proc.returncode == cli.EXIT_INCOMPLETE, proc.stderr  # items failed: the run says so, exit 3
    key = KEYS["OPENAI_API_KEY" if backend == "openai" else "GEMINI_API_KEY"]
    assert all(key in header for header in sent)  # the key was really in play
    assert "failures 3 retries 3" in proc.stderr  # the progress line: 401, 403, blocked; 500, 429, malformed
    assert leaks(proc.stdout) == [] and leaks(proc.stderr) == []
    assert leaks(printed.out) == [] and leaks(printed.err) == []
    assert file_leaks(out) == {}
    assert len(list(out.rglob("*"))) >= 5  # predictions, scores, metrics, run.json, report.md, ...


def test_a_key_inside_the_base_url_is_refused_before_any_request_and_never_echoed(release, tmp_path, monkeypatch,
                                                                                    capsys):
    secret = KEYS["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with KeyEchoingOpenAIServer() as server:
        server.oracle = lambda request: "A"
        url = f"http://user:{secret}@127.0.0.1:{server.port}/v1?api-key={secret}"
        status = cli.main(["run", "--task", "classification", "--model", "openai:fake-vlm", "--base-url", url,
                           "--dataset", str(release), "--out", str(tmp_path / "run"), "--limit", "2"])
        sent = list(server.requests)
    printed = capsys.readouterr()
    assert status == 2 and "put the key in the environment" in printed.err and sent == []
    assert leaks(printed.out + printed.err) == [] and not (tmp_path / "run").exists()
    proc = run_cli(["run", "--task", "classification", "--model", "openai:fake-vlm", "--base-url",
                    f"http://127.0.0.1:9/v1?access_token={secret}", "--dataset", str(release),
                    "--out", str(tmp_path / "other")], env=cli_env(**KEYS))
    assert leaks(assert_one_line_error(proc, "--base-url carries a credential in its query (access_token)")) == []


def test_space_evaluate_stream_never_shows_the_operator_key(release, monkeypatch):
    """The Space runs an operator-configured model; the server echoes the key in its errors."""
    pytest.importorskip("gradio")
    from space.diningspace.evaluation import EvalRequest, stream_evaluation
    from space.diningspace.settings import SpaceSettings

    for name, key in KEYS.items():
        monkeypatch.setenv(name, key)
    with KeyEchoingOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # the operator's model, served by the fake
        prompt = api.RunSettings(task="classification", model="openai:fake-vlm")
        server.oracle = model_oracle(release, prompt)
        server.inject("401", times=1)
        server.inject("500", times=1)
        settings = SpaceSettings(models=("openai:fake-vlm",), dataset=str(release), max_items=6)
        request = EvalRequest(task="classification", model="openai:fake-vlm", n_items=4)
        updates = list(stream_evaluation(request, settings))
        sent = [r.headers.get("authorization", "") for r in server.requests]

    assert sent and all(KEYS["OPENAI_API_KEY"] in header for header in sent)
    final = updates[-1]
    assert len(final.results) == 4 and sum(r.error is not None for r in final.results) == 1
    shown = repr([(u.results and [r.to_json() for r in u.results], u.metrics) for u in updates])
    assert leaks(shown) == []


def test_space_evaluate_stream_never_shows_a_pasted_key(release):
    """A visitor's own key, against an allow-listed server that echoes it in its errors."""
    pytest.importorskip("gradio")
    from space.diningspace.evaluation import OWN_KEY, EvalRequest, stream_evaluation
    from space.diningspace.settings import SpaceSettings

    pasted = "sk-pasted-LEAKCHECK-51c0e7a2d94b3f"
    with KeyEchoingOpenAIServer() as server:
        prompt = api.RunSettings(task="classification", model="openai:gpt-4o")
        server.oracle = model_oracle(release, prompt)
        server.inject("401", times=1)
        server.inject("503", times=1)
        settings = SpaceSettings(dataset=str(release), max_items=6, allowed_hosts=(f"127.0.0.1:{server.port}",))
        request = EvalRequest(task="classification", model=OWN_KEY, n_items=3, provider="openai",
                              own_model="gpt-4o", api_key=pasted, base_url=server.base_url)
        updates = list(stream_evaluation(request, settings))
        sent = [r.headers.get("authorization", "") for r in server.requests]

    assert sent and all(pasted in header for header in sent)
    assert len(updates[-1].results) == 3 and sum(r.error is not None for r in updates[-1].results) == 1
    shown = repr([([r.to_json() for r in u.results], u.metrics) for u in updates])
    assert pasted not in shown and pasted[-12:] not in shown


def test_space_refuses_an_unlisted_base_url_without_echoing_the_pasted_key(release):
    pytest.importorskip("gradio")
    from space.diningspace.evaluation import OWN_KEY, EvalRequest, stream_evaluation
    from space.diningspace.guard import GuardError
    from space.diningspace.settings import SpaceSettings

    pasted = "sk-pasted-LEAKCHECK-3e8d1a7f0b62c9"
    settings = SpaceSettings(dataset=str(release), max_items=6)
    request = EvalRequest(task="classification", model=OWN_KEY, n_items=2, provider="openai",
                          own_model="gpt-4o", api_key=pasted, base_url="http://169.254.169.254/v1")
    with pytest.raises(GuardError) as refused:
        list(stream_evaluation(request, settings))
    assert pasted not in str(refused.value) and pasted[-12:] not in str(refused.value)
    assert pasted not in repr(request)  # the key is kept out of the request's repr (logs, tracebacks)
