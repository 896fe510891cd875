"""The model-upgrade gate: per-case paired test, Holm's weighted correction, one verdict everywhere."""

from __future__ import annotations

import itertools
import random
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.decisions.gate import (
    GateInputError,
    Pair,
    RowVerdict,
    evaluate,
    holm_weighted,
    paired_p_value,
    pass_hat_k,
    per_case,
)
from runners.rendering.gate import junit, markdown

COST = (2.0, 3.0, 1000.0)


def pairs_from(cases: dict[str, tuple[str, list[bool], list[bool]]]) -> list[Pair]:
    """case -> (family, baseline passes per epoch, candidate passes per epoch)."""
    return [
        Pair(cid, fam, ep, b, c, COST, COST)
        for cid, (fam, base, cand) in cases.items()
        for ep, (b, c) in enumerate(zip(base, cand, strict=True), start=1)
    ]


def uniform(n_families: int, per_family: int, epochs: int, lose: set[str] = frozenset()) -> list[Pair]:  # type: ignore[assignment]
    """Every case passes every epoch on the baseline; cases in `lose` fail every epoch on the candidate."""
    cases = {
        f"f{f}_c{i}": (f"fam{f}", [True] * epochs, [f"f{f}_c{i}" not in lose] * epochs)
        for f in range(n_families)
        for i in range(per_family)
    }
    return pairs_from(cases)


# -- the paired per-case test: exact values derived by hand ---------------------------------------------
def test_sign_flip_p_values_are_exact() -> None:
    # differences in epochs (candidate passes - baseline passes per case, 3 epochs)
    # 7 cases all worse: only the all-negative sign assignment of 2^7 is as extreme
    assert paired_p_value([-3] * 7, worse="less") == pytest.approx(1 / 128)
    # 12 cases each one epoch of three worse: 1 / 2^12
    assert paired_p_value([-1] * 12 + [0] * 69, worse="less") == pytest.approx(1 / 4096)
    # {-1, -1, -3, +1}: sum -4; assignments with sum <= -4 have -3 negative and the three ones summing
    # to -3 (1 way) or -1 (3 ways): 4 of 16
    assert paired_p_value([-1, -1, -3, 1], worse="less") == pytest.approx(0.25)
    assert paired_p_value([-3], worse="less") == 0.5 and paired_p_value([3], worse="less") == 1.0
    assert paired_p_value([0, 0], worse="less") == 1.0
    assert paired_p_value([5] * 6, worse="greater") == pytest.approx(1 / 64)
    assert paired_p_value([5] * 6, worse="less") == 1.0


def test_sign_flip_matches_brute_force_enumeration_with_ties() -> None:
    rng = random.Random(7)
    for _ in range(5):
        d = [rng.choice([-3, -2, -1, 1, 2, 3]) for _ in range(11)]
        extreme = sum(
            1
            for signs in itertools.product((1, -1), repeat=len(d))
            if sum(s * abs(x) for s, x in zip(signs, d, strict=True)) <= sum(d)
        )
        assert paired_p_value(d, worse="less") == pytest.approx(extreme / 2 ** len(d))


