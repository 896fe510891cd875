"""The plan of a sweep: its grid (one axis per sweepable setting), every grid point validated, the options every
point shares planned as one bench run's, and the sweep id fixed, before any file is written. A resume reads the
stored sweep (read only, runners/plan/stored_plan.py) and returns the same kind of plan, marked `resumes`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from runners.plan import shard, stored_plan
from runners.plan.agent import CONTRACT_SETTINGS, AgentFramework
from runners.plan.options import BenchOptions, ResumeRequest
from runners.plan.rules import BenchInputError, check_options
from runners.plan.run_plan import RunPlan, planned, point_plan, refuse_taken
from runners.plan.settings import RunSettings, SettingsError, SettingValue, declaration
from runners.plan.stored_plan import StoredRuns

__all__ = ["SweepGrid", "SweepOptions", "SweepPlan", "plan_sweep"]


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


@dataclass(frozen=True, slots=True)
class SweepOptions:
    """A sweep: the grid plus what every point shares."""

    grid: SweepGrid
    """The grid."""
    base: BenchOptions = field(default_factory=BenchOptions)
    """Options shared by every point (model settings, cases, epochs, cassettes, db, non-swept settings)."""
    resume: ResumeRequest | None = None
    """The sweep to finish (its flags the resume would ignore among `refused`)."""


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """A validated sweep: what the sweep runner executes."""

    base: RunPlan
    """What every point shares, planned as one bench run (cases, model, epochs, cassettes, database)."""
    grid: SweepGrid
    """The grid (the stored one on resume)."""
    points: tuple[RunPlan, ...]
    """Every grid point's plan, in grid order."""
    sweep_id: str | None = None
    """The id the sweep writes: the stored sweep's on resume, derived from `--run-id`, or None (a new one when
    it starts)."""
    resumes: bool = False
    """The sweep is stored already: completed points are skipped, interrupted ones resumed."""


def plan_sweep(opts: SweepOptions, stored: StoredRuns) -> SweepPlan:
    """Apply every flag rule to the sweep (its shared options, resuming `opts.resume`), validate every
    grid point and plan the shared options and each point; with `opts.resume`, read the stored sweep (read only,
    through `stored`: the store's reads) and plan it.
    Raises `BenchInputError` (exit 2) naming what is wrong; nothing is written."""
    base = replace(opts.base, resume=opts.resume)
    check_options(base)
    db = base.storage.db
    stored.check_file(db, must_exist=opts.resume is not None)
    if opts.resume is not None:
        resume = opts.resume.run_id
        axes, restored = stored_plan.read_sweep(resume, stored.sweep(db, resume), base)
        check_options(restored)  # this invocation's API key
        grid = SweepGrid(axes)
        return _plan(replace(restored, resume=None), grid, resume, resumes=True)
    if base.execution.agent is AgentFramework.PLAIN:
        moot = [n for n, values in opts.grid.axes.items() if n in CONTRACT_SETTINGS and len(values) > 1]
        if moot:
            flag = "--" + moot[0].replace("_", "-")
            raise BenchInputError(
                f"{flag}: the plain loop (--agent plain) has no envelope or information-gain contract, so its runs"
                " would not differ; sweep it with the Harness's loop, or sweep the budgets and model settings"
            )
    sweep_id = None
    if base.storage.run_id:
        sweep_id = shard.sweep_id(base.storage.run_id)
        refuse_taken(db, "sweeps", [sweep_id], stored)
    return _plan(base, opts.grid, sweep_id)


def _plan(base: BenchOptions, grid: SweepGrid, sweep_id: str | None, *, resumes: bool = False) -> SweepPlan:
    shared = planned(base)
    points = tuple(point_plan(shared, settings) for settings in grid.points(base.settings))
    return SweepPlan(shared, grid, points, sweep_id, resumes)
