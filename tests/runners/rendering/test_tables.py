"""The CLI's tables at 80 and 100 columns and in pipes: no line wider than the width, no word split
across lines, questions cut only at a word boundary."""

from __future__ import annotations

import io
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console, RenderableType

from runners.decisions.recommend import measure, recommend
from runners.domain.evalset import Family, load_cases
from runners.plan.options import BenchOptions
from runners.rendering import tables
from runners.run.bench import family_rows, plan_run, run_bench
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep
from runners.store.connection import connect

ROOT = Path(__file__).resolve().parents[3]
WIDTHS = (80, 100)


def _render(renderable: RenderableType, width: int) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=width, force_terminal=False, color_system=None).print(renderable)
    return buf.getvalue().splitlines()


def _assert_fits(lines: list[str], width: int) -> None:
    too_wide = [line for line in lines if cell_len(line) > width]
    assert too_wide == []


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    path = tmp_path_factory.mktemp("tables") / "t.duckdb"
    bench_run_id = run_bench(plan_run(BenchOptions.of(db=path))).bench_run_id
    sweep = run_sweep(plan_sweep(SweepOptions(
        SweepGrid(no_gain_threshold=(1, 2), protocol_violation_threshold=(1, 2)),
        BenchOptions.of(evalsets=["empty_logs", "diagnosable"], db=path),
    )))  # fmt: skip
    yield path, bench_run_id, sweep.sweep_id


@pytest.mark.parametrize("width", WIDTHS)
def test_run_summary_keeps_every_name_and_code_whole(db: tuple[Path, str, str], width: int) -> None:
    path, bench_run_id, _ = db
    con = connect(path, read_only=True)
    try:
        rows = family_rows(con, bench_run_id)
    finally:
        con.close()
    lines = _render(tables.family_table(f"bench run {bench_run_id}", rows), width)
    _assert_fits(lines, width)
    text = "\n".join(lines)
    for family in Family:
        assert re.search(rf"^{family.value}\s", text, re.M), f"{family.value} on one line"
    for long_name in ("FALLBACK/INSUFFICIENT_EVIDENCE", "BUDGET_LIMIT_REACHED", "PROGRESS_PROTOCOL_VIOLATED"):
        assert long_name in text
    assert "budget_exhaust\n" not in text and "INSU\n" not in text
    assert len(lines) <= 24, "ten families fit a screen"
    for r in rows:  # every count of the row is printed whole, with its code
        row_text = " ".join(line for line in lines if line.startswith(r.family) or line.startswith(" "))
        for outcome, n in r.outcomes.items():
            assert f"{tables.OUTCOME_CODES[outcome]}:{n}" in row_text


@pytest.mark.parametrize("width", (*WIDTHS, 140))
def test_cases_table_cuts_questions_only_between_words(width: int) -> None:
    cases = load_cases()
    lines = _render(tables.cases_table(cases, width), width)
    _assert_fits(lines, width)
    text = "\n".join(lines)
    for c in cases:
        assert c.id in text, c.id
    header = next(line for line in lines if line.startswith("id"))
    # its own column when wide enough, else the line under the id ("id / question")
    column = -1 if header.startswith("id / question") else header.find("question")
    for c in cases:
        i = next(n for n, line in enumerate(lines) if line.startswith(c.id + " "))
        shown = (lines[i][column:] if column > 0 else lines[i + 1]).strip().removesuffix("…")
        question = " ".join(c.question.split())
        assert shown and question.startswith(shown), (shown, question)
        rest = question[len(shown) :]
        first_word = question.split(" ")[0]
        assert rest == "" or rest.startswith(" ") or shown == first_word[: len(shown)], f"cut mid-word: {shown!r}"


@pytest.mark.parametrize("width", WIDTHS)
def test_recommend_table_headers_do_not_fold(db: tuple[Path, str, str], width: int) -> None:
    path, _, sweep_id = db
    con = connect(path, read_only=True)
    try:
        stats = measure(con, sweep_id)
    finally:
        con.close()
    rec = recommend(stats)
    columns = rec.columns
    lines = _render(tables.stats_table("sweep", rec, stats), width)
    _assert_fits(lines, width)
    header = next(line for line in lines if "recall" in line)
    for col in columns:
        assert f" {tables.abbreviation(col)} " in f" {header} ", "abbreviated header on one line"
        assert f"{tables.abbreviation(col)} = {col}" in "\n".join(lines), "legend"
    assert "no_gai\n" not in "\n".join(lines)


@pytest.mark.parametrize(("columns", "limit"), [("80", 80), ("100", 100), (None, tables.PIPE_WIDTH)])
def test_piped_run_output_honours_columns(tmp_path: Path, columns: str | None, limit: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = columns
    exe = ROOT / ".venv" / "bin" / "harness-bench"
    proc = subprocess.run(
        [str(exe), "run", "--db", str(tmp_path / "p.duckdb"), "--evalset", "protocol_violations",
         "--evalset", "tool_failures", "--evalset", "budget_exhaustion"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= limit
    assert max(cell_len(line) for line in lines) > limit - 25, "the width is used, not a fixed narrow one"
    assert any(line.startswith("budget_exhaustion ") for line in lines)
