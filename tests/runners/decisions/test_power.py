"""Power-aware verdicts: the MDE every gate test reports, INCONCLUSIVE, the plan and the sequential gate."""

from __future__ import annotations

import functools
import itertools
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.cli import EXIT_INCONCLUSIVE, main
from runners.decisions import power
from runners.decisions.gate import (
    GateInputError,
    GateResult,
    Pair,
    Verdict,
    evaluate,
    evaluate_sequential,
    paired_p_value,
    sequential_looks,
)
from runners.rendering.gate import junit, markdown, plan, to_json

COST = (2.0, 3.0, 1000.0)


def noisy(
    n: int, epochs: int, seed: int, *, drop_flips: int = 0, probs: tuple[float, ...] = (0.0, 1.0, 0.5)
) -> list[Pair]:
    """`n` cases, each with a pass probability from `probs`, the same for both labels; `drop_flips` candidate
    passes turned into failures."""
    rng = random.Random(seed)
    p = [rng.choice(probs) for _ in range(n)]
    pairs = [
        Pair(f"c{i:03d}", f"fam{i % 3}", e, rng.random() < p[i], rng.random() < p[i], COST, COST)
        for e in range(1, epochs + 1)
        for i in range(n)
    ]
    passing = [i for i, q in enumerate(pairs) if q.cand_pass]
    flip = set(rng.sample(passing, drop_flips))
    return [Pair(q.case_id, q.family, q.epoch, q.base_pass, q.cand_pass and i not in flip, COST, COST)
            for i, q in enumerate(pairs)]  # fmt: skip


def deterministic(n: int, epochs: int, lose: int = 0) -> list[Pair]:
    """Every case passes every epoch on the baseline; the first `lose` cases fail every epoch on the candidate."""
    return [Pair(f"c{i:03d}", "fam", e, True, i >= lose, COST, COST) for e in range(1, epochs + 1) for i in range(n)]


@functools.cache
def gated_noisy(n: int, epochs: int, seed: int) -> GateResult:
    """`evaluate` of `noisy(n, epochs, seed)`, power simulation included, once for the module: tests that read the same
    comparison share it (a frozen result; that a second evaluation gives the same MDE is checked by its own test)."""
    return evaluate(noisy(n, epochs, seed), "b", "c")


@functools.cache
def gated_deterministic(n: int, epochs: int) -> GateResult:
    """`evaluate` of `deterministic(n, epochs)` (nothing lost), once for the module, as `gated_noisy`."""
    return evaluate(deterministic(n, epochs), "b", "c")


# -- the exact sign-flip p the simulation uses ------------------------------------------------------------
def test_exact_sign_flip_decision_matches_the_gate_test_and_brute_force() -> None:
    rng = random.Random(5)
    for _ in range(20):
        d = [rng.choice([-3, -2, -1, 0, 1, 2, 3]) for _ in range(rng.randint(1, 11))]
        nz = [x for x in d if x]
        brute = sum(
            sum(s * abs(x) for s, x in zip(signs, nz, strict=True)) <= sum(nz)
            for signs in itertools.product((1, -1), repeat=len(nz))
        ) / 2 ** len(nz) if nz else 1.0  # fmt: skip
        assert paired_p_value(d, worse="less") == pytest.approx(brute)
        for level in (0.01, 0.04, 0.2):
            assert power.sign_flip_rejects(np.asarray(d), level) == (sum(nz) < 0 and brute <= level)


def test_min_cases_for_a_level() -> None:
    assert power.min_cases(0.04) == 5  # 1/32 = 0.031 ≤ 0.04 < 1/16
    assert power.min_cases(0.05 * 0.2 / 13) == 11
    assert power.min_cases(0.5) == 1


# -- MDE -----------------------------------------------------------------------------------------------------
def test_noise_free_mde_is_a_handful_of_flipped_runs() -> None:
    # nothing varies: a drop is seen once it reaches 5 cases (p = 1/32 ≤ 0.04); 5–6 flips of 243 runs
    res = gated_deterministic(81, 3)
    m = res.overall.test.mde
    assert m is not None and m.level == pytest.approx(0.04) and m.reachable
    assert m.at_80 is not None and m.at_90 is not None
    assert 5 / 243 <= m.at_80 <= m.at_90 <= 7 / 243
    assert res.verdict is Verdict.PASS and res.inconclusive is None
    line = markdown(res).splitlines()[2]
    assert line.startswith("✅ **PASS**") and f"drop of {m.at_80 * 100:.1f} pts with 80% probability" in line


