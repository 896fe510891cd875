"""One DuckDB instance per process, to which every metrics database the store opens is attached.

Creating a DuckDB instance costs about 15 ms of CPU (it builds its catalog of built-in functions) whatever the file,
and a command opens its database several times (check, write, read back, report); attaching a file to an instance
that already exists costs about 1 ms. So the store keeps one in-memory instance per process (created on the first
open, made again in a forked child) and each open attaches the file to it under an alias of its own, hands out a
cursor whose default database is that alias (bare table names mean the file's tables, `current_database()` names
it), and detaches the file when the last connection to it is closed: DuckDB then checkpoints and unlocks it, as it
does when a connection of its own to the file closes. Opening a file that is attached already shares the attachment
(DuckDB allows one attachment of a file per process) when the mode matches, and is refused as DuckDB refuses two
connections to one file with different configurations when it does not.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import duckdb

__all__ = ["attach", "attach_memory", "quoted_path"]

# No extension is ever needed: never reach the network for one. Set once, for every database attached.
# One thread: the store's statements are many and small (a run's rows, a catalog lookup, a summary over thousands of
# rows), and waking a second worker thread for each costs more CPU than it saves (a one-case run and its `show`:
# about a fifth less CPU, benchmarks/bench_store_threads.py); connections used from several threads still execute in
# parallel, each statement in the thread that sent it.
_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "threads": 1,
}


@dataclass
class _Attachment:
    """A file attached to the process's instance."""

    alias: str
    """Its database name in the instance."""
    read_only: bool
    """Whether it was attached read-only."""
    users: int
    """How many connections handed out are still open on it."""


class _Host:
    """The process's instance and what is attached to it."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.instance: duckdb.DuckDBPyConnection | None = None
        self.files: dict[str, _Attachment] = {}
        self.serial = itertools.count(1)
        self.pending: list[str] = []
        """Releases asked for while `lock` was held (by a connection collected meanwhile), done when it is let go."""

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """`lock` held for the block."""
        self.lock.acquire()
        try:
            yield
        finally:
            self.unlock()

    def unlock(self) -> None:
        """Let go of `lock`, the releases that had to wait done first (one asked for after that is done by the next
        holder)."""
        try:
            while self.pending:
                _drop(self, self.pending.pop())
        finally:
            self.lock.release()

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The instance, created on first use (under `lock`)."""
        if self.instance is None:
            self.instance = duckdb.connect(":memory:", config=_CONFIG)
        return self.instance


_host = _Host()


_inherited: list[_Host] = []
"""The parents' hosts in a forked child, kept: destroying an instance whose threads are not in this process crashes
it (a `subprocess` child with a `preexec_fn` runs the fork hooks before it runs the program)."""


_inherited_cursors: list[duckdb.DuckDBPyConnection] = []
"""Cursors on a parent's instance that a forked child's code let go of, kept for the same reason."""


def _forget_in_child() -> None:
    """A forked child starts its own instance: the parent's is not its to use (its locks may be held, its threads
    are not there)."""
    global _host
    _inherited.append(_host)
    _host = _Host()


os.register_at_fork(after_in_child=_forget_in_child)


