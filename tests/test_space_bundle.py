"""The Space bundle (`space/bundle.py`) is the deployed Space: built in a temp folder, every module
the Space imports comes from there, the app builds with the Review tab on, and a path the bundle
needs that is missing is an error rather than a silently thinner Space."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eval.specs import BACKENDS
from space.bundle import REPO_PATHS, SPACE_FILES, bundle
from tests.tools.imports import ROOT, closure, module_name

# The backends the Space makes by name (eval.specs.BACKENDS), besides what its files import; the leaderboard
# imports any run's backend module for its declared traits, which needs its module-level imports only.
SPACE_BACKENDS = ("eval/backends/openai_chat.py", "eval/backends/gemini.py", "eval/backends/baseline.py")
ALL_BACKENDS = tuple(f"eval/backends/{module.removeprefix('.')}.py" for module in BACKENDS.values())
# Import name -> distribution, where they differ; gradio is installed by the Hub at the card's sdk_version.
DISTRIBUTION = {"PIL": "pillow", "yaml": "pyyaml", "google": "google-genai", "gradio": None}

PROBE = """
import importlib, json, os, sys
here = os.path.realpath(os.getcwd())
outside = []
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    if not os.path.realpath(module.__file__).startswith(here + os.sep):
        outside.append(name)
import app
from diningspace.review_tab import ReviewAccess, ReviewTab
settings = app.settings_or_exit(app.REPO_ROOT)
demo = app.build_app(settings)
tabs = [block.label for block in demo.blocks.values() if type(block).__name__ == "Tab"]
review = ReviewTab(settings.review_work, ReviewAccess(settings.reviewers, settings.review_token))
views, card, _ = review.show("nut-1", token=settings.review_token)
# What the page loads a module for: every component not hidden (a hidden one's module is never fetched).
drawn = sorted({c["type"] for c in demo.get_config_file()["components"] if c["props"].get("visible", True) is not False})
print(json.dumps({"outside": outside, "tabs": tabs, "review_work": str(settings.review_work), "drawn": drawn,
                  "delete_cache": list(demo.delete_cache or ()),
                  "pending": review.ids("all", "pending"), "views": views.count("<img "), "card": card}))
"""


def review_work(folder: Path) -> Path:
    """A construction work folder with one nutrition item awaiting review, on the synthetic raw export."""
    from construct.work import BuildSettings, Stage, save_settings, write_jsonl
    from synthetic.raw_export import write_raw_export

    write_raw_export(folder / "raw")
    work = folder / "work"
    save_settings(work, BuildSettings(raw=str(folder / "raw"), model="openai:m"))
    write_jsonl(Stage(work, "translate").dir / "items.jsonl", [{
        "task": "nutrition", "id": "nut-1", "dish_id": "merchant-01-d0", "merchant_id": "merchant-01",
        "cuisine": "chinese", "photos": ["merchant-01-d0-p0", "merchant-01-d0-p1"], "dish_name": "牛肉炒饭",
        "dish_name_en": "Beef fried rice", "calories": 720.0, "protein": 30.0, "carbohydrates": 90.0, "fat": 25.0,
        "nutrition_source": "merchant", "portion": "1份，约480克"}])
    return work


def space_modules() -> list[str]:
    """The modules the Space imports, by the names they have in the bundle (space/ is its root)."""
    files = set().union(*(closure(start) for start in ("space/app.py", *SPACE_BACKENDS)))
    return sorted(module_name(rel).removeprefix("space.") for rel in files)


@pytest.mark.slow
def test_the_bundle_runs_the_space_with_review_on(tmp_path: Path) -> None:
    out = tmp_path / "space-bundle"
    names = bundle(out)
    assert names == [*SPACE_FILES, *REPO_PATHS]
    assert "Apache License" in (out / "LICENSE").read_text(encoding="utf-8")
    assert not list(out.rglob("__pycache__"))
    modules = space_modules()
    assert {"app", "diningspace.review_tab", "construct.review", "eval.api", "eval.backends.openai_chat"} <= set(modules)
    work = review_work(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DININGBENCH_SPACE_")}
    env["DININGBENCH_SPACE_REVIEW_WORK"] = str(work)
    env["DININGBENCH_SPACE_REVIEW_TOKEN"] = "review-token-0123456789abcdef"  # the operator reviews
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules)], cwd=out, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["outside"] == []  # every module came from the bundle, none from the checkout
    assert "Review" in found["tabs"] and found["review_work"] == str(work) and found["pending"] == ["nut-1"]
    assert found["delete_cache"] == [600, 1800]  # uploads never submitted are deleted after half an hour
    assert found["views"] == 2 and "Beef fried rice" in found["card"] and "720 kcal" in found["card"]
    # Views are plain pictures in every tab, Review's included: no page loads Gradio's Gallery module (with the
    # video and HLS players it brings, ~0.6 MB of script to parse before any tab is interactive).
    assert "html" in found["drawn"] and "gallery" not in found["drawn"], found["drawn"]


def test_every_library_the_space_imports_is_in_its_requirements() -> None:
    import ast

    requirements = (ROOT / "space" / "requirements.txt").read_text(encoding="utf-8")
    listed = {re.split(r"[<>=!~\[ ]", line.strip())[0].replace("_", "-").lower()
              for line in requirements.splitlines() if line.strip() and not line.startswith("#")}
    ours = {"app", "diningspace", "eval", "construct", "metrics", "synthetic", "diningbench", "dataset", "space"}
    needed = set()
    made = set().union(*(closure(start) for start in ("space/app.py", *SPACE_BACKENDS)))
    imported = set().union(*(closure(start) for start in ALL_BACKENDS)) - made
    for rel in made | imported:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree) if rel in made else tree.body:  # one only imported: what runs on import
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ours:
                    needed.add(DISTRIBUTION[top] if top in DISTRIBUTION else top.replace("_", "-").lower())
    assert sorted(d for d in needed if d and d not in listed) == []


def test_a_missing_path_is_an_error_not_a_thinner_space(tmp_path: Path) -> None:
    partial = tmp_path / "repo"
    partial.mkdir()
    (partial / "diningbench.py").write_text("", encoding="utf-8")
    (partial / "eval").mkdir()
    with pytest.raises(SystemExit, match=r"needs dataset, diningbench, synthetic, metrics, construct, LICENSE"):
        bundle(tmp_path / "out", root=partial)
    assert not (tmp_path / "out").exists()
    # The repository without results/ (a checkout where `make demo` ran has one): linked, not copied.
    no_results = tmp_path / "no-results"
    no_results.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("results", ".git"):
            (no_results / entry.name).symlink_to(entry)
    with pytest.raises(SystemExit, match="results"):
        bundle(tmp_path / "out", with_results=True, root=no_results)
    with pytest.raises(SystemExit, match="would overwrite repository files"):
        bundle(ROOT / "eval")
