"""The model-upgrade gate: a candidate label against a baseline label on the same cases and epochs.

Per family: pass rate, pass^k (tau-bench: mean over cases of C(c, k) / C(n, k)), an exact one-sided
McNemar test on paired case runs, and cost deltas. A family regresses when its pass rate drops by
more than `max_recall_drop` *and* the drop is significant; cost regresses when a mean rises by more
than `max_cost_increase`. Exit 0 pass, 1 regression, 2 unusable input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

import duckdb

ALPHA = 0.05


class GateInputError(ValueError):
    """The two labels cannot be compared (exit 2)."""


@dataclass(frozen=True)
class Pair:
    """One case run of each label for the same (case, epoch)."""

    case_id: str
    """Case."""
    family: str
    """Family."""
    epoch: int
    """Epoch."""
    base_pass: bool
    """Baseline passed."""
    cand_pass: bool
    """Candidate passed."""
    base_cost: tuple[float, float, float]
    """Baseline (tool invocations, model calls, tokens)."""
    cand_cost: tuple[float, float, float]
    """Candidate (tool invocations, model calls, tokens)."""


def pass_hat_k(passes_per_case: dict[str, tuple[int, int]], k: int) -> float:
    """tau-bench pass^k: mean over cases of C(c, k) / C(n, k); k is capped at each case's n."""
    vals = []
    for c, n in passes_per_case.values():
        kk = min(k, n)
        vals.append(math.comb(c, kk) / math.comb(n, kk) if n else 0.0)
    return float(sum(vals) / len(vals)) if vals else float("nan")


def mcnemar_regression_p(b: int, c: int) -> float:
    """Exact one-sided McNemar: P(X >= b) for X ~ Binomial(b + c, 1/2); b = base pass & cand fail."""
    n = b + c
    if n == 0:
        return 1.0
    return float(sum(math.comb(n, i) for i in range(b, n + 1)) / 2**n)


@dataclass
class FamilyResult:
    """The gate's verdict on one family."""

    family: str
    """Family."""
    pairs: int
    """Paired case runs."""
    base_rate: float
    """Baseline pass rate."""
    cand_rate: float
    """Candidate pass rate."""
    base_pass_k: float
    """Baseline pass^k."""
    cand_pass_k: float
    """Candidate pass^k."""
    regressed_pairs: int
    """Pairs that passed on baseline and failed on candidate."""
    improved_pairs: int
    """Pairs that failed on baseline and passed on candidate."""
    p_value: float
    """One-sided exact McNemar p for a regression."""
    regressed: bool
    """The family's verdict."""


@dataclass
class GateResult:
    """Everything the gate decided."""

    baseline: str
    """Baseline label."""
    candidate: str
    """Candidate label."""
    k: int
    """k of pass^k."""
    families: list[FamilyResult]
    """Per-family verdicts."""
    overall: FamilyResult
    """All pairs together."""
    cost: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    """metric -> (baseline mean, candidate mean, relative change)."""
    cost_regressions: list[str] = field(default_factory=list)
    """Cost metrics over the allowed increase."""

    @property
    def regressed_families(self) -> list[str]:
        """Families that regressed."""
        return [f.family for f in self.families if f.regressed]

    @property
    def passed(self) -> bool:
        """No family and no cost metric regressed."""
        return not self.regressed_families and not self.cost_regressions and not self.overall.regressed


def load_pairs(con: duckdb.DuckDBPyConnection, baseline: str, candidate: str) -> list[Pair]:
    """Pair the two labels' case runs on (case_id, epoch); refuse differing case sets."""
    labels = {r[0] for r in con.execute("SELECT DISTINCT label FROM case_runs WHERE label IS NOT NULL").fetchall()}
    for lab in (baseline, candidate):
        if lab not in labels:
            raise GateInputError(
                f"unknown label {lab!r}; labels in the database: {', '.join(sorted(labels)) or 'none'}"
            )

    def runs(label: str) -> dict[tuple[str, int], tuple[str, bool, tuple[float, float, float]]]:
        rows = con.execute(
            """
            SELECT case_id, epoch, family, passed, tool_invocations, model_calls, input_tokens + output_tokens
            FROM (SELECT *, row_number() OVER (PARTITION BY case_id, epoch ORDER BY finished_at DESC) AS rn
                  FROM case_runs WHERE label = ?)
            WHERE rn = 1
            """,
            [label],
        ).fetchall()
        return {(r[0], int(r[1])): (r[2], bool(r[3]), (float(r[4]), float(r[5]), float(r[6]))) for r in rows}

    base, cand = runs(baseline), runs(candidate)
    base_cases = {c for c, _ in base}
    cand_cases = {c for c, _ in cand}
    if base_cases != cand_cases:
        only_b = sorted(base_cases - cand_cases)
        only_c = sorted(cand_cases - base_cases)
        parts = []
        if only_b:
            parts.append(f"only in {baseline}: {', '.join(only_b[:10])}" + (" …" if len(only_b) > 10 else ""))
        if only_c:
            parts.append(f"only in {candidate}: {', '.join(only_c[:10])}" + (" …" if len(only_c) > 10 else ""))
        raise GateInputError("the two labels cover different cases — " + "; ".join(parts))
    if set(base) != set(cand):
        missing = sorted(set(base) ^ set(cand))[:5]
        raise GateInputError(f"the two labels cover different epochs, e.g. {missing}; run both with the same --epochs")
    return [
        Pair(
            cid, base[(cid, ep)][0], ep, base[(cid, ep)][1], cand[(cid, ep)][1], base[(cid, ep)][2], cand[(cid, ep)][2]
        )
        for cid, ep in sorted(base)
    ]


