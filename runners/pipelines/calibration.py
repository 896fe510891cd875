"""The calibration study the project runs on itself: are the gate and `recommend` right?

It measures the bench's own decision procedures on the scripted profiles, whose truth is known by construction:

- **gate** (`gate_study`): for each stochastic profile (sloppy, eager, fabricator), disjoint seed pairs over every
  built-in case; the false-alarm rate is the share of same-profile pairs the gate fails. Detection: the candidate
  of each pair with passing case runs flipped to failing (`inject_drop`), so its pass rate drops by 2, 5 and 10
  points; and the same against a noise-free baseline (the deterministic reference against a copy of itself).
- **power** (`power_study`): is the MDE the gate prints right, and does the sequential mode keep its promise? Per
  stochastic profile, seed pairs over every case × 20 epochs of per-case outcomes (`outcome_table`); at 3 and 10
  epochs the gate's predicted MDE (80% / 90%) and predicted detection of 2 / 5 / 10-point drops against the
  measured detection over a grid of injected drops (`POWER_DROPS`, read off at `crossing`); and the sequential mode
  (budget 20, a look every 4 epochs): false alarms, detection of a 5-point drop and the epochs it spends.
- **recommend** (`recommend_study`): for every profile with a known optimum (reference → no_gain_threshold 2;
  rewriter with k rewrites after every NO_GAIN → k + 2), a sweep of thresholds × tool budgets at epochs 1, 3 and
  10: does `recommend` return the optimum, and the same configuration at every epoch count?

A study, not a command: a user's question — how many epochs does my gate need, is this drop real — is answered by
`gate` itself, which prints its MDE for the user's own runs; this study checks, once per change of the statistics,
that what `gate` prints is true. It runs minutes to an hour (the scripted model runs ~100–250 case runs/s);
`python -m scripts.calibration` runs it and writes the figures and tables of the docs.

`outcome_table` is what makes the power part affordable: a scripted case run is a pure function of (case,
trajectory, config), and the profiles draw the same trajectory again and again, so each distinct (case,
trajectory) is run once through the real Harness and its outcome reused — exactly the rows a bench run of that
seed would write (a test checks it against `run_bench`).

A pipeline, not a decision: it runs the bench in process through its API (`runners.api.run`, `runners.api.sweep`;
`outcome_table` runs single cases through `runners.run.case_runner`) and scores what it stored with the gate and
`recommend`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from harness import HarnessConfig
from runners import api
from runners.decisions import power
from runners.decisions.calibration_results import (
    DROPS,
    STOCHASTIC,
    DropDetection,
    FixedEpochs,
    GateProfile,
    GateStudy,
    PowerProfile,
    PowerStudy,
    RecommendPick,
    RecommendProfile,
    RecommendStudy,
    SequentialPlan,
    SequentialResult,
    Tolerance,
    rate,
)
from runners.decisions.gate import ALPHA, OVERALL_WEIGHT, Pair, evaluate, evaluate_sequential, load_pairs, per_case
from runners.domain.evalset import EvalCase
from runners.domain.profiles import trajectory_for
from runners.domain.scripted import ScriptedChatModel
from runners.plan.options import BenchOptions
from runners.plan.run_plan import select_cases
from runners.plan.sweep_plan import SweepGrid
from runners.run.case_runner import run_case
from runners.store.connection import connect
from runners.store.gate_pairs import labels
from runners.store.runs import completed_sweeps

__all__ = [
    "DROPS",
    "KNOWN_OPTIMA",
    "POWER_DROPS",
    "POWER_EPOCHS",
    "STOCHASTIC",
    "OutcomeTable",
    "crossing",
    "gate_study",
    "inject_drop",
    "outcome_table",
    "power_study",
    "recommend_study",
]

KNOWN_OPTIMA = {"reference": 2, "rewriter?k=1": 3, "rewriter?k=2": 4, "rewriter?k=3": 5}
"""Profiles built to need one no_gain_threshold."""
SWEEP_FAMILIES = ["diagnosable", "empty_logs", "generic_kb", "missing_context"]
SWEEP_THRESHOLDS = (1, 2, 3, 4, 5, 6)
SWEEP_BUDGETS = (8, 16)
SWEEP_EPOCHS = (1, 3, 10)
SWEEP_GRID = {"no_gain_threshold": SWEEP_THRESHOLDS, "max_tool_invocations": SWEEP_BUDGETS}
"""The grid of the recommend part: every threshold with every tool budget."""
POWER_EPOCHS = (3, 10)
POWER_DROPS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16)
"""Injected drops (points) of the measured detection curve; 2, 5 and 10 are compared point by point."""
SEQ_BUDGET = 20
SEQ_STAGE = 4
SEQ_DROP = 5
MDE_TOLERANCE_POINTS = 2.0
"""Acceptance: the predicted 80% MDE within ±2 points of the drop measured at 80% detection."""
RATE_TOLERANCE = "exact 95% interval"
"""Each predicted detection rate lies within the measured rate's exact (Clopper–Pearson) 95% interval —
the measured rate's own sampling error (±12 percentage points at 50% over 60 pairs)."""


