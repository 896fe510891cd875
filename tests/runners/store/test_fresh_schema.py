"""A process's later new databases are given at once the schema its first one got through the whole migration
history (`migrations._FreshSchema`): the same tables, columns, constraints, views and versions — and never a schema
read under another history or other declared settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import pytest

from runners.plan.options import declared_columns
from runners.store import migrations
from runners.store.connection import connect
from runners.store.errors import MetricsDbError
from tests._db import open_read_only


def _describe(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = open_read_only(db)
    try:
        queries = {
            "columns": "SELECT table_name, column_name, column_index, data_type, column_default, is_nullable"
            " FROM duckdb_columns() WHERE NOT internal",
            "constraints": "SELECT table_name, constraint_type, constraint_column_names, expression"
            " FROM duckdb_constraints()",
            "tables": "SELECT table_name, sql FROM duckdb_tables()",
            "views": "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal",
            "indexes": "SELECT index_name, sql FROM duckdb_indexes()",
            "versions": "SELECT version FROM schema_version",
        }
        return {name: con.execute(f"{sql} ORDER BY ALL").fetchall() for name, sql in queries.items()}
    finally:
        con.close()


def _through_the_history(db: Path) -> None:
    migrations._FRESH.clear()
    connect(db).close()
    assert migrations._FRESH, "the history's result was kept"


def _replayed(db: Path) -> None:
    assert migrations._fresh_schema(declared_columns()) is not None, "a new file is given the kept schema"
    connect(db).close()


def test_a_replayed_schema_is_the_historys(tmp_path: Path) -> None:
    _through_the_history(tmp_path / "history.duckdb")
    _replayed(tmp_path / "replayed.duckdb")
    history, replayed = _describe(tmp_path / "history.duckdb"), _describe(tmp_path / "replayed.duckdb")
    assert replayed == history
    assert len(history["views"]) >= 4 and history["versions"] == [(v,) for v in range(1, migrations.SCHEMA_VERSION + 1)]
    # the replayed file is a harness-bench database like any other: reopened as a writer, nothing is migrated
    con = connect(tmp_path / "replayed.duckdb")
    con.close()
    assert _describe(tmp_path / "replayed.duckdb") == history


def test_another_history_or_other_settings_are_not_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _through_the_history(tmp_path / "first.duckdb")
    longer = {**migrations._MIGRATIONS}
    longer[migrations.SCHEMA_VERSION] = [*longer[migrations.SCHEMA_VERSION], "CREATE TABLE probe (x INTEGER)"]
    monkeypatch.setattr(migrations, "_MIGRATIONS", longer)
    connect(tmp_path / "longer.duckdb").close()
    assert ("probe",) in [(t,) for t, _ in _describe(tmp_path / "longer.duckdb")["tables"]]
    monkeypatch.undo()
    connect(tmp_path / "again.duckdb").close()  # the history as it is: no probe table
    assert _describe(tmp_path / "again.duckdb") == _describe(tmp_path / "first.duckdb")
    today = declared_columns()
    other = dataclasses.replace(today, swept=(*today.swept, "no_gain_threshold_again"))
    assert migrations._fresh_schema(other) is None, "other declared settings: the history is applied again"


def test_a_foreign_file_is_refused_after_a_replay_too(tmp_path: Path) -> None:
    _through_the_history(tmp_path / "first.duckdb")
    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE orders (id INTEGER)")
    con.close()
    with pytest.raises(MetricsDbError, match="from another program"):
        connect(foreign)
    con = open_read_only(foreign)
    try:  # left as it was
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("orders",)]
    finally:
        con.close()
