"""Every bash and Python code block of README.md runs as written.

A block runs in a scratch folder that mirrors the repository (the embedded sample copied, so a block
that rewrites it cannot touch the real one), with `python` the test interpreter. Blocks that need a key
run against the tests' fake OpenAI server: OPENAI_BASE_URL points there and OPENAI_API_KEY is set. A
block that cannot run here (a GPU, a paid API the fakes do not stand in for, another run's folder, a
server that runs until stopped) says so on the line before it:
`<!-- readme-block: not run -- REASON -->`; the reason is required.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!-- readme-block: not run -- (.+?) -->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")


def readme_blocks() -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, reason it is not run or None) for every bash and python block."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) in ("bash", "python"):
            previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marked = MARKER.match(previous)
            blocks.append((i + 1, fence.group(1), "\n".join(lines[i + 1:end]), marked.group(1) if marked else None))
        i = end + 1
    return blocks


BLOCKS = readme_blocks()
RUNNABLE = [b for b in BLOCKS if b[3] is None]


def test_every_block_runs_or_says_why_not():
    assert len(BLOCKS) >= 20 and len(RUNNABLE) >= 6
    for line, _, _, reason in BLOCKS:
        assert reason is None or len(reason.split()) >= 3, f"README.md:{line}: give the reason a block is not run"
    markers = sum(1 for text in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if MARKER.match(text))
    assert markers == len(BLOCKS) - len(RUNNABLE), "a marker that stands before no bash/python block"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    work = tmp_path_factory.mktemp("readme")
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in ("results", "diningbench", "work", "raw", "my_release"):
            continue
        (work / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "diningbench", work / "diningbench")
    bindir = Path(sys.executable).parent  # `python` in a block is the interpreter (and environment) of the tests

    def oracle(request) -> str:
        return "The answers agree.\nGRADE: C" if "GRADE" in request.prompt else "C"

    with FakeOpenAIServer(oracle=oracle) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GEMINI_", "GOOGLE_API", "HF_TOKEN"))}
        env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", OPENAI_API_KEY="sk-test-readme-0000",
                   OPENAI_BASE_URL=server.base_url, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
        yield work, env


@pytest.mark.slow
@pytest.mark.parametrize(("line", "language", "code", "reason"), RUNNABLE, ids=[f"README.md:{b[0]}" for b in RUNNABLE])
def test_block_runs_as_written(workspace, line, language, code, reason):
    work, env = workspace
    command = ["bash", "-e", "-o", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
    proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"README.md:{line} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
