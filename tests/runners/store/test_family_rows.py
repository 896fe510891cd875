"""The end-of-run per-family summary (`family_rows`) says what DuckDB's own aggregates say of the same rows: the
counts per outcome and stop reason `histogram` gives, the means `avg` gives, NULLs left out as they leave them out."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.store.connection import connect_in_memory
from runners.store.runs import FamilyRow, family_rows

REFERENCE = """
SELECT family, count(*), avg(passed::INT),
       histogram(outcome || coalesce('/' || fallback_kind, '')),
       histogram(coalesce(stop_reason, CASE WHEN error IS NULL THEN 'NONE' ELSE 'ERROR' END)),
       avg(tool_invocations), avg(tool_rejections), avg(wasted_invocations), count(*) FILTER (WHERE passed IS NULL)
FROM case_runs WHERE bench_run_id = ? GROUP BY family ORDER BY family
"""
"""The summary as DuckDB's aggregates compute it."""

_count = st.integers(min_value=0, max_value=40)
_row = st.tuples(
    st.sampled_from(["diagnosable", "empty_logs", "tool_failures"]),
    st.sampled_from(["SUCCESS", "FALLBACK", None]),
    st.sampled_from(["INSUFFICIENT_EVIDENCE", "BUDGET", None]),
    st.sampled_from(["NO_GAIN_THRESHOLD", "MODEL_CALL_BUDGET", None]),
    st.sampled_from(["boom", None]),
    st.sampled_from([True, False, None]),
    _count,
    _count,
    _count,
)


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect_in_memory("<the test's database>")
    yield con
    con.close()


@settings(max_examples=60)
@given(rows=st.lists(_row, min_size=1, max_size=30), other=st.lists(_row, max_size=5))
def test_the_summary_is_what_duckdbs_aggregates_say(
    con: duckdb.DuckDBPyConnection, rows: list[tuple[object, ...]], other: list[tuple[object, ...]]
) -> None:
    con.execute("DELETE FROM case_runs")
    for bench, batch in (("b1", rows), ("b2", other)):  # another bench run's rows are no part of it
        if not batch:
            continue
        con.executemany(
            "INSERT INTO case_runs (bench_run_id, case_run_id, case_id, family, outcome, fallback_kind, stop_reason,"
            " error, passed, tool_invocations, tool_rejections, wasted_invocations)"
            " VALUES (?, ?, 'c', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(bench, f"{bench}/{i}", *row) for i, row in enumerate(batch)],
        )
    expected = [
        # a family whose every outcome is NULL has no outcome histogram (NULL): none counted
        FamilyRow(str(f), int(n), None if p is None else float(p), dict(o or {}), dict(s), float(t), float(r),
                  float(w), int(b))
        for f, n, p, o, s, t, r, w, b in con.execute(REFERENCE, ["b1"]).fetchall()
    ]  # fmt: skip
    got = family_rows(con, "b1")
    assert got == expected
    assert [list(r.outcomes) for r in got] == [list(r.outcomes) for r in expected]  # in the same order
