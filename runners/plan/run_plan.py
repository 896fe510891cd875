"""The plan of one bench run: its options checked by every flag rule, its model parsed and its cases selected,
frozen, before any file is opened. The command line, the Python API (`run_bench`, `run_sweep`) and the notebook
reach a run only through `plan_run`; the runner reads the plan's fields, never a flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runners.domain.evalset import EvalCase, load_cases
from runners.plan.executor import Executor
from runners.plan.options import BenchOptions, ModelSpec, request_of
from runners.plan.rules import BenchInputError, check_run_request
from runners.plan.settings import RunSettings
from runners.plan.shard import ShardSpec

__all__ = ["RunPlan", "plan_run", "select_cases"]


@dataclass(frozen=True, slots=True)
class RunPlan:
    """A validated bench run: what the runner executes."""

    options: BenchOptions
    """The run options (cases asked for, epochs, label, cassettes, where it executes, the database)."""
    model: ModelSpec
    """The model under test, parsed."""
    cases: tuple[EvalCase, ...]
    """The cases selected, in order."""

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


def plan_run(opts: BenchOptions) -> RunPlan:
    """Apply every flag rule to `opts`, parse its model and select its cases; raises `BenchInputError` (exit 2)
    naming what is wrong. Nothing is opened or written."""
    check_run_request(request_of(opts))
    model = ModelSpec.parse(opts.model_settings.model)
    return RunPlan(opts, model, tuple(select_cases(opts.evalsets, opts.case_ids)))
