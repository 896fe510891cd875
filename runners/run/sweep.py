"""Sweeps: the full grid of sweepable settings, each point a bench run tagged with one sweep id.

The axes are the sweepable settings of the one declaration (`runners/plan/settings.py`); a setting
declared sweepable later is an axis with no edit here. Resumable as a whole: `--resume SWEEP_ID`
skips completed points, resumes interrupted ones and runs the missing ones, so an interrupted sweep
loses nothing already written.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import duckdb

from runners.plan import run_options, shard
from runners.plan.options import BenchOptions
from runners.plan.rules import BenchInputError
from runners.plan.run_plan import select_cases
from runners.plan.settings import RunSettings, SettingsError, SettingValue, declaration
from runners.run.bench import BenchSummary, StartHook, check_options, endpoint_overrides, run_bench
from runners.store.metrics_db import WRITE_FAILURES, connect, write_statement


class SweepGrid:
    """The values to sweep, one axis per sweepable setting (public name -> values); every combination is
    one point. Settings without an axis keep the base run's value."""

    def __init__(self, axes: Mapping[str, Sequence[SettingValue]] | None = None, /, **by_name: Sequence[SettingValue]):
        merged = {**(axes or {}), **by_name}
        sweepable = {s.name: s for s in declaration().sweepable}
        self.axes: dict[str, tuple[SettingValue, ...]] = {}
        """Public name -> the values of that axis, in the given order."""
        for name, values in merged.items():
            s = sweepable.get(name)
            if s is None:
                raise BenchInputError(
                    f"sweep grid: {name!r} is not a sweepable setting; sweepable: {', '.join(sweepable)}"
                )
            if isinstance(values, str) or not values:
                raise BenchInputError(f"sweep grid: {s.flag} needs a list of values")
            try:
                self.axes[name] = tuple(dict.fromkeys(s.check(v) for v in values))
            except SettingsError as exc:
                raise BenchInputError(f"sweep grid: {exc}") from None

    def points(self, base: RunSettings) -> list[RunSettings]:
        """Every configuration of the grid over `base` (validated; a bad combination names its flags)."""
        names = list(self.axes)
        out = []
        for combo in itertools.product(*self.axes.values()):
            values = dict(zip(names, combo, strict=True))
            try:
                out.append(base.with_values(values))
            except SettingsError as exc:
                point = " ".join(f"{k}={v}" for k, v in values.items())
                raise BenchInputError(f"sweep grid point {point}: {exc}") from None
        return out

    def to_json(self) -> str:
        """The axes as stored in `sweeps.grid_json`."""
        return json.dumps(self.axes)

    def __repr__(self) -> str:
        return f"SweepGrid({self.axes!r})"


@dataclass
class SweepOptions:
    """A sweep: the grid plus what every point shares."""

    grid: SweepGrid
    """The grid."""
    base: BenchOptions = field(default_factory=BenchOptions)
    """Options shared by every point (model settings, cases, epochs, cassettes, db, non-swept settings)."""
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


def _find_point(con: duckdb.DuckDBPyConnection, sweep_id: str, point: RunSettings) -> tuple[str, str] | None:
    row = con.execute(
        "SELECT bench_run_id, status FROM bench_runs WHERE sweep_id = ? AND settings_json = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [sweep_id, point.to_json()],
    ).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def _saved(base: BenchOptions) -> str:
    """What every point shares, as stored in `sweeps.options_json`."""
    return json.dumps({**run_options.saved_values(base), "settings": base.settings.values()})


def load_sweep(con: duckdb.DuckDBPyConnection, sweep_id: str, base: BenchOptions) -> tuple[SweepGrid, BenchOptions]:
    """The grid and shared options of a stored sweep (every setting restored; endpoint settings set in
    `base` — base URL, key variable — replace the stored ones)."""
    row = con.execute("SELECT grid_json, options_json, status FROM sweeps WHERE sweep_id = ?", [sweep_id]).fetchone()
    if row is None:
        raise BenchInputError(f"--resume {sweep_id}: no such sweep in {base.db}")
    if row[2] == "completed":  # like `run --resume` of a completed bench run: nothing to do, nothing rewritten
        raise BenchInputError(f"--resume {sweep_id}: that sweep is already completed")
    saved = json.loads(row[1])
    try:
        grid = SweepGrid({k: tuple(v) for k, v in json.loads(row[0]).items()})
        if "settings" in saved:
            restored = RunSettings.from_values(saved["settings"])
        else:  # written before schema v3
            restored = RunSettings.from_values({"model": saved["model"], "base_url": saved["base_url"]})
        restored = restored.with_values(endpoint_overrides(base.resume_overrides, f"--resume {sweep_id}"))
    except SettingsError as exc:
        raise BenchInputError(f"--resume {sweep_id}: its stored settings are unusable ({exc})") from None
    try:
        restored_options = run_options.restore_saved(saved)
    except ValueError as exc:
        raise BenchInputError(f"--resume {sweep_id}: its stored options are unusable ({exc})") from None
    options = BenchOptions(
        db=base.db,
        concurrency=base.concurrency,
        config=restored.config,
        model_settings=restored.model_settings,
        resume_overrides=base.resume_overrides,
        keep_runs=base.keep_runs,
        cancellation=base.cancellation,
        executor=base.executor,
        ray_address=base.ray_address,
        **restored_options,
    )
    return grid, options


