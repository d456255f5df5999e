"""The construction stages, registered once (construct/stages.py): no stage imports another for a name,
every prompt a stage sends has an id the stand-in answers by, and a new stage is one module plus its
registration. The toy stage below is what ARCHITECTURE.md's "add a construction stage" asks for, and
nothing more: it is added to a copy of construct/, the build runs end to end on the synthetic raw export
against the stand-in, and the files the copy needed to change are counted."""

from __future__ import annotations

import ast
import filecmp
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from construct import pipeline, stages, standin
from construct.stages import STANDIN_ANSWERS, prompt, prompt_of
from tests.tools.imports import ROOT, edges

STAGE_PACKAGE = ROOT / "construct"


# ---------------------------------------------------------------- no stage imports another for a constant
def stage_modules() -> set[str]:
    """The modules of the registered stages (those with a module of their own) and the release."""
    return {f"construct.{n}" for n in stages.names() if (STAGE_PACKAGE / f"{n}.py").is_file()} | {"construct.release"}


def constant_imports(source: str, modules: set[str]) -> list[int]:
    """Lines of `source` that import from one of `modules` nothing but constants (UPPER_CASE names)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module in modules
            and all(alias.name.isupper() for alias in node.names)]


def test_the_counter_sees_a_constant_imported_from_another_stage():
    source = textwrap.dedent("""
        from construct.dishes import NAME as DISHES
        from construct.photos import RULED_OUT, STATE
        from construct.review import card_markdown, released_rows
        from construct.stages import DISH_REVIEW
        from construct.vqa import MIX_NAMES, question_problem
    """)
    assert constant_imports(source, stage_modules()) == [2, 3]


def test_no_stage_imports_another_for_a_name():
    found = {m: lines for m in sorted(stage_modules())
             if (lines := constant_imports((ROOT / (m.replace(".", "/") + ".py")).read_text(encoding="utf-8"),
                                           stage_modules() - {m}))}
    assert found == {}, "read another stage's folder by its name in construct/stages.py"


def test_the_stages_are_registered_in_the_order_of_a_build():
    assert stages.names() == ("photos", "dishes", "dish_review", "classification", "nutrition", "vqa", "translate",
                              "review")
    assert [name for name, _ in pipeline.stage_runs()] == ["photos", "dishes", "classification", "nutrition", "vqa",
                                                           "translate"]


def test_the_stage_modules_the_pipeline_imports_by_name_make_no_circle():
    """pipeline.stage_runs imports `construct/<name>.py` by a name it builds, which the import graph of
    tests/test_architecture.py cannot read: its edges are added here, and no stage may lead back to it."""
    graph = edges()
    runs = {f"construct/{name}.py" for name, _ in pipeline.stage_runs()}
    assert runs <= set(graph)
    graph["construct/pipeline.py"] |= runs
    seen: set[str] = set()
    todo = sorted(runs)
    while todo:
        rel = todo.pop()
        if rel not in seen:
            seen.add(rel)
            todo += graph[rel]
    assert "construct/pipeline.py" not in seen and "construct/standin.py" not in seen


# ---------------------------------------------------------------- prompts: an id each, answered by it
def test_every_prompt_a_stage_sends_is_answered_by_the_stand_in_by_its_id():
    pipeline.stage_runs()  # every stage's module imported: its prompts declared
    declared = {p.id: p for p in stages._BY_OPENING.values()}
    assert len(declared) == 13 and set(declared) <= set(STANDIN_ANSWERS)
    vqa = declared["vqa.generate"]
    assert prompt_of(vqa.format(category="cuisine_technique", guidance="g", metadata="{}")) is vqa
    assert prompt_of("Task: something no stage asks.\n") is None


def test_a_prompt_that_opens_like_another_is_refused():
    with pytest.raises(ValueError, match=r"prompt toy.quality opens as prompt photos.quality does"):
        prompt("toy.quality", "Task: photo quality check.\nAnother question under the same first line.")
    assert prompt_of("Task: photo quality check.\n").id == "photos.quality"  # the refused one left no trace


def test_the_stand_in_holds_no_copy_of_a_prompt():
    source = Path(standin.__file__).read_text(encoding="utf-8")
    assert "Task: " not in source, "answer a prompt by its id (construct.stages.standin_answer), not by its text"


# ---------------------------------------------------------------- a new stage, end to end
TOY_MODULE = '''"""Dish captions: a one-line English caption for each dish the translated items show."""

from __future__ import annotations

from typing import Any

from construct.context import Context
from construct.models import Ask, parse_json_object
from construct.stages import CAPTIONS as NAME
from construct.stages import TRANSLATE, prompt, standin_answer
from construct.work import Decision, Stage, dropped, inputs_key, kept, triage

PROMPT_VERSION = "captions-v1"
MAX_CHARS = 60
CAPTION_PROMPT = prompt("captions.caption", """Task: dish caption.
Dish {dish_id}: {name}
Write a one-line English caption for this dish, at most 60 characters.
Reply with one JSON object and nothing else: {{"caption": "..."}}""")


def run(ctx: Context) -> None:
    stage, source = Stage(ctx.work, NAME), Stage(ctx.work, TRANSLATE)
    inputs = inputs_key(NAME, PROMPT_VERSION, ctx.settings.model, source.items_hash())
    if stage.is_done(inputs):
        return
    dishes = sorted({row["dish_id"] for row in source.items()})
    asks = [Ask(d, CAPTION_PROMPT.format(dish_id=d, name=ctx.raw.dishes[d].name)) for d in dishes]
    answers = ctx.models.ask(NAME, ctx.settings.model, PROMPT_VERSION, asks)
    decisions: list[Decision] = []
    items = []
    for d in dishes:
        parsed = parse_json_object(answers[d].text)
        caption = str((parsed or {}).get("caption") or "").strip()
        if failed := triage(d, answers[d].error, parsed):
            decisions.append(failed)
        elif not caption or len(caption) > MAX_CHARS:
            decisions.append(dropped(d, "bad_caption", caption=caption))
        else:
            decisions.append(kept(d))
            items.append({"dish_id": d, "caption": caption})
    stage.finish(decisions, items, inputs, complete=all(a.error is None for a in answers.values()))


@standin_answer(CAPTION_PROMPT)
def caption(oracle: Any, request: Any) -> dict[str, str]:
    """The stand-in's caption: the dish's English name in the synthetic export's truth."""
    dish_id = request.prompt.splitlines()[1].split(":")[0].removeprefix("Dish ")
    return {"caption": oracle.dishes[dish_id]["name_en"]}
