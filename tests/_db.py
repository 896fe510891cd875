"""Reading a DuckDB file back in a test."""

from __future__ import annotations

from pathlib import Path

import duckdb

from runners.store._host import attach


def open_read_only(db: str | Path) -> duckdb.DuckDBPyConnection:
    """The DuckDB file `db`, read-only and as it is (no schema check), attached as the store attaches its files: to
    the process's one DuckDB instance, not an instance of its own, which costs about 15 ms of CPU to create, and the
    suite reads files back hundreds of times. Close it (or use it in a `with` block): the file is detached then."""
    return attach(str(db), read_only=True)