def _say(line: str) -> None:
    """Progress, on stderr (the study runs for minutes)."""
    print(line, file=sys.stderr)


def inject_drop(pairs: list[Pair], points: float, seed: int) -> tuple[list[Pair], int]:
    """Flip round(points% of case runs) passing candidate runs to failing (seeded); returns (pairs, flips)."""
    passing = [i for i, p in enumerate(pairs) if p.cand_pass]
    n = min(round(points / 100 * len(pairs)), len(passing))
    flip = set(random.Random(seed).sample(passing, n))
    return [dataclasses.replace(p, cand_pass=False) if i in flip else p for i, p in enumerate(pairs)], n


def crossing(curve: Sequence[tuple[float, float]], target: float) -> float | None:
    """The drop at which a measured detection curve (drop, detection rate) first reaches `target`, linearly
    interpolated from (0, 0); None when the grid never reaches it."""
    prev = (0.0, 0.0)
    for x, y in curve:
        if y >= target:
            if y == prev[1]:
                return x
            return prev[0] + (target - prev[1]) * (x - prev[0]) / (y - prev[1])
        prev = (x, y)
    return None


# -- the gate part --------------------------------------------------------------------------------------------
def _run_seeds(db: Path, profile: str, seeds: Sequence[int], epochs: int) -> None:
    """A bench run per seed into `db`, labelled `s<seed>`; one already there is reused (re-analysis is free)."""
    done: frozenset[str] = frozenset()
    if db.exists():
        con = connect(db, read_only=True)
        try:
            done = labels(con)
        finally:
            con.close()
    for seed in seeds:
        if f"s{seed}" in done:
            continue
        model = f"scripted:{profile}?seed={seed}" if profile != "reference" else "scripted"
        opts = BenchOptions.of(model=model, label=f"s{seed}", db=db, epochs=epochs)
        api.run(opts, keep_runs=False)


def _gate_profile(profile: str, all_pairs: list[list[Pair]], epochs: int) -> GateProfile:
    alarms = 0
    detected = dict.fromkeys(DROPS, 0)
    flips: dict[int, list[int]] = {d: [] for d in DROPS}
    alarm_tests: list[str] = []
    null_sd: list[float] = []
    for j, pairs in enumerate(all_pairs):
        # the sign-flip null's standard deviation of the mean per-case difference: the noise a drop must beat
        diffs = [c.pass_diff for c in per_case(pairs)]
        null_sd.append(math.sqrt(sum(d * d for d in diffs)) / len(diffs))
        res = evaluate(pairs, "baseline", "candidate", k=min(3, epochs))
        if not res.passed:
            alarms += 1
            alarm_tests += [t.name for t in res.failures]
        for d in DROPS:
            dropped, n = inject_drop(pairs, d, seed=1000 * d + j)
            flips[d].append(n)
            detected[d] += not evaluate(dropped, "baseline", "candidate", k=min(3, epochs)).passed
    first = all_pairs[0]
    return GateProfile(
        cases=len({p.case_id for p in first}),
        case_runs=len(first),
        baseline_pass_rate_first_pair=sum(p.base_pass for p in first) / len(first),
        false_alarms=rate(alarms, len(all_pairs)) if profile != "reference" else None,
        null_sd_points=100 * sum(null_sd) / len(null_sd),
        false_alarm_tests=sorted(set(alarm_tests)),
        detection={
            str(d): DropDetection(**rate(detected[d], len(all_pairs)).model_dump(), flips=sorted(set(flips[d])))
            for d in DROPS
        },
    )