def test_mde_falls_with_the_square_root_of_epochs_and_is_deterministic() -> None:
    m3 = [gated_noisy(90, 3, s).overall.test.mde for s in range(2)]
    m12 = [evaluate(noisy(90, 12, s), "b", "c").overall.test.mde for s in range(2)]
    a3 = np.mean([m.at_80 for m in m3 if m and m.at_80])
    a12 = np.mean([m.at_80 for m in m12 if m and m.at_80])
    assert 1.6 < a3 / a12 < 2.4  # √(12/3) = 2
    assert evaluate(noisy(90, 3, 0), "b", "c").overall.test.mde == m3[0]  # seeded: the same pairs, the same MDE


def test_mde_predicts_the_simulated_detection_rate() -> None:
    # the gate's own 80% MDE on a null comparison, then that drop injected into fresh comparisons of the
    # same distribution: the gate should fail in about 80% of them
    m = evaluate(noisy(90, 3, 100), "b", "c").overall.test.mde
    assert m is not None and m.at_80 is not None
    flips = round(m.at_80 * 270)
    caught = sum(not evaluate(noisy(90, 3, 200 + s, drop_flips=flips), "b", "c", mde=False).passed for s in range(40))
    assert 22 <= caught <= 40  # 80% of 40 = 32; binomial 95% range ≈ 27–37, widened for the pair-to-pair spread


def test_family_and_cost_tests_carry_their_own_mde() -> None:
    res = gated_noisy(90, 3, 1)
    fam = res.families[0].test
    assert fam.mde is not None and fam.mde.level == pytest.approx(0.05 * fam.weight)
    assert all(t.mde is not None for t in res.cost_tests)
    md = markdown(res)
    assert "| MDE 80% / 90% |" in md and "unreachable" not in md.split("\n")[10]
    xml = ET.fromstring(junit(res))
    props = {p.get("name"): p.get("value") for p in xml.find("testcase").iter("property")}  # type: ignore[union-attr]
    assert float(props["mde_80"] or "nan") == pytest.approx(res.overall.test.mde.at_80)  # type: ignore[union-attr]
    assert float(props["mde_level"] or "nan") == pytest.approx(0.04)


# -- INCONCLUSIVE ---------------------------------------------------------------------------------------------
def test_two_cases_are_inconclusive_never_a_pass() -> None:
    pairs = [
        Pair(c, "fam", e, True, True, (1.0, 2.0, 900.0), (2.0, 2.0, 900.0)) for c in ("a", "b") for e in (1, 2, 3)
    ]  # the candidate doubles the tool invocations on every run
    res = evaluate(pairs, "b", "c")
    assert res.passed and res.verdict is Verdict.INCONCLUSIVE
    assert res.inconclusive is not None and "smallest p is 1/4" in res.inconclusive and "at least 5 cases" in (
        res.inconclusive)  # fmt: skip
    assert markdown(res).splitlines()[2].startswith("⚠️ **INCONCLUSIVE**")
    xml = ET.fromstring(junit(res))
    assert (xml.get("failures"), xml.get("errors"), xml.get("skipped")) == ("0", "1", "0")
    overall = xml.find("testcase")
    assert overall is not None and overall.find("error") is not None
    assert overall.find("error").get("type") == "inconclusive"  # type: ignore[union-attr]
    allowed = ET.fromstring(junit(res, allow_inconclusive=True))
    assert (allowed.get("errors"), allowed.get("skipped")) == ("0", "1")
    assert to_json(res)["verdict"] == "inconclusive" and to_json(res, allow_inconclusive=True)["passes"] is True


def test_too_noisy_is_inconclusive_with_the_epochs_that_would_do() -> None:
    res = evaluate(noisy(90, 2, 3), "b", "c", k=2, max_mde=0.05)
    m = res.overall.test.mde
    assert m is not None and m.at_80 is not None and m.at_80 > 0.05
    assert res.verdict is Verdict.INCONCLUSIVE and res.inconclusive is not None
    more = power.epochs_for(m.at_80, 2, 0.05)
    assert f"≈ {more} epochs" in res.inconclusive and "--max-mde 5 points" in res.inconclusive
    assert evaluate(noisy(90, 2, 3), "b", "c", k=2, max_mde=0.5).verdict is Verdict.PASS