def test_holm_weighted_matches_textbook_holm_and_weights() -> None:
    # equal weights = Holm: sorted 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1 -> running max 0.06
    assert holm_weighted([0.01, 0.04, 0.03, 0.005], [1, 1, 1, 1]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # weights 0.8 / 0.2: 0.03/0.8 = 0.0375 first (x total weight 1); then 0.01/0.2 x 0.2 = 0.01 -> max 0.0375
    assert holm_weighted([0.03, 0.01], [0.8, 0.2]) == pytest.approx([0.0375, 0.0375])
    assert holm_weighted([0.9, 0.9], [0.5, 0.5]) == pytest.approx([1.0, 1.0])


def test_pass_hat_k() -> None:
    assert pass_hat_k({"a": (3, 3), "b": (2, 3)}, 3) == pytest.approx(0.5)
    assert pass_hat_k({"a": (2, 3)}, 2) == pytest.approx(1 / 3)


# -- the case is the unit ------------------------------------------------------------------------------------
def test_copying_epochs_changes_no_p_value_and_no_verdict() -> None:
    rng = random.Random(3)
    one = {f"c{i}": (f"fam{i % 4}", [rng.random() < 0.7], [rng.random() < 0.6]) for i in range(40)}
    three = {cid: (fam, b * 3, c * 3) for cid, (fam, b, c) in one.items()}
    r1 = evaluate(pairs_from(one), "b", "c", k=1)
    r3 = evaluate(pairs_from(three), "b", "c", k=1)
    assert [(t.name, t.p_value, t.p_adjusted, t.failed) for t in r1.tests] == [
        (t.name, t.p_value, t.p_adjusted, t.failed) for t in r3.tests
    ]
    assert r1.overall.pairs == 40 and r3.overall.pairs == 120


# -- one verdict everywhere ---------------------------------------------------------------------------------
def test_only_the_overall_test_regresses_and_every_output_says_so() -> None:
    # 9 families x 9 cases; the candidate loses one case per family: p = 1/2^9 overall, 0.5 per family
    lose = {f"f{f}_c0" for f in range(9)}
    res = evaluate(uniform(9, 9, 3, lose), "base", "cand")
    assert res.overall.test.p_value == pytest.approx(1 / 512)
    assert res.overall.test.p_adjusted == pytest.approx((1 / 512) / 0.8)
    assert all(f.test.p_value == pytest.approx(0.5) and not f.regressed for f in res.families)
    assert not res.passed and [t.name for t in res.failures] == ["(all)"]
    md = markdown(res)
    verdict = md.splitlines()[2]
    assert verdict.startswith("❌ **REGRESSION** — pass rate -11.1 points over 81 cases, p = 0.002")
    assert "Holm-adjusted p = 0.0024" in verdict
    xml = ET.fromstring(junit(res))
    assert xml.get("failures") == "1" and xml.get("tests") == str(1 + 9 + 3)
    failed = [tc for tc in xml.findall("testcase") if tc.find("failure") is not None]
    assert [(tc.get("classname"), tc.get("name")) for tc in failed] == [("gate.overall", "all cases")]


def test_a_collapsed_family_is_never_shown_as_ok() -> None:
    # one 7-case family drops 100% -> 0%; alone it cannot reach Holm significance (min p 1/128), the overall can
    lose = {f"f0_c{i}" for i in range(7)}
    res = evaluate(uniform(10, 7, 3, lose) + uniform(0, 0, 3), "base", "cand")
    fam0 = next(f for f in res.families if f.family == "fam0")
    assert fam0.base_rate == 1.0 and fam0.cand_rate == 0.0 and fam0.test.p_value == pytest.approx(1 / 128)
    assert fam0.test.verdict is RowVerdict.NOT_SIGNIFICANT
    row = next(line for line in markdown(res).splitlines() if line.startswith("| fam0 "))
    assert "ok" not in row.split("|")[-2] and "-100.0 pts" in row
    assert not res.passed and "Largest family drop: fam0 -100.0 points (7 of 7 cases worse" in markdown(res)


def test_a_large_collapsed_family_is_named() -> None:
    lose = {f"f0_c{i}" for i in range(12)}
    res = evaluate(uniform(6, 12, 3, lose), "base", "cand")
    assert res.regressed_families == ["fam0"] and res.overall.regressed
    assert 'name="fam0"><failure' in junit(res)


def test_cost_regression_needs_significance_and_margin() -> None:
    base = uniform(4, 6, 2)
    dearer = [Pair(p.case_id, p.family, p.epoch, p.base_pass, p.cand_pass, COST, (4.0, 3.0, 1000.0)) for p in base]
    res = evaluate(dearer, "b", "c", k=2)
    assert res.cost_regressions == ["tool_invocations"] and res.cost["tool_invocations"][2] == pytest.approx(1.0)
    assert evaluate(dearer, "b", "c", k=2, max_cost_increase=1.5).passed


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=30), st.integers(1, 3))
def test_exit_code_markdown_and_junit_always_agree(cases: list[tuple[int, int]], n_fam: int) -> None:
    data = {
        f"c{i}": (f"fam{i % n_fam}", [e < b for e in range(3)], [e < c for e in range(3)])
        for i, (b, c) in enumerate(cases)
    }
    res = evaluate(pairs_from(data), "b", "c")
    failures = int(ET.fromstring(junit(res)).get("failures") or 0)
    verdict = markdown(res).splitlines()[2]
    assert (failures > 0) == (not res.passed) == verdict.startswith("❌")
    assert failures == len(res.failures)
    for t in res.failures:
        assert t.describe() in verdict


XML_FORBIDDEN = "".join(map(chr, [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])) + "\ud800\udfff\ufffe\uffff"


