"""`cases` on many cases: the C YAML loader gives the same cases as the pure one, the long list is plain
rows within the width, and the progress bar never goes into a pipe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runners.domain import _case_file, evalset
from runners.domain.evalset import load_cases, reporting_progress
from runners.rendering import tables
from scripts.big_evalset import write_big_file

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_c_loader_and_pure_loader_give_identical_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _case_file._Loader is yaml.CSafeLoader
    monkeypatch.setattr(evalset, "_PARSED", {})
    with_c = load_cases()
    monkeypatch.setattr(evalset, "_PARSED", {})
    monkeypatch.setattr(_case_file, "_Loader", yaml.SafeLoader)
    pure = load_cases()
    assert len(with_c) > 50
    assert with_c == pure
    assert [c.model_dump() for c in with_c] == [c.model_dump() for c in pure]


def _many(n: int) -> list[evalset.EvalCase]:
    base = load_cases()
    return [base[i % len(base)].model_copy(update={"id": f"{base[i % len(base)].id[:70]}-r{i}"}) for i in range(n)]


@pytest.mark.parametrize("width", [80, 100, 50])
def test_many_cases_are_plain_rows_within_the_width(width: int) -> None:
    cases = _many(tables.STREAM_CASES_ABOVE + 500)
    lines = list(tables.cases_lines(cases, width))
    assert lines[0] == f"{len(cases)} evaluation cases"
    assert all(tables.cell_len(line) <= width for line in lines), max(lines, key=tables.cell_len)
    for c in cases[:3] + cases[-3:]:
        assert any(line.startswith(c.id[: width - 12]) for line in lines)
    legend_at = max(i for i, ln in enumerate(lines) if ln.startswith("expect: "))
    assert lines[legend_at - 1] == ""
    # one row per case (plus its question line when the question has no column of its own), a blank line and
    # the name before each family
    per_case = 2 if lines[1].startswith("id / question") else 1
    families = sum(1 for ln in lines if ln in {f.value for f in evalset.Family})
    assert families >= 10
    assert legend_at - 1 == 2 + per_case * len(cases) + 2 * families


def test_rows_are_produced_one_at_a_time() -> None:
    cases = _many(tables.STREAM_CASES_ABOVE + 1)
    rows = tables.cases_lines(cases, 100)
    assert next(rows).endswith("evaluation cases")  # a generator: nothing is buffered before the first row


def test_progress_reports_every_file_and_no_bar_into_a_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "many.yaml"
    write_big_file(path, tables.STREAM_CASES_ABOVE + 200)
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(evalset, "_PARSED", {})
    with reporting_progress(lambda _p, done, total: seen.append((done, total))):
        cases = load_cases([str(path)])
    assert seen[0] == (0, len(cases)) and seen[-1] == (len(cases), len(cases))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    proc = subprocess.run(
        [sys.executable, "-m", "runners.cli", "cases", "--evalset", str(path)], cwd=ROOT, capture_output=True,
        text=True, env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"}, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "\x1b" not in proc.stdout
    assert proc.stdout.splitlines()[0] == f"{len(cases)} evaluation cases"