def test_a_regression_stays_a_regression_however_little_power() -> None:
    res = evaluate(deterministic(8, 1, lose=8), "b", "c", k=1, max_mde=0.01)
    assert res.verdict is Verdict.REGRESSION and not res.passed


def test_cli_exit_codes_for_inconclusive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runners.plan.options import BenchOptions
    from runners.run.bench import plan_run, run_bench

    db = tmp_path / "two.duckdb"
    cases = ["diagnosable_gateway_risk_pool_exhausted_t1", "diagnosable_duplicate_settlement_batch_rerun_shop42"]
    for label, model in (("base", "scripted"), ("cand", "scripted:rewriter?k=3")):
        run_bench(plan_run(BenchOptions.of(case_ids=cases, model=model, label=label, db=db, epochs=3)))
    out = [f"--summary={tmp_path / 's.md'}", f"--junit={tmp_path / 'j.xml'}", f"--json={tmp_path / 'r.json'}"]
    argv = ["gate", "--db", str(db), "--baseline", "base", "--candidate", "cand", *out]
    assert main(argv) == EXIT_INCONCLUSIVE == 3
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "inconclusive"
    assert ET.parse(tmp_path / "j.xml").getroot().get("errors") == "1"
    assert main([*argv, "--allow-inconclusive"]) == 0
    assert ET.parse(tmp_path / "j.xml").getroot().get("skipped") == "1"
    capsys.readouterr()
    assert main([*argv[:7], "--plan"]) == 0  # advice only: no output flag
    assert "it needs at least 5 cases" in " ".join(capsys.readouterr().out.split())  # wrapped at the width


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--max-mde", "10"], "--max-mde 10: a pass-rate drop must be within (0, 1]"),
        (["--max-mde", "0"], "--max-mde 0:"),
        (["--target-mde", "0.05"], "--target-mde needs --plan or --sequential"),
        (["--sequential", "--stage", "30"], "--stage 30: more than the --budget of 20 epochs"),
        (["--sequential", "--target-mde", "2"], "--target-mde 2: a pass-rate drop must be within (0, 1]"),
        (["--sequential", "--plan"], "--plan and --sequential: give one"),
        # flags that would be ignored: --plan writes no file, --budget/--stage size only sequential looks
        (["--plan", "--json", "p.json"], "--plan prints its advice and writes no file: remove --json"),
        (["--plan", "--summary", "s.md", "--junit", "j.xml"], "writes no file: remove --summary, --junit"),
        (["--budget", "12"], "--budget size the looks of --sequential: add --sequential or remove them"),
        (["--stage", "2", "--budget", "8"], "--budget and --stage size the looks of --sequential"),
    ],
)
def test_bad_power_flags_exit_2_before_the_database_is_opened(
    flags: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["gate", "--db", str(tmp_path / "missing.duckdb"), "--baseline", "a", "--candidate", "b", *flags]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "missing.duckdb").exists()


# -- plan ------------------------------------------------------------------------------------------------------
def test_plan_scales_epochs_with_the_square_of_the_mde_ratio() -> None:
    assert power.epochs_for(0.10, 3, 0.05) == 12
    assert power.epochs_for(0.04, 3, 0.05) == 3  # already there: never fewer than the pilot
    assert power.cases_for(0.10, 81, 0.05) == 324
    res = evaluate(noisy(90, 3, 4), "b", "c")
    m = res.overall.test.mde
    assert m is not None and m.at_80 is not None and m.at_90 is not None
    text = plan(res, 0.05)
    assert f"epochs for 5 points: {power.epochs_for(m.at_80, 3, 0.05)} at 80% power" in text


# -- sequential ------------------------------------------------------------------------------------------------
def test_obrien_fleming_levels_spend_little_early_and_most_at_the_end() -> None:
    assert power.obf_spent(1.0, 0.05) == pytest.approx(0.05)
    assert power.obf_spent(0.2, 0.05) < 1e-4 and power.obf_spent(0.0, 0.05) == 0.0
    levels = power.sequential_levels((0.2, 0.4, 0.6, 0.8, 1.0), 0.05)
    assert list(levels) == sorted(levels) and levels[0] < 1e-4
    assert 0.035 < levels[-1] < 0.05  # the last look keeps most of α (the looks are correlated)
    # the boundaries hold the first-crossing probability of a Brownian path at α (independent check, new seed)
    rng = np.random.default_rng(1)
    t = np.array([0.2, 0.4, 0.6, 0.8, 1.0])
    z = np.cumsum(rng.standard_normal((200_000, 5)) * np.sqrt(np.diff(np.r_[0, t])), axis=1) / np.sqrt(t)
    from scipy.stats import norm

    crossed = np.any(norm.cdf(z) <= np.asarray(levels), axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)


