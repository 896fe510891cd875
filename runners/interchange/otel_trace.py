"""A case run read back from the OTLP/JSON the bench writes (`harness-bench export --otel FILE --otel-content`, or
a `HarnessSession` with a tracer recording contents), as `capture --trace FILE --run ID` builds a case from it.

There is one reader of traces, the importer's (`otel_import.read_traces`): the run is read by it, stored as
`harness-bench import` stores it (in a temporary database), and loaded back as `capture CASE_RUN_ID --db D` loads
a stored run. One thing is added on top: the observation of an invocation the run ended before sending, rebuilt
from its span (`_unsent`) — the importer's transcript holds only what the model was sent, so a run imported and
then captured with `--db` lacks it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from harness import EntryKind, InvocationStatus, ModelCall, ModelPurpose, ToolInvocation, __version__
from runners.interchange.observed_rows import import_rows
from runners.interchange.otel_import import ObservedRun, TraceFormat, TraceImportError, read_traces
from runners.store.captured_runs import (
    CapturedMessage,
    CapturedRun,
    CaptureSourceError,
    load_captured_run,
    load_captured_runs,
)
from runners.store.connection import connect_in_memory
from runners.store.imported_runs import ImportedBenchRun, write_imported_bench_run

__all__ = ["TraceError", "captured_run_from_trace", "captured_runs_from_trace"]

_BENCH = "trace"
"""The temporary import stores run N under bench run `trace-N` (the captured run gets its own ids back)."""


class TraceError(ValueError):
    """The trace file cannot be read, lacks the run, or lacks what a case is built from (exit 2)."""


def _the_runs(path: Path, run_ids: Sequence[str]) -> list[ObservedRun]:
    try:  # the event log carries no message contents: only spans make a case
        traces = read_traces(path, formats=(TraceFormat.OTLP_JSON,))
    except TraceImportError as exc:
        raise TraceError(f"--trace {exc}") from None
    runs: dict[str, ObservedRun] = {}
    for r in traces:  # an id seen twice (two exports in one file): the first, as a reader of the file finds it
        runs.setdefault(r.run_id, r)
    found = []
    for run_id in run_ids:
        run = runs.get(run_id)
        if run is None:
            raise TraceError(f"--run {run_id!r}: no invoke_agent span with that gen_ai.conversation.id in {path}")
        diagnosis = [e for e in run.events if isinstance(e, ModelCall) and e.purpose is ModelPurpose.DIAGNOSIS]
        if diagnosis and not run.contents:
            raise TraceError(f"--run {run_id!r}: its chat spans hold no messages; export with --otel-content (or"
                             " record with capture_content=True) to capture it")  # fmt: skip
        found.append(run)
    return found


def _unsent(run: ObservedRun, messages: tuple[CapturedMessage, ...]) -> tuple[CapturedMessage, ...]:
    """The observations of invocations the run ended before sending, from their spans (their records are not there:
    a trace holds only what the model was shown, and these were never shown)."""
    answered = {m.tool_call_id for m in messages if m.kind == EntryKind.OBSERVATION.value}
    out: list[CapturedMessage] = []
    for e in run.events:
        if not isinstance(e, ToolInvocation) or e.tool_call_id in answered:
            continue
        if e.invocation_status is InvocationStatus.FAILED:
            obs: dict[str, object] = {"status": e.invocation_status.value, "error": e.detail}
        else:
            try:
                parsed = json.loads(e.scope)
            except ValueError:
                parsed = None
            obs = {"status": e.invocation_status.value,
                   "evidence_status": None if e.evidence_status is None else e.evidence_status.value,
                   "count": e.count, "scope": parsed if isinstance(parsed, dict) else {"sql": e.scope},
                   "truncated": e.truncated, "records": []}  # fmt: skip
        out.append(CapturedMessage(len(messages) + len(out), ModelPurpose.DIAGNOSIS.value, EntryKind.OBSERVATION.value,
                                   0, json.dumps(obs, ensure_ascii=False), e.tool_call_id, None, None, None, False,
                                   None, None, None, None, None, None))  # fmt: skip
    return tuple(out)


def captured_run_from_trace(path: Path, run_id: str) -> CapturedRun:
    """The run `run_id` (its `gen_ai.conversation.id`) of the OTLP/JSON file `path`, as capture reads a stored one."""
    return captured_runs_from_trace(path, [run_id])[0]


def captured_runs_from_trace(path: Path, run_ids: Sequence[str]) -> tuple[CapturedRun, ...]:
    """The runs `run_ids` of `path`, in that order, the file read once (what `captured_run_from_trace` is for each)."""
    runs = _the_runs(path, run_ids)
    stored: dict[int, str] = {}  # the position of a run in `runs` -> its case run id in the temporary database
    # An in-memory database: nothing of it outlives the capture, and no file (nor the import's staging file beside
    # it) is created and removed once per run.
    con = connect_in_memory("<the capture's temporary database>")
    try:
        # As few imports as the runs allow, read back at once: an import's fixed cost and a read's (about forty DuckDB
        # statements) were most of capturing a run when each run was imported and read alone.
        for n, group in enumerate(_import_groups(runs)):
            bench_id = f"{_BENCH}-{n}"
            imported = import_rows([runs[i] for i in group], bench_id, label="")
            models = {str(rows.case_run["model"] or "") or None for rows, _ in imported}
            model = models.pop() if len(models) == 1 else None  # None: the runs name several
            bench = ImportedBenchRun(bench_id, "", model, str(path), tuple(runs[i].case_id for i in group),
                                     max(runs[i].epoch for i in group), __version__)  # fmt: skip
            write_imported_bench_run(con, bench, imported)
            stored |= {i: str(rows.case_run["case_run_id"]) for i, (rows, _) in zip(group, imported, strict=True)}
        try:
            loaded = load_captured_runs(con, str(path), [stored[i] for i in range(len(runs))])
        except CaptureSourceError:  # each run read alone: the first that cannot be captured is named
            for i, run in enumerate(runs):
                try:
                    load_captured_run(con, str(path), stored[i])
                except CaptureSourceError as exc:
                    raise TraceError(f"--run {run.run_id!r}: {exc}") from None
            raise
    finally:
        con.close()
    out = []
    for run, captured in zip(runs, loaded, strict=True):
        bench_run_id, _, rest = run.run_id.partition("/")
        out.append(dataclasses.replace(
            captured, case_run_id=run.run_id, bench_run_id=bench_run_id if rest else "", label=None,
            messages=captured.messages + _unsent(run, captured.messages),
        ))  # fmt: skip
    return tuple(out)


def _import_groups(runs: Sequence[ObservedRun]) -> list[list[int]]:
    """The positions of `runs` in as few imports as they allow: a bench run holds a case's epoch once, so two runs
    of one case and epoch (two models in one trace, a run asked for twice) go to different imports."""
    groups: list[tuple[list[int], set[tuple[str, int]]]] = []
    for i, run in enumerate(runs):
        key = (run.case_id, run.epoch)
        group = next((g for g in groups if key not in g[1]), None)
        if group is None:
            group = ([], set())
            groups.append(group)
        group[0].append(i)
        group[1].add(key)
    return [positions for positions, _ in groups]
