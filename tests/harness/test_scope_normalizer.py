"""ToolScopeNormalizerTest (docs/architecture.md §14 row 2): stable, order-insensitive, meaning-preserving."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.scope import ToolScopeNormalizer, normalize_timestamp

N = ToolScopeNormalizer(defaults={"limit": 20})

keys = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
scalars = st.one_of(
    st.text(alphabet="abcXYZ 0123-:", max_size=12),
    st.integers(-1000, 1000),
    st.booleans(),
)
inputs = st.dictionaries(keys, scalars, max_size=6)


def test_equivalent_timestamps_are_one_instant() -> None:
    variants = [
        "2026-07-01T14:00:00Z",
        "2026-07-01 14:00:00+00:00",
        "2026-07-01T14:00:00+00:00",
        "2026-07-01T22:00:00+08:00",
        "2026-07-01T14:00Z",
        "2026-07-01 14:00:00",
        "2026-07-01T14:00:00.000Z",
        "2026-07-01T10:00:00-0400",
        "2026-07-01 14:00:00 UTC",
    ]
    assert {normalize_timestamp(v) for v in variants} == {"2026-07-01T14:00:00Z"}
    assert normalize_timestamp("2026-07-01T14:00:01Z") != "2026-07-01T14:00:00Z"
    assert normalize_timestamp("yesterday at two") is None


def test_key_order_whitespace_case_and_defaults() -> None:
    a = {"keyword": "Timeout  Error", "tenant": "T1", "start": "2026-07-01T14:00:00Z"}
    b = {"start": "2026-07-01 22:00:00+08:00", "tenant": " t1 ", "keyword": "timeout error", "limit": 20}
    assert N.normalize(a) == N.normalize(b)
    assert N.normalize({**a, "limit": 21}) != N.normalize(a)
    assert N.normalize({**a, "tenant": None}) == N.normalize({k: v for k, v in a.items() if k != "tenant"})


def test_case_sensitive_fields_and_sets() -> None:
    n = ToolScopeNormalizer(case_sensitive_fields=frozenset({"sql"}), set_fields=frozenset({"levels"}))
    assert n.normalize({"sql": "A"}) != n.normalize({"sql": "a"})
    assert n.normalize({"levels": ["ERROR", "warn", "error"]}) == n.normalize({"levels": ["WARN", "ERROR"]})
    assert n.normalize({"order": [1, 2]}) != n.normalize({"order": [2, 1]}), "plain lists keep their order"


@given(inputs)
def test_idempotent(value: dict[str, object]) -> None:
    once = N.canonical(value)  # type: ignore[arg-type]
    assert N.canonical(once) == once
    assert N.normalize(once) == N.normalize(value)  # type: ignore[arg-type]


@given(inputs, st.randoms())
def test_insensitive_to_key_order(value: dict[str, object], rnd: random.Random) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    assert N.normalize(dict(items)) == N.normalize(value)  # type: ignore[arg-type]


@settings(max_examples=200)
@given(inputs, keys, st.integers(0, 10_000), st.integers(0, 10_000))
def test_distinct_for_inputs_that_differ_in_meaning(value: dict[str, object], key: str, x: int, y: int) -> None:
    if x == y:
        return
    a = {**value, key: x}
    b = {**value, key: y}
    assert N.normalize(a) != N.normalize(b)  # type: ignore[arg-type]


@given(st.text(alphabet="abc XYZ", min_size=1, max_size=10), st.text(alphabet="abc XYZ", min_size=1, max_size=10))
def test_strings_equal_iff_same_after_whitespace_and_case(s1: str, s2: str) -> None:
    same_meaning = " ".join(s1.split()).casefold() == " ".join(s2.split()).casefold()
    assert (N.normalize({"q": s1}) == N.normalize({"q": s2})) == same_meaning