def test_sequential_looks() -> None:
    assert sequential_looks(20, 4) == (4, 8, 12, 16, 20)
    assert sequential_looks(10, 4) == (4, 8, 10)
    with pytest.raises(GateInputError, match="more than the --budget"):
        sequential_looks(3, 4)


def test_sequential_stops_at_the_first_failing_look() -> None:
    res = evaluate_sequential(deterministic(40, 20, lose=12), "b", "c", budget=20, stage=4)
    # look 1 (4 epochs of 20) has a nominal α of 5e-6: even 12 lost cases (p = 1/4096) wait for look 2
    assert res.verdict is Verdict.REGRESSION and res.look is not None and res.look.epochs == 8
    assert res.look.index == 2 and res.look.level == pytest.approx(0.00176, abs=1e-4)


def test_sequential_undecided_names_the_next_epochs() -> None:
    res = evaluate_sequential(deterministic(40, 6), "b", "c", budget=12, stage=4)
    assert res.verdict is Verdict.INCONCLUSIVE and res.look is not None and res.look.epochs == 4
    assert res.inconclusive is not None and "--epochs 8" in res.inconclusive
    assert to_json(res)["sequential"]["next_epochs"] == 8  # type: ignore[index]
    final = evaluate_sequential(deterministic(40, 12), "b", "c", budget=12, stage=4)
    assert final.verdict is Verdict.PASS and final.look is not None and final.look.last
    # --target-mde: a pass as soon as the 90% MDE is ≤ 5 points — at 4 epochs it takes 11 cases (11 of 160 runs)
    # to reach that look's level, at 8 epochs 11 of 320 runs
    early = evaluate_sequential(deterministic(40, 12), "b", "c", budget=12, stage=4, target_mde=0.05)
    assert early.verdict is Verdict.PASS and early.look is not None and early.look.epochs == 8


def test_sequential_refuses_data_short_of_the_first_look() -> None:
    with pytest.raises(GateInputError, match="run both labels with --epochs 4"):
        evaluate_sequential(deterministic(10, 2), "b", "c", budget=12, stage=4)


# -- MDE reporting: consistent across the table, the verdict line, JSON and JUnit ---------------------------
def test_a_significant_family_with_no_detectable_drop_reads_undetectable_not_unreachable() -> None:
    """A 10-case family lost entirely is significant (p = 1/1024 within its level), yet the simulation finds no
    drop it detects with 80% probability: that is 'undetectable', never 'unreachable' (which says the test can
    never be significant), and the regression carries no reason to be inconclusive."""
    pairs = [Pair(f"{f}{i}", f, e, True, f != "a", COST, COST)
             for f in ("a", "b") for i in range(10) for e in (1, 2, 3)]  # fmt: skip
    res = evaluate(pairs, "b", "c")
    fam = next(f for f in res.families if f.family == "a")
    assert res.verdict is Verdict.REGRESSION and fam.regressed and fam.test.mde is not None
    assert fam.test.mde.reachable and fam.test.mde.at_80 is None
    row = next(line for line in markdown(res).splitlines() if line.startswith("| a |"))
    assert "| undetectable / undetectable |" in row and "unreachable" not in row
    data = to_json(res)
    assert data["inconclusive"] is None
    test = next(t for t in data["tests"] if t["name"] == "a")  # type: ignore[union-attr]
    assert (test["mde_reachable"], test["mde_80"], test["mde_80_status"]) == (True, None, "undetectable")
    case = next(c for c in ET.fromstring(junit(res)).iter("testcase") if c.get("name") == "a")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert (props["mde_80"], props["mde_80_status"], props["mde_90_status"]) == ("", "undetectable", "undetectable")


_MDE_NAMED = ("would have caught a pass-rate drop of", "Its MDE: unreachable", "Its MDE: undetectable")


