"""log_search: time-window log search on the shared DuckDB, with notation-independent scopes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.contracts import EvidenceStatus, JsonValue
from harness.tools.base import ToolInputError, ToolResult
from runners.domain.tools import _duck
from runners.domain.tools._remembered import Remembered
from runners.domain.tools.log_search import LogEvent, LogSearch, LogSearchInput

# An acquirer slowdown hits tenant acme's card payments at 14:03 UTC; other services keep logging.
EVENTS = [
    LogEvent(ts="2026-07-01T13:59:58Z", tenant="acme", service="gateway", level="INFO",
             message="POST /v1/payments 200 in 212ms", trace_id="tr-a001"),
    LogEvent(ts="2026-07-01T14:00:00Z", tenant="acme", service="order", level="INFO",
             message="order ord_002 created", trace_id="tr-a002"),
    LogEvent(ts="2026-07-01 22:03:40+08:00", tenant="acme", service="gateway", level="ERROR",
             message="GW_TIMEOUT upstream acquirer did not answer within 3000ms", trace_id="tr-a002"),
    LogEvent(ts="2026-07-01T14:03:41Z", tenant="acme", service="gateway", level="WARN",
             message="connection pool exhausted, waiting for lease (active=200, max=200)", trace_id=None),
    LogEvent(ts="2026-07-01T14:04:02Z", tenant="acme", service="gateway", level="ERROR",
             message="GW_TIMEOUT upstream acquirer did not answer within 3000ms", trace_id="tr-a003"),
    LogEvent(ts="2026-07-01T14:04:02Z", tenant="acme", service="order", level="WARN",
             message="order ord_003 stays PENDING: payment failed with GW_TIMEOUT", trace_id="tr-a003"),
    LogEvent(ts="2026-07-01T14:05:10Z", tenant="globex", service="gateway", level="INFO",
             message="POST /v1/payments 200 in 180ms", trace_id="tr-g001"),
    LogEvent(ts="2026-07-01T14:07:55Z", tenant="globex", service="risk", level="WARN",
             message="RISK_REJECT score=0.93 rule=velocity_v7", trace_id="tr-g002"),
    LogEvent(ts="2026-07-01T14:08:30Z", tenant="acme", service="gateway", level="ERROR",
             message="GW_TIMEOUT  Upstream acquirer did not answer within 3000ms", trace_id="tr-a004"),
    LogEvent(ts="2026-07-01T14:09:30Z", tenant="initech", service="notification", level="DEBUG",
             message="webhook wh_881 delivered to merchant endpoint", trace_id="tr-i001"),
    LogEvent(ts="2026-07-01T14:10:00Z", tenant="acme", service="settlement", level="INFO",
             message="settlement batch b_0701_acme scheduled for 02:00 UTC", trace_id=None),
    LogEvent(ts="2026-07-01T14:30:00Z", tenant="acme", service="gateway", level="ERROR",
             message="GW_TIMEOUT upstream acquirer did not answer within 3000ms", trace_id="tr-a005"),
]  # fmt: skip

WINDOW: dict[str, JsonValue] = {"start": "2026-07-01T14:00:00Z", "end": "2026-07-01T14:30:00Z"}


def call(tool: LogSearch, raw: Mapping[str, JsonValue]) -> ToolResult:
    """What the Harness does: validate, then run."""
    return tool.run(tool.parse_input(raw))


def scope(tool: LogSearch, raw: Mapping[str, JsonValue]) -> str:
    return tool.normalize_scope(tool.parse_input(raw))


@pytest.fixture(scope="module")
def tool() -> LogSearch:
    return LogSearch(EVENTS)


def test_window_is_start_inclusive_end_exclusive_and_ordered(tool: LogSearch) -> None:
    result = call(tool, WINDOW)

    stamps = [str(r["ts"]) for r in result.records]
    assert stamps[0] == "2026-07-01T14:00:00Z"  # at start: included
    assert "2026-07-01T14:30:00Z" not in stamps  # at end: excluded
    assert "2026-07-01T13:59:58Z" not in stamps
    assert stamps == sorted(stamps) and len(stamps) == 10
    assert result.evidence_status is EvidenceStatus.EVIDENCE and result.count == 10 and not result.truncated


def test_records_have_the_documented_shape(tool: LogSearch) -> None:
    result = call(tool, {**WINDOW, "level": "warn", "service": "gateway"})
    assert result.records == (
        {
            "ts": "2026-07-01T14:03:41Z",
            "tenant": "acme",
            "service": "gateway",
            "level": "WARN",
            "message": "connection pool exhausted, waiting for lease (active=200, max=200)",
            "trace_id": None,
        },
    )
    json.dumps(result.records)


def test_offset_timestamps_in_fixtures_are_stored_in_utc(tool: LogSearch) -> None:
    result = call(tool, {"start": "2026-07-01T14:03:40Z", "end": "2026-07-01T14:03:41Z"})
    assert [(r["ts"], r["trace_id"]) for r in result.records] == [("2026-07-01T14:03:40Z", "tr-a002")]


def test_filters_combine(tool: LogSearch) -> None:
    result = call(tool, {**WINDOW, "tenant": "acme", "service": "gateway", "level": "ERROR", "keyword": "gw_timeout"})
    assert [r["trace_id"] for r in result.records] == ["tr-a002", "tr-a003", "tr-a004"]
    assert all(r["tenant"] == "acme" and r["level"] == "ERROR" for r in result.records)


def test_keyword_ignores_case_and_whitespace_runs(tool: LogSearch) -> None:
    result = call(tool, {**WINDOW, "keyword": "  UPSTREAM   acquirer "})
    # The 14:08:30 line has a double space and a capital U; it still matches "upstream acquirer".
    assert [r["trace_id"] for r in result.records] == ["tr-a002", "tr-a003", "tr-a004"]


def test_results_are_in_time_order_whatever_the_fixture_order() -> None:
    shuffled = [EVENTS[i] for i in (7, 2, 11, 0, 9, 4, 1, 10, 3, 8, 6, 5)]  # 4 stays before 5 (equal ts)
    stamps = [(r["ts"], r["service"]) for r in call(LogSearch(shuffled), {**WINDOW, "limit": 50}).records]
    expected = [(r["ts"], r["service"]) for r in call(LogSearch(EVENTS), {**WINDOW, "limit": 50}).records]
    assert stamps == expected and len(stamps) == 10


def test_equal_timestamps_keep_fixture_order(tool: LogSearch) -> None:
    result = call(tool, {"start": "2026-07-01T14:04:02Z", "end": "2026-07-01T14:04:03Z"})
    assert [r["service"] for r in result.records] == ["gateway", "order"]


def test_empty_window_or_filter_is_no_evidence(tool: LogSearch) -> None:
    for raw in (
        {"start": "2026-07-02T00:00:00Z", "end": "2026-07-02T01:00:00Z"},
        {**WINDOW, "tenant": "umbrella"},
        {**WINDOW, "service": "risk", "level": "ERROR"},
    ):
        result = call(tool, raw)
        assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
        assert result.count == 0 and result.records == () and not result.truncated


def test_limit_truncates_and_reports_it(tool: LogSearch) -> None:
    over = call(tool, {**WINDOW, "tenant": "acme", "limit": 2})
    assert over.truncated and over.count == 2
    assert [r["ts"] for r in over.records] == ["2026-07-01T14:00:00Z", "2026-07-01T14:03:40Z"]  # the oldest two

    exact = call(tool, {**WINDOW, "keyword": "gw_timeout", "service": "gateway", "limit": 3})
    assert not exact.truncated and exact.count == 3


def test_limit_is_clamped_to_max_results_and_the_scope_says_so() -> None:
    small = LogSearch(EVENTS, max_results=3)
    result = call(small, {**WINDOW, "limit": 50})
    assert result.count == 3 and result.truncated
    assert result.actual_scope["limit"] == 3
    assert scope(small, {**WINDOW, "limit": 50}) == scope(small, {**WINDOW, "limit": 3})


def test_default_limit_and_filters_appear_in_the_actual_scope(tool: LogSearch) -> None:
    result = call(tool, {"start": "2026-07-01 14:00", "end": "2026-07-01T22:30:00+08:00", "tenant": " ACME "})
    assert result.actual_scope == {
        "start": "2026-07-01T14:00:00Z",
        "end": "2026-07-01T14:30:00Z",
        "tenant": "acme",
        "limit": 20,
    }


# --- scope ---------------------------------------------------------------------------------------


def test_time_notations_for_the_same_instants_share_one_scope_and_result(tool: LogSearch) -> None:
    variants: list[dict[str, JsonValue]] = [
        {"start": "2026-07-01T14:00:00Z", "end": "2026-07-01T14:30:00Z"},
        {"start": "2026-07-01 14:00:00+00:00", "end": "2026-07-01 14:30:00+00:00"},
        {"start": "2026-07-01T22:00:00+08:00", "end": "2026-07-01T22:30:00+08:00"},
        {"start": "2026-07-01T09:00:00-0500", "end": "2026-07-01T14:30:00.000Z"},
        {"start": "2026-07-01 14:00", "end": "2026-07-01T14:30:00 UTC"},
    ]
    scopes = {scope(tool, {**v, "tenant": "acme"}) for v in variants}
    results = {json.dumps(call(tool, {**v, "tenant": "acme"}).records) for v in variants}
    assert len(scopes) == 1 and len(results) == 1


def test_field_order_and_case_share_one_scope(tool: LogSearch) -> None:
    a = {**WINDOW, "tenant": "acme", "service": "gateway", "level": "error", "keyword": "GW_Timeout", "limit": 5}
    b = {"limit": 5, "keyword": "  gw_timeout ", "level": "ERROR", "service": "GATEWAY", "tenant": "Acme", **WINDOW}
    assert scope(tool, a) == scope(tool, b)
    assert call(tool, a).records == call(tool, b).records


def test_different_windows_filters_or_limits_are_different_scopes(tool: LogSearch) -> None:
    base = scope(tool, WINDOW)
    assert scope(tool, {**WINDOW, "end": "2026-07-01T14:30:01Z"}) != base
    assert scope(tool, {**WINDOW, "tenant": "acme"}) != base
    assert scope(tool, {**WINDOW, "limit": 21}) != base
    assert scope(tool, {**WINDOW, "limit": 20}) == base  # the default, written out


_OFFSETS = st.integers(min_value=-12 * 60, max_value=14 * 60).map(lambda m: m - m % 15)


def _render(instant: datetime, offset_minutes: int, sep: str, zulu: bool) -> str:
    if offset_minutes == 0 and zulu:
        return instant.strftime(f"%Y-%m-%d{sep}%H:%M:%SZ")
    local = instant.astimezone(timezone(timedelta(minutes=offset_minutes)))
    return local.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]


@settings(max_examples=80, deadline=None)
@given(
    start_offset=_OFFSETS,
    end_offset=_OFFSETS,
    sep=st.sampled_from(["T", " "]),
    zulu=st.booleans(),
    minutes=st.integers(min_value=1, max_value=24 * 60),
)
def test_property_any_offset_notation_gives_the_utc_scope(
    start_offset: int, end_offset: int, sep: str, zulu: bool, minutes: int
) -> None:
    tool = LogSearch(EVENTS)
    start = datetime(2026, 7, 1, 14, 0, tzinfo=UTC)
    end = start + timedelta(minutes=minutes)
    raw = {"start": _render(start, start_offset, sep, zulu), "end": _render(end, end_offset, sep, zulu)}
    canonical = {"start": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "end": end.strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert scope(tool, raw) == scope(tool, canonical)


# --- invalid input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "field", "reason"),
    [
        ({"start": "yesterday 2pm", "end": "2026-07-01T14:30:00Z"}, "start", "ISO-8601"),
        ({"start": "2026-07-01T14:00:00Z", "end": "2026-13-01T14:30:00Z"}, "end", "ISO-8601"),
        ({"start": "2026-07-01T14:30:00Z", "end": "2026-07-01T14:30:00Z"}, "end", "after start"),
        ({"start": "2026-07-01T22:30:00+08:00", "end": "2026-07-01T14:00:00Z"}, "end", "after start"),
        ({"end": "2026-07-01T14:30:00Z"}, "start", "required"),
        ({**WINDOW, "level": "FATAL"}, "level", "DEBUG"),
        ({**WINDOW, "limit": 0}, "limit", "greater than"),
        ({**WINDOW, "keyword": "   "}, "keyword", "non-whitespace"),
        ({**WINDOW, "tenant": ""}, "tenant", "at least 1"),
        ({**WINDOW, "tenantId": "acme"}, "tenantId", "Extra inputs"),
    ],
)
def test_invalid_input_is_rejected_naming_the_field(
    tool: LogSearch, raw: dict[str, JsonValue], field: str, reason: str
) -> None:
    with pytest.raises(ToolInputError, match=rf"{field}: .*{reason}"):
        tool.parse_input(raw)


def test_bad_fixture_events_and_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="ISO-8601"):
        LogEvent(ts="01/07/2026 14:00", tenant="acme", service="gateway", level="INFO", message="x")
    with pytest.raises(ValueError, match="level"):
        LogEvent(ts="2026-07-01T14:00:00Z", tenant="acme", service="gateway", level="TRACE", message="x")
    with pytest.raises(ValueError, match="max_results"):
        LogSearch(EVENTS, max_results=0)


def test_input_schema_describes_fields_for_the_model() -> None:
    props = LogSearchInput.model_json_schema()["properties"]
    assert "inclusive" in props["start"]["description"] and "exclusive" in props["end"]["description"]


# --- shared database reuse -----------------------------------------------------------------------


def test_reconstruction_reuses_the_loaded_schema() -> None:
    LogSearch(EVENTS)
    before = _duck.schema_count()
    for _ in range(5):
        call(LogSearch(EVENTS), WINDOW)
    assert _duck.schema_count() == before

    LogSearch([*EVENTS[:3]])
    assert _duck.schema_count() == before + 1


def test_two_event_sets_stay_apart() -> None:
    only_globex = LogSearch([e for e in EVENTS if e.tenant == "globex"])
    assert {r["tenant"] for r in call(only_globex, WINDOW).records} == {"globex"}
    assert {r["tenant"] for r in call(LogSearch(EVENTS), WINDOW).records} == {"acme", "globex", "initech"}


def test_no_events_at_all_is_no_evidence() -> None:
    assert call(LogSearch([]), WINDOW).evidence_status is EvidenceStatus.NO_EVIDENCE


# -- keyword: every word, any order, as log searches match words --------------------------------------------------
def test_keyword_matches_every_word_in_any_order(tool: LogSearch) -> None:
    """A person's search words need not be one phrase of the message: `acquirer timeout` finds `GW_TIMEOUT upstream
    acquirer …` (each word anywhere, `timeout` inside `GW_TIMEOUT`), and a word the message lacks finds nothing."""
    found = call(tool, {**WINDOW, "keyword": "acquirer timeout"})
    assert [r["trace_id"] for r in found.records] == ["tr-a002", "tr-a003", "tr-a004"]
    assert call(tool, {**WINDOW, "keyword": "payment failed gw_timeout"}).records[0]["trace_id"] == "tr-a003"
    assert call(tool, {**WINDOW, "keyword": "acquirer declined"}).count == 0


def test_keywords_with_the_same_words_are_one_scope(tool: LogSearch) -> None:
    """Word order and repeats do not change what matches, so they are the same search (a duplicate), while another
    word is another search."""
    base = scope(tool, {**WINDOW, "keyword": "pool exhausted"})
    assert scope(tool, {**WINDOW, "keyword": "Exhausted  POOL pool"}) == base
    assert scope(tool, {**WINDOW, "keyword": "pool exhausted lease"}) != base


def test_an_empty_keyword_search_says_what_the_window_holds_without_it(tool: LogSearch) -> None:
    """As log backends show hit counts: the count of lines in the same window and filters without the keyword, on an
    empty keyword search only (none on a hit, none without a keyword), and shown to the model in the observation."""
    from harness.observation import project_result

    empty = call(tool, {**WINDOW, "tenant": "acme", "service": "gateway", "keyword": "deadlock"})
    assert empty.count == 0 and empty.count_without_text_filter == 4
    assert call(tool, {**WINDOW, "tenant": "umbrella", "keyword": "deadlock"}).count_without_text_filter == 0
    assert call(tool, {**WINDOW, "keyword": "acquirer"}).count_without_text_filter is None
    assert call(tool, {**WINDOW, "tenant": "umbrella"}).count_without_text_filter is None
    shown = json.loads(project_result("c1", "log_search", empty, 4096, evaluation_required=False).text)
    assert shown["count_without_text_filter"] == 4 and shown["records"] == []


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_property_any_words_of_a_message_find_it(data: st.DataObject, tool: LogSearch) -> None:
    """Any non-empty set of the words of a line's message, in any order and case, finds that line (in its window)."""
    event = data.draw(st.sampled_from(EVENTS))
    words = event.message.split()
    chosen = data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=4))
    keyword = " ".join(w.upper() if i % 2 else w for i, w in enumerate(data.draw(st.permutations(chosen))))
    stamp = datetime.fromisoformat(LogEvent.model_validate(event.model_dump()).ts.replace("Z", "+00:00"))
    window = {"start": stamp.isoformat(), "end": (stamp + timedelta(seconds=1)).isoformat(), "limit": 50}
    messages = [r["message"] for r in call(tool, {**window, "keyword": keyword}).records]
    assert " ".join(event.message.split()) in [" ".join(str(m).split()) for m in messages]


def test_a_statement_is_answered_once_and_a_failed_one_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rows_of` remembers rows by statement and parameters (the fixture schemas never change); shown here on a table
    that does change, so a second execution would be seen. A failed statement runs again once it can succeed, and
    the oldest statement is forgotten past the bound."""
    import threading

    import duckdb

    monkeypatch.setattr(_duck, "_results", Remembered(2))
    con = duckdb.connect(":memory:")
    lock = threading.Lock()
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("INSERT INTO t VALUES (1), (2)")
    first = _duck.rows_of(con, lock, "SELECT x FROM t WHERE x >= ? ORDER BY x", [1])
    con.execute("INSERT INTO t VALUES (3)")
    assert _duck.rows_of(con, lock, "SELECT x FROM t WHERE x >= ? ORDER BY x", [1]) == first == ((1,), (2,))
    assert _duck.rows_of(con, lock, "SELECT x FROM t WHERE x >= ? ORDER BY x", [2]) == ((2,), (3,))
    with pytest.raises(duckdb.Error):
        _duck.rows_of(con, lock, "SELECT y FROM t", [])
    con.execute("ALTER TABLE t ADD COLUMN y INTEGER DEFAULT 7")
    assert _duck.rows_of(con, lock, "SELECT y FROM t", []) == ((7,), (7,), (7,))
    # three statements remembered into a bound of two: the first is asked again and sees the table as it is now
    assert _duck.rows_of(con, lock, "SELECT x FROM t WHERE x >= ? ORDER BY x", [1]) == ((1,), (2,), (3,))


def test_remembered_searches_answer_as_fresh_ones(tool: LogSearch) -> None:
    """Every search of this module's fixture, asked twice, with and without remembered rows: the same results."""
    searches = [{"start": "2026-07-01T14:00:00Z", "end": "2026-07-01T14:10:00Z", **extra}
                for extra in ({}, {"tenant": "acme"}, {"level": "ERROR"}, {"keyword": "gw_timeout"},
                              {"keyword": "no such words"}, {"tenant": "globex", "limit": 1})]  # fmt: skip
    first = [tool.run(LogSearchInput.model_validate(s)) for s in searches]
    _duck.forget_answers()
    assert [tool.run(LogSearchInput.model_validate(s)) for s in searches] == first
    assert [tool.run(LogSearchInput.model_validate(s)) for s in searches] == first
