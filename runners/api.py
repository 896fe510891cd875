"""The bench's Python API, for notebooks and scripts: run cases or a sweep into a DuckDB file, then recommend, gate
and what-if on it. Each function takes typed arguments, applies the rules the command line applies (a value refused
is one line naming its flag: `BenchInputError`) and returns a typed result. Everything a notebook needs is imported
from here; the rest of `runners` is the bench's inside and may change.

    from runners.api import BenchOptions, Objective, RecommendChoices, recommend, sweep

    done = sweep({"no_gain_threshold": (1, 2, 3)}, BenchOptions.of(evalsets=["empty_logs"], db="bench.duckdb"))
    print(recommend("bench.duckdb", done.sweep_id, RecommendChoices(objective=Objective.TOKENS)).reasoning)

Every flag of `run` and `sweep` is a name `BenchOptions.of` takes: the agent loop (`agent=AgentFramework.PLAIN`, the
loop without the Harness), how tools are asked for (`tool_choice=`, one of `TOOL_CHOICE_MODES` or a tool's name),
cassettes (`cassettes=`, `record_mode=RecordMode.NONE`), and every setting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from harness import CancellationToken
from runners.decisions.choices import Objective, RecommendChoices, Rule
from runners.decisions.gate import GateInputError, GateResult, Verdict, evaluate, evaluate_sequential
from runners.decisions.gate_thresholds import DEFAULTS as GATE_DEFAULTS
from runners.decisions.gate_thresholds import GateThresholds
from runners.decisions.recommend import ConfigStats, Recommendation
from runners.decisions.whatif import WhatIf
from runners.plan.agent import AgentFramework
from runners.plan.flags import BenchInputError
from runners.plan.options import BenchOptions, Execution, RecordMode, Replay, Selection, Storage
from runners.plan.settings import TOOL_CHOICE_MODES, RunSettings, SettingValue
from runners.plan.sweep_plan import SweepGrid, SweepOptions
from runners.run.bench import BenchSummary, ProgressHook
from runners.run.sweep import SweepProgress, SweepSummary

__all__ = [
    "TOOL_CHOICE_MODES",
    "AgentFramework",
    "BenchInputError",
    "BenchOptions",
    "BenchSummary",
    "ConfigStats",
    "Execution",
    "GateResult",
    "GateThresholds",
    "Objective",
    "RecommendChoices",
    "Recommendation",
    "RecordMode",
    "Replay",
    "Rule",
    "RunSettings",
    "Selection",
    "SettingValue",
    "Storage",
    "SweepSummary",
    "Verdict",
    "WhatIf",
    "gate",
    "recommend",
    "run",
    "sweep",
    "sweeps",
    "whatif",
]


def run(
    options: BenchOptions, *, cancellation: CancellationToken | None = None, on_progress: ProgressHook | None = None,
    keep_runs: bool = True,
) -> BenchSummary:  # fmt: skip
    """Plan and run one bench run (or resume one: `BenchOptions.of(resume=ID, db=...)`): every case × epoch of
    `options` into its database. Once `cancellation` is set, no case run starts and the run ends `interrupted`.
    `keep_runs` False: the summary keeps no case run (memory stays flat over a large run; they are in the database)."""
    from runners.plan.run_plan import plan_run
    from runners.run.bench import run_bench
    from runners.store.resume import STORED_RUNS

    return run_bench(plan_run(options, STORED_RUNS), cancellation=cancellation, on_progress=on_progress,
                     keep_runs=keep_runs)  # fmt: skip


def sweep(
    grid: Mapping[str, Sequence[SettingValue]], options: BenchOptions, *, cancellation: CancellationToken | None = None,
    on_progress: SweepProgress | None = None,
) -> SweepSummary:  # fmt: skip
    """Plan and run a sweep: one bench run per combination of the `grid`'s values (sweepable settings by name, e.g.
    `{"no_gain_threshold": (1, 2, 3)}`), the rest of each run `options`'. With `options.resume` (a sweep id), the
    stored sweep is finished and `grid` must be empty."""
    from runners.plan.sweep_plan import plan_sweep
    from runners.run.sweep import run_sweep
    from runners.store.resume import STORED_RUNS

    if options.resume is not None and grid:
        raise BenchInputError(f"--resume {options.resume.run_id} restores the stored grid; give no grid")
    base = BenchOptions(options.selection, options.settings, options.storage, options.execution, options.replay)
    plan = plan_sweep(SweepOptions(SweepGrid(grid), base, options.resume), STORED_RUNS)
    return run_sweep(plan, cancellation=cancellation, on_progress=on_progress)


def sweeps(db: Path | str) -> list[str]:
    """The sweep ids `db` holds, newest first."""
    from runners.store.connection import connect
    from runners.store.runs import sweep_ids

    con = connect(Path(db), read_only=True)
    try:
        return list(sweep_ids(con))
    finally:
        con.close()


def recommend(db: Path | str, sweep_id: str | None = None, choices: RecommendChoices | None = None) -> Recommendation:
    """The configuration sweep `sweep_id` (default: the newest in `db`) recommends, and why (`.reasoning`), by
    `choices` (objective, rule, margin; default: the command's)."""
    from runners.decisions.recommend import measure
    from runners.decisions.recommend import recommend as pick
    from runners.store.connection import connect
    from runners.store.runs import sweep_ids

    choices = choices or RecommendChoices()
    con = connect(Path(db), read_only=True)
    try:
        known = sweep_ids(con)
        chosen = sweep_id or (known[0] if known else None)
        if chosen is None:
            raise BenchInputError(f"{db} holds no sweeps; run a sweep first")
        if chosen not in known:
            raise BenchInputError(f"--sweep: unknown sweep {chosen!r} in {db}; known: {', '.join(known[:5]) or 'none'}")
        stats = measure(con, chosen)
    finally:
        con.close()
    if not stats:
        raise BenchInputError(f"sweep {chosen} has no case runs yet")
    return pick(stats, choices.objective, rule=choices.rule, margin=choices.margin)


def gate(
    db: Path | str, baseline: str, candidate: str, thresholds: GateThresholds = GATE_DEFAULTS, *,
    bench_runs: Sequence[str] = (), sequential: bool = False,
) -> GateResult:  # fmt: skip
    """Compare the `candidate` label's case runs with the `baseline` label's on the same cases and epochs (from
    `bench_runs` when a label is used by several), by `thresholds`; `sequential`: a group-sequential gate (a look
    every `thresholds.stage` epochs up to `thresholds.budget`). The result's `verdict` is PASS, REGRESSION or
    INCONCLUSIVE."""
    from runners.decisions.gate import load_pairs, pick_bench_runs
    from runners.store.connection import connect

    t = thresholds
    con = connect(Path(db), read_only=True)
    try:
        try:
            runs = pick_bench_runs(con, list(bench_runs), baseline, candidate)
            pairs = load_pairs(con, baseline, candidate, baseline_run=runs.baseline, candidate_run=runs.candidate)
        except GateInputError as exc:
            raise BenchInputError(str(exc)) from None
    finally:
        con.close()
    try:
        if sequential:
            result = evaluate_sequential(
                pairs, baseline, candidate, budget=t.budget, stage=t.stage, target_mde=t.target_mde, k=t.k,
                max_recall_drop=t.max_recall_drop, max_cost_increase=t.max_cost_increase, alpha=t.alpha,
                max_mde=t.max_mde,
            )  # fmt: skip
        else:
            result = evaluate(pairs, baseline, candidate, k=t.k, max_recall_drop=t.max_recall_drop,
                              max_cost_increase=t.max_cost_increase, alpha=t.alpha, max_mde=t.max_mde)  # fmt: skip
    except GateInputError as exc:
        raise BenchInputError(str(exc)) from None
    return replace(result, db=str(db))  # its `harness-bench diff` commands name this file


def whatif(
    db: Path | str, thresholds: Sequence[int], *, label: str | None = None, bench_run: str | None = None,
    tool_budgets: Sequence[int] = (),
) -> WhatIf:  # fmt: skip
    """What lower NO_GAIN `thresholds` (and `tool_budgets`) would have saved on the stored case runs of `label` (every
    bench run of it) or of one `bench_run` (give one of the two), replayed exactly from their recorded gain
    evaluations."""
    from runners.decisions.whatif import WhatIfInputError
    from runners.decisions.whatif import whatif as replay
    from runners.store.connection import connect
    from runners.store.replayable_runs import bench_run_exists, label_exists, runs_of_bench_run, runs_of_label

    if (label is None) == (bench_run is None):
        raise BenchInputError("give one of --label and --bench-run")
    con = connect(Path(db), read_only=True)
    try:
        if bench_run is not None:
            if not bench_run_exists(con, bench_run):
                raise BenchInputError(f"--bench-run: unknown bench run {bench_run!r} in {db}")
            runs = runs_of_bench_run(con, str(db), bench_run)
        else:
            assert label is not None
            if not label_exists(con, label):
                raise BenchInputError(f"--label: no case runs labelled {label!r} in {db}")
            runs = runs_of_label(con, str(db), label)
    finally:
        con.close()
    try:
        return replay(runs, thresholds, tool_budgets)
    except WhatIfInputError as exc:
        raise BenchInputError(str(exc)) from None
