"""The product's import graph, as the layer test and the Space bundle test read it.

Every Python file of the product and the files of ours it imports, in every import form: `import
x.y`, `from x import y` (as x.y and x), relative imports, imports inside functions, and
importlib.import_module / __import__ with a constant string.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("diningbench.py", "synthetic", "metrics", "eval", "construct", "space", "bench", "adapters")
SKIP_DIRS = {"__pycache__"}


def product_files(root: Path = ROOT) -> list[str]:
    """Every Python file of the product, as a path relative to the root."""
    found = []
    for top in PRODUCT:
        path = root / top
        if path.is_file():
            found.append(top)
        elif path.is_dir():
            found += [p.relative_to(root).as_posix() for p in sorted(path.rglob("*.py"))
                      if not SKIP_DIRS & set(p.relative_to(root).parts)]
    return found


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


def edges(root: Path = ROOT) -> dict[str, set[str]]:
    """file -> the files of ours it imports (a dotted name resolves to its longest module prefix)."""
    files = product_files(root)
    by_module = {module_name(rel): rel for rel in files}
    # The Space runs with space/ on sys.path (app.py puts it there): `diningspace.x` is space/diningspace/x.py.
    by_module.update({module_name(rel).removeprefix("space."): rel for rel in files if rel.startswith("space/")})
    graph: dict[str, set[str]] = {}
    for rel in files:
        module = module_name(rel)
        targets = set()
        for name in imported_names((root / rel).read_text(encoding="utf-8"), module, rel.endswith("__init__.py")):
            while name and name not in by_module:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(by_module[name])
        graph[rel] = targets
    return graph


def closure(start: str, root: Path = ROOT) -> set[str]:
    """`start` and every file of ours it imports, directly or not."""
    graph, seen, todo = edges(root), set(), [start]
    while todo:
        rel = todo.pop()
        if rel not in seen:
            seen.add(rel)
            todo += graph.get(rel, ())
    return seen
