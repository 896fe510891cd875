"""The gate's outputs: the verdict line, the Markdown summary for a pull request, the JUnit XML for CI, the JSON
result, and the plan from a pilot. Everything a case or a label wrote is escaped for its medium
(runners/rendering/safe_text.py)."""

from __future__ import annotations

import math

import scipy.stats

from runners.decisions import power
from runners.decisions.gate.result import GateResult, Hypothesis, Measure, Verdict
from runners.decisions.gate.statistics import OVERALL_WEIGHT, PERMUTATION_RESAMPLES, sequential_looks
from runners.rendering.gate.cases import junit_text, markdown_section
from runners.rendering.safe_text import markdown as md
from runners.rendering.safe_text import xml

__all__ = ["finite", "junit", "loops_line", "markdown", "plan", "to_json", "verdict_line", "verdict_line_with_power"]


def verdict_line(result: GateResult) -> str:
    """The one-line verdict: which tests regressed, with their p-values (or why it passed)."""
    if result.failures:
        line = "❌ **REGRESSION** — " + "; ".join(t.describe() for t in result.failures) + f" (α = {result.alpha:g})."
        if result.overall.regressed and not result.regressed_families:
            worst = min(result.families, key=lambda f: f.test.change)
            line += (
                f" Largest family drop: {worst.family} {worst.test.change * 100:+.1f} points "
                f"({worst.cases_worse} of {worst.cases} cases worse; not significant on its own)."
            )
        return line
    best = min(result.tests, key=lambda t: t.p_adjusted)
    if result.inconclusive:
        return (
            f"⚠️ **INCONCLUSIVE** — no test is significant (smallest adjusted p = {best.p_adjusted:.2g}, "
            f"{best.name}), but {result.inconclusive}.{_mde_sentence(result)}{_look_text(result)}"
        )
    return (
        f"✅ **PASS** — no test is significant after Holm's correction at α = {result.alpha:g} "
        f"(smallest adjusted p = {best.p_adjusted:.2g}, {best.name}).{_mde_sentence(result)}{_look_text(result)}"
    )


def _mde_sentence(result: GateResult) -> str:
    """What this comparison could have caught, or why no drop size can be named."""
    t = result.overall.test
    m = t.mde
    if m is None:
        return " Its MDE was not computed."
    at_80, at_90 = (m.status(p) for p in power.POWERS)
    if at_80 is power.MdeStatus.UNREACHABLE:
        return f" Its MDE: unreachable (its smallest p {m.min_p:.2g} is above its level {m.level:.2g})."
    if at_80 is power.MdeStatus.UNDETECTABLE:
        return (
            " Its MDE: undetectable (not even losing every passing candidate run is caught with 80% probability at"
            f" its level {m.level:.2g})."
        )
    at_90_text = f"{t.mde_text(0.9)} with 90%" if at_90 is power.MdeStatus.FOUND else "none with 90%"
    return (
        f" It would have caught a pass-rate drop of {t.mde_text(0.8)} with 80% probability "
        f"({at_90_text}) at its level {m.level:.2g}."
    )


def _look_text(result: GateResult) -> str:
    look = result.look
    if look is None:
        return ""
    return (
        f" Sequential look {look.index} of {len(look.looks)} at {look.epochs} epochs (budget {look.looks[-1]}; "
        f"nominal α {look.level:.2g}, α spent {look.spent:.2g})."
    )


def verdict_line_with_power(result: GateResult) -> str:
    """`verdict_line` plus, for a regression, the MDE sentence (a pass or inconclusive line carries it already):
    every verdict line says what the comparison could have caught, or why no drop size can be named."""
    line = verdict_line(result)
    return line + _mde_sentence(result) + _look_text(result) if result.failures else line


