"""The structure ARCHITECTURE.md describes: every module has a layer and imports point down them (in
every import form), there is no import circle, every copy of a constant agrees with its home, and the
settings' one declaration drives the flags, the hash and run.json."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import diningbench
from eval import cli, settings, tasks, types
from eval.settings import IDENTITY_FIELDS, RunSettings
from metrics.dining_accuracy import core as dining_accuracy
from metrics.nutrition_error import core as nutrition_error
from tests.tools.imports import edges, imported_names, module_name, named_modules, product_files

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- layers
# The rows of ARCHITECTURE.md's table, lowest first: a module imports only from its own layer or a
# lower one. A folder entry ends with "/"; every other entry is one file, so a new file in eval/
# has no layer until it is given one here and in ARCHITECTURE.md.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("data contract", ("diningbench.py", "dataset/", "synthetic/", "data/")),
    ("metrics", ("metrics/",)),
    ("harness contracts", ("eval/__init__.py", "eval/types.py", "eval/settings.py", "eval/specs.py",
                           "eval/redact.py", "eval/process.py", "eval/prompts.py", "eval/official.py", "eval/tasks/")),
    ("harness", ("eval/images.py", "eval/protocols/", "eval/requests.py", "eval/endpoints.py", "eval/limiter.py", "eval/backends/", "eval/runner.py",
                 "eval/store.py", "eval/runinfo.py", "eval/judge.py", "eval/numbers.py", "eval/circular.py",
                 "eval/scoring.py", "eval/agreement.py", "eval/progress.py", "eval/stats.py")),
    ("reports", ("eval/report/", "eval/analysis.py", "eval/compare.py")),
    ("construction", ("construct/",)),
    ("entry points", ("eval/api.py", "eval/cli.py", "eval/__main__.py", "eval/importer.py", "eval/official_io.py",
                      "space/")),
    ("adapters (beside the entry points)", ("adapters/",)),
    ("benches", ("bench/",)),
)
def layer_of(rel: str) -> int | None:
    """The index of `rel`'s layer: its own entry first, else the deepest folder entry holding it."""
    best: tuple[int, int] | None = None
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if entry == rel:
                return index
            if entry.endswith("/") and rel.startswith(entry) and (best is None or len(entry) > best[1]):
                best = (index, len(entry))
    return None if best is None else best[0]


def test_the_import_reader_sees_every_form():
    source = """
import eval.cli
from eval import api
from eval.types import LETTERS
from . import store
from ..report import tables

def later():
    from construct.review import list_items
    import importlib
    importlib.import_module("space.diningspace.catalog")
    __import__("bench.common")
"""
    names = imported_names(source, "eval.backends.fake")
    assert {"eval.cli", "eval.api", "eval.types", "eval.backends.store", "eval.report.tables",
            "construct.review", "space.diningspace.catalog", "bench.common"} <= names
    assert "eval.store" in imported_names("from . import store", "eval", is_package=True)


def test_every_module_has_a_layer_and_the_table_names_it():
    table = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split("## ")[0]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    assert [name for name, _ in LAYERS] == [n for n in rows if n != "layer"], "LAYERS follows ARCHITECTURE.md's rows"
    for name, entries in LAYERS:
        for entry in entries:
            short = entry.removeprefix("eval/")  # the harness row names its files without the folder
            assert f"`{entry}`" in rows[name] or f"`{short}`" in rows[name], (name, entry)
    assert [rel for rel in product_files() if layer_of(rel) is None] == []
    assert layer_of("eval/new_module.py") is None and layer_of("construct/new_stage.py") == 5


def test_imports_point_down_the_layers():
    upward = [(rel, target) for rel, targets in edges().items() for target in targets
              if layer_of(target) > layer_of(rel)]
    assert upward == []


def test_a_metric_folder_imports_nothing_of_ours_and_reads_nothing_outside_itself():
    for rel, targets in edges().items():
        if rel.startswith("metrics/"):
            folder = rel.rpartition("/")[0] + "/"
            assert all(t.startswith(folder) for t in targets), (rel, targets)
            for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    assert not node.value.startswith(("tests/", "../")) and node.value != "tests", (rel, node.value)
                if isinstance(node, ast.Subscript) and getattr(node.value, "attr", None) == "parents":
                    raise AssertionError(f"{rel} reaches outside its folder (Path.parents)")


def test_no_product_module_imports_the_tests():
    for rel in product_files():
        names = imported_names((ROOT / rel).read_text(encoding="utf-8"), module_name(rel), rel.endswith("__init__.py"))
        assert not any(n == "tests" or n.startswith("tests.") for n in names), rel


