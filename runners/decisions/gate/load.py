"""Reading the pairs: which bench run each label's case runs come from, and the two labels' case runs paired on
(case, epoch) — refused when they cannot be compared. The SQL is the store's (runners/store/gate_pairs.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import duckdb

from runners.decisions.gate.result import Cost, GateInputError, Loops, Pair
from runners.store import gate_pairs

__all__ = ["BenchRuns", "compared_loops", "load_pairs", "pick_bench_runs"]


@dataclass(frozen=True, slots=True)
class BenchRuns:
    """The bench run each label's case runs are taken from (None: the label's only one)."""

    baseline: str | None = None
    """The baseline's `--bench-run`."""
    candidate: str | None = None
    """The candidate's `--bench-run`."""


def pick_bench_runs(con: duckdb.DuckDBPyConnection, picked: Sequence[str], baseline: str, candidate: str) -> BenchRuns:
    """Give each `--bench-run` to the label it carries (the same label: baseline first); refuse more than two
    and one of neither label."""
    if len(picked) > 2:
        raise GateInputError(
            f"--bench-run given {len(picked)} times; at most one for the baseline and one for the candidate"
        )
    chosen: dict[str, str] = {}
    for run_id in picked:
        label = gate_pairs.label_of_bench_run(con, run_id)
        role = next((r for r, lab in (("baseline", baseline), ("candidate", candidate))
                     if lab == label and r not in chosen), None)  # fmt: skip
        if role is None:
            raise GateInputError(f"--bench-run {run_id}: not a bench run of --baseline {baseline!r} or --candidate"
                                 f" {candidate!r} (its label: {label!r})")  # fmt: skip
        chosen[role] = run_id
    return BenchRuns(baseline=chosen.get("baseline"), candidate=chosen.get("candidate"))


def _bench_run_of(con: duckdb.DuckDBPyConnection, label: str, picked: str | None, role: str) -> str:
    """The one bench run a label's case runs come from: `picked`, or the label's only bench run."""
    runs = gate_pairs.label_runs(con, label)
    ids = [r.bench_run_id for r in runs]
    if picked is not None:
        if picked not in ids:
            raise GateInputError(
                f"--bench-run {picked}: no case runs of {role} label {label!r} in it; its bench runs: {', '.join(ids)}"
            )
        return picked
    if len(ids) > 1:
        listed = ", ".join(f"{r.bench_run_id} ({r.case_runs} case runs, {r.epochs} epoch(s))" for r in runs)
        raise GateInputError(
            f"{role} label {label!r} is used by {len(ids)} bench runs ({listed}); pooling them would mix different"
            " runs: pick one with --bench-run ID"
        )
    return ids[0]


def _refuse_unjudged(con: duckdb.DuckDBPyConnection, sides: dict[str, tuple[str, str | None]]) -> None:
    """No verdict where a side holds only observed runs (imported: held to no expectation, so nothing passed or
    failed): one line naming the sides, instead of pass rates of 0%."""
    unjudged = [f"{flag} {label!r}" for flag, (label, run) in sides.items() if not gate_pairs.judged(con, label, run)]
    if unjudged:
        which = " and ".join(unjudged)
        holds = "hold" if len(unjudged) > 1 else "holds"
        raise GateInputError(f"no verdict: {which} {holds} only observed runs (imported with `harness-bench import`,"
                             " held to no expectation: nothing passed or failed); the gate compares labels the bench"
                             " ran and judged (`harness-bench run`)")  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Run:
    """One label's side of a pair."""

    family: str
    passed: bool | None
    cost: Cost


def load_pairs(
    con: duckdb.DuckDBPyConnection,
    baseline: str,
    candidate: str,
    *,
    baseline_run: str | None = None,
    candidate_run: str | None = None,
    cases: Collection[str] | None = None,
) -> list[Pair]:
    """Pair the two labels' case runs on (case_id, epoch); refuse differing case sets, a label compared with
    itself, and a label spread over several bench runs (unless `baseline_run` / `candidate_run` pick one).
    `cases`: pair only these (runs of other cases are left out on both sides)."""
    labels = gate_pairs.labels(con)
    for flag, lab in (("--baseline", baseline), ("--candidate", candidate)):
        if lab not in labels:
            raise GateInputError(
                f"{flag}: unknown label {lab!r}; labels in the database: {', '.join(sorted(labels)) or 'none'}"
            )
    _refuse_unjudged(con, {"--baseline": (baseline, baseline_run), "--candidate": (candidate, candidate_run)})
    base_run = _bench_run_of(con, baseline, baseline_run, "baseline")
    cand_run = _bench_run_of(con, candidate, candidate_run, "candidate")
    _refuse_unjudged(con, {"--baseline": (baseline, base_run), "--candidate": (candidate, cand_run)})
    if base_run == cand_run:
        raise GateInputError(
            f"--baseline {baseline!r} and --candidate {candidate!r} are the same bench run ({base_run}): a run"
            " compared with itself always passes; give two different labels (or two --bench-run IDs)"
        )

    def runs(label: str, bench_run: str) -> dict[tuple[str, int], _Run]:
        return {
            (r.case_id, r.epoch): _Run(r.family, r.passed, (r.tool_invocations, r.model_calls, r.tokens))
            for r in gate_pairs.latest_case_runs(con, label, bench_run)
            if cases is None or r.case_id in cases
        }

    base, cand = runs(baseline, base_run), runs(candidate, cand_run)
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
    # a pair where either side ended on the bench's failure (unjudged) says nothing of either model: left out
    return [
        Pair(cid, b.family, ep, b.passed, c.passed, b.cost, c.cost)
        for cid, ep in sorted(base)
        if (b := base[(cid, ep)]).passed is not None and (c := cand[(cid, ep)]).passed is not None
    ]  # fmt: skip


def compared_loops(
    con: duckdb.DuckDBPyConnection, baseline: str, candidate: str, *, baseline_run: str | None = None,
    candidate_run: str | None = None,
) -> Loops | None:  # fmt: skip
    """The agent loops of the two sides `load_pairs` paired, when they differ (None: one loop on both sides)."""
    base = gate_pairs.agent_of_bench_run(con, _bench_run_of(con, baseline, baseline_run, "baseline"))
    cand = gate_pairs.agent_of_bench_run(con, _bench_run_of(con, candidate, candidate_run, "candidate"))
    return None if base == cand else Loops(base, cand)
