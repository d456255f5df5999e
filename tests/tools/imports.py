"""The product's import graph, as the layer test and the Space bundle test read it.

Every Python file of the product and the files of ours it imports, in every import form: `import
x.y`, `from x import y` (as x.y and x), relative imports, imports inside functions, and
importlib.import_module / __import__ with a constant string.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Not the product: the tests, what the Makefile and the demos make (virtual environments, results, a
# demo's work folders), and caches. Every other Python file in the tree is the product's, wherever it
# sits: a new top-level package is read (and must be given a layer) as soon as it exists.
NOT_PRODUCT = {"tests", "results", "raw", "work", "my_release", "node_modules", "build", "dist"}
SKIP_DIRS = {"__pycache__", "site-packages"}


def _skipped_dir(name: str, depth: int) -> bool:
    return (name in SKIP_DIRS or name.startswith(".") or (depth == 0 and (name in NOT_PRODUCT or name.startswith("venv"))))


def product_files(root: Path = ROOT) -> list[str]:
    """Every Python file of the product, as a path relative to the root (the whole tree is walked)."""
    found = []
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        depth = len(rel.parts)
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(d, depth))
        found += [(rel / f).as_posix() for f in files if f.endswith(".py")]
    return sorted(found)


def module_name(rel: str) -> str:
    name = rel[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def imported_names(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every dotted name `source` (the text of `module`) imports, in any of the forms above."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            names.add(base)
            names.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in ("import_module", "__import__")):
            names.add(node.args[0].value)
    return {n for n in names if n}


def named_modules(source: str) -> set[str]:
    """Dotted names written as whole string constants (`"eval.backends.gemini"`): a module loaded by a
    name held in a variable (importlib.import_module(ENGINES[name])). `edges` counts those that name a
    module of ours as imports of the file that holds them."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and _DOTTED.fullmatch(node.value)}


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def edges(root: Path = ROOT, *, by_name: bool = True) -> dict[str, set[str]]:
    """file -> the files of ours it imports (a dotted name resolves to its longest module prefix); with
    `by_name`, also the modules it names whole in a string (loaded by name: what it may import)."""
    files = product_files(root)
    by_module = {module_name(rel): rel for rel in files}
    # The Space runs with space/ on sys.path (app.py puts it there): `diningspace.x` is space/diningspace/x.py.
    by_module.update({module_name(rel).removeprefix("space."): rel for rel in files if rel.startswith("space/")})
    graph: dict[str, set[str]] = {}
    for rel in files:
        module = module_name(rel)
        targets = set()
        source = (root / rel).read_text(encoding="utf-8")
        if by_name:
            targets |= {by_module[name] for name in named_modules(source) if name in by_module and name != module}
        for name in imported_names(source, module, rel.endswith("__init__.py")):
            while name and name not in by_module:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(by_module[name])
        graph[rel] = targets
    return graph


def closure(start: str, root: Path = ROOT) -> set[str]:
    """`start` and every file of ours it imports, directly or not (modules loaded by name are not
    followed: a caller names the ones it loads, as the Space's bundle test names its backends)."""
    graph, seen, todo = edges(root, by_name=False), set(), [start]
    while todo:
        rel = todo.pop()
        if rel not in seen:
            seen.add(rel)
            todo += graph.get(rel, ())
    return seen
