"""The documents say what the code does: the vocabularies they list are the enums', the replay example needs no
API key, and the help texts put each flag where it belongs."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from harness.contracts import SemanticVerdict, ViolationKind
from runners.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _attribute_docstring(path: Path, cls: str, attribute: str) -> str:
    """The docstring written under `attribute` in class `cls` of `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    for a, b in zip(node.body, node.body[1:], strict=False):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and a.target.id == attribute:
            assert isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
            return str(b.value.value)
    raise AssertionError(f"{cls}.{attribute} has no docstring")


def test_the_semantic_guard_verdicts_documented_are_the_enums() -> None:
    doc = _attribute_docstring(ROOT / "harness" / "trace.py", "GuardVerdict", "verdict")
    words = set(re.findall(r"[A-Z_]{4,}", doc))
    assert words == {v.value for v in SemanticVerdict}
    listed = re.search(r"the SemanticGuard ([A-Z_/]+) \(`GuardVerdict`\)", README)
    assert listed is not None and set(listed.group(1).split("/")) == {v.value for v in SemanticVerdict}


@pytest.mark.parametrize("kind", list(ViolationKind))
def test_every_protocol_violation_kind_is_documented(kind: ViolationKind) -> None:
    bullet = README.split("**The progress-protocol violations**", 1)[1].split("\n- ", 1)[0]
    assert kind.value in bullet


def test_the_readme_replay_example_runs_with_no_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's offline replay, run as written (one case, into a temporary database) with OPENAI_API_KEY
    unset: a replay sends nothing, so it needs no key, and the README says so."""
    line = next(x for x in README.splitlines() if "--cassettes cassettes --record-mode none --db replay.duckdb" in x)
    argv = shlex.split(line)
    assert argv[0] == "harness-bench", "the example sets no key variable"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    db = tmp_path / "replay.duckdb"
    argv = [str(db) if a == "replay.duckdb" else a for a in argv[1:]]
    assert main([*argv, "--case", "empty_logs_gateway_timeout_t1"]) == 0
    assert db.exists()
    assert "must be set" not in README.split(line)[0].splitlines()[-1]
