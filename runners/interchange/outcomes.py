"""`import --outcomes FILE`: the verdicts of imported runs, given by whoever judged them (a grader, a benchmark's
reward, a person).

One row per run, as CSV (a header line, then one row a line) or JSON Lines (one object a line), told apart by the
first line (`{` opens JSON): `trace_id` (the run's OpenTelemetry trace, hex) or `run_id` (its
`gen_ai.conversation.id`, or the id a tau-bench run is imported under: `TASK/TRIAL`), then `passed` (true or false)
or `reward` (a number from 0 to 1: passed when it is 1, as tau-bench counts a task done), and optionally
`expected_outcome` (what a passing run publishes: SUCCESS, the default, or FALLBACK — a case whose right answer is
"not found"). A row that is none of these, names a field not listed, names no imported run or a run another row
named is one line naming the file, the line and the field; nothing is imported.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness import ReleaseOutcome
from runners.domain.input_files import MAX_TRACE_BYTES, InputPathError, read_input_text
from runners.interchange._trace_values import strict_json

__all__ = ["OutcomeKey", "OutcomeRow", "OutcomesError", "RunVerdict", "match_outcomes", "read_outcomes"]

REWARD_PASSES = 1.0
"""The reward a passing run has (tau-bench: `reward == 1`, within `_REWARD_TOLERANCE`)."""
_REWARD_TOLERANCE = 1e-6


class OutcomesError(ValueError):
    """An outcomes file that cannot give verdicts: one line naming the file, the line and the field."""


class OutcomeKey(StrEnum):
    """How a row names its run."""

    TRACE_ID = "trace_id"
    """The run's OpenTelemetry trace id (hex)."""
    RUN_ID = "run_id"
    """The run's id (`gen_ai.conversation.id`; a tau-bench run's `TASK/TRIAL`)."""


class RunVerdict(BaseModel):
    """The verdict an outcomes row gives one imported run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: bool
    """The run did what it was asked (its outcome verdict, and its case verdict: nothing else is judged)."""
    reward: float | None = None
    """The reward it was given, when the row gave one."""
    expected_outcome: ReleaseOutcome = ReleaseOutcome.SUCCESS
    """What a passing run publishes (SUCCESS: an answer; FALLBACK: the honest "not found")."""

    def columns(self) -> dict[str, object]:
        """The case run's verdict columns."""
        return {"expected_outcome": self.expected_outcome.value, "passed": self.passed,
                "outcome_passed": self.passed}  # fmt: skip