def test_the_import_graph_has_no_circle():
    graph, state, circles = edges(), {}, []

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                circles.append([*path[path.index(target):], target] if target in path else [node, target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_the_layer_checks_catch_the_edges_that_must_not_come_back(tmp_path):
    """A copy of three modules with a forbidden edge each: the checks above must see every one."""
    bad = {"eval/settings.py": "from eval.backends import parse_spec\n",
           "metrics/judge_accuracy/app.py": "def f():\n    from eval import judge\n",
           "eval/types.py": "import importlib\nimportlib.import_module('eval.api')\n"}
    for rel in ("eval/backends/__init__.py", "eval/api.py", "eval/judge.py", "eval/__init__.py",
                "metrics/judge_accuracy/judge_accuracy.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("", encoding="utf-8")
    for rel, text in bad.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    graph = edges(tmp_path)
    assert {(rel, t) for rel, ts in graph.items() for t in ts if layer_of(t) > layer_of(rel)} == {
        ("eval/settings.py", "eval/backends/__init__.py"), ("eval/types.py", "eval/api.py"),
        ("metrics/judge_accuracy/app.py", "eval/judge.py"), ("metrics/judge_accuracy/app.py", "eval/__init__.py")}


# ---------------------------------------------------------------- constants
def nutrition_app_units() -> dict[str, str]:
    """metrics/nutrition_error/app.py's NUTRIENT_UNITS, read without importing gradio."""
    tree = ast.parse((ROOT / "metrics/nutrition_error/app.py").read_text(encoding="utf-8"))
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "NUTRIENT_UNITS" for t in n.targets))


def test_every_copy_of_a_constant_agrees():
    """One home per constant; the copies that must stay (a module that works copied alone, or the data
    contract's own folder) are held to it here."""
    from construct import raw, vqa, work
    from eval import prompts
    from metrics.judge_accuracy import core as judge_accuracy
    from space.diningspace import catalog, leaderboard, render
    from synthetic import raw_export, sample

    schema = json.loads(raw.SCHEMA.read_text(encoding="utf-8"))["$defs"]
    assert diningbench.CONFIGS == tasks.names()[:3] == catalog.CONFIGS == tuple(leaderboard.TASK_SHORT)
    assert diningbench.NUTRIENTS == types.NUTRIENTS == nutrition_error.NUTRIENTS == raw_export.NUTRIENT_FIELDS
    assert tuple(types.NUTRIENT_UNITS) == types.NUTRIENTS
    assert nutrition_app_units() == types.NUTRIENT_UNITS
    assert diningbench.LETTERS == types.LETTERS == sample.LETTERS and types.ALPHABET.startswith(types.LETTERS)
    assert diningbench.CUISINES == tuple(sample.CUISINE_WEIGHTS) == tuple(schema["merchant"]["properties"]["cuisine"]["enum"])
    assert diningbench.VQA_CATEGORIES == tuple(sample.VQA_PAPER) == tuple(sample.VQA_SAMPLE) == tuple(render.VQA_CATEGORY_NAMES)
    assert raw.NUTRITION_UNITS == tuple(schema["nutrition"]["properties"]["unit"]["enum"])
    # --vqa-mix's short keys name the release's VQA categories, each once
    assert tuple(vqa.MIX_NAMES) == work.VQA_MIX_KEYS and sorted(vqa.MIX_NAMES.values()) == sorted(diningbench.VQA_CATEGORIES)
    assert diningbench.IMAGE_ROLES == tuple(schema["photo"]["properties"]["role"]["enum"])
    # The metrics' parsers read the final-answer line the CoT prompts ask for.
    for marker in prompts.FINAL_MARKER.values():
        assert dining_accuracy.parse_choice(f"A looks close, B too.\n{marker}C") == "C"
        assert judge_accuracy.final_answer(f"1. fried\n{marker}Not suitable.") == "Not suitable."
        assert nutrition_error.parse_nutrition(
            f'{{"calories": 1}}\n{marker}{{"calories": 500, "protein": 20, "carbohydrates": 50, "fat": 10}}'
        ) == {"calories": 500.0, "protein": 20.0, "carbohydrates": 50.0, "fat": 10.0}


# Where each shared constant may be written out: its homes, and the copies held to them above (a module
# that works copied alone). Anywhere else a literal copy is one that came back.
CONSTANT_HOMES = {
    "dataset/schema.py": {"CONFIGS", "CUISINES", "VQA_CATEGORIES", "NUTRIENTS", "IMAGE_ROLES", "LETTERS"},
    "eval/types.py": {"NUTRIENTS", "LETTERS", "ALPHABET", "NUTRIENT_UNITS"},
    "eval/prompts.py": {"FINAL_MARKER"},
    "metrics/nutrition_error/core.py": {"NUTRIENTS"},
    "metrics/nutrition_error/app.py": {"NUTRIENT_UNITS"},
    "synthetic/sample.py": {"LETTERS"},
}
SHARED_CONSTANTS = set().union(*CONSTANT_HOMES.values()) | {"TASK_NAMES"}


def literal_constants(source: str) -> set[str]:
    """Module-level names of SHARED_CONSTANTS assigned a value spelled out in text (not derived)."""
    found = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        spelled = node.value is not None and any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                                                 for n in ast.walk(node.value)) if targets else False
        found |= {t.id for t in targets if isinstance(t, ast.Name) and t.id in SHARED_CONSTANTS and spelled}
    return found


