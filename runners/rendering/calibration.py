"""The calibration study's figures and tables (`runners/pipelines/calibration.py` measures them): false alarms and
detection of the gate (`gate_figure`, `gate_tables`), predicted against measured detection and the sequential mode
(`power_figure`, `power_tables`), and `recommend`'s picks (in `gate_tables`, as the docs show them)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from runners.decisions.calibration_results import (
    DROPS,
    STOCHASTIC,
    CalibrationResults,
    GateStudy,
    PowerStudy,
    Rate,
    gate_key,
)

__all__ = ["gate_figure", "gate_tables", "power_figure", "power_tables"]


def _pyplot() -> Any:
    """matplotlib's pyplot on the file backend (imported here: a second of start-up nothing else pays)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _error_bars(rates: list[Rate]) -> list[list[float]]:
    return [[r.rate - r.low for r in rates], [r.high - r.rate for r in rates]]


def gate_figure(results: CalibrationResults, path: Path) -> None:
    """False-alarm rate per profile and detection against the injected drop, with exact 95% intervals: the 3-epoch
    gate part solid, the others beside it."""
    plt = _pyplot()
    gate = results.gates[gate_key(3)]
    others = [results.gates[k] for k in sorted(results.gates) if k != gate_key(3)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    names = list(STOCHASTIC)
    gates = [gate, *others]
    width = 0.8 / len(gates)
    for gi, g in enumerate(gates):
        fa = [g.profiles[p].false_alarms for p in names]
        rates = [f for f in fa if f is not None]
        axes[0].bar(
            [x + (gi - (len(gates) - 1) / 2) * width for x in range(len(names))],
            [f.rate for f in rates],
            width=width,
            color=["tab:gray", "silver"][gi % 2],
            yerr=_error_bars(rates),
            capsize=4,
            label=f"{g.epochs} epochs, {g.pairs_per_profile} pairs",
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
    runs = [(gate, "-", ""), *((g, "--", f", {g.epochs} epochs") for g in others)]
    for g, style, suffix in runs:
        for p in [*names, "reference"]:
            if p not in g.profiles:
                continue
            det = g.profiles[p].detection
            xs = [int(d) for d in det]
            ys = [det[d].rate for d in det]
            label = ("reference (noise-free)" if p == "reference" else p) + suffix
            axes[1].errorbar(xs, ys, yerr=_error_bars(list(det.values())), marker="o", capsize=3, ls=style,
                             color=colors[p], label=label)  # fmt: skip
    axes[1].axhline(0.9, color="black", ls=":", lw=1, label="90%")
    axes[1].set(
        xticks=list(DROPS),
        ylim=(-0.02, 1.02),
        xlabel="injected pass-rate drop (points)",
        ylabel="detection rate (gate fails)",
        title=f"Detection, all cases (solid: {gate.epochs} epochs)",
    )
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def power_figure(study: PowerStudy, path: Path) -> None:
    """Measured detection (points, 95% intervals) against the gate's predicted detection (lines), per profile."""
    plt = _pyplot()
    profiles = list(study.profiles)
    fig, axes = plt.subplots(1, len(profiles), figsize=(3.4 * len(profiles), 3.4), sharey=True)
    for ax, p in zip(np.atleast_1d(axes), profiles, strict=True):
        for epochs, color in zip(study.epochs, ["tab:blue", "tab:orange"], strict=False):
            f = study.profiles[p].fixed[str(epochs)]
            det = f.detection
            xs = [int(d) for d in det]
            ys = [det[d].rate for d in det]
            ax.errorbar(xs, ys, yerr=_error_bars(list(det.values())), fmt="o", ms=3, capsize=2, color=color,
                        label=f"measured, {epochs} ep.")  # fmt: skip
            pd = f.predicted_detection
            ax.plot([int(d) for d in pd], list(pd.values()), "x--", color=color, label=f"predicted, {epochs} ep.")
            ax.axvline(f.predicted_mde_80, color=color, ls=":", lw=1)
        ax.axhline(0.8, color="black", ls=":", lw=1)
        ax.set(title=p, xlabel="injected drop (points)", ylim=(-0.02, 1.02))
    np.atleast_1d(axes)[0].set_ylabel("detection rate (gate fails)")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _gate_table(g: GateStudy) -> list[str]:
    lines = [f"{g.epochs} epochs × every case, {g.pairs_per_profile} seed pairs per profile:", ""]
    lines += [
        f"| profile | false alarms ({g.pairs_per_profile} seed pairs) | detection 2 / 5 / 10 points "
        "| noise: null sd of the mean difference (points) |",
        "|---|---|---|---|",
    ]
    for p, v in g.profiles.items():
        fa = v.false_alarms
        fa_txt = f"{fa.hits}/{fa.n} = {fa.rate:.1%} [{fa.low:.1%}, {fa.high:.1%}]" if fa else "—"
        det = " / ".join(f"{v.detection[str(d)].rate:.0%}" for d in DROPS)
        name = p if p != "reference" else "reference (noise-free)"
        lines.append(f"| {name} | {fa_txt} | {det} | {v.null_sd_points:.1f} |")
    a = g.false_alarms_all
    return [
        *lines,
        "",
        f"All profiles: {a.hits}/{a.n} false alarms = {a.rate:.1%} (95% interval {a.low:.1%}–{a.high:.1%}).",
        "",
    ]


def gate_tables(results: CalibrationResults) -> str:
    """The tables of the gate parts and of the recommend part (docs/calibration.md)."""
    lines: list[str] = []
    for key in sorted(results.gates):
        lines += _gate_table(results.gates[key])
    if results.recommend is not None:
        lines += [
            "| profile | known optimum | pick at epochs 1 / 3 / 10 | identical | optimum |",
            "|---|---|---|---|---|",
        ]
        for p, v in results.recommend.profiles.items():
            picks = " / ".join(
                f"threshold {x.config['no_gain_threshold']}, tools {x.config['max_tool_invocations']}"
                for x in v.picks.values()
            )
            lines.append(
                f"| {p} | {v.known_optimum} | {picks} | {'yes' if v.identical_across_epochs else 'no'} "
                f"| {'yes' if v.optimum_found else 'no'} |"
            )
    return "\n".join(lines)


def _points(x: float | None) -> str:
    return f"{x:.1f}" if x is not None else "> 16"


def power_tables(study: PowerStudy) -> str:
    """The tables of the power part (docs/calibration.md)."""
    lines = [
        f"{study.pairs_per_profile} seed pairs per profile, every case. Predicted: what the gate prints for a pair "
        "(mean over pairs); measured: the injected drop at which the gate fails in 80% (90%) of the pairs, "
        "interpolated on the drop grid; plan: the 3-epoch MDE × √(3/10). Detection: predicted / measured "
        "(✗: the prediction is outside the measured rate's exact 95% interval).",
        "",
        "| profile | epochs | MDE 80%: predicted / measured | within ±2 | MDE 90%: predicted / measured "
        "| 2 points: predicted / measured | 5 points | 10 points | plan from 3 epochs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p, v in study.profiles.items():
        for e, f in v.fixed.items():
            det = " | ".join(
                f"{f.predicted_detection[str(d)]:.0%} / {f.detection[str(d)].rate:.0%}"
                + ("" if f.detection[str(d)].low - 1e-9 <= f.predicted_detection[str(d)]
                   <= f.detection[str(d)].high + 1e-9 else " ✗")
                for d in DROPS
            )  # fmt: skip
            meas = f.measured_drop_at_80
            ok = "yes" if meas is not None and abs(f.predicted_mde_80 - meas) <= study.tolerance.mde_points else "no"
            plan = (
                f"{v.fixed['3'].predicted_mde_80 * math.sqrt(3 / int(e)):.1f}" if e != "3" and "3" in v.fixed
                else "—"
            )  # fmt: skip
            lines.append(
                f"| {p} | {e} | {_points(f.predicted_mde_80)} / {_points(meas)} | {ok} "
                f"| {_points(f.predicted_mde_90)} / {_points(f.measured_drop_at_90)} | {det} | {plan} |"
            )
    seq = study.sequential
    lines += [
        "",
        f"Sequential mode (budget {seq.budget} epochs, a look every {seq.stage}; O'Brien–Fleming spending):",
        "",
        f"| profile | false alarms | detection of a {seq.drop}-point drop | mean epochs spent "
        f"| mean epochs to detect | fixed 10 epochs: detection of {seq.drop} points |",
        "|---|---|---|---|---|---|",
    ]
    for p, v in study.profiles.items():
        s = v.sequential
        if s is None:
            continue
        fa, det_rate = s.false_alarms, s.detection
        ten = v.fixed.get("10")
        fixed = ten.detection.get(str(seq.drop)) if ten is not None else None
        to_detect = s.mean_epochs_to_detect
        lines.append(
            f"| {p} | {fa.hits}/{fa.n} = {fa.rate:.1%} [{fa.low:.1%}, {fa.high:.1%}] "
            f"| {det_rate.hits}/{det_rate.n} = {det_rate.rate:.0%} [{det_rate.low:.0%}, {det_rate.high:.0%}] "
            f"| {s.mean_epochs_spent:.1f} | {to_detect:.1f} | {fixed.rate:.0%} |"
            if fixed and to_detect is not None
            else f"| {p} | {fa.rate:.1%} | {det_rate.rate:.0%} | {s.mean_epochs_spent:.1f} | — | — |"
        )
    return "\n".join(lines)