class OutcomeRow(BaseModel):
    """One row of an outcomes file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int
    """Its line in the file, from 1."""
    key: OutcomeKey
    """Whether it names a trace or a run."""
    value: str
    """The trace id or run id."""
    verdict: RunVerdict
    """What it says of the run."""


_FIELDS = ("trace_id", "run_id", "passed", "reward", "expected_outcome")
_EXPECTED = (ReleaseOutcome.SUCCESS, ReleaseOutcome.FALLBACK)


def read_outcomes(path: Path) -> tuple[OutcomeRow, ...]:
    """Every row of `path` (CSV or JSON Lines), checked; else an OutcomesError naming the file, line and field."""
    try:
        text = read_input_text(path, max_bytes=MAX_TRACE_BYTES)
    except InputPathError as exc:
        raise OutcomesError(str(exc)) from None
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not lines:
        raise OutcomesError(f"{path}: no outcome in it (an empty file)")
    records = _json_lines(path, lines) if lines[0][1].lstrip().startswith("{") else _csv(path, text)
    if not records:
        raise OutcomesError(f"{path}: a header and no row")
    return tuple(_row(f"{path}:{n}", n, record) for n, record in records)


def _json_lines(path: Path, lines: Sequence[tuple[int, str]]) -> list[tuple[int, Mapping[str, object]]]:
    out: list[tuple[int, Mapping[str, object]]] = []
    for n, line in lines:
        try:
            value = strict_json(line)
        except (ValueError, RecursionError) as exc:
            raise OutcomesError(f"{path}:{n}: not JSON ({str(exc).splitlines()[0][:200]})") from None
        if not isinstance(value, dict):
            raise OutcomesError(f"{path}:{n}: a JSON {type(value).__name__} where an object is due")
        out.append((n, value))
    return out


def _csv(path: Path, text: str) -> list[tuple[int, Mapping[str, object]]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    out: list[tuple[int, Mapping[str, object]]] = []
    header: list[str] | None = None
    try:
        for cells in reader:
            n = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if header is None:
                header = [c.strip() for c in cells]
                twice = next((h for h in header if header.count(h) > 1), None)
                if twice is not None:
                    raise OutcomesError(f"{path}:{n}: column {twice!r} twice in the header")
                continue
            if len(cells) != len(header):
                raise OutcomesError(f"{path}:{n}: {len(cells)} cells where the header has {len(header)}")
            out.append((n, {h: c.strip() for h, c in zip(header, cells, strict=True) if c.strip() != ""}))
    except csv.Error as exc:
        raise OutcomesError(f"{path}:{reader.line_num}: not CSV ({exc})") from None
    return out


def _row(where: str, n: int, record: Mapping[str, object]) -> OutcomeRow:
    unknown = next((k for k in record if k not in _FIELDS), None)
    if unknown is not None:
        raise OutcomesError(f"{where}: {str(unknown)[:60]!r}: not a field of an outcome (one of {', '.join(_FIELDS)})")
    given = {k: v for k, v in record.items() if v is not None}
    keys = [k for k in OutcomeKey if k.value in given]
    if len(keys) != 1:
        raise OutcomesError(f"{where}: trace_id or run_id: {'both given' if keys else 'neither given'} (a row names"
                            " its run by one of them)")  # fmt: skip
    key = keys[0]
    value = given[key.value]
    if not isinstance(value, str) or not value.strip():
        raise OutcomesError(f"{where}: {key.value}: {_shown(value)} where a non-empty string is due")
    if key is OutcomeKey.TRACE_ID:
        value = value.strip().lower()
        if len(value) != 32 or any(c not in "0123456789abcdef" for c in value):
            raise OutcomesError(f"{where}: trace_id: {_shown(given[key.value])}: must be 32 hex digits")
    if ("passed" in given) == ("reward" in given):
        raise OutcomesError(f"{where}: passed or reward: {'both given' if 'passed' in given else 'neither given'}"
                            " (a row gives one of them)")  # fmt: skip
    reward: float | None = None
    if "passed" in given:
        passed = _boolean(where, given["passed"])
    else:
        reward = _reward(where, given["reward"])
        passed = abs(reward - REWARD_PASSES) <= _REWARD_TOLERANCE
    expected = ReleaseOutcome.SUCCESS
    if "expected_outcome" in given:
        raw = given["expected_outcome"]
        allowed = [o.value for o in _EXPECTED]
        if not isinstance(raw, str) or raw.strip().upper() not in allowed:
            raise OutcomesError(f"{where}: expected_outcome: {_shown(raw)}: must be one of {', '.join(allowed)}")
        expected = ReleaseOutcome(raw.strip().upper())
    return OutcomeRow(line=n, key=key, value=value,
                      verdict=RunVerdict(passed=passed, reward=reward, expected_outcome=expected))  # fmt: skip


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _boolean(where: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise OutcomesError(f"{where}: passed: {_shown(value)}: must be true or false")


def _reward(where: str, value: object) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise OutcomesError(f"{where}: reward: {_shown(value)}: must be a number from 0 to 1")
    return number


def match_outcomes(path: Path, rows: Sequence[OutcomeRow], runs: Mapping[str, str | None]) -> dict[str, RunVerdict]:
    """Each row's verdict by the run it names (`runs`: every imported run's id and its trace id); a row naming no
    run, or a run another row named, is an OutcomesError."""
    by_trace: dict[str, list[str]] = {}
    for run_id, trace_id in runs.items():
        if trace_id is not None:
            by_trace.setdefault(trace_id, []).append(run_id)
    out: dict[str, RunVerdict] = {}
    first: dict[str, int] = {}
    for row in rows:
        where = f"{path}:{row.line}: {row.key.value}"
        if row.key is OutcomeKey.RUN_ID:
            if row.value not in runs:
                raise OutcomesError(f"{where}: {_shown(row.value)}: no imported run has that id")
            named = [row.value]
        else:
            named = by_trace.get(row.value, [])
            if not named:
                raise OutcomesError(f"{where}: {row.value}: no imported run is in that trace")
            if len(named) > 1:
                raise OutcomesError(f"{where}: {row.value}: {len(named)} runs are in that trace; name each by"
                                    " run_id")  # fmt: skip
        run_id = named[0]
        if run_id in first:
            raise OutcomesError(f"{where}: run {_shown(run_id)} already has a verdict (line {first[run_id]})")
        first[run_id] = row.line
        out[run_id] = row.verdict
    return out
