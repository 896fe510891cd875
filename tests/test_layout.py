"""The layout every package keeps: each package's docstring names every module and subpackage it holds (a reader
finds a module from its package's `__init__`), and no module of harness/, runners/ or scripts/ grows past 600 lines
(one concept per file)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600
"""The bound on a module's length."""
OVER_FOR_NOW: dict[str, str] = {
    "runners/interchange/otel_import.py": "being split by the OpenTelemetry-import rewrite",
}
"""Modules still over the bound, each with the work that brings it under; the list only shrinks."""


def packages(*tops: str) -> list[Path]:
    """Every package folder (one holding `__init__.py`) under `tops`."""
    return sorted(p.parent for top in tops for p in (ROOT / top).rglob("__init__.py"))


def unnamed(package: Path) -> list[str]:
    """The modules and subpackages of `package` its docstring does not name: as `name`, `name.py` or `name/` in
    backticks (a path ending in it too), or as a bare `name.py` / `name/`."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    names = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    names += [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    missing = []
    for name in sorted(names):
        quoted = re.compile(rf"`(?:[^`\s]*[/.])?{re.escape(name)}(?:\.py|/)?`")
        bare = re.compile(rf"(?<![\w/.]){re.escape(name)}(?:\.py|/)(?!\w)")
        if not (quoted.search(doc) or bare.search(doc)):
            missing.append(name)
    return missing


@pytest.mark.parametrize("package", packages("harness", "runners"), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_package_docstring_names_its_modules(package: Path) -> None:
    missing = unnamed(package)
    assert missing == [], f"{package.relative_to(ROOT)}/__init__.py's docstring does not name: {', '.join(missing)}"


def test_the_docstring_check_bites(tmp_path: Path) -> None:
    """A module the docstring only mentions as a word is not named; `name`, name.py and a path are."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "__init__.py").write_text("")
    for name in ("events", "runs", "shown", "pathy"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "__init__.py").write_text('"""The events of runs: `shown`, sub/ and `a/b/pathy.py`."""\n')
    assert unnamed(pkg) == ["events", "runs"]


def long_modules(root: Path, *tops: str) -> dict[str, int]:
    """Every module under `tops` of `root` over MAX_LINES, with its length."""
    out = {}
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                out[path.relative_to(root).as_posix()] = lines
    return out


def test_no_module_is_over_600_lines() -> None:
    found = long_modules(ROOT, "harness", "runners", "scripts")
    over = {k: v for k, v in found.items() if k not in OVER_FOR_NOW}
    assert over == {}, f"modules over {MAX_LINES} lines (split them by concept): {over}"
    done = sorted(set(OVER_FOR_NOW) - set(found))
    assert done == [], f"back under {MAX_LINES} lines: drop them from OVER_FOR_NOW: {done}"


def test_the_length_check_bites(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "long.py").write_text("pass\n" * (MAX_LINES + 1))
    (tmp_path / "x" / "short.py").write_text("pass\n" * MAX_LINES)
    assert long_modules(tmp_path, "x") == {"x/long.py": MAX_LINES + 1}
