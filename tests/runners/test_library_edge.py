"""The library's edge: the bench (`runners/`) and the developer scripts import from the library only the names
`harness/__init__.py` exports (every import counts: top-level, inside a function, under TYPE_CHECKING), each of
them says what it is, the library holds none of the bench's replay plumbing, and an embedder's `import harness`
and diagnosis run load none of the bench's heavy dependencies."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import harness
from harness import ModelErrorKind

ROOT = Path(__file__).resolve().parents[2]
CONSUMERS = ("runners", "scripts")


def edge_crossings(folders: list[Path]) -> list[str]:
    """Every import of the library in `folders` that is not `from harness import <a name of harness.__all__>`, as
    `file:line: the import`."""
    public = set(harness.__all__)
    found: list[str] = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                where = f"{path.relative_to(folder.parent)}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if node.module != "harness" and not node.module.startswith("harness."):
                        continue
                    for alias in node.names:
                        if node.module != "harness" or alias.name not in public:
                            found.append(f"{where}: from {node.module} import {alias.name}")
                elif isinstance(node, ast.Import):
                    found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] == "harness"]
    return found


def test_the_bench_imports_only_the_librarys_public_names() -> None:
    crossings = edge_crossings([ROOT / folder for folder in CONSUMERS])
    assert crossings == [], "import these through `from harness import ...` (export them there on purpose):\n" + (
        "\n".join(crossings)
    )


def test_the_edge_check_bites(tmp_path: Path) -> None:
    """A private module path, a name the library does not export, a lazy and a TYPE_CHECKING import are found."""
    pkg = tmp_path / "runners"
    pkg.mkdir()
    (pkg / "planted.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from harness import HarnessSession, _LAZY\n"
        "import harness.tracker\n"
        "if TYPE_CHECKING:\n"
        "    from harness.otel import SpanRecorder\n"
        "def f() -> None:\n"
        "    from harness.tracker import DiagnosisProgressTracker\n"
    )
    assert edge_crossings([pkg]) == [
        "runners/planted.py:2: from harness import _LAZY",
        "runners/planted.py:3: import harness.tracker",
        "runners/planted.py:5: from harness.otel import SpanRecorder",
        "runners/planted.py:7: from harness.tracker import DiagnosisProgressTracker",
    ]


def _own_doc(obj: object) -> str | None:
    """The docstring `obj` was written with (not one inherited, nor the signature a dataclass makes up)."""
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
        if dataclasses.is_dataclass(obj) and doc is not None and doc.startswith(f"{obj.__name__}("):
            return None
        return doc if isinstance(doc, str) else None
    return inspect.getdoc(obj)


def test_every_public_name_resolves_and_says_what_it_is() -> None:
    """Exported on purpose: each name is there (the lazy ones load), and each class and function has a docstring
    of its own (constants and type aliases are documented where they are declared)."""
    undocumented = []
    for name in harness.__all__:
        obj = getattr(harness, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not _own_doc(obj):
            undocumented.append(name)
    assert undocumented == []
    assert sorted(set(dir(harness)) & set(harness.__all__)) == sorted(harness.__all__)


def test_the_library_holds_no_replay_plumbing() -> None:
    """vcrpy and cassettes are the bench's: the library knows a replaying transport only by its `ModelCallError`
    of kind REPLAY_MISS (stored as "CASSETTE_MISS", the text databases have always held)."""
    mentions = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        text = path.read_text(encoding="utf-8").replace('"CASSETTE_MISS"', "")
        mentions += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in re.finditer(r"(?i)cassette\w*|vcr\w*", text)]
    assert mentions == []
    assert ModelErrorKind.REPLAY_MISS.value == "CASSETTE_MISS" and not ModelErrorKind.REPLAY_MISS.retryable
    assert not any("CASSETTE" in k.name for k in ModelErrorKind)


_HEAVY = ("pandas", "duckdb", "bm25s", "scipy", "numpy", "sqlglot", "yaml", "vcr", "openai", "opentelemetry", "runners")

_EMBEDDER = """
import json, sys
from pydantic import BaseModel
from harness import (AssistantMessage, BusinessTool, DiagnosisTask, EvidenceStatus, ModelResponse, ToolCallRequest,
                     ToolResult, Usage, run_diagnosis)

class Query(BaseModel):
    q: str

class Lookup(BusinessTool[Query]):
    name = "lookup"
    description = "Look up what the records say."
    input_model = Query
    runs_inline = True

    def run(self, parsed):
        return ToolResult(EvidenceStatus.EVIDENCE, 1, {"q": parsed.q}, ({"text": "pool exhausted at 14:02"},))

class Scripted:
    name = "scripted"

    def __init__(self):
        self.turn = 0

    def complete(self, request):
        self.turn += 1
        if "SUPPORTED" in request.messages[0].content and "UNSUPPORTED" in request.messages[0].content:
            return ModelResponse(AssistantMessage("SUPPORTED"), Usage(1, 1))
        if self.turn == 1:
            call = ToolCallRequest("c1", "lookup", json.dumps({"input": {"q": "pool"}}))
            return ModelResponse(AssistantMessage(None, (call,)), Usage(1, 1))
        draft = {"conclusion": "the DB pool was exhausted", "claims": [{"statement": "pool exhausted",
                 "citations": [{"tool_call_id": "c1", "excerpt": "pool exhausted at 14:02"}]}]}
        return ModelResponse(AssistantMessage(json.dumps(draft)), Usage(1, 1))

result = run_diagnosis(DiagnosisTask("Why did payments time out at 14:00?"), [Lookup()], Scripted())
print(json.dumps([result.decision.outcome.value, result.usage.tool_invocations,
                  sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))]))
"""


def _embedded_run() -> tuple[str, int, list[str]]:
    """A diagnosis run as an embedder writes it, in a fresh interpreter: its outcome, its backend calls and which
    of `_HEAVY` it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", _EMBEDDER, *_HEAVY], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    outcome, calls, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return str(outcome), int(calls), list(loaded)


def test_an_embedder_loads_the_library_without_the_benchs_dependencies() -> None:
    """`import harness` and a whole diagnosis run (a tool call, the guard, Release) need pydantic only: no pandas,
    DuckDB, bm25s or SciPy (the bench's), no openai SDK (loaded on first use of OpenAIChatModel), no OpenTelemetry
    (the `otel` extra, loaded when a tracer is given)."""
    outcome, calls, loaded = _embedded_run()
    assert (outcome, calls) == ("SUCCESS", 1), "the probe ran a real diagnosis"
    assert loaded == []


def test_a_lazy_name_loads_its_module_on_first_use() -> None:
    """The probe sees what is loaded: asking for OpenAIChatModel loads the openai SDK."""
    probe = "import sys, harness; harness.OpenAIChatModel; print('openai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "True"
