"""The bench's layout: no import cycle among the modules of `runners` (every import counts: top-level, inside a
function, under TYPE_CHECKING), and every package says in its docstring what it holds."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "runners"
PACKAGES = ("plan", "run", "store", "endpoints", "analysis", "domain", "commands")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of `runners` it imports (a `from package import module` names the module)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name and not name.startswith(d + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_import_cycle_among_the_bench_modules() -> None:
    graph = import_graph(_modules())
    assert len(graph) > 30, "the walk found the modules"
    assert "runners.run.executors" in graph["runners.run.bench"], "lazy and package-relative imports are seen"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_cycle_finder_sees_a_cycle() -> None:
    """The check bites: a cycle through a lazy import is found and named."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_lazy_import_counts(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("def f():\n    from runners.y import g\n")
    (tmp_path / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import runners.x\n")
    graph = import_graph({"runners.x": tmp_path / "x.py", "runners.y": tmp_path / "y.py"})
    assert find_cycle(graph) == ["runners.x", "runners.y", "runners.x"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_says_what_it_holds(package: str) -> None:
    module = importlib.import_module(f"runners.{package}")
    assert module.__doc__ and len(module.__doc__.split()) >= 20, f"runners.{package} needs a one-paragraph docstring"


SQL_ELSEWHERE_FOR_NOW = {"runners.commands.gate", "runners.endpoints.live_llm"}
"""Modules outside store/ and analysis/ that still run their own SQL (being split into packages whose queries move
into store/); the list only shrinks."""


def _runs_sql(path: Path) -> list[int]:
    """Lines that open a DuckDB connection or run a statement (`.execute(...)`, `.executemany(...)`, `.sql(...)`)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            opens = f.attr == "connect" and isinstance(f.value, ast.Name) and f.value.id == "duckdb"
            if opens or (f.attr in ("execute", "executemany", "sql") and node.args):
                lines.append(node.lineno)
    return lines


def test_only_the_store_and_the_analysis_touch_the_database() -> None:
    """Plan, run, the commands and the endpoints reach the metrics tables through the store's named queries."""
    found = {
        name: lines
        for name, path in _modules().items()
        if not name.startswith(("runners.store", "runners.analysis", "runners.domain.tools"))  # tools: their backends
        and name not in SQL_ELSEWHERE_FOR_NOW
        if (lines := _runs_sql(path))
    }
    assert found == {}, f"SQL outside runners/store/ (module: lines): {found}"


def test_the_store_imports_nothing_above_it() -> None:
    """store/ sits below the run, the analysis, the endpoints and the commands: it imports none of them."""
    graph = import_graph(_modules())
    above = ("runners.run", "runners.analysis", "runners.endpoints", "runners.live", "runners.commands", "runners.cli")
    up = {name: sorted(d for d in deps if d.startswith(above)) for name, deps in graph.items()}
    assert {n: d for n, d in up.items() if n.startswith("runners.store") and d} == {}
