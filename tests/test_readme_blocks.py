"""Every bash and Python code block of README.md runs as written (space/README.md's too, where one can).

A block runs in a scratch folder that mirrors the repository (the embedded sample copied, so a block
that rewrites it cannot touch the real one), with `python` the test interpreter. Blocks that need a key
run against the tests' fake OpenAI server: OPENAI_BASE_URL points there and OPENAI_API_KEY is set. A
block that cannot run here (a GPU, a paid API the fakes do not stand in for, another run's folder, a
server that runs until stopped) says so on the line before it:
`<!-- readme-block: not run -- REASON -->`; the reason is required. A Python block that is not run must
still compile and use no name it does not import or define. The harness runs from any folder once the
checkout is installed (`pip install -e .`, which `make` does).
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


def readme_blocks(path: Path = ROOT / "README.md") -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, reason it is not run or None) for every bash and python block."""
    lines = path.read_text(encoding="utf-8").splitlines()
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
SPACE_README = ROOT / "space" / "README.md"
SPACE_BLOCKS = readme_blocks(SPACE_README)


@pytest.mark.parametrize(("path", "blocks", "least"), [(ROOT / "README.md", BLOCKS, 6), (SPACE_README, SPACE_BLOCKS, 0)],
                         ids=["README.md", "space/README.md"])
def test_every_block_runs_or_says_why_not(path: Path, blocks: list, least: int) -> None:
    runnable = [b for b in blocks if b[3] is None]
    assert len(blocks) >= 3 and len(runnable) >= least
    for line, _, _, reason in blocks:
        assert reason is None or len(reason.split()) >= 3, f"{path.name}:{line}: give the reason a block is not run"
    markers = sum(1 for text in path.read_text(encoding="utf-8").splitlines() if MARKER.match(text))
    assert markers == len(blocks) - len(runnable), "a marker that stands before no bash/python block"


def _unbound_names(code: str) -> set[str]:
    """Names a Python block loads without importing, assigning or defining them (builtins aside)."""
    import ast
    import builtins

    tree = ast.parse(code)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
            bound |= {a.arg for a in (*node.args.args, *node.args.kwonlyargs)} if not isinstance(node, ast.ClassDef) else set()
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


@pytest.mark.parametrize(("path", "line", "code"),
                         [(p, b[0], b[2]) for p, blocks in ((ROOT / "README.md", BLOCKS), (SPACE_README, SPACE_BLOCKS))
                          for b in blocks if b[1] == "python"],
                         ids=lambda v: v.name if isinstance(v, Path) else str(v) if isinstance(v, int) else "")
def test_every_python_block_compiles_and_imports_what_it_uses(path: Path, line: int, code: str) -> None:
    compile(code, f"{path.name}:{line}", "exec")
    assert _unbound_names(code) == set(), f"{path.name}:{line} uses names it never imports or defines"


@pytest.mark.slow
def test_the_harness_runs_from_another_folder(tmp_path: Path) -> None:
    """`python -m eval` from a folder outside the checkout, as a user who installed it (`pip install -e .`,
    which `make` does) types it, and the same through the `diningbench` command."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", "import eval, diningbench; print(eval.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, ("the checkout is not installed in this environment: run `make` (it runs "
                                   f"pip install -e .): {found.stderr.strip().splitlines()[-1:]}")
    for command in ([sys.executable, "-m", "eval"], [str(Path(sys.executable).parent / "diningbench")]):
        out = tmp_path / Path(command[-1]).name
        proc = subprocess.run([*command, "run", "--task", "classification", "--model", "baseline:random",
                               "--limit", "4", "--out", str(out)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "classification" in proc.stdout and (out / "metrics.json").is_file()


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
