"""Stop-rule specs: every valid policy reads back to itself from its own spec, and every bad spec — an unknown rule,
a missing, unknown, repeated or out-of-range parameter, a value that is not a whole number, an empty part, a cap or
the contract given twice — is one `StopRuleError` line naming the part that is wrong, whatever the good parts around
it. Each detector's semantics are pinned on hand-written request sequences."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import SeenRequest
from runners.domain.stop_rules import (
    Alternation,
    AnyOf,
    ErrorCycle,
    NoGain,
    Repeat,
    RuleKind,
    StopRuleError,
    TokenCap,
    ToolCap,
    TurnCap,
    parse_policy_file,
    parse_rules,
)

_BOUNDS = {
    RuleKind.NO_GAIN: {"threshold": (1, 1_000)},
    RuleKind.TOOL_CAP: {"n": (1, 1_000_000)},
    RuleKind.TURN_CAP: {"n": (1, 1_000_000)},
    RuleKind.TOKEN_CAP: {"n": (1, 2**62)},
    RuleKind.REPEAT: {"k": (2, 1_000), "w": (2, 10_000)},
    RuleKind.ERROR_CYCLE: {"k": (2, 1_000)},
    RuleKind.ALTERNATION: {"k": (2, 1_000)},
}
"""Each rule's parameters and their bounds (the typed objects' Field bounds)."""


def _good(kind: RuleKind) -> st.SearchStrategy[str]:
    """A valid part of `kind`: positional for a one-parameter rule sometimes, key=value (any order) otherwise."""
    params = _BOUNDS[kind]

    def spell(values: dict[str, int], positional: bool, order: list[str]) -> str:
        if positional and len(values) == 1 and kind in (RuleKind.NO_GAIN, RuleKind.TOOL_CAP, RuleKind.TURN_CAP,
                                                         RuleKind.TOKEN_CAP):  # fmt: skip
            return f"{kind.value}:{next(iter(values.values()))}"
        return f"{kind.value}:" + ",".join(f"{k}={values[k]}" for k in order)

    values = st.fixed_dictionaries({k: st.integers(lo, min(hi, lo + 50)) for k, (lo, hi) in params.items()})
    values = values.filter(lambda v: v.get("w", 10_000) >= v.get("k", 0))  # a repeat's window holds its k
    return st.builds(spell, values, st.booleans(), st.permutations(list(params)))


@st.composite
def _bad(draw: st.DrawFn) -> tuple[str, str]:
    """A bad part and the text its error must name."""
    kind = draw(st.sampled_from(list(RuleKind)))
    params = _BOUNDS[kind]
    key = draw(st.sampled_from(list(params)))
    lo, hi = params[key]
    good = {k: b[0] for k, b in params.items()}
    how = draw(st.sampled_from(["unknown rule", "no parameter", "low", "high", "not whole", "unknown key",
                                "missing key", "key twice", "not key=value"]))  # fmt: skip
    if kind is RuleKind.REPEAT and draw(st.booleans()):  # a window that can never hold k requests
        k = draw(st.integers(3, 1_000))
        part = f"repeat:k={k},w={draw(st.integers(2, k - 1))}"
        return part, "the window can never hold k requests"
    if how == "unknown rule":
        name = draw(st.from_regex(r"[a-z][a-z-]{0,12}", fullmatch=True).filter(lambda n: n not in set(RuleKind)))
        part = f"{name}:3"
        return part, part
    if how == "no parameter":
        part = draw(st.sampled_from([kind.value, f"{kind.value}:", f"{kind.value}: "]))
        return part, part.strip()
    if how in ("low", "high"):
        value = draw(st.integers(0, lo - 1)) if how == "low" else draw(st.integers(hi + 1, hi + 10**6))
        part = f"{kind.value}:" + ",".join(f"{k}={value if k == key else v}" for k, v in good.items())
        return part, key
    if how == "not whole":
        value = draw(st.sampled_from(["-1", "2.5", "x", "1e3", "", "0x10", "½"]))
        part = f"{kind.value}:" + ",".join(f"{k}={value if k == key else v}" for k, v in good.items())
        return part, f"{key}={value!r}"
    if how == "unknown key":
        extra = draw(st.sampled_from(["z", "window", "limit", "kk"]))
        part = f"{kind.value}:" + ",".join([*(f"{k}={v}" for k, v in good.items()), f"{extra}=3"])
        return part, extra
    if how == "missing key" and len(params) > 1:
        part = f"{kind.value}:" + ",".join(f"{k}={v}" for k, v in good.items() if k != key)
        return part, key
    if how == "key twice":
        part = f"{kind.value}:" + ",".join([*(f"{k}={v}" for k, v in good.items()), f"{key}={good[key]}"])
        return part, f"{key} given twice"
    part = f"{kind.value}:{'=' if draw(st.booleans()) else ''}{','.join(str(v) for v in good.values())},"
    return part, part


@given(
    kinds=st.lists(st.sampled_from(list(RuleKind)), min_size=0, max_size=3, unique=True),
    bad=_bad(),
    at=st.integers(0, 3),
    data=st.data(),
)
@settings(max_examples=150)
def test_every_bad_spec_is_one_error_naming_the_bad_part(
    kinds: list[RuleKind], bad: tuple[str, str], at: int, data: st.DataObject
) -> None:
    parts = [data.draw(_good(k)) for k in kinds]
    part, named = bad
    parts.insert(min(at, len(parts)), part)
    spec = "+".join(parts)
    with pytest.raises(StopRuleError) as exc:
        parse_rules(spec)
    message = str(exc.value)
    assert "\n" not in message and len(message) < 400, message
    assert named in message, (spec, message)
    # the part is quoted as given (stripped), so a reader finds it in a long combination
    assert repr(part.strip()) in message, (spec, message)


@given(kinds=st.lists(st.sampled_from(list(RuleKind)), min_size=1, max_size=7, unique=True), data=st.data())
@settings(max_examples=100)
def test_a_valid_policy_reads_back_to_itself(kinds: list[RuleKind], data: st.DataObject) -> None:
    spec = "+".join(data.draw(_good(k)) for k in kinds)
    policy = parse_rules(spec)
    assert [r.kind for r in policy.rules] == kinds
    assert parse_rules(policy.spec) == policy
    assert re.fullmatch(r"[a-z-]+:[0-9a-z=,]+(\+[a-z-]+:[0-9a-z=,]+)*", policy.spec)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty stop rule"),
        ("no-gain:2+", "empty stop rule"),
        ("no-gain:2+no-gain:3", "more than one no-gain"),
        ("tool-cap:2+tool-cap:2", "more than one tool-cap"),
        ("repeat:k=3,w=10+repeat:w=10,k=3", "a rule given twice"),
        ("NO-GAIN:2", "not a stop rule"),
    ],
)
def test_whole_spec_problems(spec: str, message: str) -> None:
    with pytest.raises(StopRuleError, match=message):
        parse_rules(spec)


def test_two_detectors_of_one_kind_with_different_parameters_combine() -> None:
    policy = parse_rules("repeat:k=2,w=3+repeat:k=4,w=10")
    assert policy.detectors == (Repeat(k=2, w=3), Repeat(k=4, w=10))


def test_a_policy_file_names_the_line() -> None:
    text = "# the team's caps\nno-gain:2\n\n  tool-cap:8  # today's cap\nno-gain:2+tool-cap:8\n"
    assert [p.spec for p in parse_policy_file(text)] == ["no-gain:2", "tool-cap:8", "no-gain:2+tool-cap:8"]
    with pytest.raises(StopRuleError, match=r"^line 3: 'repeat:k=1,w=3': k: Input should be greater"):
        parse_policy_file("no-gain:2\n# fine\nrepeat:k=1,w=3\n")
    with pytest.raises(StopRuleError, match="no policy in it"):
        parse_policy_file("# nothing\n\n")


def _seen(*calls: tuple[str, str | None, bool]) -> list[SeenRequest]:
    return [SeenRequest(f"c{i}", tool, scope, failed) for i, (tool, scope, failed) in enumerate(calls)]


def test_the_detectors_semantics() -> None:
    a, b, bad = ("logs", "a", False), ("kb", "b", False), ("logs", "a", True)
    nxt = SeenRequest("cx", "logs", "a")
    # exact repeat: the k-th request of one tool and scope within the last w requests, the new one included
    assert Repeat(k=3, w=4).stop_before(_seen(a, b, a), nxt) is not None
    assert Repeat(k=3, w=3).stop_before(_seen(a, b, a), nxt) is None, "the first a is outside the window of 3"
    assert Repeat(k=2, w=2).stop_before(_seen(("logs", None, False)), SeenRequest("cy", "logs", None)) is None
    # error cycle: the k-1 requests before it were this call and each one failed
    assert ErrorCycle(k=2).stop_before(_seen(bad), nxt) is not None
    assert ErrorCycle(k=2).stop_before(_seen(a), nxt) is None, "it did not fail"
    assert ErrorCycle(k=3).stop_before(_seen(bad, b, bad), nxt) is None, "not in a row"
    # A-B alternation: the last 2k requests, the new one the last, alternate between two calls
    assert Alternation(k=2).stop_before(_seen(a, b, b), SeenRequest("cz", "logs", "a")) is None
    assert Alternation(k=2).stop_before(_seen(a, b, a), SeenRequest("cz", "kb", "b")) is not None
    assert Alternation(k=2).stop_before(_seen(a, a, a), nxt) is None, "A-A is a repeat, not an alternation"


def test_the_typed_objects() -> None:
    policy = parse_rules("no-gain:2+tool-cap:8+turn-cap:6+token-cap:20000+error-cycle:k=2+alternation:k=3")
    assert isinstance(policy, AnyOf)
    assert policy.no_gain == NoGain(threshold=2) and policy.tool_cap == ToolCap(n=8)
    assert policy.turn_cap == TurnCap(n=6) and policy.token_cap == TokenCap(n=20000)
    assert policy.detectors == (ErrorCycle(k=2), Alternation(k=3))
    assert ToolCap(n=8).stops_invocation(8) and not ToolCap(n=8).stops_invocation(7)
    assert TurnCap(n=6).stops_model_call(6, 0) and TokenCap(n=10).stops_model_call(0, 10)
