"""The README's offline demo ("Building your own benchmark") runs as written: its first fenced bash
block is run with bash in an empty folder, no API key in the environment and the stand-in on a free
port, and the release it ends with validates. Also: the stand-in refuses an export it does not know,
and `--serve-for` stops it by itself."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import diningbench

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "HF_TOKEN")


def demo_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Building your own benchmark"):]
    section = section[:section.index("\n## ", 1)]
    return re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` is this one
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def run_group(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run in its own process group, so that nothing it started outlives it (the stand-in on failure)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = ""
        pytest.fail(f"{cmd} ran past {timeout} s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out)


def test_the_readme_block_names_the_stand_in_and_needs_no_key():
    block = demo_block()
    assert "python -m construct.standin" in block and "NOT a model" in block
    assert "--base-url http://127.0.0.1:$PORT/v1" in block
    assert not re.search(r"gemini:|gpt-|API_KEY|^export ", block, flags=re.M)


@pytest.mark.slow
def test_the_readme_demo_runs_offline_and_its_release_validates(tmp_path):
    (tmp_path / "diningbench.py").symlink_to(ROOT / "diningbench.py")  # as if run from the repository root
    (tmp_path / "data").symlink_to(ROOT / "data")
    script = tmp_path / "demo.sh"
    script.write_text(demo_block(), encoding="utf-8")
    done = run_group(["bash", "-e", str(script)], tmp_path, offline_env(PORT=str(free_port())), timeout=240)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "STAND-IN, NOT A MODEL" in done.stdout
    assert "stand-in stopped" in done.stdout  # `kill; wait` found it stopped cleanly on SIGTERM
    assert "wrote my_release: 0 error(s)" in done.stdout
    assert "wrote my_release_official: 0 error(s)" in done.stdout  # the authors' layout, both languages validated
    assert "the authors' protocol" in done.stdout and (tmp_path / "runs" / "official" / "metrics.json").is_file()
    assert "await review before any task item is generated" in done.stdout  # the first run stopped there
    card = (tmp_path / "my_release" / "README.md").read_text(encoding="utf-8")
    assert "No person reviewed the base dishes" in card and "No person reviewed the final items" in card
    assert "USDA check (computed by code from each dish's ingredient grams" in card and "0 sent to review" in card
    assert not [p for p in diningbench.validate(str(tmp_path / "my_release")) if p.level == "error"]
    assert (tmp_path / "work" / "funnel.md").is_file() and (tmp_path / "work" / "funnel.png").is_file()
    notes = (tmp_path / "work" / "review" / "decisions.jsonl").read_text(encoding="utf-8")
    assert notes.count('"approved in bulk"') == notes.count('"verdict": "kept"') > 0


def test_the_stand_in_refuses_an_export_it_does_not_know(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "x.jpg").write_bytes(b"not the generator's photo")
    (tmp_path / "photos.jsonl").write_text('{"photo_id": "x", "dish_id": "d", "role": "user", "path": "images/x.jpg"}\n')
    (tmp_path / "merchants.jsonl").write_text('{"merchant_id": "m", "name": "m", "cuisine": "chinese"}\n')
    done = run_group([sys.executable, "-m", "construct.standin", str(tmp_path), "--port", "0"], tmp_path,
                     offline_env(), timeout=60)
    assert done.returncode == 2 and "error:" in done.stdout and "not one the synthetic generator writes" in done.stdout


def test_the_stand_in_serves_on_loopback_and_stops_by_itself(tmp_path):
    from synthetic.raw_export import write_raw_export

    write_raw_export(tmp_path / "raw")
    port = free_port()
    start = time.monotonic()
    done = run_group([sys.executable, "-m", "construct.standin", str(tmp_path / "raw"), "--port", str(port),
                      "--serve-for", "0.5"], tmp_path, offline_env(), timeout=60)
    assert done.returncode == 0, done.stdout
    assert f"http://127.0.0.1:{port}/v1" in done.stdout and "stand-in stopped" in done.stdout
    assert time.monotonic() - start < 30
