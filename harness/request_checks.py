"""Request checks: an embedder's stop rules in front of the Harness's own gate, consulted before each tool request is
admitted — a loop detector's exact repeat, error cycle or A-B alternation, as peers ship them.

A check only says why: given the requests the run has seen and the one about to be decided, it returns a reason to
stop, or None. What a reason means is the Harness's decision (docs/architecture.md §2: the Harness owns whether the
loop may continue): the request is refused before the backend (TOOL_REQUEST_REJECTED, STOP_RULE), the run is
stopped as at a hard budget (BUDGET_EXHAUSTED with budget STOP_RULE and the reason as its detail;
BUDGET_LIMIT_REACHED unless an earlier stop reason stands), no further model call is made, and Release publishes
from what the run verified. The model is never told a check exists.

Every request the loop decides is seen, in order: rejected ones too (a loop detector watches what the model asks
for); the calls left in a message after the loop ended are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["RequestCheck", "SeenRequest"]


@dataclass(frozen=True, slots=True)
class SeenRequest:
    """One tool request as a check sees it."""

    tool_call_id: str
    """The request's call id."""
    tool: str
    """The tool asked for (as the model named it)."""
    scope: str | None
    """Its normalised scope (None: the request was malformed and has none)."""
    failed: bool = False
    """It reached the backend and the backend failed (known once it ran)."""


class RequestCheck(Protocol):
    """A stop rule consulted before each tool request is admitted."""

    def stop_before(self, seen: Sequence[SeenRequest], request: SeenRequest) -> str | None:
        """Why the run should stop before `request` (None: no reason); `seen`: the run's earlier requests, in
        order."""
        ...
