"""No import cycles in the shipped tree: every import statement counts, wherever it is
(module level, ``TYPE_CHECKING`` blocks, inside functions), because a cycle hidden in a
function or a type check is still two modules that cannot be read, tested or moved
apart. The graph is built from source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = [ROOT / "ledger_core"] + [
    package
    for parent in ("backends", "conformance", "integrations")
    for package in sorted((ROOT / parent).iterdir())
    if (package / "__init__.py").is_file()
]
# Cycles still to break, each with the reason it is allowed meanwhile (empty: none).
KNOWN: dict[frozenset[str], str] = {}  # a cycle allowed for now, with the reason


def modules(packages: list[Path] = SHIPPED) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in package.rglob("*.py"):
            parts = list(path.relative_to(package.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _targets(node: ast.AST, name: str, path: Path) -> Iterator[str]:
    """Every module (or name in a module) an import statement names, absolute."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            base = package[: len(package) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        # ``from a import b``: the module ``a.b`` if there is one, else ``a`` (walked up).
        yield from (f"{module}.{alias.name}" for alias in node.names)


def graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports. Importing ``a.b`` runs ``a`` too, but
    that edge is not counted: a package's ``__init__`` re-exporting its modules is no
    cycle of theirs."""
    edges: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(node, name, path):
                while target and target not in found:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _path(edges: dict[str, set[str]], component: list[str]) -> str:
    """One cycle through the component, for the failure message: a -> b -> a."""
    start, members = component[0], set(component)
    trail, seen = [start], {start}
    while True:
        nxt = sorted(n for n in edges[trail[-1]] if n in members)
        back = [n for n in nxt if n == start]
        if back and len(trail) > 1:
            return " -> ".join([*trail, start])
        fresh = [n for n in nxt if n not in seen]
        if not fresh:
            return " <-> ".join(component)
        trail.append(fresh[0])
        seen.add(fresh[0])


def test_the_shipped_tree_has_no_import_cycle() -> None:
    edges = graph(modules())
    assert "ledger_conformance.runner" in edges["ledger_conformance.commands"]
    found = cycles(edges)
    new = [c for c in found if frozenset(c) not in KNOWN]
    assert not new, "import cycles:\n" + "\n".join(_path(edges, c) for c in new)
    gone = [sorted(k) for k in KNOWN if list(sorted(k)) not in found]
    assert not gone, f"no longer cycles, drop them from KNOWN: {gone}"


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The finder itself: a cycle through a function-local import and one through a
    ``TYPE_CHECKING`` import are both cycles."""
    source = {
        "a.py": "def f():\n    from . import b\n",
        "b.py": "from pkg.a import f\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import X\n",
        "d.py": "import pkg.c\nX = 1\n",
        "e.py": "from . import a\n",
    }
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import a, e\n")
    for name, text in source.items():
        (tmp_path / "pkg" / name).write_text(text)
    edges = graph(modules([tmp_path / "pkg"]))
    assert cycles(edges) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    assert _path(edges, ["pkg.a", "pkg.b"]) == "pkg.a -> pkg.b -> pkg.a"


def test_the_registry_and_the_cli_stay_below_migrate_and_the_suite() -> None:
    """Opening depends on the migration check (``ledger_core.runs``), never on the
    migration tool; the core names the suite in one place only (the CLI, by name)."""
    edges = graph(modules())
    for low in ("ledger_core.registry", "ledger_core.base", "ledger_core.runs"):
        assert "ledger_core.migrate" not in edges[low], low
    core = {name: path.read_text() for name, path in modules().items() if "ledger_core" in name}
    for name in core:  # no import statement: the CLI imports it by name when a command runs
        assert not any(t.startswith("ledger_conformance") for t in edges[name]), name
    assert [n for n, text in core.items() if "ledger_conformance" in text] == ["ledger_core.cli"]
    assert core["ledger_core.cli"].count("ledger_conformance") == 1
