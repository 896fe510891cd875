"""The model-upgrade gate: a candidate label against a baseline label on the same cases and epochs.

One concept per module, each importing only those above it in this list:

- `result.py` — what the gate works on and decides: `Pair`, `Hypothesis`, `FamilyResult`, the frozen `GateResult`;
- `load.py` — reading the pairs through the store's named queries (runners/store/gate_pairs.py);
- `statistics.py` — per-case means, the sign-flip test, Holm's weighted correction, power, the verdicts
  (its docstring is the statistical design);
- `cases.py` — the cases behind a verdict, each with the command that opens its transcripts;
- `render.py` — the verdict line, Markdown, JUnit, JSON and the plan from a pilot;
- `files.py` — writing the summary, JUnit and JSON files.

The gate's defaults and flag ranges are runners/analysis/_gate_flags.py, shared with the command's argparse.
"""

from __future__ import annotations

from runners.analysis.gate.cases import (
    CASE_LIMIT,
    WorseCase,
    failing_case_lines,
    junit_text,
    markdown_section,
    worse_cases,
)
from runners.analysis.gate.files import write_outputs
from runners.analysis.gate.load import BenchRuns, load_pairs, pick_bench_runs
from runners.analysis.gate.render import junit, markdown, plan, to_json, verdict_line, verdict_line_with_power
from runners.analysis.gate.result import (
    COST_METRICS,
    CostChange,
    FamilyResult,
    GateInputError,
    GateResult,
    Hypothesis,
    Measure,
    Pair,
    RowVerdict,
    SequentialLook,
    Verdict,
)
from runners.analysis.gate.statistics import (
    ALL,
    ALPHA,
    MAX_MDE,
    OVERALL_WEIGHT,
    PERMUTATION_RESAMPLES,
    PERMUTATION_SEED,
    CaseMeans,
    evaluate,
    evaluate_sequential,
    holm_weighted,
    paired_p_value,
    pass_hat_k,
    per_case,
    sequential_looks,
    validate_flags,
)

__all__ = [
    "ALL",
    "ALPHA",
    "CASE_LIMIT",
    "COST_METRICS",
    "MAX_MDE",
    "OVERALL_WEIGHT",
    "PERMUTATION_RESAMPLES",
    "PERMUTATION_SEED",
    "BenchRuns",
    "CaseMeans",
    "CostChange",
    "FamilyResult",
    "GateInputError",
    "GateResult",
    "Hypothesis",
    "Measure",
    "Pair",
    "RowVerdict",
    "SequentialLook",
    "Verdict",
    "WorseCase",
    "evaluate",
    "evaluate_sequential",
    "failing_case_lines",
    "holm_weighted",
    "junit",
    "junit_text",
    "load_pairs",
    "markdown",
    "markdown_section",
    "paired_p_value",
    "pass_hat_k",
    "per_case",
    "pick_bench_runs",
    "plan",
    "sequential_looks",
    "to_json",
    "validate_flags",
    "verdict_line",
    "verdict_line_with_power",
    "worse_cases",
    "write_outputs",
]