def check_sweep(grid: SweepGrid, base: BenchOptions) -> tuple[list[RunSettings], int]:
    """Everything refusable before a file is touched: the grid points and the shared options.
    Returns the points and the number of cases."""
    points = grid.points(base.settings)
    n_cases = len(check_options(base))
    return points, n_cases


def run_sweep(
    opts: SweepOptions, *, on_progress: SweepProgress | None = None, on_start: StartHook | None = None
) -> SweepSummary:
    """Run (or resume) every grid point. Once `opts.base.cancellation` is set, no new point starts and the
    sweep ends `interrupted` (unless every point had already completed)."""
    if not opts.resume:
        check_sweep(opts.grid, opts.base)  # before the database file is created
    con = connect(opts.base.db)
    try:
        return _sweep(con, opts, on_progress, on_start)
    finally:
        con.close()


def _sweep(
    con: duckdb.DuckDBPyConnection, opts: SweepOptions, on_progress: SweepProgress | None,
    on_start: StartHook | None = None,
) -> SweepSummary:  # fmt: skip
    base = opts.base
    if opts.resume:
        grid, base = load_sweep(con, opts.resume, base)
        sweep_id = opts.resume
    elif base.run_id:
        grid = opts.grid
        sweep_id = shard.sweep_id(base.run_id)
        shard.refuse_existing(con, "sweeps", "sweep_id", [sweep_id], base.db)
    else:
        grid = opts.grid
        sweep_id = f"sw-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    points, n_cases = check_sweep(grid, base)
    cases = select_cases(base.evalsets, base.case_ids) if base.shard else []

    def size(point: RunSettings) -> int:
        # this shard's share of the point (progress only): every (case, epoch) when unsharded
        if base.shard is None:
            return n_cases * base.epochs
        return len(shard.select(base.shard, point, ((c, e) for e in range(1, base.epochs + 1) for c in cases)))

    if opts.resume:
        con.execute("UPDATE sweeps SET status = 'running', finished_at = NULL WHERE sweep_id = ?", [sweep_id])
    else:
        con.execute(
            "INSERT INTO sweeps VALUES (?, now(), NULL, 'running', ?, ?, ?, ?)",
            [sweep_id, base.model_settings.model, base.label, grid.to_json(), _saved(base)],
        )
    if on_start:
        on_start(sweep_id)
    total = sum(size(p) for p in points)
    if on_progress:
        on_progress(0, total)
    done_before = 0
    summaries: list[BenchSummary] = []
    status = "failed"
    stopped = False  # Ctrl-C/SIGTERM (base.cancellation): no new point starts
    try:
        for point in points:
            if base.cancellation.cancelled:
                stopped = True
                break
            found = _find_point(con, sweep_id, point)
            if found and found[1] == "completed":
                done_before += size(point)
                if on_progress:
                    on_progress(done_before, total)
                continue
            point_opts = replace(
                base, config=point.config, model_settings=point.model_settings, sweep_id=sweep_id, keep_runs=False,
                resume=found[0] if found else None,
            )  # fmt: skip
            offset = done_before

            def hook(done: int, _total: int, _run: object, offset: int = offset) -> None:
                if on_progress:
                    on_progress(offset + done, total)

            summaries.append(run_bench(point_opts, on_progress=hook, con=con))
            if summaries[-1].status != "completed":
                stopped = True
                break
            done_before += size(point)
        status = "interrupted" if stopped else "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        try:
            write_statement(con, "UPDATE sweeps SET status = ?, finished_at = now() WHERE sweep_id = ?",
                            [status, sweep_id])  # fmt: skip
        except WRITE_FAILURES:
            if not summaries or summaries[-1].storage_error is None:
                raise  # (else left `running`: the next writer marks it `interrupted`)
            status = "interrupted"
    return SweepSummary(sweep_id, status, len(points), summaries)


def sweep_ids(con: duckdb.DuckDBPyConnection) -> Sequence[str]:
    """Known sweep ids, newest first."""
    return [r[0] for r in con.execute("SELECT sweep_id FROM sweeps ORDER BY started_at DESC").fetchall()]
