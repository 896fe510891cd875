"""Model observations (docs/architecture.md §6.2): what each public builder of `harness.observation` puts before
the model, and how a byte cap is met — records dropped first, then the longest strings cut with a marker, and as a
last resort only the control facts. (Caps over arbitrary input, and the run-wide observation budget:
test_observation_caps.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import observation as obs
from harness.contracts import EvidenceStatus, JsonObject, RejectionReason, Relevance, StopReason, ViolationKind
from harness.tools.base import ToolResult
from harness.tracker import Violation

BIG = 65_536
STOP_TEXT = (
    "Stop calling tools. Write your final Draft now as JSON: the conclusion with its citations if the results "
    "you received show the root cause, otherwise conclusion null with what is missing and the next steps."
)


def _body(o: obs.Observation) -> Any:
    """The observation's JSON (checked to be an object; Any so that tests index it freely)."""
    assert o.bytes == len(o.text.encode("utf-8")), "bytes is the UTF-8 size of the text"
    body = json.loads(o.text)
    assert isinstance(body, dict)
    return body


def _result(n: int, *, line: str = "row", truncated: bool = False, scope: JsonObject | None = None) -> ToolResult:
    rows: tuple[JsonObject, ...] = tuple({"line": f"{line} {i}"} for i in range(n))
    status = EvidenceStatus.EVIDENCE if n else EvidenceStatus.NO_EVIDENCE
    return ToolResult(status, n, scope if scope is not None else {"q": "timeout"}, rows, truncated)


# -- project_result ----------------------------------------------------------------------------------------------------
def test_a_result_that_fits_is_shown_whole_as_compact_json() -> None:
    o = obs.project_result("c1", "logs", _result(2, line="é"), BIG, evaluation_required=False)
    assert o.text == (
        '{"tool_call_id":"c1","tool":"logs","status":"COMPLETED","evidence_status":"EVIDENCE","count":2,'
        '"scope":{"q":"timeout"},"truncated":false,"evaluation_required":false,'
        '"records":[{"line":"é 0"},{"line":"é 1"}]}'
    )
    assert not o.truncated and o.bytes == len(o.text.encode()) > len(o.text)


def test_a_pending_result_tells_the_model_what_the_next_call_must_include() -> None:
    body = _body(obs.project_result("c9", "logs", _result(1), BIG, evaluation_required=True))
    assert body["evaluation_required"] is True
    assert body["next_call_must_include"] == {
        "previous_observation": {"tool_call_id": "c9", "information_gain": "GAINED | NO_GAIN"}
    }
    assert "next_call_must_include" not in _body(
        obs.project_result("c9", "logs", _result(1), BIG, evaluation_required=False)
    )


def test_stop_required_rides_on_the_result_that_saturated_the_run() -> None:
    body = _body(
        obs.project_result(
            "c1", "logs", _result(0), BIG, evaluation_required=False, stop_reason=StopReason.INFORMATION_SATURATED
        )
    )
    assert (body["control"], body["stop_reason"], body["message"]) == (
        "STOP_REQUIRED",
        "INFORMATION_SATURATED",
        STOP_TEXT,
    )
    assert body["evidence_status"] == "NO_EVIDENCE" and body["records"] == []
    assert "control" not in _body(obs.project_result("c1", "logs", _result(0), BIG, evaluation_required=False))


def test_relevance_is_attached_to_each_record_it_is_known_for() -> None:
    result = ToolResult(
        EvidenceStatus.EVIDENCE,
        3,
        {"q": "x"},
        ({"doc": "a"}, {"doc": "b"}, {"doc": "c"}),
        relevance=(Relevance.STRONG, Relevance.REFERENCE),
    )
    body = _body(obs.project_result("c1", "kb", result, BIG, evaluation_required=True))
    assert body["records"] == [
        {"doc": "a", "relevance": "STRONG"},
        {"doc": "b", "relevance": "REFERENCE"},
        {"doc": "c"},
    ]
    assert result.records[0] == {"doc": "a"}, "the canonical records are never changed"


def test_a_backend_truncated_result_is_flagged_even_when_it_fits() -> None:
    o = obs.project_result("c1", "logs", _result(1, truncated=True), BIG, evaluation_required=False)
    assert o.truncated and _body(o)["truncated"] is True


def test_records_are_dropped_from_the_end_and_the_count_shown_says_how_many_remain() -> None:
    result = _result(40, line="x" * 80)
    o = obs.project_result("c1", "logs", result, 1_024, evaluation_required=True)
    body = _body(o)
    assert o.truncated and body["truncated"] is True and o.bytes <= 1_024
    shown = body["records_shown"]
    assert 0 < shown < 40 and len(body["records"]) == shown
    assert body["records"] == [dict(r) for r in result.records[:shown]], "the first records are kept, uncut"
    assert body["count"] == 40, "count is what the backend returned"
    assert body["next_call_must_include"]["previous_observation"]["tool_call_id"] == "c1"


