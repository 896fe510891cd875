"""How long the live phase may take: a warm-up call per mode measures the per-call latency, and the phase is sized
from it (a case run is only started while the time left covers its worst case) under a derived hard limit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runners.live._log import log
from runners.live.cases import MODES
from runners.live.models import LocalModel
from runners.live.server import LlamaServer, post_json

__all__ = ["DEADLINE_SLACK_S", "LivePlan", "plan_live", "schedule", "warm_up"]

DEADLINE_SLACK_S = 1.0
"""How far past its deadline a case run may end."""


@dataclass(frozen=True, slots=True)
class LivePlan:
    """How long the live phase may take, derived from the measured per-call latency."""

    per_call_s: float
    """Worst case of one model call: measured prompt processing + the server's cap of generated tokens at the
    measured rate."""
    run_bound_s: float
    """Worst case of one case run: its deadline (+ slack), or all its model calls at per_call_s if shorter."""
    planned_runs: int
    """Case runs wanted (cases x modes)."""
    hard_limit_s: float
    """The live phase's wall-clock limit; a run is only started while the time left covers run_bound_s."""


def plan_live(
    per_call_s: float, *, deadline_s: float, max_model_calls: int, cases: int, modes: int, ceiling_s: float
) -> LivePlan:
    """Size the live phase: at most `ceiling_s`, never less than one worst-case run per mode."""
    # +1 call: SemanticGuard; x2: a loaded 2-core machine can halve the throughput mid-run.
    by_calls = (max_model_calls + 1) * per_call_s * 2
    run_bound = min(deadline_s + DEADLINE_SLACK_S, by_calls) + 2  # +2 s: DuckDB write and bookkeeping
    planned = cases * modes
    limit = min(ceiling_s, planned * run_bound)
    limit = max(limit, modes * run_bound)
    return LivePlan(round(per_call_s, 1), round(run_bound, 1), planned, round(limit))


def schedule(cases: Sequence[str], modes: Sequence[str]) -> list[tuple[str, str]]:
    """Interleave the modes case by case, so a phase cut short still measures every mode."""
    return [(mode, case) for case in cases for mode in modes]


def warm_up(server: LlamaServer, body: dict[str, Any], model: LocalModel) -> float:
    """One real first-turn call to `model` per mode; the worst call from the measured rates (seconds)."""
    worst = 0.0
    for mode in MODES:
        t = time.perf_counter()
        status, data = post_json(
            f"{server.root}/v1/chat/completions",
            {**body, "model": model.name, "tool_choice": mode, "temperature": 0.0},
            timeout=600,
        )
        took = time.perf_counter() - t
        timings = data.get("timings", {}) if isinstance(data, dict) else {}
        pp = float(timings.get("prompt_per_second") or 0) or 1.0
        tg = float(timings.get("predicted_per_second") or 0) or 1.0
        prompt_n = int(timings.get("prompt_n") or 0)
        # Worst case: the whole first prompt again (no cache) and as many generated tokens as the server allows.
        bound = max(took, prompt_n / pp + model.server.n_predict / tg)
        log(
            f"warm-up tool_choice={mode}: HTTP {status} in {took:.1f} s (prompt {prompt_n} tokens at {pp:.0f} tok/s, "
            f"generation at {tg:.1f} tok/s) -> worst call {bound:.1f} s"
        )
        worst = max(worst, bound)
    return worst
