"""The process's one DuckDB instance: every store connection is a file attached to it, detached when its last
connection closes (checkpointed and unlocked as a connection of its own would leave it), shared while open in one
mode, refused in the other, and never used by a forked child."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from runners.store import _host
from runners.store._host import attach, attach_memory


def _attached() -> set[str]:
    """The databases attached to the process's instance, but its own."""
    instance = _host._host.connection()
    rows = instance.execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()
    return {str(r[0]) for r in rows} - {"memory"}


def _opens_alone(path: Path) -> bool:
    """Whether an instance of its own opens the file for writing (nothing in this process holds it)."""
    try:
        duckdb.connect(str(path)).close()
    except duckdb.Error:
        return False
    return True


def test_a_closed_writer_leaves_the_file_whole_unlocked_and_detached(tmp_path: Path) -> None:
    db = tmp_path / "a.duckdb"
    before = _attached()
    con = attach(str(db), read_only=False)
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(1000)")
    assert con.execute("SELECT current_database()").fetchone() != ("memory",)
    assert not _opens_alone(db) and len(_attached()) == len(before) + 1
    con.close()
    con.close()  # again: nothing
    assert _attached() == before and not (tmp_path / "a.duckdb.wal").exists()
    script = f"import duckdb; print(duckdb.connect({str(db)!r}).execute('SELECT sum(x) FROM t').fetchone()[0])"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(sum(range(1000)))
    with pytest.raises(duckdb.ConnectionException):
        con.execute("SELECT 1")


def test_two_connections_share_the_file_until_the_last_closes(tmp_path: Path) -> None:
    db = tmp_path / "b.duckdb"
    with attach(str(db), read_only=False) as writer:
        writer.execute("CREATE TABLE t (x INTEGER)")
    first, second = attach(str(db), read_only=True), attach(str(tmp_path / "." / "b.duckdb"), read_only=True)
    first.close()
    assert second.execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert second.cursor().execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert not _opens_alone(db)
    with pytest.raises(duckdb.ConnectionException, match="different configuration"):
        attach(str(db), read_only=False)
    assert second.execute("SELECT count(*) FROM t").fetchone() == (0,)  # the refusal left the attachment as it was
    second.close()
    assert _opens_alone(db)


def test_a_statement_on_a_connection_nobody_keeps_reads_its_rows(tmp_path: Path) -> None:
    """`execute` returns the connection, as DuckDB's does: the rows of `attach(..).execute(..)` are read before the
    connection goes."""
    db = tmp_path / "d.duckdb"
    with attach(str(db), read_only=False) as con:
        con.execute("CREATE TABLE t AS SELECT range AS x FROM range(3)")
    # outside an assert: pytest's rewriting would keep the intermediate values alive
    total = attach(str(db), read_only=True).execute("SELECT sum(x) FROM t").fetchone()
    rows = attach(str(db), read_only=True).executemany("SELECT ? + x FROM t", [[1]]).fetchall()
    assert total == (3,) and rows == [(1,), (2,), (3,)]
    gc.collect()
    assert _opens_alone(db)


