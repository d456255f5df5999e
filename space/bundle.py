"""Assemble a folder that can be pushed as a Hugging Face Space: this app plus the repo code it runs.

Usage, contents and upload: space/README.md, *Deploy to the Hub*.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPACE_FILES = ("app.py", "README.md", "requirements.txt", "style.css", "diningspace")
REPO_PATHS = ("diningbench.py", "dataset", "diningbench", "synthetic", "eval", "metrics", "construct", "LICENSE")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")


def bundle(out: Path, with_results: bool = False, *, root: Path = ROOT) -> list[str]:
    """Copy everything into `out` (emptied first); return the top-level names written. `root` is the
    repository the code is taken from."""
    target = out.resolve()
    protected = [ROOT / p for p in (*REPO_PATHS, "space", "tests", ".git")]
    if target == ROOT or target in ROOT.parents or any(target == p or p in target.parents for p in protected):
        raise SystemExit(f"error: --out {out} would overwrite repository files; choose e.g. build/space")
    sources = [(name, base / name) for base, names in
               ((HERE, SPACE_FILES), (root, REPO_PATHS + (("results",) if with_results else ()))) for name in names]
    missing = [name for name, path in sources if not path.exists()]
    if missing:
        raise SystemExit(f"error: the Space needs {', '.join(missing)}, which the repository does not have")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name, source in sources:
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=IGNORE)
        else:
            shutil.copy2(source, out / name)
    return [name for name, _ in sources]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "space", help="folder to write (replaced)")
    parser.add_argument("--with-results", action="store_true", help="include results/ for the Leaderboard")
    args = parser.parse_args(argv)
    print(f"wrote {args.out}: {', '.join(bundle(args.out, args.with_results))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