def test_one_huge_record_is_cut_with_a_marker_rather_than_dropped() -> None:
    result = ToolResult(EvidenceStatus.EVIDENCE, 1, {"q": "x"}, ({"line": "y" * 5_000},))
    body = _body(obs.project_result("c1", "logs", result, 1_024, evaluation_required=True))
    assert body["records_shown"] == 1
    (record,) = body["records"]
    assert record["line"].startswith("yyyy") and record["line"].endswith("…[cut]")


def test_when_no_record_fits_even_cut_the_header_is_kept_with_no_records() -> None:
    # strings of at most 24 characters are never cut, so not even one of these records fits in 512 bytes
    wide: JsonObject = {f"k{i:02d}": f"short value number {i:03d}" for i in range(20)}
    result = ToolResult(EvidenceStatus.EVIDENCE, 3, {"q": "x"}, (wide, wide, wide))
    o = obs.project_result("c1", "logs", result, 512, evaluation_required=True)
    body = _body(o)
    assert o.bytes <= 512 and o.truncated
    assert body["records"] == [] and body["records_shown"] == 0
    assert (body["tool"], body["scope"], body["count"]) == ("logs", {"q": "x"}, 3), "not the last-resort form"


def test_a_long_scope_gets_at_most_a_quarter_of_the_cap_before_records_are_dropped() -> None:
    scope: JsonObject = {"sql": "SELECT " + "a" * 4_000}
    o = obs.project_result("c1", "db", _result(3, scope=scope), 2_048, evaluation_required=False)
    body = _body(o)
    assert o.bytes <= 2_048
    assert body["scope"]["sql"].endswith("…[cut]")
    assert len(json.dumps(body["scope"], ensure_ascii=False, separators=(",", ":")).encode()) <= 2_048 // 4
    assert body["records_shown"] == 3, "the scope was cut instead of the records"


# The projection cuts strings in place, and the interceptor hands it the very ToolResult it just put in the
# canonical store: the store's truth (the snapshot's scopes, the raw records EvidenceGuard matches excerpts in)
# is cut along with what the model reads.
def test_cutting_a_long_scope_leaves_the_canonical_result_unchanged() -> None:
    scope: JsonObject = {"sql": "SELECT " + "a" * 4_000}
    obs.project_result("c1", "db", _result(3, scope=scope), 2_048, evaluation_required=False)
    assert scope == {"sql": "SELECT " + "a" * 4_000}


def test_cutting_a_nested_record_string_leaves_the_canonical_record_unchanged() -> None:
    record: JsonObject = {"doc": {"text": "y" * 5_000}}
    result = ToolResult(EvidenceStatus.EVIDENCE, 1, {"q": "x"}, (record,))
    obs.project_result("c1", "kb", result, 1_024, evaluation_required=False)
    assert record == {"doc": {"text": "y" * 5_000}}


def test_a_tiny_cap_and_a_huge_call_id_keep_only_the_control_facts() -> None:
    call_id = "id-" + "z" * 2_000
    o = obs.project_result("c" * 10 + call_id, "logs", _result(5), 256, evaluation_required=True)
    body = _body(o)
    assert o.bytes <= 256 and o.truncated
    assert set(body) <= {"tool_call_id", "status", "evidence_status", "count", "evaluation_required", "truncated"}
    shown = body["tool_call_id"]
    assert len(shown) <= 64 and ("c" * 10 + call_id).startswith(shown.removesuffix("…[cut]"))
    assert body["status"] == "COMPLETED" and body["evaluation_required"] is True and body["count"] == 5


@given(cap=st.integers(256, 4_096), n=st.integers(0, 30), width=st.integers(0, 300))
def test_what_is_shown_is_a_prefix_of_the_records(cap: int, n: int, width: int) -> None:
    result = _result(n, line="w" * width)
    body = _body(obs.project_result("c1", "logs", result, cap, evaluation_required=bool(n)))
    shown = body.get("records")
    if isinstance(shown, list) and body.get("truncated") is False:
        assert shown == [dict(r) for r in result.records], "nothing is cut without the truncated flag"


# -- the other builders ------------------------------------------------------------------------------------------------
def test_a_backend_failure_is_its_own_status_with_its_error_cut_at_500_characters() -> None:
    body = _body(obs.failed("c1", "logs", "refused " + "e" * 900, BIG))
    assert body == {"tool_call_id": "c1", "tool": "logs", "status": "FAILED", "error": ("refused " + "e" * 900)[:500]}