def attach(path: str, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the DuckDB file `path` (created when missing unless `read_only`), through the process's
    instance; closing it detaches the file once no other connection to it is open. DuckDB's own errors as they are
    (a file locked by another process: `duckdb.IOException`)."""
    key = os.path.realpath(path)
    host = _host
    with host.locked():
        instance = host.connection()
        found = host.files.get(key)
        if found is None:
            alias = f"hb_db_{next(host.serial)}"
            mode = " (READ_ONLY)" if read_only else ""
            instance.execute(f"ATTACH {quoted_path(path)} AS {alias}{mode}")
            found = host.files[key] = _Attachment(alias, read_only, 0)
            try:
                cursor = _using(instance, alias)
            except BaseException:
                del host.files[key]
                instance.execute(f"DETACH {alias}")
                raise
        elif found.read_only != read_only:
            raise duckdb.ConnectionException(
                f"Can't open a connection to same database file with a different configuration than existing"
                f" connections ({path} is open {'read-only' if found.read_only else 'for writing'} in this process)"
            )
        else:
            cursor = _using(instance, found.alias)
        found.users += 1
    return cast(duckdb.DuckDBPyConnection, _Attached(host, key, found.alias, cursor))


def attach_memory() -> duckdb.DuckDBPyConnection:
    """A connection to a new empty in-memory database of the process's instance, dropped when it is closed."""
    host = _host
    with host.locked():
        instance = host.connection()
        alias = f"hb_mem_{next(host.serial)}"
        instance.execute(f"ATTACH ':memory:' AS {alias}")
        key = f":memory:{alias}"
        host.files[key] = _Attachment(alias, False, 1)
        cursor = _using(instance, alias)
    return cast(duckdb.DuckDBPyConnection, _Attached(host, key, alias, cursor))


def _using(instance: duckdb.DuckDBPyConnection, alias: str) -> duckdb.DuckDBPyConnection:
    """A new cursor of the instance whose default database is `alias`."""
    cursor = instance.cursor()
    cursor.execute(f"USE {alias}")
    return cursor


def _release(host: _Host, key: str, *, wait: bool = True) -> None:
    """One connection to `key` closed: the file detached once none is open (DuckDB checkpoints it then). Without
    `wait` (a connection being collected, which may happen while this very thread holds the lock), a lock held
    elsewhere leaves the release to whoever holds it."""
    if not host.lock.acquire(blocking=wait):
        host.pending.append(key)
        return
    try:
        _drop(host, key)
    finally:
        host.unlock()


def _drop(host: _Host, key: str) -> None:
    """`_release`'s work, under the lock."""
    found = host.files.get(key)
    if found is None:
        return
    found.users -= 1
    if found.users > 0:
        return
    del host.files[key]
    if host.instance is not None:
        try:
            host.instance.execute(f"DETACH {found.alias}")
        except duckdb.Error:
            # The checkpoint failed (a full disk): the file is detached all the same and what was committed is in
            # its write-ahead log, which the next open replays; a connection of DuckDB's own closes so too.
            pass


def _call(connection: _Attached, name: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(connection._open(), name)(*args, **kwargs)


def quoted_path(path: str | os.PathLike[str]) -> str:
    """`path` as a SQL string literal, for an ATTACH statement."""
    return "'" + str(path).replace("'", "''") + "'"


class _Attached:
    """A cursor on one attached database that behaves as a connection of its own: every attribute is the cursor's,
    `cursor()` is another cursor on the same database, and `close` (or leaving a `with` block, or the object being
    collected) releases the attachment. A relation it makes (`sql`, `table`) is read while it is open."""

    def __init__(self, host: _Host, key: str, alias: str, cursor: duckdb.DuckDBPyConnection) -> None:
        self._host = host
        self._key = key
        self._alias = alias
        self._cursor: duckdb.DuckDBPyConnection | None = cursor

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._open(), name)
        # A method of the cursor, bound to this connection: `attach(..).execute(..).fetchone()` must not let the
        # connection go (and close the cursor) between looking the method up and calling it.
        return functools.partial(_call, self, name) if callable(value) else value

    def execute(self, *args: Any, **kwargs: Any) -> _Attached:
        """Run a statement; returns this connection, as DuckDB's `execute` returns its own (so that
        `connect(..).execute(..).fetchall()` keeps the connection until the rows are read)."""
        self._open().execute(*args, **kwargs)
        return self

    def executemany(self, *args: Any, **kwargs: Any) -> _Attached:
        """Run a statement once per parameter set; returns this connection, as `execute` does."""
        self._open().executemany(*args, **kwargs)
        return self

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self._cursor is None:
            raise duckdb.ConnectionException("Connection already closed!")
        return self._cursor

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """Another cursor on the same database (valid while this connection is open)."""
        return _using(self._open(), self._alias)

    def close(self) -> None:
        """Close the cursor and release the attachment; closing again does nothing."""
        self._close(wait=True)

    def _close(self, *, wait: bool) -> None:
        cursor, self._cursor = self._cursor, None
        if cursor is None:
            return
        if self._host.pid != os.getpid():  # a forked child leaves its parent's instance alone: kept, not closed
            _inherited_cursors.append(cursor)
            return
        try:
            cursor.close()
        finally:
            _release(self._host, self._key, wait=wait)

    def __enter__(self) -> _Attached:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_cursor", None) is not None:
            try:
                self._close(wait=False)
            except Exception:  # collected during shutdown or after a failed write: nothing to tell
                pass
