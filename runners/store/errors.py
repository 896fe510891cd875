"""What the metrics database raises: a database that cannot be used, and a write the storage refused."""

from __future__ import annotations

import duckdb

__all__ = ["STORAGE_ERRORS", "WRITE_FAILURES", "DatabaseLockedError", "MetricsDbError", "MetricsWriteError"]


class MetricsDbError(RuntimeError):
    """The database cannot be used (locked by another writer, not a DuckDB file, newer schema)."""


class DatabaseLockedError(MetricsDbError):
    """Another process holds the database file's lock (another `harness-bench run` writing to it)."""


class MetricsWriteError(Exception):
    """The database could not be written (full disk, I/O error): the rows of the failed transaction are not
    stored, and the connection may be unusable; the bench run must stop as interrupted and be resumed."""

    def __init__(self, cause: BaseException) -> None:
        first = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        super().__init__(first)
        self.cause = cause

    @property
    def fix(self) -> str:
        """What the user can do, by what the storage said: a folder that cannot be written is not a full disk."""
        text = str(self).lower()
        if "read-only file system" in text or "permission denied" in text:
            return "the folder cannot be written here: choose another --db"
        return "free some space (or fix the device) and run the command again"


STORAGE_ERRORS: tuple[type[Exception], ...] = (duckdb.IOException, duckdb.FatalException, OSError)
"""What a full disk or a failing device raises while DuckDB writes (FatalException: the database was
invalidated by an earlier failed write)."""


WRITE_FAILURES: tuple[type[Exception], ...] = (MetricsWriteError, *STORAGE_ERRORS)
"""A write that failed on the storage, raised by the store or by DuckDB."""
