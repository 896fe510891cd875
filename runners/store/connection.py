"""Opening a metrics database: the file checked before DuckDB sees it, the writer's connection migrated, a reader's
older database read through an upgraded temporary copy, and every failure one readable line."""

from __future__ import annotations

import contextlib
import fcntl
import struct
import sys
from pathlib import Path

import duckdb

from runners.plan.options import DeclaredColumns
from runners.store import migrations
from runners.store._host import attach, attach_memory
from runners.store.errors import DatabaseLockedError, MetricsDbError, MetricsWriteError
from runners.store.migrations import SCHEMA_VERSION
from runners.store.output_files import NamedPath, OutputPathError, check_output_path, path_kind

__all__ = ["check_database_file", "connect", "connect_in_memory"]

_DUCKDB_MAGIC = b"DUCK"  # at byte 8 of every DuckDB database file
_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_database_file(path: str | Path, *, must_exist: bool = False, writing: bool = False,
                        flag: str = "--db") -> None:  # fmt: skip
    """Refuse, without opening it, a path that is not a DuckDB database (DuckDB would otherwise try to
    download the sqlite extension for a SQLite file); a missing file is fine unless `must_exist`. A database
    `writing` commands write is an output: the one output-path rule holds (a regular file or nothing yet, never a
    device, FIFO, socket or symlink, which are left as they are); one only read may be a symlink to a database, never
    a device or FIFO (reading one would block or read nothing a database holds)."""
    p = Path(path)
    if writing:
        try:
            check_output_path(NamedPath(flag, p))
        except OutputPathError as exc:
            raise MetricsDbError(str(exc)) from None
    if p.is_dir():
        raise MetricsDbError(f"{p} is a folder, not a DuckDB database file")
    if not p.exists():
        if must_exist:
            raise MetricsDbError(f"{p}: no such DuckDB file")
        if not p.parent.is_dir():
            raise MetricsDbError(f"{p}: folder {p.parent} does not exist")
        return
    what = path_kind(p)
    if what is not None:  # opened, a FIFO would block and a device read as an empty or endless file
        raise MetricsDbError(f"{p} is {what}, not a DuckDB database file; use another --db")
    try:
        with p.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise MetricsDbError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if head.startswith(_SQLITE_MAGIC):
        raise MetricsDbError(f"{p} is a SQLite database, not a DuckDB file; use another --db")
    if head[8:12] != _DUCKDB_MAGIC:
        what = "an empty file" if not head else "not a DuckDB database file (unrecognised header)"
        raise MetricsDbError(f"{p} is {what}; use another --db")


def connect(
    path: str | Path, *, read_only: bool = False, upgrade: bool = True, columns: DeclaredColumns | None = None
) -> duckdb.DuckDBPyConnection:
    """Open (and migrate) a metrics database with readable errors (a writer: with the `columns` the declared settings
    and options ask for, a run's plan has them; None: today's declaration).

    Read-only, a database written by an older harness-bench (an older schema version, or settings
    declared since) is read through an upgraded temporary copy, so every reading command reads every
    version this project wrote; the file itself is never changed (`upgrade=False`: the file as it is).
    """
    target = str(path)
    check_database_file(path, must_exist=read_only, writing=not read_only)
    existed = Path(path).exists()
    try:
        con = attach(target, read_only=read_only)
    except duckdb.IOException as exc:
        text = str(exc)
        if not read_only and not existed:  # creating the file failed: the storage (full disk, read-only)
            for created in (Path(path), Path(f"{target}.wal")):
                with contextlib.suppress(OSError):  # a read-only file system refuses even removing nothing
                    created.unlink(missing_ok=True)
            raise MetricsWriteError(exc) from None
        if _locked_by_another_process(Path(path)):
            raise DatabaseLockedError(
                f"{target} is locked by another process (another `harness-bench run` writing to it?). "
                "Wait for it to finish or use another --db file."
            ) from None
        raise MetricsDbError(f"{target}: cannot open as a DuckDB database ({text.splitlines()[0]})") from None
    except duckdb.Error as exc:
        raise MetricsDbError(f"{target}: not a usable DuckDB database ({str(exc).splitlines()[0]})") from None
    try:
        if not read_only:
            try:
                migrations.prepare(con, target, columns)
            except duckdb.TransactionException as exc:  # the only writer's COMMIT failed: the storage (full disk)
                raise MetricsWriteError(exc) from exc
        else:
            catalog = migrations.check_version(con, target)
            if upgrade and migrations.outdated(con, catalog):
                version = migrations.current_version(con)
                con.close()
                return _upgraded_copy(Path(path), version)
    except MetricsWriteError:
        con.close()
        if not read_only and not existed:  # a file created here without its schema (a full disk): not left behind
            for created in (Path(path), Path(f"{target}.wal")):
                with contextlib.suppress(OSError):
                    created.unlink(missing_ok=True)
        raise
    except duckdb.Error as exc:
        con.close()
        raise MetricsDbError(_damaged(target, exc)) from None
    except BaseException:
        con.close()
        raise
    return con


