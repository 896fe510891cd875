"""A run observed elsewhere, as every reader of outside runs returns it (`otel_import`, `genai_spans`,
`tau_bench`): its id, case and epoch, its typed events, the limits it ran under when the source says, and what its
model was sent and answered when the source carries it. `fingerprint` hashes runs (how an import finds runs
imported before; `Fingerprint` hashes them as they are read); `distinct_epochs` gives two runs of one case and epoch
in one file epochs of their own."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from harness import RunLimits, RunStarted, TraceEvent, event_line
from runners.interchange._trace_values import ChatMessage

__all__ = [
    "Contents",
    "Fingerprint",
    "ObservedRun",
    "TraceImportError",
    "distinct_epochs",
    "fingerprint",
    "identity",
    "short",
]


class TraceImportError(ValueError):
    """A trace file that is not a set of whole runs: one line naming the file, the line and the span."""


@dataclass(frozen=True, slots=True)
class Contents:
    """The messages of one model call attempt, as its span carries them (None: the attribute is absent)."""

    given: tuple[ChatMessage, ...] | None
    """`gen_ai.input.messages`: what the call added to the conversation."""
    answered: tuple[ChatMessage, ...] | None
    """`gen_ai.output.messages`: the model's answer."""
    tools: str | None = None
    """`gen_ai.tool.definitions`: the tools it offered, where they first appear or change."""


@dataclass(frozen=True, slots=True)
class ObservedRun:
    """One run read from a trace file, whole."""

    run_id: str
    """Its id in the trace (`gen_ai.conversation.id`, or the event log's `run_id`)."""
    case_id: str
    """The case it ran: the middle of a bench case run id (`BENCH/CASE/EPOCH`), else the run id."""
    epoch: int
    """Its epoch: the end of a bench case run id, else 1."""
    events: tuple[TraceEvent, ...]
    """Its typed events, in trace order."""
    limits: RunLimits | None
    """The thresholds and budgets it ran under, when the trace says."""
    final_text: str | None = None
    """The text of its last diagnosis answer, when the trace carries message contents (the Draft)."""
    contents: tuple[Contents, ...] = ()
    """Per model call attempt, in order: its `gen_ai.input.messages` and `gen_ai.output.messages`, when the trace
    carries message contents; else empty."""
    source: str = ""
    """Where it was read (`FILE:LINE`, and its run span), for a message about it."""
    trace_id: str | None = None
    """The OpenTelemetry trace it was read from (hex), when it came from spans (how `--outcomes` may name it)."""
    harnessed: bool = True
    """Its events are the Harness's decisions (a run the Harness drove); False: another agent's run, its tool calls
    as they ran, every Harness decision in its events inferred (`_foreign_events`)."""


_BENCH_ID = re.compile(r"(?P<bench>.+)/(?P<case>[^/]+)/(?P<epoch>[1-9][0-9]{0,8})")
"""A bench case run id (`runners.run.bench.case_run_id`)."""


def identity(run_id: str) -> tuple[str, int]:
    """The case and epoch a run id names: a bench case run id's middle and end, else the id itself and 1."""
    m = _BENCH_ID.fullmatch(run_id)
    return (m["case"], int(m["epoch"])) if m else (run_id, 1)


class Fingerprint:
    """Runs hashed as they are read, one at a time (`fingerprint`)."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def add(self, run: ObservedRun) -> None:
        """Hash one more run: its id, events and limits."""
        for e in run.events:
            self._digest.update(event_line(run.run_id, e, run.limits if isinstance(e, RunStarted) else None).encode())
            self._digest.update(b"\n")

    @property
    def value(self) -> str:
        """The runs added so far, as `fingerprint` spells them."""
        return f"trace-sha256:{self._digest.hexdigest()}"


def fingerprint(runs: Iterable[ObservedRun]) -> str:
    """The runs as a hash of their ids, events and limits (not of the file's bytes: the same runs exported again,
    under new span ids, hash the same) — how an import finds runs imported before."""
    hashed = Fingerprint()
    for run in runs:
        hashed.add(run)
    return hashed.value


def distinct_epochs(runs: Iterable[ObservedRun]) -> Iterator[ObservedRun]:
    """Each run a case and epoch of its own, as they come: a case and epoch seen before (two bench runs in one file)
    gets the case's next free epoch (the import's case run id is `BENCH/CASE/EPOCH`)."""
    taken: dict[str, set[int]] = {}
    for run in runs:
        epochs = taken.setdefault(run.case_id, set())
        if run.epoch in epochs:
            run = dataclasses.replace(run, epoch=max(epochs) + 1)
        epochs.add(run.epoch)
        yield run


def short(text: str) -> str:
    """A trace's id as an error names it: cut to 120 characters (a trace may hold any text there)."""
    return text if len(text) <= 120 else text[:120] + "…"
