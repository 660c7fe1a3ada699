"""The package's imports go one way: no cycle (function-level imports
included), and no module imports a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "pcheckout"

#: Bottom to top; a module may import only from its own layer or those below.
#: Within a layer, the no-cycle check is what holds the order.
LAYERS = [
    {"pcheckout", "pcheckout.errors", "pcheckout.fdio"},
    {"pcheckout.git"},
    {"pcheckout.fs"},
    {"pcheckout.plan"},
    {"pcheckout.context", "pcheckout.options"},
    {"pcheckout.write"},
    {"pcheckout.session"},  # opening a checkout's run
    {"pcheckout.decide"},  # each command's plan
    {"pcheckout.apply"},  # carrying a plan out
    {"pcheckout.checkout", "pcheckout.export"},
    # git clone, then checkout() (its public API); tune timing checkout() with each writer
    {"pcheckout.clone", "pcheckout.tune"},
    {"pcheckout.cli", "pcheckout.__main__"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    """Every pcheckout module ``path`` imports, at any depth of the file."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m == "pcheckout" or m.startswith("pcheckout.")}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path, name) if m in modules and m != name}
    return graph


def _layer(module: str) -> int:
    """The layer of the longest prefix naming ``module``."""
    matches = [
        (len(prefix), k)
        for k, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


def test_no_import_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = path[path.index(n) :] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_imports_only_go_down_the_layers() -> None:
    graph = _graph()
    upward = [
        f"{m} (layer {_layer(m)}) imports {n} (layer {_layer(n)})"
        for m, deps in sorted(graph.items())
        for n in sorted(deps)
        if n != "pcheckout" and _layer(n) > _layer(m)
    ]
    assert not upward, "\n".join(upward)


def test_the_checker_sees_function_level_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from pcheckout.git import tree\n    import pcheckout.fs.detect\n")
    assert {"pcheckout.git.tree", "pcheckout.fs.detect"} <= _imports(src, "pcheckout.m")
