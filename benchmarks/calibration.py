"""The calibration study the project runs on itself: are the gate and `recommend` right?

    .venv/bin/python -m benchmarks.calibration [--part gate|recommend|all] [--pairs 60] [--epochs 3]

- **recommend**: for every behaviour profile with a known optimum (reference → no_gain_threshold 2;
  rewriter with k rewrites after every NO_GAIN → k + 2), a sweep of thresholds × tool budgets at
  epochs 1, 3 and 10; does `recommend` return the optimum, and the same configuration at every
  epoch count?
- **gate**: for each stochastic profile (sloppy, eager, fabricator), `--pairs` disjoint seed pairs
  over every built-in case × `--epochs`; the false-alarm rate is the share of same-profile pairs the
  gate fails. Detection: the candidate of each pair with passing case runs flipped to failing, so
  its pass rate drops by 2, 5 and 10 points; and the same against a noise-free baseline (the
  deterministic reference model against a copy of itself with flips).

- **power** (`--part power`): is the MDE the gate prints right, and does the sequential mode keep
  its promise? For each stochastic profile, `--pairs` disjoint seed pairs, every built-in case ×
  20 epochs of per-case outcomes (`outcome_table`); at 3 and 10 epochs the gate's predicted MDE
  (80% / 90%) and predicted detection of 2 / 5 / 10-point drops against the measured detection
  over a grid of injected drops (`POWER_DROPS`); and the sequential mode (budget 20, a look every
  4 epochs): false alarms over the same-profile pairs, detection of a 5-point drop and the epochs
  it spends.

Writes `reports/calibration/calibration.json` and `calibration.png` (`power.png` for the power
part), and prints the README tables. A study, not a test: it takes minutes (the scripted model
runs ~100–250 case runs/s).

`outcome_table` is what makes the power part affordable: a scripted case run is a pure function of
(case, trajectory, config), and the profiles draw the same trajectory again and again (most epochs
of a seed leave a case's trajectory unchanged), so each distinct (case, trajectory) is run once
through the real Harness and its outcome reused — exactly the rows a bench run of that seed would
write (`tests/runners/decisions/test_calibration.py` checks it against `run_bench`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats

from harness.config import HarnessConfig
from runners.decisions import power
from runners.decisions.gate import ALPHA, OVERALL_WEIGHT, Pair, evaluate, evaluate_sequential, load_pairs, per_case
from runners.domain.evalset import EvalCase
from runners.domain.profiles import trajectory_for
from runners.domain.scripted import ScriptedChatModel
from runners.plan.options import BenchOptions
from runners.plan.run_plan import select_cases
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.run.case_runner import run_case
from runners.store.connection import connect

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "calibration"
STOCHASTIC = ("sloppy", "eager", "fabricator")
DROPS = (2, 5, 10)
KNOWN_OPTIMA = {"reference": 2, "rewriter?k=1": 3, "rewriter?k=2": 4, "rewriter?k=3": 5}
SWEEP_FAMILIES = ["diagnosable", "empty_logs", "generic_kb", "missing_context"]
SWEEP_THRESHOLDS = (1, 2, 3, 4, 5, 6)
SWEEP_BUDGETS = (8, 16)
SWEEP_EPOCHS = (1, 3, 10)
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


def inject_drop(pairs: list[Pair], points: float, seed: int) -> tuple[list[Pair], int]:
    """Flip round(points% of case runs) passing candidate runs to failing (seeded); returns (pairs, flips)."""
    passing = [i for i, p in enumerate(pairs) if p.cand_pass]
    n = min(round(points / 100 * len(pairs)), len(passing))
    flip = set(random.Random(seed).sample(passing, n))
    return [dataclasses.replace(p, cand_pass=False) if i in flip else p for i, p in enumerate(pairs)], n


def rate(hits: int, n: int) -> dict[str, float]:
    """Share with its exact (Clopper–Pearson) 95% interval."""
    ci = scipy.stats.binomtest(hits, n).proportion_ci(method="exact")
    return {"hits": hits, "n": n, "rate": hits / n, "low": float(ci.low), "high": float(ci.high)}


def gate_study(pairs_per_profile: int, epochs: int, workdir: Path) -> dict[str, Any]:
    """False alarms over same-profile seed pairs and detection of injected drops."""
    out: dict[str, Any] = {"pairs_per_profile": pairs_per_profile, "epochs": epochs, "profiles": {}}
    t0 = time.perf_counter()
    for profile in [*STOCHASTIC, "reference"]:
        db = workdir / f"gate-{profile}-e{epochs}.duckdb"
        con = connect(db, read_only=True) if db.exists() else None
        labels = {r[0] for r in con.execute("SELECT DISTINCT label FROM case_runs").fetchall()} if con else set()
        if con:
            con.close()
        seeds = range(2 * pairs_per_profile) if profile != "reference" else [0]
        for seed in seeds:  # a run already in the work folder is reused (the study can be re-analysed)
            if f"s{seed}" not in labels:
                run_bench(
                    plan_run(
                        BenchOptions.of(
                            model_settings=ModelSettings(
                                model=f"scripted:{profile}?seed={seed}" if profile != "reference" else "scripted"
                            ),
                            label=f"s{seed}",
                            db=db,
                            epochs=epochs,
                        )
                    ),
                    keep_runs=False,
                )
        con = connect(db, read_only=True)
        try:
            if profile == "reference":  # noise-free: the deterministic model against a copy of itself
                all_pairs = [load_pairs(con, "s0", "s0")] * pairs_per_profile
            else:
                all_pairs = [load_pairs(con, f"s{2 * j}", f"s{2 * j + 1}") for j in range(pairs_per_profile)]
        finally:
            con.close()
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
        base = sum(p.base_pass for p in all_pairs[0]) / len(all_pairs[0])
        out["profiles"][profile] = {
            "cases": len({p.case_id for p in all_pairs[0]}),
            "case_runs": len(all_pairs[0]),
            "baseline_pass_rate_first_pair": base,
            "false_alarms": rate(alarms, len(all_pairs)) if profile != "reference" else None,
            "null_sd_points": 100 * sum(null_sd) / len(null_sd),
            "false_alarm_tests": sorted(set(alarm_tests)),
            "detection": {str(d): {**rate(detected[d], len(all_pairs)), "flips": sorted(set(flips[d]))} for d in DROPS},
        }
        print(
            f"  {profile}: {out['profiles'][profile]['false_alarms']} "
            f"detection {[detected[d] for d in DROPS]} ({time.perf_counter() - t0:.0f}s)",
            file=sys.stderr,
        )
    total = sum(v["false_alarms"]["hits"] for v in out["profiles"].values() if v["false_alarms"])
    n = sum(v["false_alarms"]["n"] for v in out["profiles"].values() if v["false_alarms"])
    out["false_alarms_all"] = rate(total, n)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


@dataclasses.dataclass(frozen=True)
class OutcomeTable:
    """Per (seed, case, epoch) outcomes of one profile: what `run --model scripted:PROFILE?seed=S` writes."""

    profile: str
    """Profile."""
    cases: list[EvalCase]
    """Cases, in bench order."""
    passed: np.ndarray
    """bool[seed, case, epoch − 1]."""
    cost: np.ndarray
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
    passed = np.zeros((seeds, len(cases), epochs), dtype=bool)
    cost = np.zeros((seeds, len(cases), epochs, 3))
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
                    memo[key] = (run.passed, (m.tool_invocations, m.model_calls, m.input_tokens + m.output_tokens))
                passed[s, i, e], cost[s, i, e] = memo[key]
    return OutcomeTable(profile, cases, passed, cost, len(memo))


def _crossing(curve: list[tuple[float, float]], target: float) -> float | None:
    """The drop at which a measured detection curve first reaches `target` (linear interpolation)."""
    prev = (0.0, 0.0)
    for x, y in curve:
        if y >= target:
            if y == prev[1]:
                return x
            return prev[0] + (target - prev[1]) * (x - prev[0]) / (y - prev[1])
        prev = (x, y)
    return None


def power_study(pairs_per_profile: int, profiles: tuple[str, ...] = (*STOCHASTIC, "reference")) -> dict[str, Any]:
    """Predicted (the gate's MDE) against measured detection; the sequential mode's false alarms and epochs."""
    t0 = time.perf_counter()
    level = ALPHA * OVERALL_WEIGHT
    out: dict[str, Any] = {
        "pairs_per_profile": pairs_per_profile, "epochs": list(POWER_EPOCHS), "drops": list(POWER_DROPS),
        "sequential": {"budget": SEQ_BUDGET, "stage": SEQ_STAGE, "drop": SEQ_DROP},
        "tolerance": {"mde_points": MDE_TOLERANCE_POINTS, "rate": RATE_TOLERANCE}, "profiles": {},
    }  # fmt: skip
    for profile in profiles:
        noisy = profile != "reference"
        seeds = 2 * pairs_per_profile if noisy else 1
        table = outcome_table(profile, seeds, SEQ_BUDGET if noisy else max(POWER_EPOCHS))
        seed_pairs = [(2 * j, 2 * j + 1) if noisy else (0, 0) for j in range(pairs_per_profile)]
        prof: dict[str, Any] = {"cases": len(table.cases), "distinct_case_runs": table.distinct_runs, "fixed": {}}
        for epochs in POWER_EPOCHS:
            mde80, mde90, predicted = [], [], {d: 0.0 for d in DROPS}
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
            prof["fixed"][str(epochs)] = {
                "predicted_mde_80": 100 * float(np.mean(mde80)), "predicted_mde_90": 100 * float(np.mean(mde90)),
                "predicted_mde_80_range": [100 * min(mde80), 100 * max(mde80)],
                "measured_drop_at_80": _crossing(curve, 0.8), "measured_drop_at_90": _crossing(curve, 0.9),
                "detection": {str(d): rate(detected[d], n) for d in POWER_DROPS},
                "predicted_detection": {str(d): predicted[d] / n for d in DROPS},
                "false_alarms": rate(alarms, n) if noisy else None,
            }  # fmt: skip
            f = prof["fixed"][str(epochs)]
            print(
                f"  {profile} @{epochs}: MDE80 predicted {f['predicted_mde_80']:.1f} measured "
                f"{f['measured_drop_at_80']} ({time.perf_counter() - t0:.0f}s)",
                file=sys.stderr,
            )
        if noisy:
            prof["sequential"] = _sequential(table, seed_pairs)
            print(f"  {profile} sequential: {prof['sequential']} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
        out["profiles"][profile] = prof
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _sequential(table: OutcomeTable, seed_pairs: list[tuple[int, int]]) -> dict[str, Any]:
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
    return {
        "false_alarms": rate(alarms, n),
        "detection": rate(detected, n),
        "mean_epochs_spent": float(np.mean(spent)),
        "mean_epochs_to_detect": float(np.mean(to_detect)) if to_detect else None,
        "stops_by_look": {str(e): spent.count(e) for e in sorted(set(spent))},
    }


def power_figure(study: dict[str, Any], path: Path) -> None:
    """Measured detection (points, 95% intervals) against the gate's predicted detection (lines), per profile."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = list(study["profiles"])
    fig, axes = plt.subplots(1, len(profiles), figsize=(3.4 * len(profiles), 3.4), sharey=True)
    for ax, p in zip(np.atleast_1d(axes), profiles, strict=True):
        for epochs, color in zip(study["epochs"], ["tab:blue", "tab:orange"], strict=False):
            f = study["profiles"][p]["fixed"][str(epochs)]
            det = f["detection"]
            xs = [int(d) for d in det]
            ys = [det[d]["rate"] for d in det]
            err = [[det[d]["rate"] - det[d]["low"] for d in det], [det[d]["high"] - det[d]["rate"] for d in det]]
            ax.errorbar(xs, ys, yerr=err, fmt="o", ms=3, capsize=2, color=color, label=f"measured, {epochs} ep.")
            pd = f["predicted_detection"]
            ax.plot([int(d) for d in pd], list(pd.values()), "x--", color=color, label=f"predicted, {epochs} ep.")
            ax.axvline(f["predicted_mde_80"], color=color, ls=":", lw=1)
        ax.axhline(0.8, color="black", ls=":", lw=1)
        ax.set(title=p, xlabel="injected drop (points)", ylim=(-0.02, 1.02))
    np.atleast_1d(axes)[0].set_ylabel("detection rate (gate fails)")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def power_tables(study: dict[str, Any]) -> str:
    """The README tables of the power part."""
    tol = study["tolerance"]

    def pts(x: float | None) -> str:
        return f"{x:.1f}" if x is not None else "> 16"

    lines = [
        f"{study['pairs_per_profile']} seed pairs per profile, every case. Predicted: what the gate prints for a pair "
        "(mean over pairs); measured: the injected drop at which the gate fails in 80% (90%) of the pairs, "
        "interpolated on the drop grid; plan: the 3-epoch MDE × √(3/10). Detection: predicted / measured "
        "(✗: the prediction is outside the measured rate's exact 95% interval).",
        "",
        "| profile | epochs | MDE 80%: predicted / measured | within ±2 | MDE 90%: predicted / measured "
        "| 2 points: predicted / measured | 5 points | 10 points | plan from 3 epochs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p, v in study["profiles"].items():
        for e, f in v["fixed"].items():
            det = " | ".join(
                f"{f['predicted_detection'][str(d)]:.0%} / {f['detection'][str(d)]['rate']:.0%}"
                + ("" if f["detection"][str(d)]["low"] - 1e-9 <= f["predicted_detection"][str(d)]
                   <= f["detection"][str(d)]["high"] + 1e-9 else " ✗")
                for d in DROPS
            )  # fmt: skip
            meas = f["measured_drop_at_80"]
            ok = "yes" if meas is not None and abs(f["predicted_mde_80"] - meas) <= tol["mde_points"] else "no"
            plan = (
                f"{v['fixed']['3']['predicted_mde_80'] * math.sqrt(3 / int(e)):.1f}" if e != "3" and "3" in v["fixed"]
                else "—"
            )  # fmt: skip
            lines.append(
                f"| {p} | {e} | {pts(f['predicted_mde_80'])} / {pts(meas)} | {ok} "
                f"| {pts(f['predicted_mde_90'])} / {pts(f['measured_drop_at_90'])} | {det} | {plan} |"
            )
    seq = study["sequential"]
    lines += [
        "",
        f"Sequential mode (budget {seq['budget']} epochs, a look every {seq['stage']}; O'Brien–Fleming spending):",
        "",
        f"| profile | false alarms | detection of a {seq['drop']}-point drop | mean epochs spent "
        f"| mean epochs to detect | fixed 10 epochs: detection of {seq['drop']} points |",
        "|---|---|---|---|---|---|",
    ]
    for p, v in study["profiles"].items():
        if "sequential" not in v:
            continue
        s = v["sequential"]
        fa, det = s["false_alarms"], s["detection"]
        fixed = v["fixed"].get("10", {}).get("detection", {}).get(str(seq["drop"]))
        to_detect = s["mean_epochs_to_detect"]
        lines.append(
            f"| {p} | {fa['hits']}/{fa['n']} = {fa['rate']:.1%} [{fa['low']:.1%}, {fa['high']:.1%}] "
            f"| {det['hits']}/{det['n']} = {det['rate']:.0%} [{det['low']:.0%}, {det['high']:.0%}] "
            f"| {s['mean_epochs_spent']:.1f} | {to_detect:.1f} | {fixed['rate']:.0%} |"
            if fixed and to_detect is not None
            else f"| {p} | {fa['rate']:.1%} | {det['rate']:.0%} | {s['mean_epochs_spent']:.1f} | — | — |"
        )
    return "\n".join(lines)


def _cached_sweep(db: Path, model: str, epochs: int, grid: Any) -> str | None:
    """A completed sweep of this model, grid and epochs already in the work folder (re-analysis is free)."""
    if not db.exists():
        return None
    con = connect(db, read_only=True)
    try:
        for sweep_id, grid_json, options_json in con.execute(
            "SELECT sweep_id, grid_json, options_json FROM sweeps WHERE model = ? AND status = 'completed'", [model]
        ).fetchall():
            if json.loads(grid_json) == json.loads(json.dumps(dataclasses.asdict(grid))) and (
                json.loads(options_json)["epochs"] == epochs and json.loads(options_json)["evalsets"] == SWEEP_FAMILIES
            ):
                return str(sweep_id)
    finally:
        con.close()
    return None


def recommend_study(workdir: Path) -> dict[str, Any]:
    """`recommend`'s pick per profile with a known optimum, at epochs 1, 3 and 10."""
    from runners.decisions.recommend import measure, recommend
    from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep

    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "families": SWEEP_FAMILIES,
        "thresholds": SWEEP_THRESHOLDS,
        "budgets": SWEEP_BUDGETS,
        "profiles": {},
    }
    db = workdir / "recommend.duckdb"
    for profile, optimum in KNOWN_OPTIMA.items():
        picks = {}
        for epochs in SWEEP_EPOCHS:
            model = "scripted" if profile == "reference" else f"scripted:{profile}"
            grid = SweepGrid(no_gain_threshold=SWEEP_THRESHOLDS, max_tool_invocations=SWEEP_BUDGETS)
            sweep_id = (
                _cached_sweep(db, model, epochs, grid)
                or run_sweep(
                    plan_sweep(
                        SweepOptions(
                            grid,
                            BenchOptions.of(
                                evalsets=SWEEP_FAMILIES, model=model, db=db, epochs=epochs
                            ),
                        )
                    )
                ).sweep_id
            )
            con = connect(db, read_only=True)
            try:
                rec = recommend(measure(con, sweep_id))
            finally:
                con.close()
            picks[str(epochs)] = {
                "config": {c: rec.chosen.setting(c) for c in rec.columns},
                "recall": rec.chosen.recall.value,
                "honest_fallback": rec.chosen.honest_fallback.value,
                "best_recall": rec.best_recall.recall.value,
            }
        thresholds = {p["config"]["no_gain_threshold"] for p in picks.values()}
        out["profiles"][profile] = {
            "known_optimum": optimum,
            "picks": picks,
            "identical_across_epochs": len({json.dumps(p["config"], sort_keys=True) for p in picks.values()}) == 1,
            "optimum_found": thresholds == {optimum},
        }
        print(f"  {profile}: {picks} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def figure(results: dict[str, Any], path: Path) -> None:
    """False-alarm rate per profile and detection against the injected drop, with exact 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gate = results["gate"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    names = list(STOCHASTIC)
    gates = [("gate", gate)] + [(k, results[k]) for k in sorted(results) if k.startswith("gate_")]
    width = 0.8 / len(gates)
    for gi, (_, g) in enumerate(gates):
        fa = [g["profiles"][p]["false_alarms"] for p in names]
        axes[0].bar(
            [x + (gi - (len(gates) - 1) / 2) * width for x in range(len(names))],
            [f["rate"] for f in fa],
            width=width,
            color=["tab:gray", "silver"][gi % 2],
            yerr=[[f["rate"] - f["low"] for f in fa], [f["high"] - f["rate"] for f in fa]],
            capsize=4,
            label=f"{g['epochs']} epochs, {g['pairs_per_profile']} pairs",
        )
    axes[0].set_xticks(range(len(names)), names)
    axes[0].axhline(0.05, color="tab:red", ls="--", label="α = 0.05")
    axes[0].set(
        ylim=(0, 0.2),
        ylabel="false-alarm rate (gate fails)",
        xlabel="profile (same profile, two seeds)",
        title="False alarms: same profile, two seeds",
    )
    axes[0].legend(fontsize=8)
    colors = {"sloppy": "tab:blue", "eager": "tab:orange", "fabricator": "tab:green", "reference": "tab:purple"}
    runs = [(gate, "-", "")] + [
        (results[k], "--", f", {results[k]['epochs']} epochs") for k in sorted(results) if k.startswith("gate_")
    ]
    for g, style, suffix in runs:
        for p in [*names, "reference"]:
            if p not in g["profiles"]:
                continue
            det = g["profiles"][p]["detection"]
            xs = [int(d) for d in det]
            ys = [det[d]["rate"] for d in det]
            err = [[det[d]["rate"] - det[d]["low"] for d in det], [det[d]["high"] - det[d]["rate"] for d in det]]
            label = ("reference (noise-free)" if p == "reference" else p) + suffix
            axes[1].errorbar(xs, ys, yerr=err, marker="o", capsize=3, ls=style, color=colors[p], label=label)
    axes[1].axhline(0.9, color="black", ls=":", lw=1, label="90%")
    axes[1].set(
        xticks=list(DROPS),
        ylim=(-0.02, 1.02),
        xlabel="injected pass-rate drop (points)",
        ylabel="detection rate (gate fails)",
        title=f"Detection, all cases (solid: {gate['epochs']} epochs)",
    )
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown_tables(results: dict[str, Any]) -> str:
    """The README tables."""
    lines = []
    for key in sorted(k for k in results if k.startswith("gate")):
        g = results[key]
        lines += [f"{g['epochs']} epochs × every case, {g['pairs_per_profile']} seed pairs per profile:", ""]
        lines += [
            f"| profile | false alarms ({g['pairs_per_profile']} seed pairs) | detection 2 / 5 / 10 points "
            "| noise: null sd of the mean difference (points) |",
            "|---|---|---|---|",
        ]
        for p, v in g["profiles"].items():
            fa = v["false_alarms"]
            fa_txt = f"{fa['hits']}/{fa['n']} = {fa['rate']:.1%} [{fa['low']:.1%}, {fa['high']:.1%}]" if fa else "—"
            det = " / ".join(f"{v['detection'][str(d)]['rate']:.0%}" for d in DROPS)
            name = p if p != "reference" else "reference (noise-free)"
            lines.append(f"| {name} | {fa_txt} | {det} | {v.get('null_sd_points', 0):.1f} |")
        a = g["false_alarms_all"]
        lines += [
            "",
            f"All profiles: {a['hits']}/{a['n']} false alarms = {a['rate']:.1%} "
            f"(95% interval {a['low']:.1%}–{a['high']:.1%}).",
            "",
        ]
    if "recommend" in results:
        lines += [
            "| profile | known optimum | pick at epochs 1 / 3 / 10 | identical | optimum |",
            "|---|---|---|---|---|",
        ]
        for p, v in results["recommend"]["profiles"].items():
            picks = " / ".join(
                f"threshold {x['config']['no_gain_threshold']}, tools {x['config']['max_tool_invocations']}"
                for x in v["picks"].values()
            )
            lines.append(
                f"| {p} | {v['known_optimum']} | {picks} | {'yes' if v['identical_across_epochs'] else 'no'} "
                f"| {'yes' if v['optimum_found'] else 'no'} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["gate", "recommend", "power", "all"], default="all")
    parser.add_argument("--pairs", type=int, default=60, help="seed pairs per stochastic profile (default 60)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the gate runs (default 3)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the DuckDB files here (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"results folder (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.epochs < 1:
        print("error: --pairs and --epochs must be >= 1", file=sys.stderr)
        return 2
    results_path = args.out / "calibration.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.part in ("gate", "all"):
            print("gate: false alarms and detection …", file=sys.stderr)
            # the acceptance setting (3 epochs) is "gate"; other epoch counts are kept beside it
            key = "gate" if args.epochs == 3 else f"gate_{args.epochs}_epochs"
            results[key] = gate_study(args.pairs, args.epochs, work)
        if args.part in ("recommend", "all"):
            print("recommend: picks per profile and epochs …", file=sys.stderr)
            results["recommend"] = recommend_study(work)
        if args.part in ("power", "all"):
            print("power: predicted MDE against measured detection; the sequential mode …", file=sys.stderr)
            results["power"] = power_study(args.pairs)
    args.out.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(results, indent=1) + "\n")
    if "gate" in results:
        figure(results, args.out / "calibration.png")
    if "power" in results:
        power_figure(results["power"], args.out / "power.png")
    print(markdown_tables(results))
    if "power" in results:
        print(power_tables(results["power"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
