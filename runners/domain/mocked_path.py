"""The mocked path of a suite's case: each fixture's call once, in order, then a Draft citing what they returned.

What `--model scripted:mocked-path` plays: the investigation the fixtures were captured from (HolmesGPT's mocks
capture one), so every declared tool, fixture and citation of a suite goes through the Harness without a model.
Each call's arguments are the fixture's `match` (a wildcard argument is left out, or given a placeholder of its type
when the tool requires it); a call whose scope an earlier one already had is not made again. Each call evaluates the
previous one GAINED when that returned results, NO_GAIN otherwise. The Draft concludes with the case's root-cause
statement (its root cause's) and cites the first line of every result; with no result, it concludes nothing.
"""

from __future__ import annotations

from harness import InformationGain, JsonValue
from runners.domain.case_model import EvalCase
from runners.domain.scripted import ScriptStep, Trajectory
from runners.domain.suite import DeclaredTool, ParameterType
from runners.domain.tool_fixtures import WILDCARD, FixtureStatus, ToolFixture
from runners.domain.tools.declared import scope_of

__all__ = ["mocked_path"]

_PLACEHOLDER: dict[ParameterType, JsonValue] = {
    ParameterType.STRING: "any",
    ParameterType.INTEGER: 0,
    ParameterType.NUMBER: 0,
    ParameterType.BOOLEAN: False,
    ParameterType.ARRAY: [],
    ParameterType.OBJECT: {},
}

_EXCERPT_CHARS = 80
"""The longest excerpt a citation copies from a result's line."""


def _arguments(fixture: ToolFixture, tool: DeclaredTool) -> dict[str, JsonValue]:
    args = {k: v for k, v in fixture.match.items() if v != WILDCARD}
    for name in tool.parameters.required:
        if name not in args:
            spec = tool.parameters.properties[name]
            args[name] = spec.enum[0] if spec.enum else _PLACEHOLDER[spec.type]
    return args


def _excerpt(output: str) -> str | None:
    for line in output.splitlines():
        text = line.strip()
        if len(text) >= 8:
            return text[:_EXCERPT_CHARS].strip()
    return None


def mocked_path(case: EvalCase) -> Trajectory:
    """The mocked path of `case` (a case without fixtures of declared tools: its own trajectory)."""
    if case.suite is None or not case.fixtures.results:
        return case.trajectory
    offered = set(case.tool_names)
    seen: set[tuple[str, str]] = set()
    steps: list[ScriptStep] = []
    cited: list[tuple[int, str, str]] = []
    previous: ToolFixture | None = None
    for fixture in case.fixtures.results:
        tool = case.suite.tool(fixture.tool)
        if not isinstance(tool, DeclaredTool) or tool.name not in offered:
            continue
        args = _arguments(fixture, tool)
        key = (tool.name, scope_of(tool, args))
        if key in seen:
            continue
        seen.add(key)
        gained = previous is not None and previous.status is FixtureStatus.RESULTS
        steps.append(ScriptStep(tool=tool.name, input=args,
                                gain=InformationGain.GAINED if gained else InformationGain.NO_GAIN))  # fmt: skip
        previous = fixture
        excerpt = _excerpt(fixture.output) if fixture.status is FixtureStatus.RESULTS else None
        if excerpt is not None:
            cited.append((len(steps), tool.name, excerpt))
    expect = case.expect
    statement = expect.root_cause_statement or (expect.root_cause.statement if expect.root_cause else None)
    draft: dict[str, JsonValue]
    if cited and statement is not None:
        draft = {
            "conclusion": statement,
            "claims": [{"statement": f"{tool} returned: {excerpt}",
                        "citations": [{"tool_call_id": f"@step{n}", "excerpt": excerpt}]}
                       for n, tool, excerpt in cited],
            "missing_info": [],
            "next_steps": [],
        }  # fmt: skip
    else:
        draft = {"conclusion": None, "claims": [], "missing_info": ["no tool returned data on the question"],
                 "next_steps": []}  # fmt: skip
    return Trajectory(steps=steps, draft=draft)
