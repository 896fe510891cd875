"""A case suite: a folder of case files with a `suite.yaml` that declares the suite's tools, families and role.

A declared tool has a name, a description, the JSON schema of its arguments (objects of string, integer, number,
boolean, array and object properties, `required`, `enum`) and the arguments that make a call's scope; each case
gives its results as fixtures (`tool_fixtures`). A tool may instead be one of the bench's own (`builtin:
log_search`): the built-in cases are the suite of `evalsets/suite.yaml`, whose tools are the three built-in ones.
`find_suite` finds the suite a case file belongs to (the nearest `suite.yaml` above it); `read_suite` reads one and
names the file, line and field of every problem.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from harness import JsonValue

__all__ = [
    "SUITE_FILE",
    "BuiltinTool",
    "DeclaredTool",
    "ParameterType",
    "SuiteError",
    "SuiteFamily",
    "SuiteSpec",
    "SuiteTool",
    "ToolParameter",
    "ToolParameters",
    "find_suite",
    "read_suite",
]

SUITE_FILE = "suite.yaml"
"""The file that makes a folder a suite (never read as a file of cases)."""

Name = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")]
"""A tool's, an argument's or a family's name."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class ParameterType(StrEnum):
    """The JSON type of one argument."""

    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    ARRAY = "array"
    OBJECT = "object"


class ToolParameter(_Strict):
    """One argument of a declared tool, as JSON schema writes it."""

    type: ParameterType
    """Its JSON type."""
    description: str | None = None
    """What it is, for the model."""
    enum: list[JsonValue] | None = Field(default=None, min_length=1)
    """The values it may take (none: any of its type)."""


class ToolParameters(_Strict):
    """A declared tool's arguments: a JSON schema object."""

    type: Literal["object"] = "object"
    """Always `object`."""
    properties: dict[Name, ToolParameter] = Field(default_factory=dict)
    """The arguments by name."""
    required: list[Name] = Field(default_factory=list)
    """The arguments a call must give."""

    @model_validator(mode="after")
    def _required_declared(self) -> ToolParameters:
        unknown = [r for r in self.required if r not in self.properties]
        if unknown:
            raise ValueError(f"required: {', '.join(unknown)} not among the properties")
        return self

    def json_schema(self) -> dict[str, JsonValue]:
        """The schema the model is shown (no additional arguments allowed)."""
        schema: dict[str, JsonValue] = self.model_dump(mode="json", exclude_none=True)
        schema["additionalProperties"] = False
        return schema


class DeclaredTool(_Strict):
    """A tool of the suite, answered from each case's fixtures."""

    name: Name
    """The name the model calls it by."""
    description: str = Field(min_length=1, max_length=4_000)
    """What it does, written for the model."""
    parameters: ToolParameters = ToolParameters()
    """The JSON schema of its arguments."""
    scope: list[Name] | None = None
    """The arguments that make a call's scope (two calls with equal ones are the same query); none: all of them."""

    @model_validator(mode="after")
    def _scope_declared(self) -> DeclaredTool:
        unknown = [s for s in self.scope or () if s not in self.parameters.properties]
        if unknown:
            raise ValueError(f"scope: {', '.join(unknown)} not among the parameters' properties")
        return self


class BuiltinTool(_Strict):
    """One of the bench's own tools, running on the case's `kb`, `logs` and `tables` fixtures."""

    builtin: Literal["kb_search", "log_search", "db_query"]
    """Which one."""

    @property
    def name(self) -> str:
        """The name the model calls it by."""
        return self.builtin


def _tool_kind(value: Any) -> str:
    builtin = isinstance(value, BuiltinTool) or (isinstance(value, dict) and "builtin" in value)
    return "builtin" if builtin else "declared"


SuiteTool = Annotated[
    Annotated[DeclaredTool, Tag("declared")] | Annotated[BuiltinTool, Tag("builtin")], Discriminator(_tool_kind)
]
"""A declared tool or a built-in one."""


class SuiteFamily(_Strict):
    """One family of the suite's cases."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")]
    """Its name, as cases give it."""
    description: str = ""
    """What its cases have in common."""


class SuiteSpec(_Strict):
    """What `suite.yaml` declares."""

    suite: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")]
    """The suite's name."""
    description: str = ""
    """What it is, where it comes from."""
    role: str | None = Field(default=None, min_length=10, max_length=4_000)
    """Who the agent is, for which system: the system prompt is this role and the Harness's tool protocol
    (none: the bench's own role, the payment platform's)."""
    families: list[SuiteFamily] = Field(min_length=1)
    """The families its cases belong to."""
    tools: list[SuiteTool] = Field(min_length=1)
    """Its tools."""

    @model_validator(mode="after")
    def _unique(self) -> SuiteSpec:
        for what, names in (("tools", [t.name for t in self.tools]), ("families", [f.name for f in self.families])):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what}: {', '.join(twice)} declared twice")
        return self

    @property
    def builtin_only(self) -> bool:
        """Its tools are the bench's own and it has no role of its own: its cases run as the built-in cases do."""
        return self.role is None and all(isinstance(t, BuiltinTool) for t in self.tools)

    def tool(self, name: str) -> DeclaredTool | BuiltinTool | None:
        """The tool of that name."""
        return next((t for t in self.tools if t.name == name), None)


class SuiteError(ValueError):
    """A `suite.yaml` is malformed: one line naming the file, line and field."""


def _node_line(node: yaml.Node, loc: tuple[int | str, ...]) -> int:
    """The line (1-based) of the deepest YAML node `loc` reaches (pydantic's tag names are stepped over)."""
    line = node.start_mark.line + 1
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
            if child is None:
                key = next((k for k, _ in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
                child = key
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
        if child is None:
            continue
        node, line = child, child.start_mark.line + 1
    return line


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if part in ("declared", "builtin") and out.startswith("tools"):
            continue  # the union's tag, not a field
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<suite>"


def read_suite(path: Path) -> SuiteSpec:
    """The suite `path` declares; SuiteError naming the file, line and field of its first problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{path}: not valid UTF-8 (byte offset {exc.start})") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SuiteError(f"{path}:{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if node is None or not isinstance(raw, dict):
        raise SuiteError(f"{path}: line 1: the suite must be a mapping (suite, families, tools)")
    try:
        return SuiteSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        named = re.match(r"^([\w.\[\]]+): (.*)$", msg, re.DOTALL)
        if named:  # a model check naming its own field, relative to the model it checks
            loc = (*loc, *named.group(1).split("."))
            msg = named.group(2)
        raise SuiteError(f"{path}: line {_node_line(node, loc)}: field {_where(loc)}: {msg}") from None


@lru_cache(maxsize=256)
def _read_cached(path: Path, mtime_ns: int, size: int) -> SuiteSpec:
    return read_suite(path)


def find_suite(case_file: Path, root: Path | None = None) -> tuple[Path, SuiteSpec] | None:
    """The suite `case_file` belongs to: the nearest `suite.yaml` in its folder or above, up to `root` (the folder
    the files were selected from; without one, its own folder only). SuiteError when that file is malformed."""
    folder = case_file.parent.resolve()
    stop = root.resolve() if root is not None else folder
    while True:
        candidate = folder / SUITE_FILE
        if candidate.is_file():
            st = candidate.stat()
            return candidate, _read_cached(candidate, st.st_mtime_ns, st.st_size)
        if folder == stop or folder.parent == folder or stop not in folder.parents:
            return None
        folder = folder.parent
