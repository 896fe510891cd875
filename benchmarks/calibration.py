"""The calibration study the project runs on itself (issue 11): are the gate and `recommend` right?

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

Writes `reports/calibration/calibration.json` and `calibration.png`, and prints the README tables.
A study, not a test: it takes minutes (the scripted model runs ~100–250 case runs/s).
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

import scipy.stats

from runners.bench import BenchOptions, run_bench
from runners.gate import Pair, evaluate, load_pairs, per_case
from runners.metrics_db import connect

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "calibration"
STOCHASTIC = ("sloppy", "eager", "fabricator")
DROPS = (2, 5, 10)
KNOWN_OPTIMA = {"reference": 2, "rewriter?k=1": 3, "rewriter?k=2": 4, "rewriter?k=3": 5}
SWEEP_FAMILIES = ["diagnosable", "empty_logs", "generic_kb", "missing_context"]
SWEEP_THRESHOLDS = (1, 2, 3, 4, 5, 6)
SWEEP_BUDGETS = (8, 16)
SWEEP_EPOCHS = (1, 3, 10)


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
                    BenchOptions(
                        model=f"scripted:{profile}?seed={seed}" if profile != "reference" else "scripted",
                        label=f"s{seed}",
                        db=db,
                        epochs=epochs,
                        keep_runs=False,
                    )
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
    from runners.recommend import measure, recommend
    from runners.sweep import SweepGrid, SweepOptions, run_sweep

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
            grid = SweepGrid(no_gain_threshold=SWEEP_THRESHOLDS, max_tool_calls=SWEEP_BUDGETS)
            sweep_id = (
                _cached_sweep(db, model, epochs, grid)
                or run_sweep(
                    SweepOptions(grid, BenchOptions(evalsets=SWEEP_FAMILIES, model=model, db=db, epochs=epochs))
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
                f"threshold {x['config']['no_gain_threshold']}, tools {x['config']['max_tool_calls']}"
                for x in v["picks"].values()
            )
            lines.append(
                f"| {p} | {v['known_optimum']} | {picks} | {'yes' if v['identical_across_epochs'] else 'no'} "
                f"| {'yes' if v['optimum_found'] else 'no'} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["gate", "recommend", "all"], default="all")
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
    args.out.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(results, indent=1) + "\n")
    if "gate" in results:
        figure(results, args.out / "calibration.png")
    print(markdown_tables(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
