"""The model-upgrade gate: a candidate label against a baseline label on the same cases and epochs.

One concept per module, each importing only those above it in this list:

- `result.py` — what the gate works on and decides: `Pair`, `Hypothesis`, `FamilyResult`, the frozen `GateResult`;
- `load.py` — reading the pairs through the store's named queries (runners/store/gate_pairs.py);
- `statistics.py` — per-case means, the sign-flip test, Holm's weighted correction, power, the verdicts
  (its docstring is the statistical design);
- `cases.py` — the cases behind a verdict, worst first;


How a verdict is written (the verdict line, Markdown, JUnit, JSON, the plan from a pilot, the files) is
runners/rendering/gate/.
"""

from __future__ import annotations

from runners.decisions.gate.cases import WorseCase, worse_cases
from runners.decisions.gate.load import BenchRuns, compared_loops, load_pairs, pick_bench_runs
from runners.decisions.gate.result import (
    COST_METRICS,
    CostChange,
    FamilyResult,
    GateInputError,
    GateResult,
    Hypothesis,
    Loops,
    Measure,
    Pair,
    RowVerdict,
    SequentialLook,
    Verdict,
)
from runners.decisions.gate.statistics import (
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
    "Loops",
    "Measure",
    "Pair",
    "RowVerdict",
    "SequentialLook",
    "Verdict",
    "WorseCase",
    "compared_loops",
    "evaluate",
    "evaluate_sequential",
    "holm_weighted",
    "load_pairs",
    "paired_p_value",
    "pass_hat_k",
    "per_case",
    "pick_bench_runs",
    "sequential_looks",
    "validate_flags",
    "worse_cases",
]