def connect_in_memory(target: str) -> duckdb.DuckDBPyConnection:
    """A metrics database in memory with today's schema, written nowhere (`target`: what an error calls it): for
    work that needs the store's tables for a moment only."""
    con = attach_memory()
    try:
        migrations.prepare(con, target)
    except BaseException:
        con.close()
        raise
    return con


def _damaged(target: str, exc: BaseException) -> str:
    """One line for a database DuckDB opened but could not read (truncated, half-written)."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{target}: a damaged or incomplete harness-bench database ({first}); use another --db"


_COPIES: list[Path] = []


def _remove_copies() -> None:
    import shutil

    for folder in _COPIES:
        shutil.rmtree(folder, ignore_errors=True)


def _upgraded_copy(path: Path, version: int | None) -> duckdb.DuckDBPyConnection:
    """Read an older database through a migrated copy in a temporary folder (removed at exit)."""
    import atexit
    import shutil
    import tempfile

    if not _COPIES:
        atexit.register(_remove_copies)
    folder = Path(tempfile.mkdtemp(prefix="harness-bench-read-"))
    _COPIES.append(folder)
    copy = folder / "db.duckdb"
    how = f"`harness-bench migrate --db {path}` upgrades it in place"
    try:
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, folder / "db.duckdb.wal")
        con = attach(str(copy), read_only=False)
    except (OSError, duckdb.Error) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise MetricsDbError(
            f"{path} has schema version {version}, older than this harness-bench's ({SCHEMA_VERSION}), and cannot be"
            f" read through a temporary upgraded copy ({reason}); {how}"
        ) from None
    try:
        migrations.prepare(con, str(path))
    except (duckdb.Error, MetricsDbError) as exc:
        con.close()
        raise MetricsDbError(
            f"{path} has schema version {version}, older than this harness-bench's ({SCHEMA_VERSION}), and cannot be"
            f" migrated ({str(exc).splitlines()[0]}); it was not changed"
        ) from None
    return con


def _locked_by_another_process(path: Path) -> bool:
    """Whether another process holds a lock on `path` (DuckDB locks its database file with fcntl; DuckDB's
    IOException does not say which failure it is, the lock table does). Asks without taking a lock."""
    if sys.platform.startswith("linux"):
        request = struct.pack("hh", fcntl.F_WRLCK, 0) + bytes(28)  # struct flock: l_type, l_whence, then zeros
        type_at = 0
    elif sys.platform == "darwin":
        request = bytes(20) + struct.pack("hh", fcntl.F_WRLCK, 0)  # l_start, l_len, l_pid, then l_type, l_whence
        type_at = 20
    else:
        return False
    try:
        with path.open("rb") as f:
            answer = fcntl.fcntl(f.fileno(), fcntl.F_GETLK, request)
    except OSError:
        return False
    (lock_type,) = struct.unpack_from("h", answer, type_at)
    return bool(lock_type != fcntl.F_UNLCK)