def gate_study(pairs_per_profile: int, epochs: int, workdir: Path) -> GateStudy:
    """False alarms over same-profile seed pairs and detection of injected drops; the bench runs are kept in
    `workdir` (and reused from it)."""
    t0 = time.perf_counter()
    profiles: dict[str, GateProfile] = {}
    for profile in [*STOCHASTIC, "reference"]:
        db = workdir / f"gate-{profile}-e{epochs}.duckdb"
        _run_seeds(db, profile, range(2 * pairs_per_profile) if profile != "reference" else [0, 1], epochs)
        con = connect(db, read_only=True)
        try:
            if profile == "reference":  # noise-free: the deterministic model against a second run of itself
                all_pairs = [load_pairs(con, "s0", "s1")] * pairs_per_profile
            else:
                all_pairs = [load_pairs(con, f"s{2 * j}", f"s{2 * j + 1}") for j in range(pairs_per_profile)]
        finally:
            con.close()
        profiles[profile] = found = _gate_profile(profile, all_pairs, epochs)
        detected = [found.detection[str(d)].hits for d in DROPS]
        _say(f"  {profile}: {found.false_alarms} detection {detected} ({time.perf_counter() - t0:.0f}s)")
    noisy = [v.false_alarms for v in profiles.values() if v.false_alarms is not None]
    return GateStudy(
        pairs_per_profile=pairs_per_profile, epochs=epochs, profiles=profiles,
        false_alarms_all=rate(sum(r.hits for r in noisy), sum(r.n for r in noisy)),
        seconds=round(time.perf_counter() - t0, 1),
    )  # fmt: skip


# -- the power part -------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class OutcomeTable:
    """Per (seed, case, epoch) outcomes of one profile: what `run --model scripted:PROFILE?seed=S` writes."""

    profile: str
    """Profile."""
    cases: list[EvalCase]
    """Cases, in bench order."""
    passed: npt.NDArray[np.bool_]
    """bool[seed, case, epoch − 1]."""
    cost: npt.NDArray[np.float64]
    """float[seed, case, epoch − 1, (tool invocations, model calls, tokens)]."""
    distinct_runs: int
    """Case runs actually executed (distinct (case, trajectory))."""

    def pairs(self, base_seed: int, cand_seed: int, epochs: int) -> list[Pair]:
        """The gate's pairs of two seeds over the first `epochs` epochs."""
        out = []
        for e in range(epochs):
            for i, c in enumerate(self.cases):
                b, k = self.cost[base_seed, i, e], self.cost[cand_seed, i, e]
                out.append(
                    Pair(
                        c.id,
                        c.family,
                        e + 1,
                        bool(self.passed[base_seed, i, e]),
                        bool(self.passed[cand_seed, i, e]),
                        (float(b[0]), float(b[1]), float(b[2])),
                        (float(k[0]), float(k[1]), float(k[2])),
                    )
                )
        return out


def outcome_table(profile: str, seeds: int, epochs: int, cases: list[EvalCase] | None = None) -> OutcomeTable:
    """Run every (case, trajectory) the profile draws for seeds 0..seeds−1 × epochs once, reuse the rest."""
    cases = cases if cases is not None else select_cases([], [])
    passed = np.zeros((seeds, len(cases), epochs), dtype=np.bool_)
    cost = np.zeros((seeds, len(cases), epochs, 3), dtype=np.float64)
    memo: dict[tuple[str, str], tuple[bool, tuple[float, float, float]]] = {}
    config = HarnessConfig()
    for s in range(seeds):
        model = f"{profile}?seed={s}" if profile != "reference" else "reference"
        for e in range(epochs):
            for i, case in enumerate(cases):
                traj = trajectory_for(case, model, e + 1)
                key = (case.id, traj.model_dump_json())
                if key not in memo:
                    run = run_case(case, ScriptedChatModel(traj, name=f"scripted:{model}"), config=config)
                    m = run.metrics
                    memo[key] = (
                        run.passed is True,
                        (m.tool_invocations, m.model_calls, m.input_tokens + m.output_tokens),
                    )
                passed[s, i, e], cost[s, i, e] = memo[key]
    return OutcomeTable(profile, cases, passed, cost, len(memo))


