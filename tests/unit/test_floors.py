"""The packages of fitbench stand on floors: a module imports only from its own package or from a
lower floor, at module level or inside a function alike (docs/architecture.md draws them).

The root package (`fitbench`: the lazy public API and __version__) is the exception every floor
may import; a new package must be given a floor here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fitbench

SRC = Path(fitbench.__file__).parent

FLOORS: dict[str, int] = {
    "errors": 0,
    "core": 1,
    "records": 1,
    "catalog": 2,
    "workloads": 2,
    "datasets": 2,
    "estimate": 3,
    "advise": 4,
    "backends": 4,
    "measure": 5,
    "results": 5,
    "check": 5,
    "cli": 6,
}


def _package_of(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


def _imported_packages(path: Path) -> set[str]:
    """The fitbench packages a module imports, wherever the import statement stands."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        out.update(n.split(".")[1] for n in names if n.startswith("fitbench."))
    return out


MODULES = sorted(p for p in SRC.rglob("*.py") if len(p.relative_to(SRC).parts) > 1 or p.name == "errors.py")


def test_every_package_has_a_floor():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages | {"errors"} == set(FLOORS)


def test_imports_point_down_or_within_the_package():
    upward = [
        f"{path.relative_to(SRC)} (floor {FLOORS[_package_of(path)]}) imports {target}"
        for path in MODULES
        for target in sorted(_imported_packages(path))
        if target != _package_of(path) and FLOORS[target] >= FLOORS[_package_of(path)]
    ]
    assert not upward, upward


def test_the_rule_catches_an_upward_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from fitbench.measure.runner import measure\n", encoding="utf-8")
    assert _imported_packages(module) == {"measure"}
    assert FLOORS["measure"] > FLOORS["backends"]
