"""The documents say what the code does: the vocabularies they list are the enums', the replay example needs no
API key, the evaluation families and their counts are the built-in cases', and every flag of `run` has its row."""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from pathlib import Path

import pytest

from harness.contracts import SemanticVerdict, ViolationKind
from runners.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


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
    listed = re.search(r"the SemanticGuard ([A-Z_/]+) \(`GuardVerdict`\)", _page("library.md"))
    assert listed is not None and set(listed.group(1).split("/")) == {v.value for v in SemanticVerdict}


@pytest.mark.parametrize("kind", list(ViolationKind))
def test_every_protocol_violation_kind_is_documented(kind: ViolationKind) -> None:
    bullet = _page("architecture.md").split("**The progress-protocol violations**", 1)[1].split("\n- ", 1)[0]
    assert kind.value in bullet


def test_the_replay_example_runs_with_no_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The offline replay of docs/cassettes.md, run as written (one case, into a temporary database) with
    OPENAI_API_KEY unset: a replay sends nothing, so it needs no key, and the page says so."""
    page = _page("cassettes.md")
    line = next(x for x in page.splitlines() if "--cassettes cassettes --record-mode none --db replay.duckdb" in x)
    argv = shlex.split(line)
    assert argv[0] == "harness-bench", "the example sets no key variable"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    db = tmp_path / "replay.duckdb"
    argv = [str(db) if a == "replay.duckdb" else a for a in argv[1:]]
    assert main([*argv, "--case", "empty_logs_gateway_timeout_t1"]) == 0
    assert db.exists()
    assert "must be set" not in page.split(line)[0].splitlines()[-1]


def test_the_family_table_counts_the_built_in_cases() -> None:
    from collections import Counter

    from runners.domain.evalset import load_cases

    page = _page("evaluation-cases.md")
    table = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", page, re.M))
    counts = Counter(case.family for case in load_cases())
    assert {family: int(n) for family, n in table.items()} == dict(counts)
    assert f"{sum(counts.values())} cases in" in page


def _run_flags() -> set[str]:
    from runners.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices["run"]
    return {s for a in run._actions for s in a.option_strings if s.startswith("--") and s != "--help"}


def test_every_flag_of_run_is_documented_on_the_running_page() -> None:
    """A flag added to `run` (a setting, a run option, an execution option) gets its row or bullet on the page."""
    page = _page("running.md")
    missing = sorted(f for f in _run_flags() if f"`{f}" not in page)
    assert not missing, missing