def _fixed(table: OutcomeTable, seed_pairs: list[tuple[int, int]], epochs: int, noisy: bool) -> FixedEpochs:
    """The fixed-epoch gate at `epochs`: predicted MDE and detection against measured, over the seed pairs."""
    level = ALPHA * OVERALL_WEIGHT
    mde80: list[float] = []
    mde90: list[float] = []
    predicted = {d: 0.0 for d in DROPS}
    detected = dict.fromkeys(POWER_DROPS, 0)
    alarms = 0
    for j, (sb, sc) in enumerate(seed_pairs):
        pairs = table.pairs(sb, sc, epochs)
        cs = per_case(pairs)
        # a different replicate seed per pair: the prediction's own noise averages out too
        thr = power.pass_rate_thresholds(
            [c.epochs for c in cs], [c.base_passes for c in cs], [c.cand_passes for c in cs],
            level=level, seed=power.MDE_SEED + j,
        )  # fmt: skip
        q80, q90 = (float(np.sort(thr)[math.ceil(p * thr.size) - 1]) for p in power.POWERS)
        mde80.append(q80)
        mde90.append(q90)
        for d in DROPS:
            predicted[d] += float(np.mean(thr <= round(d / 100 * len(pairs)) / len(pairs)))
        alarms += noisy and not evaluate(pairs, "b", "c", k=min(3, epochs), mde=False).passed
        for d in POWER_DROPS:
            dropped, _ = inject_drop(pairs, d, seed=1000 * d + j)
            detected[d] += not evaluate(dropped, "b", "c", k=min(3, epochs), mde=False).passed
    n = len(seed_pairs)
    curve = [(float(d), detected[d] / n) for d in POWER_DROPS]
    return FixedEpochs(
        predicted_mde_80=100 * float(np.mean(mde80)), predicted_mde_90=100 * float(np.mean(mde90)),
        predicted_mde_80_range=[100 * min(mde80), 100 * max(mde80)],
        measured_drop_at_80=crossing(curve, 0.8), measured_drop_at_90=crossing(curve, 0.9),
        detection={str(d): rate(detected[d], n) for d in POWER_DROPS},
        predicted_detection={str(d): predicted[d] / n for d in DROPS},
        false_alarms=rate(alarms, n) if noisy else None,
    )  # fmt: skip


def _sequential(table: OutcomeTable, seed_pairs: list[tuple[int, int]]) -> SequentialResult:
    """The sequential gate over the same pairs: false alarms (no drop) and a `SEQ_DROP`-point drop."""
    alarms = detected = 0
    spent: list[int] = []
    to_detect: list[int] = []
    for j, (sb, sc) in enumerate(seed_pairs):
        pairs = table.pairs(sb, sc, SEQ_BUDGET)
        null = evaluate_sequential(pairs, "b", "c", budget=SEQ_BUDGET, stage=SEQ_STAGE, mde=False)
        alarms += bool(null.failures)
        dropped, _ = inject_drop(pairs, SEQ_DROP, seed=7000 + j)
        res = evaluate_sequential(dropped, "b", "c", budget=SEQ_BUDGET, stage=SEQ_STAGE, mde=False)
        assert res.look is not None
        spent.append(res.look.epochs)
        if res.failures:
            detected += 1
            to_detect.append(res.look.epochs)
    n = len(seed_pairs)
    return SequentialResult(
        false_alarms=rate(alarms, n),
        detection=rate(detected, n),
        mean_epochs_spent=float(np.mean(spent)),
        mean_epochs_to_detect=float(np.mean(to_detect)) if to_detect else None,
        stops_by_look={str(e): spent.count(e) for e in sorted(set(spent))},
    )


