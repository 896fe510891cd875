"""A suite's declared tool: its arguments checked against the declared JSON schema, its results read from the case's
fixtures (the first fixture that matches the call answers; none: no data)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from harness import BusinessTool, EvidenceStatus, JsonObject, JsonValue, ToolExecutionError, ToolResult
from runners.domain.suite import DeclaredTool, ParameterType, ToolParameters
from runners.domain.tool_fixtures import FixtureStatus, ToolFixture, first_match

__all__ = ["DeclaredBackend", "arguments_of", "declared_input_model", "declared_tool", "records_of", "scope_of"]

_TYPES: dict[ParameterType, Any] = {
    ParameterType.STRING: str,
    ParameterType.INTEGER: int,
    ParameterType.NUMBER: float,
    ParameterType.BOOLEAN: bool,
    ParameterType.ARRAY: list[JsonValue],
    ParameterType.OBJECT: dict[str, JsonValue],
}

_MODELS: dict[tuple[str, str], type[BaseModel]] = {}


def declared_input_model(name: str, parameters: ToolParameters) -> type[BaseModel]:
    """A pydantic model of the declared arguments (fields aliased: an argument may be any name); built once."""
    key = (name, parameters.model_dump_json())
    model = _MODELS.get(key)
    if model is not None:
        return model
    fields: dict[str, Any] = {}
    for i, (arg, spec) in enumerate(parameters.properties.items()):
        kind: Any = Literal[tuple(spec.enum)] if spec.enum else _TYPES[spec.type]
        required = arg in parameters.required
        fields[f"a{i}"] = (kind if required else kind | None, Field(... if required else None, alias=arg))
    model = create_model(
        f"{name}_input", __config__=ConfigDict(extra="forbid", populate_by_name=False, strict=False), **fields
    )
    _MODELS[key] = model
    return model


def arguments_of(parsed: BaseModel) -> dict[str, JsonValue]:
    """The arguments as the call gave them (by their declared names)."""
    args: dict[str, JsonValue] = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return args


def scope_of(spec: DeclaredTool, arguments: dict[str, JsonValue]) -> str:
    """A call's scope: its scope arguments (all, when the tool names none) as canonical JSON, nulls left out; two
    calls are the same query when these are equal."""
    kept = {k: v for k, v in arguments.items() if v is not None and (spec.scope is None or k in spec.scope)}
    return json.dumps(kept, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def records_of(output: str) -> tuple[JsonObject, ...]:
    """A fixture's output as records: one per non-empty line, its text under `line`."""
    return tuple({"line": line} for line in output.splitlines() if line.strip())


class DeclaredBackend(BusinessTool[BaseModel]):
    """A declared tool answered from the case's fixtures."""

    runs_inline = True  # a lookup in memory: no worker thread, no deadline-capped timeout needed

    def __init__(self, spec: DeclaredTool, fixtures: Sequence[ToolFixture]) -> None:
        self.spec = spec
        self.fixtures = tuple(f for f in fixtures if f.tool == spec.name)
        self.description = spec.description
        self.input_model = declared_input_model(spec.name, spec.parameters)
        self._schema = spec.parameters.json_schema()

    def input_schema(self) -> JsonObject:
        return dict(self._schema)

    def normalize_scope(self, parsed: BaseModel) -> str:
        return scope_of(self.spec, arguments_of(parsed))

    def run(self, parsed: BaseModel) -> ToolResult:
        args = arguments_of(parsed)
        found = first_match(self.fixtures, self.spec.name, args)
        if found is not None and found.status is FixtureStatus.ERROR:
            raise ToolExecutionError(found.error or "error")
        records = records_of(found.output) if found is not None and found.status is FixtureStatus.RESULTS else ()
        status = EvidenceStatus.EVIDENCE if records else EvidenceStatus.NO_EVIDENCE
        return ToolResult(status, len(records), args, records)


def declared_tool(spec: DeclaredTool, fixtures: Sequence[ToolFixture]) -> BusinessTool[Any]:
    """The tool, as a class named after it (the Harness reads `name` from the class)."""
    cls = type(f"Declared_{spec.name}", (DeclaredBackend,), {"name": spec.name})
    tool: BusinessTool[Any] = cls(spec, fixtures)
    return tool
