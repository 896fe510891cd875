"""The plan of one bench run: its options checked by every flag rule, its model parsed, its cases selected, this
shard's work listed, the id it writes fixed and what it records of itself computed, frozen, before any file is
written. The command line, the Python API and the notebook reach `run_bench` only with a plan from `plan_run`; the
runner reads the plan's fields (never a flag, never the planner again).

A resume is planned too: `plan_run` reads the stored bench run (read only, through the `StoredRuns` the caller
hands in — the store's, `runners.store.resume.STORED_RUNS`; runners/plan/stored_plan.py turns it into options) and
returns the same kind of plan, marked `resumes`, so the runner has one code path for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from runners.domain.evalset import EvalCase, content_hash, load_cases
from runners.domain.model_spec import ModelSpec
from runners.domain.redaction import Secrets
from runners.domain.suggest import did_you_mean
from runners.plan import shard, stored_plan
from runners.plan.flags import StoredValue
from runners.plan.options import BenchOptions, DeclaredColumns, declared_columns
from runners.plan.rules import BenchInputError, check_options
from runners.plan.settings import RunSettings, SettingValue
from runners.plan.stored_plan import StoredRuns

__all__ = ["RunPlan", "RunRecord", "plan_run", "planned", "point_plan", "refuse_taken", "select_cases"]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What a bench run records of itself, computed when it is planned (the runner writes it as it is)."""

    evalset_hash: str
    """Content hash of the selected cases."""
    settings_json: str
    """Every setting as stored, as canonical JSON (what a resume reads)."""
    setting_columns: Mapping[str, SettingValue]
    """Every setting as stored (the base URL without credentials), by column."""
    option_columns: Mapping[str, StoredValue]
    """Every option the run keeps in a `bench_runs` column, by column."""
    swept: Mapping[str, SettingValue]
    """The grid coordinates every case run carries (its `case_runs` setting columns)."""
    columns: DeclaredColumns
    """The columns the declared settings and options ask of the database (added to a file made before one was)."""


@dataclass(frozen=True, slots=True)
class RunPlan:
    """A validated bench run: what the runner executes, every value it reads computed here."""

    options: BenchOptions
    """The run's options (cases asked for, epochs, label, cassettes, where it executes, the database); on resume,
    the stored run's."""
    model: ModelSpec
    """The model under test, parsed."""
    cases: tuple[EvalCase, ...]
    """The cases selected, in order."""
    work: tuple[tuple[EvalCase, int], ...]
    """This shard's (case, epoch) items, epoch by epoch (all of them without a shard)."""
    record: RunRecord
    """What the run records of itself."""
    secrets: Secrets
    """The values no row or printed line may hold (the base URL's credentials, the key)."""
    harnessed: bool
    """The Harness drives every case run (every agent loop but the plain one): its invariants are judged, and a
    scripted trajectory's bounds may be."""
    bench_run_id: str | None = None
    """The id the run writes: the stored run's on resume, derived from `--run-id`, or None (a new one when the run
    starts)."""
    resumes: bool = False
    """The bench run is stored already: its finished case runs are kept, the others run."""
    sweep_id: str | None = None
    """The sweep the run is a point of (the runner of a new sweep sets it once the sweep has its id)."""


def select_cases(evalsets: Sequence[str], case_ids: Sequence[str]) -> list[EvalCase]:
    """Load and filter cases; unknown case ids are an input error."""
    cases = load_cases(evalsets)
    if case_ids:
        known = {c.id for c in cases}
        unknown = [c for c in case_ids if c not in known]
        if unknown:
            hint = did_you_mean(unknown[0], known) if len(unknown) == 1 else ""
            raise BenchInputError(f"unknown case id(s): {', '.join(unknown)}{hint}")
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


def _record(opts: BenchOptions, cases: Sequence[EvalCase]) -> RunRecord:
    run = opts.settings
    values = run.values()
    columns = declared_columns()
    return RunRecord(content_hash(cases), run.to_json(), run.stored_values(), opts.column_values(),
                     {name: values[name] for name, _ in columns.case_columns}, columns)  # fmt: skip


def planned(
    opts: BenchOptions, bench_run_id: str | None = None, *, resumes: bool = False, sweep_id: str | None = None,
    cases: Sequence[EvalCase] | None = None,
) -> RunPlan:  # fmt: skip
    """The plan of options whose flag rules passed: the model parsed, the cases selected (or `cases`, a sweep's
    already selected), this shard's work listed, what the run records computed."""
    model = opts.settings.model_settings.model  # parsed once, when the settings were made
    selected = tuple(cases) if cases is not None else tuple(select_cases(opts.selection.evalsets,
                                                                         opts.selection.case_ids))  # fmt: skip
    items = [(c, e) for e in range(1, opts.selection.epochs + 1) for c in selected]
    work = tuple(shard.select(opts.execution.shard, opts.settings, items))
    secrets = Secrets.of(opts.settings.model_settings.base_url, opts.settings.model_settings.api_key_env)
    harnessed = opts.execution.agent.harnessed
    return RunPlan(opts, model, selected, work, _record(opts, selected), secrets, harnessed, bench_run_id, resumes,
                   sweep_id)  # fmt: skip


def plan_run(opts: BenchOptions, stored: StoredRuns) -> RunPlan:
    """Apply every flag rule to `opts`, parse its model and select its cases; with `opts.resume`, read the stored
    bench run (read only from the database, through `stored`: the store's reads) and plan it. Raises
    `BenchInputError` (exit 2) naming what is wrong; nothing is written."""
    check_options(opts)
    db = opts.storage.db
    stored.check_file(db, must_exist=opts.resume is not None)
    if opts.resume is not None:
        resume = opts.resume.run_id
        row = stored.bench_run(db, resume)
        restored = stored_plan.read_bench_run(resume, row, opts)
        check_options(restored)  # this invocation's API key for the stored model
        return planned(restored, resume, resumes=True, sweep_id=row.sweep_id if row is not None else None)
    bench_run_id = None
    if opts.storage.run_id:
        bench_run_id = shard.bench_run_id(opts.storage.run_id, opts.settings, in_sweep=False)
        refuse_taken(db, "bench_runs", [bench_run_id], stored)
    return planned(opts, bench_run_id)


def point_plan(base: RunPlan, settings: RunSettings) -> RunPlan:
    """`base` (a sweep's shared plan) at one grid point: its settings, its share of the work, its record and (for a
    named sweep) its id; the sweep's runner sets the sweep id and, for a point stored already, the resume."""
    options = replace(base.options, settings=settings)
    run_id = options.storage.run_id
    bench_run_id = shard.bench_run_id(run_id, settings, in_sweep=True) if run_id else None
    return planned(options, bench_run_id, cases=base.cases)