def _verdict_line(res: object) -> str:
    return markdown(res).splitlines()[2]  # type: ignore[arg-type]


def _mde_named(res: GateResult) -> str:
    """Which MDE sentence the verdict line carries (after the inconclusive reason, which may mention power)."""
    line = _verdict_line(res)
    named = [n for n in _MDE_NAMED if n in line]
    assert len(named) == 1, line
    return named[0]


def test_every_verdict_line_carries_its_mde() -> None:
    """PASS, REGRESSION and each INCONCLUSIVE (too few cases, too little power, an undecided sequential look) say
    what the comparison could have caught, or why no drop size can be named."""
    two = [Pair(c, "fam", e, True, True, COST, COST) for c in ("a", "b") for e in (1, 2, 3)]
    few = evaluate(two, "b", "c")
    assert few.verdict is Verdict.INCONCLUSIVE and _mde_named(few) == _MDE_NAMED[1]
    weak = evaluate(noisy(12, 2, 3), "b", "c", k=1)
    assert weak.verdict is Verdict.INCONCLUSIVE and _mde_named(weak) == _MDE_NAMED[0], _verdict_line(weak)
    look = evaluate_sequential(noisy(40, 4, 1, probs=(0.7,)), "b", "c", budget=20, stage=4, k=1)
    assert look.verdict is Verdict.INCONCLUSIVE and look.look is not None
    assert "decides nothing yet" in _verdict_line(look) and _mde_named(look) == _MDE_NAMED[0]
    passed = gated_deterministic(81, 3)
    regressed = evaluate(deterministic(81, 3, lose=20), "b", "c")
    assert passed.verdict is Verdict.PASS and regressed.verdict is Verdict.REGRESSION
    assert _mde_named(passed) == _mde_named(regressed) == _MDE_NAMED[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from("xyz")), min_size=1, max_size=14),
)
def test_mde_reporting_is_consistent_for_any_comparison(cases: list[tuple[int, int, str]]) -> None:
    """For any comparison: a regression has no inconclusive reason; a missing MDE is 'unreachable' exactly when
    the test cannot be significant, else 'undetectable', in the table, JSON and JUnit alike; the verdict line
    names the MDE."""
    pairs = [Pair(f"c{i}", fam, e, e <= b, e <= c, COST, COST)
             for i, (b, c, fam) in enumerate(cases) for e in (1, 2, 3)]  # fmt: skip
    res = evaluate(pairs, "b", "c", k=1, mde_replicates=40)
    if res.verdict is Verdict.REGRESSION:
        assert res.inconclusive is None
    data = {t["name"]: t for t in to_json(res)["tests"]}  # type: ignore[attr-defined,index]
    for t in res.tests:
        assert t.mde is not None
        for p in power.POWERS:
            text, status, value = t.mde_text(p), data[t.name][f"mde_{p * 100:.0f}_status"], t.mde.at(p)
            assert (value is None) == (status != "found")
            assert (status == "unreachable") == (not t.mde.reachable) == (data[t.name]["mde_reachable"] is False)
            if value is None:
                assert text == status
    named = _mde_named(res)
    assert (named == _MDE_NAMED[1]) == (res.overall.test.mde.status(0.8) is power.MdeStatus.UNREACHABLE)  # type: ignore[union-attr]


def test_an_undetectable_mde_never_claims_the_candidate_has_nothing_left_to_lose() -> None:
    """The candidate passes every run and the baseline none: nothing is significant, and no drop is detected with
    80% probability (a case the baseline fails cannot get worse in half the null replicates). The reason, the
    verdict line and the plan say that, not that the candidate has no passing runs left (it has all of them)."""
    pairs = [Pair(f"c{i}", "fam", e, False, True, COST, COST) for i in range(5) for e in (1, 2, 3)]
    res = evaluate(pairs, "b", "c")
    m = res.overall.test.mde
    assert m is not None and m.reachable and m.status(0.8) is power.MdeStatus.UNDETECTABLE
    assert res.verdict is Verdict.INCONCLUSIVE and res.inconclusive is not None
    texts = [res.inconclusive, _verdict_line(res), plan(res, 0.05)]
    for text in texts:
        assert "no passing case runs left" not in text and "not even losing every passing candidate run" in text
    assert "no drop is detected with 80% probability" in texts[2]
