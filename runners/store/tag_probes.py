"""The `tag_probes` table: what a model answered at each probe of `harness-bench tag-probe`, beside the observation's
truth grade; written probe by probe after the probe's case run, read back for the confusion (`report`, the JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import duckdb

from harness import InformationGain
from runners.domain.probe_answers import ProbeAnswer
from runners.domain.truth_grades import TruthGrade
from runners.store.writer import write_statement

__all__ = ["StoredProbe", "probe_bench_runs", "store_probe", "stored_probes"]

_COLUMNS = ("bench_run_id", "case_run_id", "case_id", "step", "tool_call_id", "answer", "tag", "implied", "grade")


@dataclass(frozen=True, slots=True)
class StoredProbe:
    """One row of `tag_probes`."""

    bench_run_id: str
    """The tag-probe bench run."""
    case_run_id: str
    """The probe's case run."""
    case_id: str
    """The case."""
    step: int
    """The reference step probed (1-based)."""
    tool_call_id: str
    """That step's call in the teacher-forced conversation."""
    answer: ProbeAnswer
    """What the model answered."""
    tag: InformationGain | None
    """The tag the Harness applied from the model's envelope."""
    implied: InformationGain | None
    """What a Draft implies."""
    grade: TruthGrade
    """The observation's truth grade."""


def store_probe(con: duckdb.DuckDBPyConnection, probe: StoredProbe) -> None:
    """Write one probe's row (after its case run's rows); a storage failure raises MetricsWriteError."""
    marks = ", ".join("?" for _ in _COLUMNS)
    values = [v.value if isinstance(v, Enum) else v for v in (getattr(probe, c) for c in _COLUMNS)]
    write_statement(con, f"INSERT OR REPLACE INTO tag_probes ({', '.join(_COLUMNS)}) VALUES ({marks})", values)


def stored_probes(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> list[StoredProbe]:
    """Every probe of a tag-probe bench run, by case and step."""
    rows = con.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM tag_probes WHERE bench_run_id = ? ORDER BY case_id, step", [bench_run_id]
    ).fetchall()
    return [
        StoredProbe(str(b), str(r), str(c), int(s), str(t), ProbeAnswer(a), InformationGain(g) if g else None,
                    InformationGain(i) if i else None, TruthGrade(gr))
        for b, r, c, s, t, a, g, i, gr in rows
    ]  # fmt: skip


def probe_bench_runs(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """Every tag-probe bench run as (bench run id, its model's label or model), newest first."""
    rows = con.execute(
        """SELECT p.bench_run_id, coalesce(any_value(c.label), any_value(c.model)) AS who, max(b.started_at) AS t
           FROM tag_probes p JOIN case_runs c USING (case_run_id) JOIN bench_runs b ON b.bench_run_id = p.bench_run_id
           GROUP BY p.bench_run_id ORDER BY t DESC"""
    ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]