def test_a_connection_dropped_unclosed_detaches_its_file(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    before = _attached()
    con = attach(str(db), read_only=False)
    con.execute("CREATE TABLE t (x INTEGER)")
    del con
    gc.collect()
    assert _attached() == before and _opens_alone(db)


def test_a_connection_collected_while_the_lock_is_held_is_released_when_it_is_let_go(tmp_path: Path) -> None:
    """Collection runs anywhere, on the thread that holds the store's lock too: the release waits for the lock to be
    let go instead of waiting on it (which would never end), and the file is detached then."""
    db = tmp_path / "e.duckdb"
    con = attach(str(db), read_only=False)
    host = _host._host
    with host.locked():
        del con
        gc.collect()
        assert host.pending and not _opens_alone(db)
    assert not host.pending and _opens_alone(db)


def test_a_memory_database_is_its_own_and_goes_with_its_connection() -> None:
    before = _attached()
    one, two = attach_memory(), attach_memory()
    one.execute("CREATE TABLE t AS SELECT 1 AS x")
    with pytest.raises(duckdb.CatalogException):
        two.execute("SELECT * FROM t")
    one.close()
    two.close()
    assert _attached() == before


def test_a_failed_attach_leaves_nothing_attached(tmp_path: Path) -> None:
    before = _attached()
    with pytest.raises(duckdb.Error):
        attach(str(tmp_path / "missing.duckdb"), read_only=True)
    (tmp_path / "junk.duckdb").write_bytes(b"not a database at all" * 100)
    with pytest.raises(duckdb.Error):
        attach(str(tmp_path / "junk.duckdb"), read_only=False)
    assert _attached() == before and not [k for k in _host._host.files if k.startswith(str(tmp_path))]


def test_a_forked_child_uses_an_instance_of_its_own(tmp_path: Path) -> None:
    """The child's store opens its own instance (the parent's may hold a lock a thread of the parent took, and
    its threads are not in the child); its closing leaves the parent's connection working."""
    parent = attach(str(tmp_path / "p.duckdb"), read_only=False)
    parent.execute("CREATE TABLE t AS SELECT 1 AS x")
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when its own instance works and is not the parent's
        code = 1
        try:
            assert _host._host.instance is None and not _host._host.files
            with attach(str(tmp_path / "child.duckdb"), read_only=False) as mine:
                mine.execute("CREATE TABLE c AS SELECT 2 AS y")
            del parent  # the parent's connection, collected here: must not detach anything in the parent's instance
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert parent.execute("SELECT x FROM t").fetchone() == (1,)
    parent.close()


class StoreConnections(RuleBasedStateMachine):
    """Opens and closes over two files in both modes, writes and reads: what is attached is what has an open
    connection, each read sees every committed write, and a file with no open connection opens alone."""

    connections = Bundle("connections")

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, int] = {}
        self.open: dict[int, tuple[str, bool, duckdb.DuckDBPyConnection]] = {}
        self.serial = 0

    @initialize()
    def files(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="hb-host-"))
        for name in ("x.duckdb", "y.duckdb"):
            with attach(str(self.folder / name), read_only=False) as con:
                con.execute("CREATE TABLE t (n INTEGER)")
            self.rows[name] = 0
        self.before = _attached()

    def _modes(self, name: str) -> set[bool]:
        return {ro for (n, ro, _) in self.open.values() if n == name}

    @rule(target=connections, name=st.sampled_from(["x.duckdb", "y.duckdb"]), read_only=st.booleans())
    def open_one(self, name: str, read_only: bool) -> int:
        modes = self._modes(name)
        if modes and read_only not in modes:
            with pytest.raises(duckdb.ConnectionException):
                attach(str(self.folder / name), read_only=read_only)
            return -1
        self.serial += 1
        self.open[self.serial] = (name, read_only, attach(str(self.folder / name), read_only=read_only))
        return self.serial

    @rule(handle=connections)
    def write_or_read(self, handle: int) -> None:
        if handle not in self.open:
            return
        name, read_only, con = self.open[handle]
        if not read_only:
            con.execute("INSERT INTO t VALUES (1)")
            self.rows[name] += 1
        assert con.execute("SELECT count(*) FROM t").fetchone() == (self.rows[name],)

    @rule(handle=consumes(connections))
    def close_one(self, handle: int) -> None:
        if handle in self.open:
            self.open.pop(handle)[2].close()

    @invariant()
    def attached_is_what_is_open(self) -> None:
        if not hasattr(self, "before"):
            return
        open_files = {n for (n, _, _) in self.open.values()}
        assert len(_attached() - self.before) == len(open_files)

    def teardown(self) -> None:
        for _, _, con in self.open.values():
            con.close()
        if hasattr(self, "folder"):
            for name, count in self.rows.items():
                assert _opens_alone(self.folder / name)
                with duckdb.connect(str(self.folder / name), read_only=True) as con:
                    assert con.execute("SELECT count(*) FROM t").fetchone() == (count,)
            shutil.rmtree(self.folder)


StoreConnections.TestCase.settings = settings(max_examples=15, stateful_step_count=15, deadline=None)
test_store_connections = StoreConnections.TestCase
