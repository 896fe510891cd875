"""The plan of one bench run: its options checked by every flag rule, its model parsed, its cases selected and
the id it writes fixed, frozen, before any file is written. The command line, the Python API and the notebook
reach `run_bench` only with a plan from `plan_run`; the runner reads the plan's fields, never a flag.

A resume is planned too: `plan_run` reads the stored bench run (read only, through the `StoredRuns` the caller
hands in — the store's, `runners.store.resume.STORED_RUNS`; runners/plan/stored_plan.py turns it into options) and
returns the same kind of plan, marked `resumes`, so the runner has one code path for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from runners.domain import profiles
from runners.domain.evalset import EvalCase, load_cases
from runners.domain.model_spec import ModelKind, ModelSpec, ModelSpecError, parse_model
from runners.plan import shard, stored_plan
from runners.plan.executor import Executor
from runners.plan.options import BenchOptions
from runners.plan.rules import BenchInputError, check_options
from runners.plan.settings import RunSettings
from runners.plan.shard import ShardSpec
from runners.plan.stored_plan import StoredRuns

__all__ = ["RunPlan", "plan_model", "plan_run", "planned", "refuse_taken", "select_cases"]


@dataclass(frozen=True, slots=True)
class RunPlan:
    """A validated bench run: what the runner executes."""

    options: BenchOptions
    """The run options (cases asked for, epochs, label, cassettes, where it executes, the database); on resume,
    the stored run's."""
    model: ModelSpec
    """The model under test, parsed."""
    cases: tuple[EvalCase, ...]
    """The cases selected, in order."""
    bench_run_id: str | None = None
    """The id the run writes: the stored run's on resume, derived from `--run-id`, or None (a new one when the run
    starts)."""
    resumes: bool = False
    """The bench run is stored already: its finished case runs are kept, the others run."""

    @property
    def settings(self) -> RunSettings:
        """Every setting of the run (what it measures)."""
        return self.options.settings

    @property
    def shard(self) -> ShardSpec | None:
        """This machine's share of the work (None: all of it)."""
        return self.options.shard

    @property
    def executor(self) -> Executor:
        """Where the case runs execute."""
        return self.options.executor

    @property
    def db(self) -> Path:
        """The DuckDB file the run writes."""
        return self.options.db

    def point(self, settings: RunSettings, sweep_id: str, resume: str | None) -> RunPlan:
        """This plan at one grid point of sweep `sweep_id` (`resume`: the point's stored bench run, to finish)."""
        options = replace(self.options, config=settings.config, model_settings=settings.model_settings,
                          sweep_id=sweep_id, keep_runs=False, resume=resume)  # fmt: skip
        run_id = self.options.run_id
        bench_run_id = resume or (shard.bench_run_id(run_id, settings, in_sweep=True) if run_id else None)
        return RunPlan(options, plan_model(settings.model_settings.model), self.cases, bench_run_id,
                       resume is not None)  # fmt: skip


def plan_model(text: str) -> ModelSpec:
    """The model a run is planned with: its text parsed, a scripted profile checked; `BenchInputError` naming
    the `--model` value and what is wrong."""
    try:
        spec = parse_model(text)
        if spec.kind is ModelKind.SCRIPTED:
            profiles.parse_profile(spec.name)
    except (ModelSpecError, profiles.UnknownProfileError) as exc:
        raise BenchInputError(f"--model {text!r}: {exc}") from None
    return spec


def select_cases(evalsets: Sequence[str], case_ids: Sequence[str]) -> list[EvalCase]:
    """Load and filter cases; unknown case ids are an input error."""
    cases = load_cases(evalsets)
    if case_ids:
        known = {c.id for c in cases}
        unknown = [c for c in case_ids if c not in known]
        if unknown:
            raise BenchInputError(f"unknown case id(s): {', '.join(unknown)}")
        cases = [c for c in cases if c.id in set(case_ids)]
    if not cases:
        raise BenchInputError("no cases selected")
    return cases


def refuse_taken(db: Path, table: str, ids: Sequence[str], stored: StoredRuns) -> None:
    """A named run must not reuse an id already in `db` (`table`: bench_runs or sweeps; read only; nothing to check
    when `db` is not there)."""
    if not db.exists():
        return
    shard.refuse_existing(stored.taken(db, table, ids), db)


def planned(opts: BenchOptions, bench_run_id: str | None = None, *, resumes: bool = False) -> RunPlan:
    """The plan of options whose flag rules passed: the model parsed, the cases selected."""
    model = plan_model(opts.model_settings.model)
    return RunPlan(opts, model, tuple(select_cases(opts.evalsets, opts.case_ids)), bench_run_id, resumes)


def plan_run(opts: BenchOptions, stored: StoredRuns) -> RunPlan:
    """Apply every flag rule to `opts`, parse its model and select its cases; with `opts.resume`, read the stored
    bench run (read only from `opts.db`, through `stored`: the store's reads) and plan it. Raises `BenchInputError`
    (exit 2) naming what is wrong; nothing is written."""
    check_options(opts)
    stored.check_file(opts.db, must_exist=opts.resume is not None)
    if opts.resume:
        resume = opts.resume
        restored = stored_plan.read_bench_run(resume, stored.bench_run(opts.db, resume), opts)
        check_options(restored)  # this invocation's API key for the stored model
        return planned(restored, resume, resumes=True)
    bench_run_id = None
    if opts.run_id:
        bench_run_id = shard.bench_run_id(opts.run_id, opts.settings, in_sweep=opts.sweep_id is not None)
        refuse_taken(opts.db, "bench_runs", [bench_run_id], stored)
    return planned(opts, bench_run_id)