@settings(max_examples=25, deadline=None)
@given(st.text(st.characters() | st.sampled_from(XML_FORBIDDEN + "<&\"'>]\x1b\u202e"), max_size=12))
def test_junit_is_valid_xml_with_forbidden_characters_shown_as_escapes(extra: str) -> None:
    # every text a case, a model or a user wrote reaches JUnit escaped: labels, family names, case ids
    hostile = f"fam{XML_FORBIDDEN}{extra}"
    data = {f"c{i}{XML_FORBIDDEN}": (hostile, [True] * 3, [False] * 3) for i in range(8)}
    res = evaluate(pairs_from(data), f"base{XML_FORBIDDEN}", f"cand{extra}\x00")
    assert not res.passed
    suite = ET.fromstring(junit(res).encode("utf-8"))
    assert suite.get("name", "").startswith("harness-bench gate cand") and "\\x00" in suite.get("name", "")
    names = [tc.get("name", "") for tc in suite.iter("testcase")]
    assert any(n.startswith("fam\\x00\\x01") and "\\ud800" in n and "\\uffff" in n for n in names)
    for el in suite.iter():
        for text in [el.text or "", el.tail or "", *el.attrib.values()]:
            assert not set(text) & set(XML_FORBIDDEN + "\x1b\u202e"), text


# -- false alarms and detection by simulation (truth known) --------------------------------------------------
def _simulate(seed: int, drop_flips: int) -> bool:
    """81 cases x 3 epochs, per-case pass probabilities spread over [0, 1]; True when the gate fails."""
    rng = random.Random(seed)
    probs = [rng.choice([0.0, 1.0, 1.0, 0.3, 0.6, 0.9]) for _ in range(81)]
    data = {
        f"c{i}": (f"fam{i % 9}", [rng.random() < p for _ in range(3)], [rng.random() < p for _ in range(3)])
        for i, p in enumerate(probs)
    }
    pairs = pairs_from(data)
    passing = [i for i, p in enumerate(pairs) if p.cand_pass]
    flip = set(rng.sample(passing, drop_flips))
    pairs = [
        Pair(p.case_id, p.family, p.epoch, p.base_pass, p.cand_pass and i not in flip, COST, COST)
        for i, p in enumerate(pairs)
    ]
    return not evaluate(pairs, "b", "c", mde=False).passed


def test_simulated_false_alarms_and_detection() -> None:
    # same distribution for both labels, so every failure is a false alarm: pinned 2 of 40 seeded simulations
    # (seeds 12 and 14; 300 seeds give 9 = 3.0%, below alpha = 5% with its Holm-corrected share 0.8 * 5%)
    assert [seed for seed in range(40) if _simulate(seed, 0)] == [12, 14]
    # a 10-point drop (24 of 243 case runs flipped) against this much noise is caught in 18 of 20
    assert sum(_simulate(seed, 24) for seed in range(20)) == 18


# -- bad input -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"k": 4}, "--k 4: the cases have only 3 epoch(s)"),
        ({"max_recall_drop": 2.0}, "--max-recall-drop 2: "),
        ({"max_recall_drop": -0.1}, "within [0, 1]"),
        ({"max_cost_increase": -1.0}, "must be >= 0"),
        ({"alpha": 0.0}, "--alpha 0"),
    ],
)
def test_bad_flags_are_refused(kwargs: dict[str, float], needle: str) -> None:
    with pytest.raises(GateInputError, match=re.escape(needle)):
        evaluate(uniform(2, 3, 3), "b", "c", **kwargs)  # type: ignore[arg-type]


def test_per_case_means() -> None:
    cases = per_case(pairs_from({"a": ("f", [True, False, True], [False, False, True])}))
    assert cases[0].base_passes == 2 and cases[0].cand_passes == 1 and cases[0].pass_diff == pytest.approx(-1 / 3)


def test_calibration_injects_exactly_the_requested_drop() -> None:
    from runners.pipelines.calibration import inject_drop

    pairs = uniform(9, 9, 3)  # 243 passing case runs
    dropped, flips = inject_drop(pairs, 5, seed=1)
    assert flips == 12 and sum(p.cand_pass for p in dropped) == 243 - 12
    assert all(p.base_pass == q.base_pass and p.cand_cost == q.cand_cost for p, q in zip(pairs, dropped, strict=True))
    assert inject_drop(pairs, 5, seed=1)[0] == dropped and inject_drop(pairs, 5, seed=2)[0] != dropped
