"""What an import's first reading of a trace file learns of its runs, a run at a time: every run whole and every
row of it storable (`import_rows` builds them, then they are dropped), and of each run only what the bench run's
row and `--outcomes` need (its case, epoch, model, trace) — so that a file of any size is refused, or known good,
before the database is opened, and its second reading stores runs the first one checked."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from runners.interchange.observed_rows import import_rows
from runners.interchange.observed_runs import Fingerprint, ObservedRun, TraceImportError

__all__ = ["TraceSurvey", "survey_runs"]


@dataclass
class TraceSurvey:
    """The runs of a trace file, as far as an import needs them before it stores any."""

    case_ids: list[str] = field(default_factory=list)
    """Each run's case, in file order."""
    epochs: int = 0
    """The highest epoch among them."""
    models: set[str] = field(default_factory=set)
    """The models they name."""
    trace_ids: dict[str, str | None] = field(default_factory=dict)
    """Each run's id -> the OpenTelemetry trace it was read from (how `--outcomes` may name it)."""
    harnessed: bool | None = None
    """Whether the Harness drove them (None: no run read yet)."""
    fingerprint: Fingerprint = field(default_factory=Fingerprint)
    """The runs hashed (how an import finds runs imported before)."""

    @property
    def runs(self) -> int:
        """How many runs the file holds."""
        return len(self.case_ids)


def survey_runs(path: Path, runs: Iterable[ObservedRun], bench_run_id: str, label: str) -> TraceSurvey:
    """Read every run of `runs` (from `path`) once, checking it whole and storable: a TraceImportError at the first
    that is not, or when the Harness drove some runs and not others."""
    survey = TraceSurvey()
    for run in runs:
        ((rows, _),) = import_rows([run], bench_run_id, label)  # every value fits its column, or TraceImportError
        if survey.harnessed is not None and survey.harnessed is not run.harnessed:
            raise TraceImportError(f"{path}: holds runs the Harness drove and runs of another agent (no harness.*"
                                   " attributes); import them separately")  # fmt: skip
        survey.harnessed = run.harnessed
        survey.case_ids.append(run.case_id)
        survey.epochs = max(survey.epochs, run.epoch)
        survey.models.add(str(rows.case_run["model"]))
        survey.trace_ids[run.run_id] = run.trace_id
        survey.fingerprint.add(run)
    if not survey.runs:
        raise TraceImportError(f"{path}: no run to import")
    return survey
