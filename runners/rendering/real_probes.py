"""The real-models report's tag-probe section, rendered: per probed model (replayed by `runners.pipelines.real_probes`),
the confusion per truth grade beside the trivial taggers, and the NO_GAIN threshold the measured tags imply beside the
one the model's sweep recommends. It only renders."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runners.decisions.tag_probe import ModelProbe
from runners.rendering.tag_probe import probe_markdown

__all__ = ["PROBE_TEXT", "ProbeReport", "probe_lines"]

PROBE_TEXT = (
    "A run judges an observation only where the model's own search took it, and both models draft right after their"
    " first non-empty observation, so the runs hold almost no gain tags. The tag probe asks for one on every non-empty"
    " observation of the reference trajectories: the conversation up to and including that observation (the"
    " reference's calls, the real tools, envelope and prompt, through the Harness) and one model call; the tag its"
    " envelope carries is scored against the observation's truth grade (docs/evaluation-cases.md), a Draft instead of"
    " a call is counted apart. Beside it, the trivial taggers on the same observations, and the NO_GAIN threshold the"
    " measured rate of NO_GAIN on evidence implies (the smallest T with rate^T below 5%)."
)
"""The section's introduction."""


class ProbeReport(BaseModel):
    """One model's probe in the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The registry name of the model."""
    folder: str
    """The recording's folder name."""
    cases: int
    """Cases with a recorded probe."""
    measured: ModelProbe
    """What the replay measured."""
    swept: str | None
    """What the model's sweep recommends (`no_gain_threshold=2`), None without a recommendation."""


def probe_lines(p: ProbeReport) -> list[str]:
    """One model's probe section as Markdown lines (the caller escapes nothing: every text here is the bench's)."""
    cases = f"{p.cases} case" + ("" if p.cases == 1 else "s")
    lines = [f"### {p.model} ({cases}, `cassettes/{p.folder}`)", "", *probe_markdown(p.measured), ""]
    t = p.measured.threshold
    implied = "none" if t.threshold is None else str(t.threshold)
    lines.append(f"Beside the sweep: the tags imply NO_GAIN {implied}"
                 + (f" (cautious: {t.threshold_upper})" if t.threshold_upper not in (None, t.threshold) else "")
                 + f"; the recorded sweep recommends {p.swept or 'nothing'}.")  # fmt: skip
    return lines
