"""The documents say what the code does: the vocabularies they list are the enums', the replay example needs no
API key, the evaluation families and their counts are the built-in cases', every flag of `run` has its row, and
every citation in the code points at a section of the architecture page that exists — never at a document outside
the repository."""

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


# What a citation must never name: the design brief and the two design notes the contract was rebuilt from live
# outside the repository (docs/architecture.md is the project's account of them), as does any absolute path of the
# machine the project was written on. This file, which names the patterns, is the one file not scanned.
_OUTSIDE = re.compile(r"\b(?-i:BRIEF)\b|\bseed\s+00[03]\b|/work/|shared/design|\.\./seeds|seeds/0", re.IGNORECASE)
_SOURCES = ("harness", "runners", "scripts", "tests", "benchmarks", "evalsets", "notebooks", "docs", ".ci", ".github")
_TEXT = {".py", ".md", ".yaml", ".yml", ".json", ".ipynb", ".toml", ".txt", ".jinja", ""}


def _source_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / "mkdocs.yml"]
    for folder in _SOURCES:
        files += [
            p for p in sorted((ROOT / folder).rglob("*"))
            if p.is_file() and p.suffix in _TEXT and "__pycache__" not in p.parts and ".venvs" not in p.parts
        ]  # fmt: skip
    return [p for p in files if p != Path(__file__).resolve()]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    found = []
    for path in _source_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "\n".join(found)


def _architecture_sections() -> set[str]:
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", _page("architecture.md"), re.M))


def test_every_citation_of_the_architecture_page_names_a_section_it_has() -> None:
    """`docs/architecture.md §5.4` in a docstring, a help text or a case description points at a numbered heading."""
    sections = _architecture_sections()
    assert {"2", "3", "4", "5", "5.4", "6", "7", "8", "13", "14"} <= sections
    cited = re.compile(r"architecture\.md\s+§(\d+(?:\.\d+)?)")
    dangling = []
    for path in _source_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            dangling += [f"{path.relative_to(ROOT)}:{number}: §{s}" for s in cited.findall(line) if s not in sections]
    assert not dangling, dangling


# Folders the pages name that commands create and git ignores, so a clone does not have them.
_GENERATED = {"reports/notebook", "benchmarks/.venvs"}
_REPO_PATH = re.compile(
    r"`((?:harness|runners|tests|scripts|benchmarks|evalsets|reports|cassettes|notebooks|docs|\.github|\.ci)/[^`\s]*)`"
)


def test_every_repository_path_the_pages_name_exists() -> None:
    """A file or folder named in a page or the README (`runners/plan/settings.py`, `tests/x.py::test_y`) is there:
    a module moved or a test renamed since fails here, naming the page."""
    missing = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for named in _REPO_PATH.findall(page.read_text(encoding="utf-8")):
            path, _, test = named.partition("::")
            path = path.rstrip("/")
            if any(c in path for c in "<…*{") or path in _GENERATED:
                continue
            if not (ROOT / path).exists():
                missing.append(f"{page.name}: {named}")
            elif test and not re.search(rf"^def {re.escape(test)}\(", (ROOT / path).read_text(), re.M):
                missing.append(f"{page.name}: {named}")
    assert not missing, missing