def test_no_copy_of_a_shared_constant_comes_back():
    assert literal_constants('LETTERS = "ABCDEFGH"\nTASKS = CONFIGS\nNUTRIENTS: tuple = ("fat",)') == {"LETTERS", "NUTRIENTS"}
    copies = {rel: sorted(literal_constants((ROOT / rel).read_text(encoding="utf-8")) - CONSTANT_HOMES.get(rel, set()))
              for rel in product_files()}
    assert {rel: names for rel, names in copies.items() if names} == {}


def test_every_default_is_the_settings_one():
    parser = cli.build_parser()
    args = parser.parse_args(["run", "--task", "nutrition", "--model", "baseline:zero"])
    from_flags = settings.settings_from_args(args)
    assert dataclasses.replace(from_flags, task="all", model="") == RunSettings()
    sweep = parser.parse_args(["sweep", "--task", "nutrition", "--model", "baseline:zero", "--out", "x"])
    assert sweep.max_tokens == RunSettings().max_tokens == types.DEFAULT_MAX_TOKENS == 16384


def test_identity_fields_are_the_settings_that_change_the_question():
    assert set(IDENTITY_FIELDS) == {"model", "images", "image_order", "cot", "lang", "max_tokens", "reasoning_effort",
                                    "thinking_budget", "seed", "max_image_side", "protocol", "image_indices"}


def test_the_letters_the_parser_reads_are_the_contracts():
    assert dining_accuracy.parse_choice("H") == "H" and types.LETTERS[-1] == "H"


def test_the_readme_shows_every_prompt_as_sent():
    from eval import prompts

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert prompts.PROMPT_VERSION in readme
    for task, kwargs in (("classification", {"options": ["{option A}", "{option B}"]}), ("nutrition", {}),
                         ("vqa", {"question": "{question}"})):
        for lang in ("zh", "en"):
            for cot in (False, True):
                assert tasks.task_prompt(task, lang, cot=cot, **kwargs) in readme, (task, lang, cot)


# ---------------------------------------------------------------- copies under another name
def _normal(value: object) -> object:
    """A literal's value in a comparable form: sequences of text as tuples, mappings as sorted items."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if isinstance(value, set | frozenset) and all(isinstance(v, str) for v in value):
        return tuple(sorted(value))
    if isinstance(value, dict):
        return tuple(sorted((str(k), str(v)) for k, v in value.items()))
    return value


def shared_values() -> dict[object, str]:
    """The value of each shared constant -> its name (what a renamed copy would hold)."""
    found: dict[object, str] = {}
    for name, value in (("CONFIGS", diningbench.CONFIGS), ("CUISINES", diningbench.CUISINES),
                        ("VQA_CATEGORIES", diningbench.VQA_CATEGORIES), ("NUTRIENTS", types.NUTRIENTS),
                        ("IMAGE_ROLES", diningbench.IMAGE_ROLES), ("LETTERS", types.LETTERS),
                        ("ALPHABET", types.ALPHABET), ("NUTRIENT_UNITS", types.NUTRIENT_UNITS)):
        found[_normal(value)] = name
        if isinstance(value, tuple):
            found[tuple(sorted(value))] = name  # the same names in another order are a copy too
    return found


def renamed_copies(source: str, values: dict[object, str]) -> dict[str, str]:
    """Module-level names assigned a literal equal to a shared constant (name -> the constant it copies),
    whatever the name."""
    found = {}
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if not targets or node.value is None:
            continue
        try:
            value = _normal(ast.literal_eval(node.value))
            hash(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, tuple) and value not in values and all(isinstance(v, str) for v in value):
            value = tuple(sorted(value))  # the same names in another order
        for target in targets:
            if isinstance(target, ast.Name) and value in values:
                found[target.id] = values[value]
    return found


# Copies under another name that a module must keep (it works copied alone), held to their home above:
# none today (synthetic/raw_export.py's NUTRIENT_FIELDS is derived, not spelled out).
RENAMED_HELD: dict[str, set[str]] = {}


def test_no_shared_constant_comes_back_under_another_name():
    values = shared_values()
    assert renamed_copies('MY_TASKS = ("classification", "nutrition", "vqa")\nK = ["fat", "protein", '
                          '"carbohydrates", "calories"]\nOK = ("classification",)', values) == {
        "MY_TASKS": "CONFIGS", "K": "NUTRIENTS"}
    copies = {rel: sorted(set(renamed_copies((ROOT / rel).read_text(encoding="utf-8"), values))
                          - CONSTANT_HOMES.get(rel, set()) - RENAMED_HELD.get(rel, set()))
              for rel in product_files()}
    assert {rel: names for rel, names in copies.items() if names} == {}


def test_backends_loaded_by_name_are_modules_of_the_package_that_loads_them():
    """eval/backends/__init__.py loads each backend by its name in eval/specs.py:BACKENDS, relative to its
    own package: the loader and what it loads share a layer, and each module's own imports are checked."""
    from eval.specs import BACKENDS

    files = set(product_files())
    for name, module in BACKENDS.items():
        assert module.startswith(".") and "." not in module[1:], name
        assert f"eval/backends/{module[1:]}.py" in files, name
    assert not named_modules((ROOT / "eval/specs.py").read_text(encoding="utf-8"))  # no import of specs.py