'''

# Its registration: its name, and its place in the build (after translation).
REGISTRATION = (('REVIEW = "review"\n', 'CAPTIONS = "captions"\n'), ("    StageDef(TRANSLATE),\n", "    StageDef(CAPTIONS),\n"))

BUILD = '''
import json, sys, threading
from collections import Counter
from pathlib import Path

import construct
from construct.__main__ import main
from construct.standin import ConstructOracle, StandInServer, synthetic_truth
from synthetic.raw_export import write_raw_export

write_raw_export("raw", merchants=4)
filters = ("openai:standin-judge-a", "openai:standin-judge-b")
server = StandInServer(0)
truth = synthetic_truth("raw")
server.oracle = oracle = ConstructOracle(truth, filters)
threading.Thread(target=server.serve_forever, daemon=True).start()
build = ["run", "raw", "--out", "work", "--base-url", server.base_url, "--model", "openai:standin",
         "--filter-models", ",".join(filters), "--fdc", sys.argv[1]]
codes = [main(build), main(["review", "work", "--stage", "dishes", "--approve-all"]), main(build),
         main(["review", "work", "--approve-all"]), main(["release", "work", "--out", "release"])]
server.shutdown()
print(json.dumps({"codes": codes, "package": construct.__file__, "prompts": Counter(map(str, oracle.prompt_ids)),
                  "names_en": {d: v["name_en"] for d, v in truth["dishes"].items()}}))
'''


def changed_files(copy: Path, original: Path) -> list[str]:
    """Files of `copy` that are new or differ from `original` (recursively, caches left out)."""
    def walk(cmp: filecmp.dircmp, rel: str) -> list[str]:
        out = [rel + name for name in cmp.left_only + cmp.diff_files if name != "__pycache__"]
        return out + [f for name, sub in cmp.subdirs.items() if name != "__pycache__" for f in walk(sub, f"{rel}{name}/")]
    return sorted(walk(filecmp.dircmp(copy, original, ignore=["__pycache__"]), ""))


@pytest.mark.slow
def test_a_new_stage_is_one_module_and_its_registration(tmp_path):
    code = tmp_path / "code"
    package = code / "construct"
    shutil.copytree(STAGE_PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "captions.py").write_text(TOY_MODULE, encoding="utf-8")
    registry = (package / "stages.py").read_text(encoding="utf-8")
    for anchor, line in REGISTRATION:
        assert registry.count(anchor) == 1, anchor
        registry = registry.replace(anchor, anchor + line)
    (package / "stages.py").write_text(registry, encoding="utf-8")
    assert changed_files(package, STAGE_PACKAGE) == ["captions.py", "stages.py"]

    work = tmp_path / "build"
    work.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
           "PYTHONPATH": os.pathsep.join((str(code), str(ROOT)))}
    done = subprocess.run([sys.executable, "-c", BUILD, str(ROOT / "data" / "fdc_sr28_sample")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["package"] == str(package / "__init__.py")  # the copy ran, not the checkout
    assert result["codes"] == [0, 0, 0, 0, 0]

    # The stand-in answered the new stage by its prompt's id, and every prompt had an id.
    dishes = sorted({json.loads(line)["dish_id"]
                     for line in (work / "work" / "translate" / "items.jsonl").read_text(encoding="utf-8").splitlines()})
    assert dishes and result["prompts"]["captions.caption"] == len(dishes)
    assert "None" not in result["prompts"]
    # Its decisions and items, in its own folder; the funnel and the release card count it as a stage.
    decisions = [json.loads(line) for line in (work / "work" / "captions" / "decisions.jsonl").read_text().splitlines()]
    items = [json.loads(line) for line in (work / "work" / "captions" / "items.jsonl").read_text().splitlines()]
    assert Counter(d["verdict"] for d in decisions) == {"kept": len(dishes)}
    assert items == [{"dish_id": d, "caption": result["names_en"][d]} for d in dishes]
    assert f"| captions | all | {len(dishes)} | {len(dishes)} | 0 | - |" in (work / "work" / "funnel.md").read_text()
    assert "| captions | all |" in (work / "release" / "README.md").read_text(encoding="utf-8")


def test_add_a_stage_in_architecture_is_two_files():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("- **A construction stage**", 1)[1].split("\n- **", 1)[0]
    assert "(2 files)" in section and "construct/stages.py" in section and "test_construct_stages.py" in section