@pytest.mark.parametrize("kind", list(ViolationKind))
@pytest.mark.parametrize("pending", [None, "call-7"])
def test_a_violation_names_its_kind_its_fix_and_a_template_for_the_pending_state(
    kind: ViolationKind, pending: str | None
) -> None:
    v = Violation(kind, "what is wrong", missing_field="previous_observation")
    o = obs.violation("c2", v, pending, BIG)
    body = _body(o)
    assert not o.truncated
    assert body["tool_call_id"] == "c2" and body["status"] == "REJECTED"
    assert body["reason"] == RejectionReason.PROTOCOL_VIOLATION.value
    assert (body["violation"], body["message"], body["missing_field"]) == (kind.value, "what is wrong", v.missing_field)
    assert body["expected_previous_tool_call_id"] == pending and body["backend_called"] is False
    template = body["envelope_template"]
    if pending is None:
        assert template == {"input": {"...": "the tool's parameters"}}
    else:
        assert template["previous_observation"] == {"tool_call_id": pending, "information_gain": "GAINED or NO_GAIN"}
    shows_gains = pending is not None or kind is ViolationKind.INVALID_GAIN_VALUE
    assert ("allowed_information_gain" in body) is shows_gains
    if shows_gains:
        assert body["allowed_information_gain"] == ["GAINED", "NO_GAIN"]


def test_the_fix_for_a_missing_evaluation_names_the_pending_call() -> None:
    v = Violation(ViolationKind.MISSING_PREVIOUS_OBSERVATION, "m", missing_field="previous_observation")
    assert _body(obs.violation("c2", v, "call-7", BIG))["fix"] == (
        "Add previous_observation with tool_call_id call-7 and your evaluation of that observation "
        "(GAINED or NO_GAIN), then the input."
    )


def test_a_call_queued_behind_a_pending_one_is_told_to_evaluate_it_first_and_is_no_violation() -> None:
    body = _body(obs.awaiting("c3", "c2", BIG))
    assert body["reason"] == RejectionReason.AWAITING_EVALUATION.value and body["evaluate_first"] == "c2"
    assert body["protocol_violation"] is False and body["backend_called"] is False
    assert "evaluate c2 first" in body["message"]


def test_a_duplicate_is_harness_no_gain_and_names_the_call_it_repeats() -> None:
    body = _body(obs.duplicate("c4", "c1", BIG))
    assert (body["reason"], body["duplicate_of"], body["information_gain"]) == ("DUPLICATE_SCOPE", "c1", "NO_GAIN")
    assert body["evaluation_required"] is False and body["backend_called"] is False


@pytest.mark.parametrize("violation", [None, Violation(ViolationKind.WRONG_TOOL_CALL_ID, "m")])
def test_stop_required_is_the_control_signal_and_names_a_violation_that_caused_it(violation: Violation | None) -> None:
    body = _body(obs.stop_required("c5", StopReason.PROGRESS_PROTOCOL_VIOLATED, violation, BIG))
    assert (body["control"], body["stop_reason"], body["message"]) == (
        "STOP_REQUIRED",
        "PROGRESS_PROTOCOL_VIOLATED",
        STOP_TEXT,
    )
    assert body.get("violation") == (violation.kind.value if violation else None)
    assert body["status"] == "REJECTED" and body["backend_called"] is False


@pytest.mark.parametrize("reason", [None, StopReason.INFORMATION_SATURATED])
def test_a_request_beside_stop_required_is_rejected_as_saturated(reason: StopReason | None) -> None:
    body = _body(obs.saturated("c6", reason, BIG))
    assert body["reason"] == "SATURATED" and body["stop_reason"] == (reason.value if reason else None)
    assert "control" not in body, "STOP_REQUIRED goes out once, not again beside it"


def test_a_request_left_after_the_loop_ended_is_never_run() -> None:
    body = _body(obs.not_executed("c7", RejectionReason.BUDGET, "the tool budget is used up", BIG))
    assert body == {
        "tool_call_id": "c7",
        "status": "REJECTED",
        "reason": RejectionReason.BUDGET.value,
        "message": "the tool budget is used up",
        "backend_called": False,
    }


def test_a_control_observation_over_its_cap_keeps_its_control_facts() -> None:
    o = obs.stop_required("c" * 3_000, StopReason.INFORMATION_SATURATED, None, 256)
    body = _body(o)
    assert o.bytes <= 256 and o.truncated
    assert body["control"] == "STOP_REQUIRED" and body["stop_reason"] == "INFORMATION_SATURATED"
    shown = body["tool_call_id"]
    assert len(shown) <= 64 and shown.removesuffix("…[cut]").strip("c") == ""
