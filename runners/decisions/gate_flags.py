"""The gate's flags: the one set of their defaults (`DEFAULTS`, read by the command's argparse and by the analysis's
keyword defaults) and the range of each numeric flag, derived from what it sizes: checked by argparse on the command
line and by `validate_flags` and `sequential_looks` in the library (runners/decisions/gate/statistics.py). Light: the
parser imports it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runners.plan.flags import bounded_float, bounded_int
from runners.plan.rules import MAX_EPOCHS

__all__ = [
    "ALPHA_RANGE",
    "COST_RANGE",
    "DEFAULTS",
    "DROP_RANGE",
    "EPOCHS_RANGE",
    "GateDefaults",
    "K_RANGE",
    "MAX_COST_INCREASE",
    "MAX_LOOKS",
    "MDE_RANGE",
    "TARGET_MDE_RANGE",
]

MAX_COST_INCREASE = 100.0
"""Largest `--max-cost-increase`: the 100-fold cost up to which `power.cost_mde` searches an increase."""
MAX_LOOKS = 25
"""Most looks of a sequential gate: `power.sequential_levels` draws its 400,000 simulated paths again for every 5
looks, so its time grows with the square of the looks (25: about 1.5 s on one core; the designs it serves have
2 to 10). Its memory stays flat whatever the looks (a few columns of paths)."""


@dataclass(frozen=True, slots=True)
class GateDefaults:
    """What each gate flag is when it is not given."""

    k: int = 3
    """--k: k of pass^k."""
    max_recall_drop: float = 0.0
    """--max-pass-rate-drop: no drop is tolerated once significant."""
    max_cost_increase: float = 0.25
    """--max-cost-increase: a quarter more tool calls, model calls or tokens per case run is tolerated."""
    alpha: float = 0.05
    """--alpha: the false-alarm rate of the whole gate."""
    max_mde: float = 0.10
    """--max-mde: a pass must be able to see a 10-point pass-rate drop with 80% probability."""
    budget: int = 20
    """--budget: most epochs of a sequential gate."""
    stage: int = 4
    """--stage: epochs between the looks of a sequential gate."""
    summary: Path = Path("gate-summary.md")
    """--summary: the Markdown summary, in the current folder."""
    junit: Path = Path("gate-junit.xml")
    """--junit: the JUnit XML, in the current folder."""


DEFAULTS = GateDefaults()
"""The gate's defaults: the command's flags and the library's keyword arguments both read them."""

K_RANGE = bounded_int(1, MAX_EPOCHS, reason=f"must be >= 1 and <= {MAX_EPOCHS}")
"""--k: k of pass^k is at most the epochs per case, which --epochs bounds."""
EPOCHS_RANGE = bounded_int(1, MAX_EPOCHS)
"""--budget and --stage count epochs, which --epochs bounds (and the looks they make, MAX_LOOKS)."""
DROP_RANGE = bounded_float(0.0, 1.0, reason="a pass-rate drop must be within [0, 1]")
"""--max-pass-rate-drop: a share of the pass rate."""
COST_RANGE = bounded_float(
    0.0, MAX_COST_INCREASE, reason=f"a relative increase must be >= 0 and <= {MAX_COST_INCREASE:g}"
)
"""--max-cost-increase: a relative increase, up to the largest the cost MDE considers."""
ALPHA_RANGE = bounded_float(0.0, 1.0, lo_open=True, hi_open=True, reason="must be within (0, 1)")
"""--alpha: a probability strictly between 0 and 1."""
MDE_RANGE = bounded_float(
    0.0, 1.0, lo_open=True, reason="a pass-rate drop must be within (0, 1] (e.g. 0.10 for 10 points)"
)
"""--max-mde: a pass-rate drop, more than 0 and at most all of it."""
TARGET_MDE_RANGE = bounded_float(0.0, 1.0, lo_open=True, reason="a pass-rate drop must be within (0, 1] (e.g. 0.05)")
"""--target-mde: as --max-mde."""
