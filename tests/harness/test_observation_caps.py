"""Byte caps are bounds and corrections say what to change.

Every observation the model reads — header, scope, records, error text, model-chosen ids — fits
`max_observation_bytes`; a run-wide observation budget stops the run like the other budgets.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from harness import observation as obs
from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import BudgetKind, EvidenceStatus, ReleaseOutcome, StopReason, ViolationKind
from harness.models.base import ChatRequest, ModelResponse, ToolMessage
from harness.prompts import DiagnosisTask
from harness.tools.base import ToolResult
from harness.trace import ToolRequestRejected
from harness.tracker import Violation
from runners.domain.scripted import ScriptedChatModel, ScriptStep, Trajectory
from runners.domain.tools.db_query import DatabaseQuery, TableFixture
from tests.conftest import LINES, LookupTool

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3000)
records = st.lists(st.dictionaries(st.sampled_from(["line", "msg", "ts", "n"]), text | st.integers()), max_size=30)


@given(
    cap=st.integers(256, 6000),
    scope=st.dictionaries(st.sampled_from(["sql", "query", "tenant"]), text, max_size=3),
    recs=records,
    call_id=st.text(min_size=1, max_size=400),
    pending=st.booleans(),
)
def test_a_completed_call_never_exceeds_its_cap(
    cap: int, scope: dict[str, str], recs: list[dict[str, object]], call_id: str, pending: bool
) -> None:
    status = EvidenceStatus.EVIDENCE if recs else EvidenceStatus.NO_EVIDENCE
    result = ToolResult(status, len(recs), dict(scope), tuple(recs))  # type: ignore[arg-type]
    o = obs.project_result(call_id, "db_query", result, cap, evaluation_required=pending and bool(recs))
    assert o.bytes == len(o.text.encode()) <= cap
    body = json.loads(o.text)
    assert body["status"] == "COMPLETED"
    if len(json.dumps(body)) < len(json.dumps({"scope": scope, "records": recs})):
        assert o.truncated and body["truncated"] is True


long_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=300, max_size=3000)


@given(cap=st.integers(256, 2000), services=st.lists(long_text, min_size=1, max_size=8), line=long_text)
def test_long_strings_inside_lists_are_cut_to_fit(cap: int, services: list[str], line: str) -> None:
    """A scope's list of strings (and a record's) are cut like an object's values: the result fits its cap."""
    result = ToolResult(EvidenceStatus.EVIDENCE, 1, {"services": list(services)}, ({"lines": [line, line]},))
    o = obs.project_result("call-1", "log_search", result, cap, evaluation_required=False)
    assert o.bytes == len(o.text.encode()) <= cap
    body = json.loads(o.text)
    if "scope" in body:
        assert all(isinstance(v, str) for v in body["scope"]["services"])


@given(
    cap=st.integers(256, 2000),
    message=text,
    call_id=st.text(min_size=1, max_size=600),
    kind=st.sampled_from(ViolationKind),
)
def test_every_control_observation_fits_its_cap(cap: int, message: str, call_id: str, kind: ViolationKind) -> None:
    for o in (
        obs.failed(call_id, "db_query", message, cap),
        obs.violation(call_id, Violation(kind, message), call_id, cap),
        obs.awaiting(call_id, call_id, cap),
        obs.duplicate(call_id, call_id, cap),
        obs.stop_required(call_id, StopReason.INFORMATION_SATURATED, None, cap),
        obs.saturated(call_id, StopReason.INFORMATION_SATURATED, cap),
    ):
        assert o.bytes <= cap, o.text[:200]
        json.loads(o.text)


def test_the_reported_long_sql_scope_fits_the_default_cap() -> None:
    """A 3,936-character SQL scope put a 4,699-byte observation before the model (cap 4,096)."""
    table = TableFixture(name="t", columns=("a", "b"), rows=tuple((i, "x" * 40) for i in range(200)))
    tool = DatabaseQuery([table])
    sql = "SELECT a, b FROM t WHERE " + " OR ".join(f"b = 'value number {i:04d}'" for i in range(144)) + " OR a >= 0"
    assert 3900 < len(sql) <= 4000
    parsed = tool.parse_input({"sql": sql})
    result = tool.run(parsed)
    o = obs.project_result("call_1", "db_query", result, 4096, evaluation_required=True)
    assert o.bytes <= 4096 and o.truncated
    body = json.loads(o.text)
    assert "…[cut]" in body["scope"]["sql"], "the long scope is cut with a marker"
    assert body["records"], "records still reach the model"


def test_corrections_name_the_fix_and_their_template_never_contradicts_it() -> None:
    cap = 4096
    unexpected = json.loads(
        obs.violation("c2", Violation(ViolationKind.UNEXPECTED_PREVIOUS_OBSERVATION, "no pending"), None, cap).text
    )
    assert "Remove previous_observation" in unexpected["fix"]
    assert "previous_observation" not in unexpected["envelope_template"]
    assert "allowed_information_gain" not in unexpected
    for kind in (ViolationKind.MISSING_PREVIOUS_OBSERVATION, ViolationKind.WRONG_TOOL_CALL_ID):
        body = json.loads(obs.violation("c3", Violation(kind, "x"), "call_7", cap).text)
        assert "call_7" in body["fix"], kind
        assert body["envelope_template"]["previous_observation"]["tool_call_id"] == "call_7"
        assert body["allowed_information_gain"] == ["GAINED", "NO_GAIN"]
    fixes = {k: json.loads(obs.violation("c", Violation(k, "m"), None, cap).text)["fix"] for k in ViolationKind}
    assert len(set(fixes.values())) == len(ViolationKind), "each violation kind names its own fix"


class _Recording(ScriptedChatModel):
    """The scripted model, remembering how many observation bytes each request carried."""

    seen: list[int]

    def complete(self, request: ChatRequest) -> ModelResponse:
        self.seen.append(sum(len(m.content.encode()) for m in request.messages if isinstance(m, ToolMessage)))
        return super().complete(request)


def test_the_run_wide_observation_budget_stops_the_run_like_the_other_budgets() -> None:
    steps = [ScriptStep(tool="lookup", input={"query": q}) for q in ("timeout", "pool", "tenant=t1", "order")]
    model = _Recording(Trajectory(steps=steps, draft={"conclusion": None, "missing_info": ["x"]}))
    model.seen = []
    cfg = HarnessConfig(max_run_observation_bytes=900, no_gain_threshold=9)
    r = run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], model, config=cfg)
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert r.usage.budget_hit is BudgetKind.OBSERVATION_BYTES
    assert 1 <= r.usage.tool_invocations < len(steps)
    # the model never received more observation bytes than the budget allows
    assert len(model.seen) >= 2 and max(model.seen) <= cfg.max_run_observation_bytes
    assert r.decision.outcome is ReleaseOutcome.FALLBACK, "verified facts are still published"
    # the cut result kept what the protocol needs: the model evaluated it instead of violating
    assert not [e for e in r.events if isinstance(e, ToolRequestRejected) and e.violation is not None]
