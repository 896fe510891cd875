"""What a model answered at a tag probe: the vocabulary the probe, its table and its measure share."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ProbeAnswer"]


class ProbeAnswer(StrEnum):
    """What the model answered at a probe point."""

    TAGGED = "TAGGED"
    """A tool call whose envelope evaluated the observation: the Harness applied the model's tag."""
    UNTAGGED = "UNTAGGED"
    """A tool call without a valid evaluation of the observation (the Harness rejected it as a protocol violation)."""
    DRAFT = "DRAFT"
    """A valid Draft instead of a call (with a conclusion it implies GAINED, without one NO_GAIN)."""
    INVALID_DRAFT = "INVALID_DRAFT"
    """A final message that is not a valid Draft."""
    NO_ANSWER = "NO_ANSWER"
    """The model call failed or a budget forbade it."""
