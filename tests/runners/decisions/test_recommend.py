"""recommend: per-case intervals, the non-inferiority rule, copy-invariance, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import scipy.stats

from runners.cli import main
from runners.decisions.recommend import (
    ConfigStats,
    Interval,
    Objective,
    RecommendInputError,
    Rule,
    case_bootstrap_mean,
    config_columns,
    deficit_upper_bound,
    measure,
    recommend,
    wilson,
)
from runners.domain.evalset import BUILTIN_DIR
from runners.plan.options import BenchOptions
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep
from tests._db import open_read_only

FAMILIES = [str(BUILTIN_DIR / "diagnosable.yaml"), "empty_logs"]
"""The ten older diagnosable cases (the file; the family also holds the new held-out ones) and the empty-logs family:
the known optimum below was measured on them."""


def test_wilson_matches_scipy_for_whole_counts() -> None:
    for k, n in [(8, 10), (0, 7), (10, 10), (66, 72), (1, 3)]:
        ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        iv = wilson(k, n)
        assert iv.low == pytest.approx(ci.low, abs=1e-4) and iv.high == pytest.approx(ci.high, abs=1e-4)
    assert wilson(0, 0).n == 0


def test_fractional_wilson_is_wider_than_the_case_bootstrap() -> None:
    # per-case rates that disagree across epochs: the Wilson interval on cases is conservative
    rates = [1.0] * 6 + [2 / 3] * 3 + [1 / 3]
    iv, boot = wilson(sum(rates), len(rates)), case_bootstrap_mean(rates)
    assert iv.value == pytest.approx(boot.value) and iv.high - iv.low >= boot.high - boot.low


def test_deficit_bound_by_hand() -> None:
    # one case of ten lost in 1 of 3 epochs: the resampled mean is (1/3) * Binomial(10, 0.1) / 10, whose 95th
    # percentile is 3 * (1/3) / 10 = 0.1 (P(X <= 2) = 0.930, P(X <= 3) = 0.987)
    assert deficit_upper_bound([1 / 3] + [0.0] * 9) == pytest.approx(0.1)
    assert deficit_upper_bound([0.0] * 10) == 0.0 and deficit_upper_bound([]) == 0.0


def _stats(config: tuple[int, ...], recall: dict[str, float], tokens: float) -> ConfigStats:
    """`config` as (no_gain_threshold, protocol_violation_threshold, max_tool_invocations, max_model_calls,
    max_total_tokens); placed in the declaration's order of swept settings (schema_mode at its default)."""
    named = dict(zip(("no_gain_threshold", "protocol_violation_threshold", "max_tool_invocations", "max_model_calls",
                      "max_total_tokens"), config, strict=True))  # fmt: skip
    full = tuple(named.get(c, "adaptive") for c in config_columns())
    iv = Interval(mean=tokens, low=tokens, high=tokens, cases=1)
    honest = {"e1": 1.0}
    return ConfigStats(
        full, len(recall) + 1, len(recall) + 1, recall, honest, wilson(sum(recall.values()), len(recall)),
        wilson(1, 1), Interval(mean=0, low=0, high=0, cases=1), iv, iv, iv, 1.0,
    )  # fmt: skip


def test_non_inferiority_refuses_a_visibly_lower_recall() -> None:
    # the rewriter case: 69/72 at a higher budget vs 66/72 cheaper; "not significantly below" picked 66
    dear = _stats((4, 2, 16, 12, 200_000), {f"c{i}": float(i >= 3) for i in range(72)}, 7000.0)
    cheap = _stats((4, 2, 8, 12, 200_000), {f"c{i}": float(i >= 6) for i in range(72)}, 6000.0)
    rec = recommend([dear, cheap])
    assert rec.chosen is dear and rec.eligible == [dear]
    assert rec.checks[cheap.config].recall_deficit > 0.02
    assert rec.paragraphs[1].startswith("Rule: non-inferiority with a margin of 2 points")
    assert "is not eligible" in rec.reasoning
    # a 5-point margin still refuses: the deficit (3 cases of 72 = 4.2 points) has an upper bound above it
    assert recommend([dear, cheap], margin=0.05).chosen is dear
    # with identical per-case results the cheaper one is chosen
    same = _stats((4, 2, 8, 12, 200_000), dict(dear.recall_by_case), 6000.0)
    assert recommend([dear, same]).chosen is same


