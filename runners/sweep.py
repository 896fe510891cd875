"""Sweeps: the full grid of thresholds and budgets, each point a bench run tagged with one sweep id.

Resumable as a whole: `--resume SWEEP_ID` skips completed points, resumes interrupted ones and
runs the missing ones, so an interrupted sweep loses nothing already written.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from harness.config import HarnessConfig
from runners.bench import BenchInputError, BenchOptions, BenchSummary, run_bench, select_cases
from runners.metrics_db import connect


@dataclass(frozen=True)
class SweepGrid:
    """The values to sweep; every combination is one point."""

    no_gain_threshold: tuple[int, ...] = (2,)
    """NO_GAIN thresholds."""
    protocol_violation_threshold: tuple[int, ...] = (2,)
    """Protocol-violation thresholds."""
    max_tool_calls: tuple[int, ...] = (10,)
    """Tool invocation budgets."""
    max_model_calls: tuple[int, ...] = (12,)
    """Model call budgets."""
    max_tokens: tuple[int, ...] = (200_000,)
    """Token budgets."""

    def points(self) -> list[HarnessConfig]:
        """Every configuration of the grid (validated; a bad value names its field)."""
        for name, values in asdict(self).items():
            if not values:
                raise BenchInputError(f"sweep grid: --{name.replace('_', '-')} has no values")
        return [
            HarnessConfig(
                no_gain_threshold=ng, protocol_violation_threshold=pv, max_tool_invocations=tc,
                max_model_calls=mc, max_total_tokens=tk,
            )
            for ng, pv, tc, mc, tk in itertools.product(
                self.no_gain_threshold, self.protocol_violation_threshold, self.max_tool_calls,
                self.max_model_calls, self.max_tokens,
            )
        ]  # fmt: skip


def parse_values(text: str, flag: str) -> tuple[int, ...]:
    """`1,2,3` -> (1, 2, 3), naming the flag on a bad value."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise BenchInputError(f"{flag} {text!r}: expected comma-separated integers like 1,2,3") from None
    if not values:
        raise BenchInputError(f"{flag}: the grid is empty")
    return values


@dataclass
class SweepOptions:
    """A sweep: the grid plus what every point shares."""

    grid: SweepGrid
    """The grid."""
    base: BenchOptions = field(default_factory=BenchOptions)
    """Options shared by every point (model, cases, epochs, cassettes, db)."""
    resume: str | None = None
    """Sweep id to finish."""


@dataclass
class SweepSummary:
    """What a sweep did."""

    sweep_id: str
    """Its id."""
    status: str
    """completed | interrupted | failed."""
    points: int
    """Grid points."""
    bench_runs: list[BenchSummary]
    """One per point run by this invocation."""


SweepProgress = Callable[[int, int], None]


def _find_point(con: duckdb.DuckDBPyConnection, sweep_id: str, cfg: HarnessConfig) -> tuple[str, str] | None:
    row = con.execute(
        "SELECT bench_run_id, status FROM bench_runs WHERE sweep_id = ? AND config_json = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [sweep_id, cfg.model_dump_json()],
    ).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def run_sweep(opts: SweepOptions, *, on_progress: SweepProgress | None = None) -> SweepSummary:
    """Run (or resume) every grid point."""
    con = connect(opts.base.db)
    try:
        return _sweep(con, opts, on_progress)
    finally:
        con.close()


def _sweep(con: duckdb.DuckDBPyConnection, opts: SweepOptions, on_progress: SweepProgress | None) -> SweepSummary:
    base = opts.base
    if opts.resume:
        row = con.execute(
            "SELECT grid_json, options_json, status FROM sweeps WHERE sweep_id = ?", [opts.resume]
        ).fetchone()
        if row is None:
            raise BenchInputError(f"--resume {opts.resume}: no such sweep in {base.db}")
        grid = SweepGrid(**{k: tuple(v) for k, v in json.loads(row[0]).items()})
        saved = json.loads(row[1])
        base = BenchOptions(
            evalsets=saved["evalsets"], case_ids=saved["case_ids"], model=saved["model"], db=base.db,
            label=saved["label"], epochs=saved["epochs"], concurrency=base.concurrency,
            cassettes=Path(saved["cassettes"]) if saved["cassettes"] else None, record_mode=saved["record_mode"],
            base_url=saved["base_url"], api_key_env=base.api_key_env, keep_runs=base.keep_runs,
        )  # fmt: skip
        sweep_id = opts.resume
        con.execute("UPDATE sweeps SET status = 'running', finished_at = NULL WHERE sweep_id = ?", [sweep_id])
    else:
        grid = opts.grid
        sweep_id = f"sw-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        saved = {
            "evalsets": base.evalsets, "case_ids": base.case_ids, "model": base.model, "label": base.label,
            "epochs": base.epochs, "cassettes": str(base.cassettes) if base.cassettes else None,
            "record_mode": base.record_mode, "base_url": base.base_url,
        }  # fmt: skip
    points = grid.points()
    n_cases = len(select_cases(base.evalsets, base.case_ids))
    if not opts.resume:
        con.execute(
            "INSERT INTO sweeps VALUES (?, now(), NULL, 'running', ?, ?, ?, ?)",
            [sweep_id, base.model, base.label, json.dumps(asdict(grid)), json.dumps(saved)],
        )
    total = len(points) * n_cases * base.epochs
    done_before = 0
    summaries: list[BenchSummary] = []
    status = "failed"
    try:
        for cfg in points:
            found = _find_point(con, sweep_id, cfg)
            if found and found[1] == "completed":
                done_before += n_cases * base.epochs
                if on_progress:
                    on_progress(done_before, total)
                continue
            point = BenchOptions(**{**base.__dict__, "config": cfg, "sweep_id": sweep_id, "keep_runs": False,
                                    "resume": found[0] if found else None})  # fmt: skip
            offset = done_before

            def hook(done: int, _total: int, _run: object, offset: int = offset) -> None:
                if on_progress:
                    on_progress(offset + done, total)

            summaries.append(run_bench(point, on_progress=hook, con=con))
            done_before += n_cases * base.epochs
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        con.execute("UPDATE sweeps SET status = ?, finished_at = now() WHERE sweep_id = ?", [status, sweep_id])
    return SweepSummary(sweep_id, status, len(points), summaries)


def sweep_ids(con: duckdb.DuckDBPyConnection) -> Sequence[str]:
    """Known sweep ids, newest first."""
    return [r[0] for r in con.execute("SELECT sweep_id FROM sweeps ORDER BY started_at DESC").fetchall()]