def power_study(pairs_per_profile: int, profiles: tuple[str, ...] = (*STOCHASTIC, "reference")) -> PowerStudy:
    """Predicted (the gate's MDE) against measured detection; the sequential mode's false alarms and epochs."""
    t0 = time.perf_counter()
    found: dict[str, PowerProfile] = {}
    for profile in profiles:
        noisy = profile != "reference"
        seeds = 2 * pairs_per_profile if noisy else 1
        table = outcome_table(profile, seeds, SEQ_BUDGET if noisy else max(POWER_EPOCHS))
        seed_pairs = [(2 * j, 2 * j + 1) if noisy else (0, 0) for j in range(pairs_per_profile)]
        fixed: dict[str, FixedEpochs] = {}
        for epochs in POWER_EPOCHS:
            fixed[str(epochs)] = f = _fixed(table, seed_pairs, epochs, noisy)
            _say(f"  {profile} @{epochs}: MDE80 predicted {f.predicted_mde_80:.1f} measured "
                 f"{f.measured_drop_at_80} ({time.perf_counter() - t0:.0f}s)")  # fmt: skip
        sequential = _sequential(table, seed_pairs) if noisy else None
        if sequential is not None:
            _say(f"  {profile} sequential: {sequential} ({time.perf_counter() - t0:.0f}s)")
        found[profile] = PowerProfile(cases=len(table.cases), distinct_case_runs=table.distinct_runs, fixed=fixed,
                                      sequential=sequential)  # fmt: skip
    return PowerStudy(
        pairs_per_profile=pairs_per_profile, epochs=list(POWER_EPOCHS), drops=list(POWER_DROPS),
        sequential=SequentialPlan(budget=SEQ_BUDGET, stage=SEQ_STAGE, drop=SEQ_DROP),
        tolerance=Tolerance(mde_points=MDE_TOLERANCE_POINTS, rate=RATE_TOLERANCE), profiles=found,
        seconds=round(time.perf_counter() - t0, 1),
    )  # fmt: skip


# -- the recommend part ---------------------------------------------------------------------------------------
def _cached_sweep(db: Path, model: str, epochs: int, grid: SweepGrid) -> str | None:
    """A completed sweep of this model, grid and epochs already in the work folder (re-analysis is free)."""
    if not db.exists():
        return None
    con = connect(db, read_only=True)
    try:
        wanted = json.loads(grid.to_json())
        for sweep in completed_sweeps(con, model):
            if sweep.grid_json is None or sweep.options_json is None:
                continue
            options = json.loads(sweep.options_json)
            if (json.loads(sweep.grid_json) == wanted and options["epochs"] == epochs
                    and options["evalsets"] == SWEEP_FAMILIES):  # fmt: skip
                return sweep.sweep_id
    finally:
        con.close()
    return None


def recommend_study(workdir: Path) -> RecommendStudy:
    """`recommend`'s pick per profile with a known optimum, at epochs 1, 3 and 10 (sweeps kept in `workdir`)."""
    from runners.decisions.recommend import measure, recommend

    t0 = time.perf_counter()
    db = workdir / "recommend.duckdb"
    profiles: dict[str, RecommendProfile] = {}
    for profile, optimum in KNOWN_OPTIMA.items():
        picks: dict[str, RecommendPick] = {}
        for epochs in SWEEP_EPOCHS:
            model = "scripted" if profile == "reference" else f"scripted:{profile}"
            grid = SweepGrid(SWEEP_GRID)
            opts = BenchOptions.of(evalsets=SWEEP_FAMILIES, model=model, db=db, epochs=epochs)
            cached = _cached_sweep(db, model, epochs, grid)
            sweep_id = cached or api.sweep(SWEEP_GRID, opts).sweep_id
            con = connect(db, read_only=True)
            try:
                rec = recommend(measure(con, sweep_id))
            finally:
                con.close()
            picks[str(epochs)] = RecommendPick(
                config={c: rec.chosen.setting(c) for c in rec.columns}, recall=rec.chosen.recall.value,
                honest_fallback=rec.chosen.honest_fallback.value, best_recall=rec.best_recall.recall.value,
            )  # fmt: skip
        thresholds = {p.config["no_gain_threshold"] for p in picks.values()}
        profiles[profile] = RecommendProfile(
            known_optimum=optimum, picks=picks,
            identical_across_epochs=len({json.dumps(p.config, sort_keys=True) for p in picks.values()}) == 1,
            optimum_found=thresholds == {optimum},
        )  # fmt: skip
        _say(f"  {profile}: {picks} ({time.perf_counter() - t0:.0f}s)")
    return RecommendStudy(
        families=SWEEP_FAMILIES, thresholds=list(SWEEP_THRESHOLDS), budgets=list(SWEEP_BUDGETS), profiles=profiles,
        seconds=round(time.perf_counter() - t0, 1),
    )  # fmt: skip
