"""The business-tool boundary: what a tool is and what it returns (docs/architecture.md §2 row one, §6).

A tool decides only objective facts — ran or failed, empty or not, count, actual scope,
truncated — and never whether content supports a hypothesis.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from harness.contracts import EvidenceStatus, JsonObject, JsonValue, Relevance
from harness.scope import ToolScopeNormalizer

InputT = TypeVar("InputT", bound=BaseModel)


class ToolInputError(ValueError):
    """The business input does not match the tool's schema; the backend is never called."""


class ToolExecutionError(RuntimeError):
    """The backend ran and failed; a technical failure, never NO_GAIN."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The objective outcome of one successful backend call."""

    evidence_status: EvidenceStatus
    """EVIDENCE when anything came back for the scope, else NO_EVIDENCE."""
    count: int
    """How many records the backend returned (before any truncation to the model)."""
    actual_scope: JsonObject
    """The scope the backend really applied (defaults and clamps included)."""
    records: tuple[JsonObject, ...]
    """The raw payload: the records as the backend produced them."""
    truncated: bool = False
    """True when the backend itself capped the result (row limit, top-k)."""
    relevance: tuple[Relevance, ...] = field(default=())
    """Per-record retrieval relevance, for knowledge-base tools only."""
    count_without_text_filter: int | None = None
    """For an empty result of a query with a text filter (a log keyword): how many records the same scope holds
    without that filter, as log backends show hit counts. A count, not a record: nothing to cite."""


class BusinessTool(ABC, Generic[InputT]):
    """A tool the Diagnosis Agent may call; it never sees control fields."""

    name: ClassVar[str]
    """The name the model calls the tool by."""
    description: str
    """What the tool does, written for the model (a class attribute, which an instance may narrow, as the database
    tool does by naming its case's tables)."""
    input_model: type[InputT]
    """The pydantic model of the business input; its JSON schema is shown to the model (a class attribute,
    which an instance may narrow, as the database tool does with its case's tables)."""
    runs_inline: ClassVar[bool] = False
    """True when the tool bounds its own latency (in memory, or a backend with its own statement
    timeout): it runs on the loop's thread instead of a worker with a deadline-capped timeout."""

    def input_schema(self) -> JsonObject:
        """JSON schema of the business input (cached per input model: pydantic rebuilds it each call)."""
        model = self.input_model
        schema = _SCHEMAS.get(model)
        if schema is None:
            schema = _SCHEMAS[model] = model.model_json_schema()
        return schema

    def parse_input(self, raw: Mapping[str, JsonValue]) -> InputT:
        """Validate the business input, raising ToolInputError with a readable message."""
        try:
            parsed = self.input_model.model_validate(dict(raw))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '<input>'}: {err['msg'].removeprefix('Value error, ')}"
                for err in exc.errors()
            )
            raise ToolInputError(f"invalid input for tool {self.name!r}: {problems}") from None
        return parsed

    def normalize_scope(self, parsed: InputT) -> str:
        """A stable identity for the query; equal for inputs that mean the same thing."""
        return _DEFAULT_NORMALIZER.normalize(parsed.model_dump(mode="json"))

    @abstractmethod
    def run(self, parsed: InputT) -> ToolResult:
        """Call the backend. Raise ToolExecutionError (or anything) on technical failure."""


_DEFAULT_NORMALIZER = ToolScopeNormalizer()
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], JsonObject] = weakref.WeakKeyDictionary()
