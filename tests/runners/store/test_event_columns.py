"""The events table is derived from the event classes: a field without its column (or a column no event
fills) fails here, with the type each field needs."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from pathlib import Path

import pytest

from harness import EVENT_TYPES, EventKind, ToolInvocation, TraceEvent
from runners.store.connection import connect
from runners.store.schema import event_columns

_DUCK_TYPES = {str: "VARCHAR", int: "INTEGER", float: "DOUBLE", bool: "BOOLEAN"}
_IDS = {"bench_run_id", "case_run_id"}


def _duck_type(annotation: object) -> str:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if isinstance(annotation, types.UnionType) and len(args) == 1 else annotation
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return "VARCHAR"
    assert isinstance(base, type) and base in _DUCK_TYPES, f"no column type for {annotation!r}"
    return _DUCK_TYPES[base]


def _field_types() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"kind": {"VARCHAR"}}
    for cls in EVENT_TYPES:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            out.setdefault(f.name, set()).add(_duck_type(hints[f.name]))
    return out


def _table_columns(tmp_path: Path) -> dict[str, str]:
    con = connect(tmp_path / "m.duckdb")
    rows = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'events'").fetchall()
    con.close()
    return {name: kind for name, kind in rows if name not in _IDS}


def test_every_event_field_has_its_column_of_its_type(tmp_path: Path) -> None:
    columns = _table_columns(tmp_path)
    fields = _field_types()
    assert set(fields) == set(columns), (
        f"fields without a column: {sorted(set(fields) - set(columns))}; "
        f"columns no event fills: {sorted(set(columns) - set(fields))} (add a migration in runners/store/migrations.py)"
    )
    for name, wanted in fields.items():
        assert wanted == {columns[name]}, f"{name}: the events column is {columns[name]}, the fields need {wanted}"
    assert set(event_columns()) == set(columns)


def test_one_event_class_per_kind() -> None:
    assert sorted(c.kind for c in EVENT_TYPES) == sorted(EventKind)
    assert all(c.__dataclass_params__.frozen for c in EVENT_TYPES)


def test_an_added_field_is_caught(tmp_path: Path) -> None:
    """The check bites: an event class with a field the table lacks is reported."""

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Extended(ToolInvocation):
        retries_hidden: int = 0

    assert set(event_columns((*EVENT_TYPES, Extended))) - set(_table_columns(tmp_path)) == {"retries_hidden"}


def test_events_are_stamped_and_frozen() -> None:
    from harness.trace import Trace

    t = Trace()
    e = t.emit(ToolInvocation(tool_call_id="c1", tool="x", scope="s", invocation_status=_status(), observation_bytes=1,
                              latency_ms=0.0))  # fmt: skip
    assert isinstance(e, TraceEvent) and e.seq == 0 and e.kind is EventKind.TOOL_INVOCATION
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.scope = "other"  # type: ignore[misc]


def _status() -> typing.Any:
    from harness.contracts import InvocationStatus

    return InvocationStatus.COMPLETED


def test_the_tool_call_row_type_is_the_tool_calls_table(tmp_path: Path) -> None:
    """The writer's `tool_calls` columns come from `ToolCallRow`: its fields are the table's columns, in table
    order, each of the table's type."""
    from runners.store.schema import TOOL_CALL_COLUMNS, ToolCallRow

    con = connect(tmp_path / "m.duckdb")
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'tool_calls' ORDER BY column_index"
    ).fetchall()
    con.close()
    assert [name for name, _ in rows] == list(TOOL_CALL_COLUMNS)
    hints = typing.get_type_hints(ToolCallRow)
    for name, kind in rows:
        assert _duck_type(hints[name]) == kind, f"tool_calls.{name} is {kind}, ToolCallRow.{name} is {hints[name]}"