# ---------------------------------------------------------------- each check catches what it is for
def test_each_injected_violation_is_caught(tmp_path):
    """A copy of the tree with one violation of each kind: an upward import, a circle, a shared constant
    copied under another name, a task-name comparison outside the registry, a backend loaded by name from
    a lower layer, and a new top-level package without a layer."""
    import shutil

    from tests.test_task_registry import REGISTRY, task_name_comparisons

    for rel in product_files():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, tmp_path / rel)
    injected = {
        "eval/types.py": "\ndef _later():\n    from eval import api\n",                      # upward
        "eval/stats.py": "\nfrom eval import numbers\n",                                     # circle (numbers imports stats)
        "eval/report/plots.py": '\nPANEL_TASKS = ("classification", "nutrition", "vqa")\n',  # renamed copy
        "space/diningspace/render.py": '\ndef _is_vqa(task):\n    return task == "vqa"\n',  # task-name comparison
        "eval/settings.py": '\n_LOADED = "eval.backends.gemini"\n',                         # name-loaded, upward
        "plugins/extra.py": "VALUE = 1\n",                                                   # a new top-level package
    }
    for rel, text in injected.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text(encoding="utf-8") if path.exists() else "") + text, encoding="utf-8")
    files = product_files(tmp_path)
    graph = edges(tmp_path)
    upward = {(rel, t) for rel, ts in graph.items() for t in ts
              if layer_of(rel) is not None and layer_of(t) is not None and layer_of(t) > layer_of(rel)}
    assert ("eval/types.py", "eval/api.py") in upward
    assert ("eval/settings.py", "eval/backends/gemini.py") in upward
    assert "eval/numbers.py" in graph["eval/stats.py"] and "eval/stats.py" in graph["eval/numbers.py"]
    assert renamed_copies((tmp_path / "eval/report/plots.py").read_text(encoding="utf-8"), shared_values()) == {
        "PANEL_TASKS": "CONFIGS"}
    compared = [rel for rel in files if not rel.startswith(REGISTRY)
                and task_name_comparisons((tmp_path / rel).read_text(encoding="utf-8"))]
    assert compared == ["space/diningspace/render.py"]
    assert [rel for rel in files if layer_of(rel) is None] == ["plugins/extra.py"]


def test_the_data_contracts_docstring_examples_hold():
    import doctest
    import importlib

    ran = 0
    for name in ("dataset.schema", "dataset.jsonl", "dataset.cache", "dataset.load", "dataset.stats",
                 "dataset.validate", "dataset.build", "dataset.archive", "dataset.official", "dataset.official_rows",
                 "dataset.convert"):
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, name
        ran += result.attempted
    assert ran >= 10


def test_every_docstring_example_of_the_metric_cores_holds():
    """The parsers' examples of messy outputs (STYLE: parsers are pure functions with docstring examples),
    every one of them, not only those of the functions the parser tests name."""
    import doctest
    import importlib

    for name in ("dining_accuracy", "nutrition_error", "judge_accuracy"):
        result = doctest.testmod(importlib.import_module(f"metrics.{name}.core"), optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted >= 20, (name, result)


def test_diningbench_py_is_the_entry_point_over_the_package():
    """diningbench.py stays small and gives every public name of dataset/ (the API people import)."""
    import importlib

    assert len((ROOT / "diningbench.py").read_text(encoding="utf-8").splitlines()) <= 300
    for name in ("schema", "jsonl", "cache", "load", "stats", "validate", "build", "archive", "official", "official_rows",
                 "convert"):
        module = importlib.import_module(f"dataset.{name}")
        public = {n for n, v in vars(module).items() if not n.startswith("_")
                  and getattr(v, "__module__", module.__name__) == module.__name__ and n.isidentifier()
                  and (callable(v) or n.isupper()) and n != "TYPE_CHECKING"}
        assert public <= set(diningbench.__all__) | set(dir(diningbench)), (name, public - set(dir(diningbench)))
