"""The bench's Python API, for notebooks and scripts: run cases or a sweep into a DuckDB file, then recommend, gate
and what-if on it. Each function takes typed arguments, applies the rules the command line applies (every flag's
type, bounds and parser — a label's allowlist among them — and the flag rules between them) and returns a typed
result. Every bad input, whatever its type or value, is one exception type, `BenchInputError`, whose message is one
line naming the flag or argument; nothing is written before it is raised. Everything a notebook needs is imported
from here; the rest of `runners` is the bench's inside and may change.

    from runners.api import BenchOptions, Objective, RecommendChoices, recommend, sweep

    done = sweep({"no_gain_threshold": (1, 2, 3)}, BenchOptions.of(evalsets=["empty_logs"], db="bench.duckdb"))
    print(recommend("bench.duckdb", done.sweep_id, RecommendChoices(objective=Objective.TOKENS)).reasoning)

Every flag of `run` and `sweep` is a name `BenchOptions.of` takes, and `run` and `sweep` take as keywords
(`run(case_ids=[...], db="b.duckdb", label="nightly")`): the agent loop (`agent=AgentFramework.PLAIN`, the
loop without the Harness), how tools are asked for (`tool_choice=`, one of `TOOL_CHOICE_MODES` or a tool's name),
cassettes (`cassettes=`, `record_mode=RecordMode.NONE`), and every setting.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness import CancellationToken
from runners.decisions.choices import Objective, RecommendChoices, Rule
from runners.decisions.gate import GateInputError, GateResult, Verdict, evaluate, evaluate_sequential
from runners.decisions.gate_thresholds import DEFAULTS as GATE_DEFAULTS
from runners.decisions.gate_thresholds import GateThresholds
from runners.decisions.recommend import ConfigStats, Recommendation
from runners.decisions.whatif import WhatIf
from runners.plan._bounds import value_text
from runners.plan.agent import AgentFramework
from runners.plan.flags import BenchInputError
from runners.plan.options import BenchOptions, Execution, RecordMode, Replay, Selection, Storage
from runners.plan.python_values import given_label, given_path, given_setting_values, given_text, given_type, optional
from runners.plan.settings import TOOL_CHOICE_MODES, RunSettings, SettingValue
from runners.plan.sweep_plan import SweepGrid, SweepOptions
from runners.run.bench import BenchSummary, ProgressHook
from runners.run.sweep import SweepProgress, SweepSummary

if TYPE_CHECKING:
    import duckdb

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
    options: BenchOptions | None = None, *, cancellation: CancellationToken | None = None,
    on_progress: ProgressHook | None = None, keep_runs: bool = True, **values: object,
) -> BenchSummary:  # fmt: skip
    """Plan and run one bench run (or resume one: `resume=ID, db=...`): every case × epoch into its database. Its
    options are `options`, or the names `BenchOptions.of` takes (`run(case_ids=[...], db="b.duckdb", label="x")`),
    or both (the names over `options`). Once `cancellation` is set, no case run starts and the run ends
    `interrupted`. `keep_runs` False: the summary keeps no case run (memory stays flat over a large run; they are in
    the database). Bad input is a `BenchInputError` before anything is written."""
    from runners.plan.run_plan import plan_run
    from runners.run.bench import run_bench
    from runners.store.resume import STORED_RUNS

    with _refusals():
        opts = _options(options, values)
        _hooks(cancellation, on_progress, keep_runs=keep_runs)
        plan = plan_run(opts, STORED_RUNS)
        return run_bench(plan, cancellation=cancellation, on_progress=on_progress, keep_runs=keep_runs)


def sweep(
    grid: Mapping[str, Sequence[SettingValue]] | None = None, options: BenchOptions | None = None, *,
    cancellation: CancellationToken | None = None, on_progress: SweepProgress | None = None, **values: object,
) -> SweepSummary:  # fmt: skip
    """Plan and run a sweep: one bench run per combination of the `grid`'s values (sweepable settings by name, e.g.
    `{"no_gain_threshold": (1, 2, 3)}`; none: one point), the rest of each run `options` and the names
    `BenchOptions.of` takes in `values`. With `resume` (a sweep id), the stored sweep is finished and `grid` must be
    empty. Bad input is a `BenchInputError` before anything is written."""
    from runners.plan.sweep_plan import plan_sweep
    from runners.run.sweep import run_sweep
    from runners.store.resume import STORED_RUNS

    with _refusals():
        if grid is not None and not isinstance(grid, Mapping):
            raise BenchInputError(f"grid: expected a mapping of setting name to values, not {type(grid).__name__}")
        grid = grid or {}
        opts = _options(options, values)
        _hooks(cancellation, on_progress)
        if opts.resume is not None and grid:
            raise BenchInputError(f"--resume {opts.resume.run_id} restores the stored grid; give no grid")
        base = BenchOptions(opts.selection, opts.settings, opts.storage, opts.execution, opts.replay)
        plan = plan_sweep(SweepOptions(SweepGrid(grid), base, opts.resume), STORED_RUNS)
        return run_sweep(plan, cancellation=cancellation, on_progress=on_progress)


def sweeps(db: Path | str) -> list[str]:
    """The sweep ids `db` holds, newest first."""
    from runners.store.runs import sweep_ids

    with _refusals(), _reading(db) as con:
        return list(sweep_ids(con))


def recommend(db: Path | str, sweep_id: str | None = None, choices: RecommendChoices | None = None) -> Recommendation:
    """The configuration sweep `sweep_id` (default: the newest in `db`) recommends, and why (`.reasoning`), by
    `choices` (objective, rule, margin; default: the command's)."""
    from runners.decisions.recommend import measure
    from runners.decisions.recommend import recommend as pick
    from runners.store.runs import sweep_ids

    with _refusals():
        sweep_id = optional(given_text, sweep_id, "--sweep")
        choices = RecommendChoices() if choices is None else given_type(choices, RecommendChoices, "choices")
        with _reading(db) as con:
            known = sweep_ids(con)
            chosen = sweep_id or (known[0] if known else None)
            if chosen is None:
                raise BenchInputError(f"--db {db}: holds no sweeps; run a sweep first")
            if chosen not in known:
                shown = ", ".join(known[:5]) or "none"
                raise BenchInputError(f"--sweep: unknown sweep {chosen!r} in {db}; known: {shown}")
            stats = measure(con, chosen)
        if not stats:
            raise BenchInputError(f"--sweep {chosen}: the sweep has no case runs yet")
        return pick(stats, choices.objective, rule=choices.rule, margin=choices.margin)


def gate(
    db: Path | str, baseline: str, candidate: str, thresholds: GateThresholds = GATE_DEFAULTS, *,
    bench_runs: Sequence[str] = (), sequential: bool = False,
) -> GateResult:  # fmt: skip
    """Compare the `candidate` label's case runs with the `baseline` label's on the same cases and epochs (from
    `bench_runs` when a label is used by several), by `thresholds`; `sequential`: a group-sequential gate (a look
    every `thresholds.stage` epochs up to `thresholds.budget`). The result's `verdict` is PASS, REGRESSION or
    INCONCLUSIVE; its `loops` names the two agent loops when the sides ran different ones (the gate then compares
    loops, not models)."""
    from runners.decisions.gate import compared_loops, load_pairs, pick_bench_runs, sequential_looks, validate_flags

    with _refusals():
        baseline, candidate = given_label(baseline, "--baseline"), given_label(candidate, "--candidate")
        t = given_type(thresholds, GateThresholds, "thresholds")
        sequential = given_type(sequential, bool, "sequential")
        if isinstance(bench_runs, str) or not isinstance(bench_runs, Sequence):
            raise BenchInputError(f"--bench-run {value_text(bench_runs)}: expected a list of bench run ids")
        picked = [given_text(r, "--bench-run") for r in bench_runs]
        validate_flags(k=t.k, max_recall_drop=t.max_recall_drop, max_cost_increase=t.max_cost_increase,
                       alpha=t.alpha, max_mde=t.max_mde)  # fmt: skip
        if sequential:
            sequential_looks(t.budget, t.stage)
        else:  # the command line's rules: what only a sequential gate reads is refused without one
            ignored = [f"--{n.replace('_', '-')}" for n in ("budget", "stage", "target_mde")
                       if getattr(t, n) != getattr(GATE_DEFAULTS, n)]  # fmt: skip
            if ignored:
                raise BenchInputError(f"{' and '.join(ignored)} size the looks of a sequential gate: pass"
                                      " sequential=True or leave them at their defaults")  # fmt: skip
        with _reading(db) as con:
            runs = pick_bench_runs(con, picked, baseline, candidate)
            pairs = load_pairs(con, baseline, candidate, baseline_run=runs.baseline, candidate_run=runs.candidate)
            loops = compared_loops(con, baseline, candidate, baseline_run=runs.baseline,
                                   candidate_run=runs.candidate)  # fmt: skip
        if sequential:
            result = evaluate_sequential(
                pairs, baseline, candidate, budget=t.budget, stage=t.stage, target_mde=t.target_mde, k=t.k,
                max_recall_drop=t.max_recall_drop, max_cost_increase=t.max_cost_increase, alpha=t.alpha,
                max_mde=t.max_mde,
            )  # fmt: skip
        else:
            result = evaluate(pairs, baseline, candidate, k=t.k, max_recall_drop=t.max_recall_drop,
                              max_cost_increase=t.max_cost_increase, alpha=t.alpha, max_mde=t.max_mde)  # fmt: skip
        return replace(result, db=str(db), loops=loops)  # its `harness-bench diff` commands name this file


def whatif(
    db: Path | str, no_gain_thresholds: Sequence[int], *, label: str | None = None, bench_run: str | None = None,
    tool_budgets: Sequence[int] = (),
) -> WhatIf:  # fmt: skip
    """What lower NO_GAIN thresholds (`no_gain_thresholds`, as `--no-gain-threshold`; and tool budgets,
    `tool_budgets`) would have saved on the stored case runs of `label` (every bench run of it) or of one
    `bench_run` (give one of the two), replayed exactly from their recorded gain evaluations."""
    from runners.decisions.whatif import whatif as replay
    from runners.store.replayable_runs import bench_run_exists, label_exists, runs_of_bench_run, runs_of_label

    with _refusals():
        thresholds = [int(v) for v in given_setting_values(no_gain_thresholds, "no_gain_threshold")]
        budgets = [int(v) for v in given_setting_values(tool_budgets, "max_tool_invocations", at_least_one=False)]
        label, bench_run = optional(given_label, label, "--label"), optional(given_text, bench_run, "--bench-run")
        if (label is None) == (bench_run is None):
            raise BenchInputError("give one of --label and --bench-run")
        with _reading(db) as con:
            if bench_run is not None:
                if not bench_run_exists(con, bench_run):
                    raise BenchInputError(f"--bench-run: unknown bench run {bench_run!r} in {db}")
                runs = runs_of_bench_run(con, str(db), bench_run)
            else:
                assert label is not None
                if not label_exists(con, label):
                    raise BenchInputError(f"--label: no case runs labelled {label!r} in {db}")
                runs = runs_of_label(con, str(db), label)
        return replay(runs, thresholds, budgets)


# -- the boundary ----------------------------------------------------------------------------------------------------
def _options(options: object, values: Mapping[str, object]) -> BenchOptions:
    """The options of a run: `options`, the named `values` over them, or the named values alone."""
    if options is not None and not isinstance(options, BenchOptions):
        raise BenchInputError(f"options: expected BenchOptions (BenchOptions.of(...)), not {type(options).__name__}")
    base = options or BenchOptions()
    return base.replaced(**values) if values or options is None else base


def _hooks(cancellation: object, on_progress: object, *, keep_runs: object = True) -> None:
    """The keyword arguments of `run` and `sweep` that are not options: of the type they name."""
    optional(lambda v, n: given_type(v, CancellationToken, n), cancellation, "cancellation")
    if on_progress is not None and not callable(on_progress):
        raise BenchInputError(f"on_progress: expected a function, not {type(on_progress).__name__}")
    given_type(keep_runs, bool, "keep_runs")


@contextmanager
def _reading(db: object) -> Iterator[duckdb.DuckDBPyConnection]:
    """`db` opened to read (a path that names no DuckDB file is refused naming `--db`), closed after the block."""
    from runners.store.connection import connect

    con = connect(given_path(db, "--db"), read_only=True)
    try:
        yield con
    finally:
        con.close()


@contextmanager
def _refusals() -> Iterator[None]:
    """Every refusal of the layers below, as the one `BenchInputError` of one line naming the flag or argument: a
    database that cannot be used (`--db`), an evaluation set that cannot be read (`--evalset`, its problems on one
    line), a gate's, what-if's or recommendation's input."""
    from runners.decisions.choices import RecommendInputError
    from runners.decisions.whatif import WhatIfInputError
    from runners.domain.evalset import EvalSetError
    from runners.store.errors import MetricsDbError

    try:
        yield
    except BenchInputError:
        raise
    except MetricsDbError as exc:
        text = " ".join(str(exc).split())
        raise BenchInputError(text if text.startswith("--db") else f"--db {text}") from None
    except EvalSetError as exc:
        more = f" (and {len(exc.problems) - 1} more problems)" if len(exc.problems) > 1 else ""
        first = " ".join(exc.problems[0].split()) if exc.problems else "unusable"
        raise BenchInputError(f"--evalset: {first}{more}") from None
    except (GateInputError, WhatIfInputError, RecommendInputError) as exc:
        raise BenchInputError(" ".join(str(exc).split())) from None
