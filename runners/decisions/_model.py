"""The base of the decisions' result models: frozen, and refusing a field they do not declare."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen"]


class Frozen(BaseModel):
    """A result: immutable once built, no undeclared field."""

    model_config = ConfigDict(frozen=True, extra="forbid")