def markdown(result: GateResult) -> str:
    """A summary fit for a pull-request comment."""
    lines = [
        f"## Model gate: {md(result.candidate)} vs {md(result.baseline)}",
        "",
        verdict_line_with_power(result),
        "",
        *([loops_line(result), ""] if result.loops is not None else []),
        f"Unit: the case ({result.overall.cases} cases × {result.overall.pairs // result.overall.cases} epochs). "
        f"p: one-sided sign-flip permutation test on per-case differences (exact up to 13 differing cases, else "
        f"{PERMUTATION_RESAMPLES:,} resamples: floor {1 / (PERMUTATION_RESAMPLES + 1):.4f}); "
        f"adj. p: Holm's weighted step-down over all {len(result.tests)} tests "
        f"(overall pass rate {OVERALL_WEIGHT:.0%} of α), so the whole gate's "
        f"false-alarm rate is ≤ α = {result.alpha:g}. pass^{result.k}: tau-bench, mean over cases of "
        f"C(passes, {result.k}) / C(epochs, {result.k}).{_mde_legend(result)}",
        "",
        f"| family | cases | pass rate (base → cand) | change | pass^{result.k} (base → cand) | cases worse / better "
        "| p | adj. p | MDE 80% / 90% | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in [result.overall, *result.families]:
        t = f.test
        lines.append(
            f"| {md(f.family)} | {f.cases} | {f.base_rate:.0%} → {f.cand_rate:.0%} | {t.change * 100:+.1f} pts | "
            f"{f.base_pass_k:.2f} → {f.cand_pass_k:.2f} | {f.cases_worse} / {f.cases_better} | {t.p_value:.2g} | "
            f"{t.p_adjusted:.2g} | {t.mde_text(0.8)} / {t.mde_text(0.9)} | {t.verdict.value} |"
        )
    lines += [
        "",
        "| cost per case run | baseline | candidate | change | p | adj. p | MDE 80% / 90% | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in result.cost_tests:
        b, c, rel = result.cost[t.name]
        lines.append(
            f"| {md(t.name)} | {b:.1f} | {c:.1f} | {rel:+.0%} | {t.p_value:.2g} | {t.p_adjusted:.2g} | "
            f"{t.mde_text(0.8)} / {t.mde_text(0.9)} | {t.verdict.value} |"
        )
    return "\n".join(lines) + "\n" + markdown_section(result, result.db)


def loops_line(result: GateResult) -> str:
    """One line when the two sides ran different agent loops: the gate then compares the loops, not the models."""
    loops = result.loops
    if loops is None:
        return ""
    return (
        f"⚠️ Different agent loops: the baseline ran `--agent {md(loops.baseline)}`, the candidate `--agent"
        f" {md(loops.candidate)}`; this compares the loops (the Harness or none), not the models."
    )


def _mde_legend(result: GateResult) -> str:
    if result.overall.test.mde is None:
        return ""
    return (
        " MDE: the smallest pass-rate drop (points; costs: relative increase) the test detects with 80% / 90% "
        "probability at its first Holm level (α × its share), simulated from these cases' own noise; "
        "'unreachable': too few cases for its smallest p to reach its level; 'undetectable': it can be significant,"
        " but not even the largest change simulated (every passing candidate run lost; a 100-fold cost) is caught"
        f" with that probability. A pass needs the overall MDE at 80% ≤ "
        f"{result.max_mde * 100:g} points (--max-mde), else the verdict is INCONCLUSIVE."
    )


def junit(result: GateResult, *, allow_inconclusive: bool = False) -> str:
    """JUnit XML: one test case for the whole set, one per family, one per cost metric, each with its MDE.

    INCONCLUSIVE marks the whole-set test case `<error type="inconclusive">` (errors="1": CI fails, as the
    exit code 3 does), or `<skipped>` with `allow_inconclusive` (exit 0)."""
    cases = []
    inconclusive = result.verdict is Verdict.INCONCLUSIVE
    for t in result.tests:
        classname = {Measure.OVERALL: "gate.overall", Measure.FAMILY: "gate.family", Measure.COST: "gate.cost"}
        body = ""
        if t.failed:
            # the message stays the verdict line's text; the cases and their diff commands are the failure's body
            body = f'<failure message="{xml(t.describe())}">{xml(junit_text(result, t, result.db))}</failure>'
        if inconclusive and t.kind is Measure.OVERALL:  # an error without --allow-inconclusive, else skipped
            tag = "skipped" if allow_inconclusive else 'error type="inconclusive"'
            body = f'<{tag} message="{xml("INCONCLUSIVE: " + (result.inconclusive or ""))}"/>'
        name = "all cases" if t.kind is Measure.OVERALL else t.name
        cases.append(f'<testcase classname="{classname[t.kind]}" name="{xml(name)}">{body}{_properties(t)}</testcase>')
    errors = int(inconclusive and not allow_inconclusive)
    skipped = int(inconclusive and allow_inconclusive)
    suite_props = [("verdict", result.verdict.value), ("max_mde", f"{result.max_mde:g}")]
    if result.look is not None:
        suite_props += [("sequential_look", str(result.look.index)), ("sequential_epochs", str(result.look.epochs)),
                        ("sequential_level", f"{result.look.level:.6g}")]  # fmt: skip
    props = "".join(f'<property name="{n}" value="{xml(v)}"/>' for n, v in suite_props)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="harness-bench gate {xml(result.candidate)} vs {xml(result.baseline)}" '
        f'tests="{len(cases)}" failures="{len(result.failures)}" errors="{errors}" skipped="{skipped}">\n'
        f"  <properties>{props}</properties>\n  " + "\n  ".join(cases) + "\n</testsuite>\n"
    )


def finite(value: object) -> object:
    """JSON has no infinity: an infinite relative change (a cost up from 0) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def plan(result: GateResult, target_mde: float) -> str:
    """How many epochs (or cases) bring the overall MDE to `target_mde`, estimated from this pilot."""
    t = result.overall.test
    m = t.mde
    n, e = result.overall.cases, result.epochs
    head = f"Plan from a pilot of {n} cases × {e} epochs, target MDE {target_mde * 100:g} points at 80% power:"
    if m is None or not m.reachable:
        need = power.min_cases(t.alpha * t.weight)
        return f"{head}\n  the overall test cannot be significant with {n} cases: it needs at least {need} cases.\n"
    if m.at_80 is None or m.at_90 is None:
        return (
            f"{head}\n  no drop is detected with {'80' if m.at_80 is None else '90'}% probability, not even losing"
            " every passing candidate run: too few cases pass under both labels; run more cases both pass.\n"
        )
    last = power.sequential_levels(tuple(x / 20 for x in sequential_looks(20, 4)), result.alpha)[-1]
    z = scipy.stats.norm.ppf
    factor = float(
        ((z(1 - last * t.weight) + z(power.POWERS[0])) / (z(1 - result.alpha * t.weight) + z(power.POWERS[0]))) ** 2
    )
    lines = [
        head,
        f"  now: MDE {m.at_80 * 100:.1f} points at 80%, {m.at_90 * 100:.1f} at 90% (level {m.level:.2g}).",
        f"  epochs for {target_mde * 100:g} points: {power.epochs_for(m.at_80, e, target_mde)} at 80% power, "
        f"{power.epochs_for(m.at_90, e, target_mde)} at 90% (or {power.cases_for(m.at_80, n, target_mde)} cases at "
        f"{e} epochs, 80%).",
        "  predicted MDE at 80% by epochs (noise falls with 1/√epochs): "
        + ", ".join(f"{x}: {m.at_80 * math.sqrt(e / x) * 100:.1f}" for x in sorted({e, 5, 10, 20, 40}) if x >= e),
        f"  a sequential gate (--sequential --budget 20 --stage 4) runs its last look at nominal α {last:.3g} instead "
        f"of {result.alpha:g}: give it a budget of ≈ {factor:.2f} × these epochs; it stops earlier when a drop is "
        "large.",
    ]
    return "\n".join(lines) + "\n"


def _properties(t: Hypothesis) -> str:
    """A test case's MDE as JUnit properties (fractions; an empty value: none, `mde_80_status` says why)."""
    if t.mde is None:
        return ""
    vals = [("mde_80", t.mde.at_80), ("mde_90", t.mde.at_90)]
    items = [f'<property name="{n}" value="{"" if v is None else f"{v:.6g}"}"/>' for n, v in vals]
    items.append(f'<property name="mde_level" value="{t.mde.level:.6g}"/>')
    items += [f'<property name="mde_{p * 100:.0f}_status" value="{t.mde.status(p).value}"/>' for p in power.POWERS]
    return "<properties>" + "".join(items) + "</properties>"


def to_json(result: GateResult, *, allow_inconclusive: bool = False) -> dict[str, object]:
    """The gate's result as plain data: verdict, every test with its p, adjusted p and MDE."""

    def test(t: Hypothesis) -> dict[str, object]:
        return {
            "name": t.name, "kind": t.kind.name.lower(), "cases": t.cases, "change": t.change,
            "p": t.p_value, "p_adjusted": t.p_adjusted, "weight": t.weight, "failed": t.failed,
            "mde_80": t.mde.at_80 if t.mde else None, "mde_90": t.mde.at_90 if t.mde else None,
            "mde_level": t.mde.level if t.mde else None, "mde_reachable": t.mde.reachable if t.mde else None,
            # why mde_80 / mde_90 is null: unreachable (never significant) or undetectable (not that likely)
            "mde_80_status": t.mde.status(power.POWERS[0]).value if t.mde else None,
            "mde_90_status": t.mde.status(power.POWERS[1]).value if t.mde else None,
        }  # fmt: skip

    look = result.look
    return {
        "baseline": result.baseline, "candidate": result.candidate, "verdict": result.verdict.value,
        "passes": result.verdict is Verdict.PASS or (result.verdict is Verdict.INCONCLUSIVE and allow_inconclusive),
        "alpha": result.alpha, "max_mde": result.max_mde, "inconclusive": result.inconclusive,
        "cases": result.overall.cases, "epochs": result.epochs, "tests": [test(t) for t in result.tests],
        "loops": None if result.loops is None else {"baseline": result.loops.baseline,
                                                    "candidate": result.loops.candidate},
        "sequential": None if look is None else {
            "look": look.index, "epochs": look.epochs, "looks": list(look.looks), "level": look.level,
            "spent": look.spent, "target_mde": look.target_mde, "next_epochs": look.next_epochs,
        },
    }  # fmt: skip
