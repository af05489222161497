"""The estimator is one road: its modules import each other in one direction only.

Why: an import hidden inside a function to dodge a circle lets two models call each other and
the reader follow a parameter up and down the same files. These tests read every module of
fitbench.estimate with `ast` (nothing is imported, so a lazy import counts like any other),
forbid imports inside functions or classes, and require the graph of imports among the
estimator's own modules to have no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fitbench.estimate

PACKAGE = "fitbench.estimate"
ROOT = Path(fitbench.estimate.__file__).parent


def _module_name(path: Path) -> str:
    return PACKAGE if path.name == "__init__.py" else f"{PACKAGE}.{path.stem}"


MODULES = {_module_name(p): p for p in sorted(ROOT.glob("*.py"))}


def _resolve(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The fitbench modules an import statement names (`from fitbench.estimate import speed`
    names the submodule speed; `from fitbench.estimate.api import estimate` names api)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "fitbench"]
    base = node.module or ""
    if node.level:  # relative: from the module's package
        package = module if module == PACKAGE else module.rsplit(".", 1)[0]
        parts = package.split(".")
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    if base.split(".")[0] != "fitbench":
        return []
    named = [f"{base}.{a.name}" for a in node.names]
    return [n for n in named if n in MODULES] or [base]


def _import_nodes(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of the file, with whether it runs at module level (the module's
    own statements, and those in a module-level `if`, such as `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top: set[int] = set()
    for statement in tree.body:
        nested = ast.walk(statement) if isinstance(statement, ast.If) else [statement]
        top |= {id(n) for n in nested}
    return [(n, id(n) in top) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported fitbench module, line, at module level?) for every import in the file,
    module-level and function-level alike."""
    module = _module_name(path)
    return [(name, node.lineno, top) for node, top in _import_nodes(path) for name in _resolve(node, module)]


def _not_at_module_level() -> list[str]:
    """Every import (of any module) in the estimator's files that is not at module level."""
    return [
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        for node, top in _import_nodes(path)
        if not top
    ]


def _graph() -> dict[str, set[str]]:
    """Module -> the fitbench.estimate modules it imports (the package itself left out: every
    submodule runs its __init__, which imports none of them)."""
    return {
        module: {name for name, _, _ in _imports(path) if name in MODULES and name != PACKAGE}
        for module, path in MODULES.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_parser_sees_the_estimators_modules_and_their_imports() -> None:
    # Guards the two checks below against passing on nothing.
    assert {
        "fitbench.estimate.api",
        "fitbench.estimate.memory",
        "fitbench.estimate.peft",
        "fitbench.estimate.distributed",
        "fitbench.estimate.speed",
    } <= set(MODULES)
    graph = _graph()
    assert "fitbench.estimate.memory" in graph["fitbench.estimate.api"]
    assert "fitbench.estimate.speed" in graph["fitbench.estimate.timing"]


def test_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_inside_a_function_in_the_estimator() -> None:
    assert _not_at_module_level() == [], "imports inside functions or classes (move them to the top)"


def test_the_estimators_import_graph_has_no_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle in fitbench.estimate: " + " -> ".join(cycle or [])
