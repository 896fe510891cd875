"""The bench's layout: no import cycle among the modules of `runners` (every import counts: top-level, inside a
function, under TYPE_CHECKING), every package says in its docstring what it holds, and only the store and the analysis
run SQL — the analysis's naming no base table of the metrics database (parsed with sqlglot)."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import duckdb
import pytest
import sqlglot
from sqlglot import exp

ROOT = Path(__file__).resolve().parents[2] / "runners"
PACKAGES = (
    "plan", "run", "store", "endpoints", "live", "interchange", "decisions", "rendering", "pipelines", "domain",
    "commands",
)  # fmt: skip


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def syntax(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per content for every check of this module (they walk the same ~250
    files; a tree is only read, never changed)."""
    st = path.stat()
    return _parsed(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=1024)
def _parsed(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"), path)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of `runners` it imports (a `from package import module` names the module)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for module, member in imports(path):
            sub = f"{module}.{member}" if member is not None else module
            deps.add(sub if sub in modules else module)
        graph[name] = {d for d in deps if d in modules and d != name and not name.startswith(d + ".")}
    return graph


def imports(path: Path) -> tuple[tuple[str, str | None], ...]:
    """Every absolute import in the file, anywhere in it: (module, the name a `from` imports of it, or None)."""
    st = path.stat()
    return _imports(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=1024)
def _imports(path: str, mtime_ns: int, size: int) -> tuple[tuple[str, str | None], ...]:
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(_parsed(path, mtime_ns, size)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
    return tuple(found)


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


ANALYSIS = ("runners.interchange", "runners.decisions", "runners.rendering")
"""The layers that read stored runs: they may compose SQL (DuckDB is their engine), over the store's views only."""

SQL_ELSEWHERE_FOR_NOW: set[str] = set()
"""Modules outside store/ and analysis/ that still run their own SQL (being split into packages whose queries move
into store/); the list only shrinks."""


def _runs_sql(path: Path) -> list[int]:
    """Lines that open a DuckDB connection or run a statement (`.execute(...)`, `.executemany(...)`, `.sql(...)`)."""
    lines = []
    for node in ast.walk(syntax(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            opens = f.attr == "connect" and isinstance(f.value, ast.Name) and f.value.id == "duckdb"
            if opens or (f.attr in ("execute", "executemany", "sql") and node.args):
                lines.append(node.lineno)
    return lines


def test_only_the_store_and_the_analysis_touch_the_database() -> None:
    """Plan, run, the commands and the endpoints reach the metrics tables through the store's named queries; the
    analysis may compose SQL (DuckDB is its engine) but over the views the store declares, never a base table."""
    found = {
        name: lines
        for name, path in _modules().items()
        if not name.startswith(("runners.store", *ANALYSIS, "runners.domain.tools"))  # tools: their backends
        and name not in SQL_ELSEWHERE_FOR_NOW
        if (lines := _runs_sql(path))
    }
    assert found == {}, f"SQL outside runners/store/ (module: lines): {found}"
    tables, views = stored_tables_and_views()
    assert {"bench_runs", "case_runs", "tool_calls", "events"} <= tables and views, "the schema was read"
    named = {
        name: hits
        for name, path in _modules().items()
        if name.startswith(ANALYSIS)
        if (hits := base_tables_named(path, tables))
    }
    assert named == {}, (
        "analysis SQL naming a base table (module: [(line, table)]); read it through a view of"
        f" runners/store/views.py or a named query of runners/store/: {named}"
    )


# -- the analysis reads what the store declares ---------------------------------------------------
DYNAMIC = "__dynamic__"
"""What an f-string's `{...}` reads as: a table named at run time cannot be checked, so it counts as a base table."""
_STATEMENT = re.compile(r"\s*(SELECT|WITH)\s", re.ASCII)
_FRAGMENT = re.compile(r"\b(?:FROM|JOIN)\s+([A-Za-z_][A-Za-z_0-9]*)", re.ASCII)
"""A piece of a statement (`FROM case_runs c`) in a string that is not a whole statement."""


def stored_tables_and_views() -> tuple[frozenset[str], frozenset[str]]:
    """The base tables and the views of a metrics database as the store's migrations create it (the schema itself,
    not a list typed here)."""
    from runners.store import migrations

    con = duckdb.connect()
    try:
        migrations.migrate(con, ":memory:")
        migrations.ensure_settings_columns(con)
        tables = frozenset(str(r[0]) for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall())
        views = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        return tables, frozenset(str(r[0]) for r in views)
    finally:
        con.close()


def _sql_text(node: ast.expr) -> str | None:
    """The text of a string literal (an f-string's `{...}` as DYNAMIC), or None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else DYNAMIC for v in node.values)
    return None


def base_tables_named(path: Path, tables: frozenset[str]) -> list[tuple[int, str]]:
    """(line, table) for each base table (or table named at run time) a SQL statement written in `path` reads;
    a common table expression's own name is not a table. A statement sqlglot cannot parse is reported too."""
    hits: list[tuple[int, str]] = []
    tree = syntax(path)
    pieces = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr) or id(node) in pieces or (text := _sql_text(node)) is None:
            continue
        text = re.sub(r"\{[A-Za-z_][A-Za-z_0-9]*\}", DYNAMIC, text)  # a `.format(...)` placeholder
        if not _STATEMENT.match(text):
            hits += [(node.lineno, t) for t in _FRAGMENT.findall(text) if t in tables or t == DYNAMIC]
            continue
        try:
            statement = sqlglot.parse_one(text, read="duckdb")
        except sqlglot.errors.ParseError:
            hits.append((node.lineno, "<SQL sqlglot cannot parse>"))
            continue
        ctes = {c.alias for c in statement.find_all(exp.CTE)}
        named = {t.name for t in statement.find_all(exp.Table)} - ctes
        hits += [(node.lineno, t) for t in sorted(named) if t in tables or t == DYNAMIC]
    return sorted(hits)


def test_the_analysis_sql_check_bites(tmp_path: Path) -> None:
    """A base table is found in a plain string, an f-string, a `.format` template and a piece of a statement; a
    view, a common table expression, a table function and a message are not; a table named at run time counts."""
    module = tmp_path / "planted.py"
    module.write_text(
        "def f(con, where, table):\n"
        "    con.execute('SELECT family, count(*) FROM case_runs c JOIN v_pass_rate v USING (bench_run_id)')\n"
        "    con.execute(f'SELECT pass_rate FROM v_pass_rate WHERE {where}')\n"
        "    con.execute(f'SELECT * FROM {table}')\n"
        "    q = 'WITH newest AS (SELECT * FROM v_outcomes) SELECT n.* FROM newest n, duckdb_tables() t'\n"
        "    r = 'SELECT n FROM tool_calls WHERE {where}'.format(where=where)\n"
        "    s = 'FROM bench_runs b WHERE ' + where\n"
        "    return 'FROM here on, a message', q, r, s\n"
    )
    tables, _ = stored_tables_and_views()
    assert base_tables_named(module, tables) == [(2, "case_runs"), (4, DYNAMIC), (6, "tool_calls"), (7, "bench_runs")]


def test_the_store_imports_nothing_above_it() -> None:
    """store/ sits below the run, the analysis, the endpoints and the commands: it imports none of them."""
    graph = import_graph(_modules())
    above = ("runners.run", *ANALYSIS, "runners.endpoints", "runners.live", "runners.commands", "runners.cli")
    up = {name: sorted(d for d in deps if d.startswith(above)) for name, deps in graph.items()}
    assert {n: d for n, d in up.items() if n.startswith("runners.store") and d} == {}


# -- private names stay in their package ----------------------------------------------------------
CODE = ROOT.parent

# Private names still imported across packages, each with its reason; each entry must still be imported, so the
# list only shrinks.
PRIVATE_IMPORTS_LEFT: set[tuple[str, str, str]] = set()


def _package_of(module: str, root: Path) -> str:
    """The package a module belongs to (a package's `__init__` belongs to the package itself)."""
    return module if (root / Path(*module.split(".")) / "__init__.py").exists() else module.rpartition(".")[0]


def private_imports(root: Path, tops: tuple[str, ...] = ("harness", "runners")) -> set[tuple[str, str, str]]:
    """(importer, module, name) for every `from module import _name` of a private name (one leading underscore)
    whose module is in another package than the importer — lazy imports and TYPE_CHECKING ones included."""
    found: set[tuple[str, str, str]] = set()
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for node in ast.walk(syntax(path)):
                if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                    continue
                if node.module.partition(".")[0] not in tops:
                    continue
                if _package_of(node.module, root) == _package_of(importer, root):
                    continue
                found.update((importer, node.module, a.name) for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__"))  # fmt: skip
    return found


def test_no_private_name_is_imported_from_another_package() -> None:
    found = private_imports(CODE)
    unexpected = sorted(found - PRIVATE_IMPORTS_LEFT)
    assert not unexpected, "private names imported across packages: " + ", ".join(
        f"{importer} imports {name} from {module}" for importer, module, name in unexpected
    )
    assert PRIVATE_IMPORTS_LEFT <= found, f"no longer imported, drop from the list: {PRIVATE_IMPORTS_LEFT - found}"


def test_the_private_import_check_bites(tmp_path: Path) -> None:
    """A private name imported from another package is found, lazily too; the same package's is not."""
    for package in ("harness", "runners", "runners/plan", "runners/commands"):
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "harness" / "contracts.py").write_text("class _Enum: ...\n")
    (tmp_path / "runners" / "plan" / "_helpers.py").write_text("def _check(): ...\ndef _mine(): ...\n")
    (tmp_path / "runners" / "plan" / "settings.py").write_text("from runners.plan._helpers import _mine\n")
    (tmp_path / "runners" / "commands" / "run.py").write_text(
        "from harness.contracts import _Enum\n\ndef f():\n    from runners.plan._helpers import _check, __doc__\n"
    )
    assert private_imports(tmp_path) == {
        ("runners.commands.run", "harness.contracts", "_Enum"),
        ("runners.commands.run", "runners.plan._helpers", "_check"),
    }


def test_the_agent_loop_protocol_is_the_librarys() -> None:
    """The shape of an agent loop is the library's (`harness.AgentLoop`); the bench declares no second one."""
    import harness
    from runners.run import agents, case_runner

    assert "AgentLoop" in harness.__all__
    assert case_runner.AgentLoop is agents.AgentLoop is harness.AgentLoop
    assert agents.pydantic_ai_loop.adapter is not agents.openai_agents_loop.adapter


# -- layers point one way ---------------------------------------------------------------------------------------
LAYERS = (
    "domain", "plan", "store", "run", "endpoints", "interchange", "decisions", "rendering", "api", "pipelines", "live",
    "commands", "cli",
)  # fmt: skip
"""The bench's layers, lowest first: a module may import its own layer and those before it, never one after. `domain` is
the bench's world (cases, tools, profiles, the model spec, the run's secrets and their redaction), `plan` decides what a
run is (options, rules), `store` owns every byte on disk, `run` executes a plan, `endpoints` serve what the run talks to
(serve-sim), `interchange` carries runs in and out (OpenTelemetry, event logs, Inspect logs, captures), `decisions`
judge stored runs (gate, power, recommend, what-if, compare-stops), `rendering` writes what a person reads (tables,
transcripts, reports, the gate's files), `api` is the Python API of notebooks and scripts (one module), `pipelines` run
the bench in process and compose the decisions over what it stored (the real-models report, the calibration study),
`live` drives real local models, `commands` are the CLI's commands and `cli` their parser. Developer tools live outside
the package, in scripts/."""
TOP: tuple[str, ...] = ()
"""Programs of their own inside the package, above every layer (none: developer tools are in scripts/)."""


def layer_of(module: str) -> int:
    """The index of `module`'s layer in LAYERS (the top-level programs above them all)."""
    if module in TOP or module == "runners":
        return len(LAYERS)
    part = module.split(".")[1]
    return LAYERS.index(part)


def imports_against_the_layers(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer, as `importer -> imported (layer -> layer)`."""
    out = []
    for name, deps in sorted(graph.items()):
        for dep in sorted(deps):
            if layer_of(dep) > layer_of(name):
                out.append(
                    f"{name} -> {dep} ({LAYERS[layer_of(name)] if layer_of(name) < len(LAYERS) else 'top'}"
                    f" -> {LAYERS[layer_of(dep)] if layer_of(dep) < len(LAYERS) else 'top'})"
                )
    return out


def test_every_package_is_in_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
    assert packages | {"cli", "api"} == set(LAYERS), "a package of runners/ missing from LAYERS, or one too many"
    assert {f"runners.{m}" for m in modules - {"cli", "api"}} == set(TOP), "a top-level module missing from TOP"


def test_imports_point_down_the_layers() -> None:
    """Lazy imports and TYPE_CHECKING ones included: a layer never reaches one above it."""
    found = imports_against_the_layers(import_graph(_modules()))
    assert found == [], "imports against the layers (" + " < ".join(LAYERS) + "):\n" + "\n".join(found)


def test_the_layer_check_bites(tmp_path: Path) -> None:
    """An import from a lower layer into a higher one is found, a lazy one too; one pointing down is not."""
    (tmp_path / "plan.py").write_text("def f():\n    from runners.store.writer import MetricsWriter\n")
    (tmp_path / "run.py").write_text("from runners.store.writer import MetricsWriter\n")
    (tmp_path / "writer.py").write_text("")
    graph = import_graph({"runners.plan.x": tmp_path / "plan.py", "runners.run.y": tmp_path / "run.py",
                          "runners.store.writer": tmp_path / "writer.py"})  # fmt: skip
    assert imports_against_the_layers(graph) == ["runners.plan.x -> runners.store.writer (plan -> store)"]


# -- tools where tools live ----------------------------------------------------------------------------------
def benchmark_imports(tests: Path) -> list[str]:
    """Every import of the `benchmarks` folder (or a module of it) in `tests` as `file:line: module`, lazy ones
    included: the benchmarks measure the package, nothing the tests check lives there."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(syntax(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found += [
                f"{path.relative_to(tests.parent)}:{node.lineno}: {n}" for n in names if n.split(".")[0] == "benchmarks"
            ]
    return found


def test_no_test_imports_the_benchmarks() -> None:
    found = benchmark_imports(ROOT.parent / "tests")
    assert found == [], "tests import from the package (or scripts/), never benchmarks/:\n" + "\n".join(found)


def test_the_benchmark_import_check_bites(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text("import os\n\ndef test() -> None:\n    from benchmarks.calibration import rate\n")
    assert benchmark_imports(tests) == ["tests/test_x.py:4: benchmarks.calibration"]


# -- the command line is started from the commands only ------------------------------------------------------------
_STARTS = {("subprocess", "run"), ("subprocess", "Popen"), ("subprocess", "call"), ("subprocess", "check_call"),
           ("subprocess", "check_output"), ("os", "system"), ("os", "execv"), ("os", "execvp"), ("os", "spawnv"),
           ("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell")}  # fmt: skip
"""Calls that start a process."""
_CLI = re.compile(r"(runners\.cli|harness-bench)(\s|$)")
"""A string that names the bench's command line as a program: `python -m runners.cli`, `harness-bench sweep …`."""


def process_starts(path: Path) -> list[tuple[int, bool]]:
    """Each call that starts a process in `path`, as (line, whether the function it is in names the bench's command
    line in a string other than its docstring: the argv it builds)."""
    tree = syntax(path)
    found = []
    scopes: list[ast.AST] = [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
    ]
    for scope in scopes:
        body = list(ast.iter_child_nodes(scope))
        doc = (
            ast.get_docstring(scope, clean=False)
            if isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef)
            else None
        )
        texts = [n.value for b in body for n in ast.walk(b) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and n.value != doc]  # fmt: skip
        names_cli = any(_CLI.match(t.strip()) for t in texts)
        for b in body:
            if scope is tree and isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef):
                continue  # a function's calls are its own scope's
            for n in ast.walk(b):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name):
                    if (n.func.value.id, n.func.attr) in _STARTS:
                        found.append((n.lineno, names_cli))
    return sorted(set(found))


def cli_started_below_the_commands(modules: dict[str, Path]) -> list[str]:
    """Every module below `commands` that starts the bench's command line as a process (`module:line`): a layer
    that cannot import a command must not run one either, where the import check cannot see it."""
    commands = LAYERS.index("commands")
    return [f"{name}:{line}" for name, path in sorted(modules.items()) if layer_of(name) < commands
            for line, cli in process_starts(path) if cli]  # fmt: skip


def test_no_layer_below_the_commands_starts_the_command_line() -> None:
    found = cli_started_below_the_commands(_modules())
    assert found == [], "the bench's command line started as a process below the commands:\n" + "\n".join(found)


def test_rendering_starts_no_process() -> None:
    """The rendering layer only renders: it starts no process at all (and imports no command: the layer check)."""
    found = {name: lines for name, path in _modules().items() if name.startswith("runners.rendering")
             if (lines := [line for line, _ in process_starts(path)])}  # fmt: skip
    assert found == {}, f"processes started by the rendering layer (module: lines): {found}"


def test_decisions_import_nothing_from_the_run() -> None:
    """Decisions read stored runs; they never run the bench (a pipeline composes the two)."""
    graph = import_graph(_modules())
    found = sorted(f"{name} -> {dep}" for name, deps in graph.items() if name.startswith("runners.decisions")
                   for dep in deps if dep.startswith("runners.run"))  # fmt: skip
    assert found == [], "decisions importing the run:\n" + "\n".join(found)


def test_the_command_line_check_bites(tmp_path: Path) -> None:
    """A renderer that starts `python -m runners.cli sweep` (its argv built first), or `harness-bench` through a
    shell, is found; a command may, and a process that is not the bench's command line is no finding."""
    (tmp_path / "r.py").write_text(
        '"""Replays with `harness-bench sweep`."""\nimport subprocess, sys\n\n'
        "def replay(db):\n"
        '    """Runs harness-bench sweep."""\n'
        '    argv = [sys.executable, "-m", "runners.cli", "sweep", "--db", db]\n'
        "    return subprocess.run(argv, check=False)\n"
    )
    (tmp_path / "s.py").write_text('import os\nos.system("harness-bench run --db x")\n')
    (tmp_path / "w.py").write_text(
        '"""Calls harness-bench? No: sha256sum."""\nimport subprocess\n\n'
        'def f():\n    """Not harness-bench."""\n    return subprocess.run(["sha256sum", "f"])\n'
    )
    modules = {"runners.rendering.r": tmp_path / "r.py", "runners.decisions.s": tmp_path / "s.py",
               "runners.live.w": tmp_path / "w.py", "runners.commands.c": tmp_path / "r.py"}  # fmt: skip
    assert cli_started_below_the_commands(modules) == ["runners.decisions.s:2", "runners.rendering.r:7"]
    assert process_starts(tmp_path / "w.py") == [(6, False)]