def _family(name: str, pairs: list[Pair], k: int, max_drop: float) -> FamilyResult:
    n = len(pairs)
    base_rate = sum(p.base_pass for p in pairs) / n
    cand_rate = sum(p.cand_pass for p in pairs) / n
    b = sum(p.base_pass and not p.cand_pass for p in pairs)
    c = sum(p.cand_pass and not p.base_pass for p in pairs)
    per_case_b: dict[str, tuple[int, int]] = {}
    per_case_c: dict[str, tuple[int, int]] = {}
    for p in pairs:
        pb, nb = per_case_b.get(p.case_id, (0, 0))
        per_case_b[p.case_id] = (pb + p.base_pass, nb + 1)
        pc, nc = per_case_c.get(p.case_id, (0, 0))
        per_case_c[p.case_id] = (pc + p.cand_pass, nc + 1)
    p_value = mcnemar_regression_p(b, c)
    regressed = (base_rate - cand_rate) > max_drop and p_value < ALPHA
    return FamilyResult(
        name, n, base_rate, cand_rate, pass_hat_k(per_case_b, k), pass_hat_k(per_case_c, k), b, c, p_value, regressed
    )


def evaluate(
    pairs: list[Pair], baseline: str, candidate: str, *, k: int = 3, max_recall_drop: float = 0.0,
    max_cost_increase: float = 0.25,
) -> GateResult:  # fmt: skip
    """Compute the gate verdict from paired case runs."""
    if not pairs:
        raise GateInputError("no paired case runs")
    if k < 1:
        raise GateInputError(f"--k {k}: must be >= 1")
    by_family: dict[str, list[Pair]] = {}
    for p in pairs:
        by_family.setdefault(p.family, []).append(p)
    families = [_family(f, ps, k, max_recall_drop) for f, ps in sorted(by_family.items())]
    overall = _family("(all)", pairs, k, max_recall_drop)
    result = GateResult(baseline, candidate, k, families, overall)
    for i, metric in enumerate(("tool_invocations", "model_calls", "tokens")):
        b = sum(p.base_cost[i] for p in pairs) / len(pairs)
        c = sum(p.cand_cost[i] for p in pairs) / len(pairs)
        rel = (c - b) / b if b else (0.0 if c == 0 else float("inf"))
        result.cost[metric] = (b, c, rel)
        if rel > max_cost_increase:
            result.cost_regressions.append(metric)
    return result


def markdown(result: GateResult) -> str:
    """A summary fit for a pull-request comment."""
    verdict = "✅ **PASS**" if result.passed else "❌ **REGRESSION**"
    lines = [
        f"## Model gate: `{result.candidate}` vs `{result.baseline}` — {verdict}",
        "",
        f"Paired case runs: {result.overall.pairs}. pass^{result.k} per tau-bench; p = exact one-sided McNemar.",
        "",
        f"| family | pairs | pass rate (base → cand) | pass^{result.k} (base → cand) | lost / won | p | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in [*result.families, result.overall]:
        lines.append(
            f"| {f.family} | {f.pairs} | {f.base_rate:.0%} → {f.cand_rate:.0%} | {f.base_pass_k:.2f} → "
            f"{f.cand_pass_k:.2f} | {f.regressed_pairs} / {f.improved_pairs} | {f.p_value:.3f} | "
            f"{'❌ regressed' if f.regressed else 'ok'} |"
        )
    lines += ["", "| cost per case run | baseline | candidate | change |", "|---|---|---|---|"]
    for metric, (b, c, rel) in result.cost.items():
        flag = " ❌" if metric in result.cost_regressions else ""
        lines.append(f"| {metric} | {b:.1f} | {c:.1f} | {rel:+.0%}{flag} |")
    if result.regressed_families:
        lines += ["", f"Regressed families: {', '.join(result.regressed_families)}."]
    if result.cost_regressions:
        lines += ["", f"Cost regressions: {', '.join(result.cost_regressions)}."]
    return "\n".join(lines) + "\n"


def junit(result: GateResult) -> str:
    """JUnit XML: one test case per family plus one per cost metric."""
    cases = []
    for f in result.families:
        body = ""
        if f.regressed:
            msg = f"pass rate {f.base_rate:.0%} -> {f.cand_rate:.0%} (lost {f.regressed_pairs}, p={f.p_value:.3f})"
            body = f'<failure message="{escape(msg, {chr(34): "&quot;"})}"/>'
        cases.append(f'<testcase classname="gate.family" name="{escape(f.family)}">{body}</testcase>')
    for metric, (b, c, rel) in result.cost.items():
        body = ""
        if metric in result.cost_regressions:
            body = f'<failure message="{escape(f"{metric} {b:.1f} -> {c:.1f} ({rel:+.0%})")}"/>'
        cases.append(f'<testcase classname="gate.cost" name="{metric}">{body}</testcase>')
    failures = len(result.regressed_families) + len(result.cost_regressions)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="harness-bench gate {escape(result.candidate)} vs {escape(result.baseline)}" '
        f'tests="{len(cases)}" failures="{failures}">\n  ' + "\n  ".join(cases) + "\n</testsuite>\n"
    )


def write_outputs(result: GateResult, summary_path: Path, junit_path: Path) -> None:
    """Write the Markdown summary and the JUnit XML."""
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    junit_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(markdown(result), encoding="utf-8")
    junit_path.write_text(junit(result), encoding="utf-8")