def test_max_recall_rule() -> None:
    a = _stats((2, 2, 10, 12, 200_000), {"c0": 1.0, "c1": 0.0}, 10.0)
    b = _stats((3, 2, 10, 12, 200_000), {"c0": 1.0, "c1": 1.0}, 99.0)
    rec = recommend([a, b], rule=Rule.MAX_RECALL)
    assert rec.chosen is b and rec.rule_text.startswith("Rule: maximum recall first")


def test_margin_out_of_range() -> None:
    with pytest.raises(RecommendInputError, match=r"--margin 2: a rate margin must be within \[0, 1\]"):
        recommend([_stats((1, 2, 3, 4, 5), {"c": 1.0}, 1.0)], margin=2)


@pytest.fixture(scope="module")
def epochs_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[str, int], str]]:
    """Four sweeps (two profiles, one and three epochs). Without transcripts: recommend reads `case_runs` only, never
    the conversations in `messages` (what `show` and `diff` open), and writing them is a tenth of the sweeps' time."""
    db = tmp_path_factory.mktemp("epochs") / "e.duckdb"
    ids = {}
    for model in ("scripted", "scripted:rewriter?k=2"):
        for epochs in (1, 3):
            grid = SweepGrid(no_gain_threshold=(1, 2, 3, 4, 5), max_tool_invocations=(4, 8))
            s = run_sweep(
                plan_sweep(
                    SweepOptions(
                        grid,
                        BenchOptions.of(evalsets=FAMILIES, model=model, db=db, epochs=epochs, transcripts=False),
                    )
                )
            )
            ids[(model, epochs)] = s.sweep_id
    return db, ids


def test_pick_is_the_known_optimum_and_does_not_move_with_epochs(
    epochs_db: tuple[Path, dict[tuple[str, int], str]],
) -> None:
    db, ids = epochs_db
    con = open_read_only(db)
    try:
        tables = {key: measure(con, sweep) for key, sweep in ids.items()}
    finally:
        con.close()
    picks = {key: recommend(table).chosen for key, table in tables.items()}  # measured once: the same seeded numbers

    # the regression pinned: reference picked max_tool_invocations=4 at epochs 1 and 8 at epochs 3; rewriter 8 then 16
    def named(s: ConfigStats) -> tuple[object, ...]:
        return tuple(s.setting(c) for c in ("no_gain_threshold", "protocol_violation_threshold", "max_tool_invocations",
                                            "max_model_calls", "max_total_tokens"))  # fmt: skip

    assert named(picks[("scripted", 1)]) == named(picks[("scripted", 3)]) == (2, 2, 8, 12, 200_000)
    rewriter = named(picks[("scripted:rewriter?k=2", 1)])
    assert rewriter == named(picks[("scripted:rewriter?k=2", 3)]) == (4, 2, 8, 12, 200_000)
    # copying epochs changes no number: the reference plays exact copies, so its whole table is identical
    one = {s.config: (s.recall, s.honest_fallback, s.wasted, s.tokens) for s in tables[("scripted", 1)]}
    assert one == {s.config: (s.recall, s.honest_fallback, s.wasted, s.tokens) for s in tables[("scripted", 3)]}
    # the rewriter's paraphrases vary by epoch (so its wasted calls do), its outcomes do not
    one = {s.config: (s.recall, s.honest_fallback) for s in tables[("scripted:rewriter?k=2", 1)]}
    assert one == {s.config: (s.recall, s.honest_fallback) for s in tables[("scripted:rewriter?k=2", 3)]}


def test_recommend_cli_prints_rule_and_definitions(
    epochs_db: tuple[Path, dict[tuple[str, int], str]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, ids = epochs_db
    assert main(["recommend", "--db", str(db), "--sweep", ids[("scripted", 3)]]) == 0
    text = capsys.readouterr().out
    assert "Recommendation: no_gain_threshold=2 max_tool_invocations=8" in text
    assert "Rule: non-inferiority with a margin of 2 points" in text and "honest fallback:" in text
    assert main(["recommend", "--db", str(db), "--sweep", ids[("scripted", 3)], "--margin", "2"]) == 2
    err = capsys.readouterr().err
    assert "--margin 2: a rate margin must be within [0, 1]" in err and len(err.strip().splitlines()) == 1
    assert main(["recommend", "--db", str(db), "--rule", "max-recall", "--objective", Objective.WASTED.value]) == 0
    assert "Rule: maximum recall first" in capsys.readouterr().out
