"""A stored case run's trace read back as the typed events it was written from (`harness.trace`).

The `events` table has one column per field of every event class (`schema.EVENT_COLUMNS`); a row is
rebuilt as the class its `kind` names, from that class's columns only, validated by pydantic (each enum from its
stored value), never parsed from text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import duckdb
import pydantic

from harness import EVENT_TYPES, EventKind, TraceEvent, event_adapter
from runners.store.schema import EVENT_COLUMNS

__all__ = ["StoredEventError", "read_bench_run_events", "read_events"]


class StoredEventError(ValueError):
    """A stored event row is not an event of its kind (an unknown kind, a field that does not fit): names the row."""


@dataclass(frozen=True, slots=True)
class _Kind:
    """How the rows of one kind are rebuilt."""

    cls: type[TraceEvent]
    """The event class."""
    adapter: pydantic.TypeAdapter[TraceEvent]
    """Its validator (each enum from its stored value)."""
    fields: tuple[str, ...]
    """Its fields: the columns it is rebuilt from."""
    defaults: frozenset[str]
    """Its fields with a default: a NULL there is the default (the column is shared with other kinds)."""


_KINDS: dict[str, _Kind] = {
    cls.kind.value: _Kind(
        cls,
        event_adapter(cls.kind),
        tuple(f.name for f in dataclasses.fields(cls)),
        frozenset(f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING),
    )
    for cls in EVENT_TYPES
}


_COLUMNS = EVENT_COLUMNS
_SELECT = ", ".join(f'"{c}"' for c in ("case_run_id", *_COLUMNS))


def read_events(con: duckdb.DuckDBPyConnection, db: str, case_run_id: str) -> tuple[TraceEvent, ...]:
    """The events of one case run, in trace order (`seq`); a row that is no event is a StoredEventError."""
    rows = con.execute(f"SELECT {_SELECT} FROM events WHERE case_run_id = ? ORDER BY seq", [case_run_id]).fetchall()
    return tuple(_event(db, row) for row in rows)


def read_bench_run_events(
    con: duckdb.DuckDBPyConnection, db: str, bench_run_id: str
) -> dict[str, tuple[TraceEvent, ...]]:
    """The events of every case run of a bench run, by case run id, each in trace order: one scan of the table
    (a query per case run would scan it once per case run)."""
    rows = con.execute(
        f"SELECT {_SELECT} FROM events WHERE bench_run_id = ? ORDER BY case_run_id, seq", [bench_run_id]
    ).fetchall()
    out: dict[str, list[TraceEvent]] = {}
    for row in rows:
        out.setdefault(str(row[0]), []).append(_event(db, row))
    return {k: tuple(v) for k, v in out.items()}


def _event(db: str, row: tuple[object, ...]) -> TraceEvent:
    """One row (`case_run_id`, then the event columns) as its typed event."""
    values = dict(zip(_COLUMNS, row[1:], strict=True))
    kind = values["kind"]
    spec = _KINDS.get(str(kind))
    where = f"{db}: case run {row[0]}, event {values.get('seq')}"
    if spec is None:
        known = ", ".join(k.value for k in EventKind)
        raise StoredEventError(f"{where}: unknown kind {kind!r} (known: {known})")
    data = {k: values[k] for k in spec.fields if not (values[k] is None and k in spec.defaults)}
    try:
        return spec.adapter.validate_python(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise StoredEventError(f"{where} ({kind}): {field}: {first['msg']}") from None
