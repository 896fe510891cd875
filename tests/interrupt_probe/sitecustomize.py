"""Probe for tests/runners/run/test_interrupts.py, loaded into a real `harness-bench` process via PYTHONPATH.

Inert unless HB_PROBE_FD is set. It changes no behaviour: it reports what the process is doing as
lines on that file descriptor, so the test can send its signal on observed progress rather than
after a sleep, and at the one moment named by HB_PROBE_AT (`kind:n`, e.g. `tool:4`) it keeps the
main thread inside DuckDB statements until the test has sent its signal (it writes a byte on
HB_PROBE_GO_FD afterwards), so that the signal lands *inside* a DuckDB statement:

- `claim:1`  the writer's first statements (schema check and migration when it opens the file),
- `tool:n`   the n-th backend call of log_search / db_query (a tool's DuckDB query),
- `flush:n`  the n-th metrics write transaction (between its BEGIN and its first INSERT),
- `point:n`  the start of the n-th sweep point (between points, on the sweep's connection),
- `case:n`   the n-th case run handed to the metrics writer (no hold: the signal lands wherever
             the process is a moment later).

Each line also says whether the process had received its signal by then (read from the installed
handler), so the test can count case runs handed to the writer after the signal arrived.

For the commands that only read or write whole files (tests/e2e/test_output_paths.py):

- `copy:n`   the n-th `INSERT INTO case_runs` of `merge` (inside its transaction),
- `commit:n` the statement after `merge`'s n-th COMMIT (the merge is whole, the command not yet done),
- `load:n`   the n-th bench run whose transcripts `export --inspect` loads (a DuckDB read, before any file is
             written),
- `pairs:n`  the n-th time `gate` loads the pairs of its labels (a DuckDB read, before any file is written).

HB_PROBE_FLUSH_SECONDS=0 makes the writer commit every case run on its own (instead of grouping a
second's worth), so that `flush:n` is a write with case runs still to come.

A KeyboardInterrupt raised by the signal inside those statements becomes DuckDB's
`RuntimeError: Query interrupted` — the bug the test guards against.
"""

from __future__ import annotations

import os

if os.environ.get("HB_PROBE_FD"):
    import select
    import signal
    import threading
    import time
    from collections import Counter
    from typing import Any

    import duckdb

    import runners.domain.tools.db_query as _db_query
    import runners.domain.tools.log_search as _log_search
    import runners.run.bench as _bench
    import runners.run.sweep as _sweep
    import runners.store.migrations as _migrations
    import runners.store.writer as _writer

    _FD = int(os.environ["HB_PROBE_FD"])
    _GO = int(os.environ["HB_PROBE_GO_FD"])
    _AT = os.environ.get("HB_PROBE_AT", "")
    _seen: Counter[str] = Counter()
    _lock = threading.Lock()  # tools run on worker threads with --concurrency

    def _received() -> str:
        """1 once the process's SIGINT/SIGTERM handler has run (runners.run.interrupts), 0 before, - unknown."""
        state = getattr(signal.getsignal(signal.SIGINT), "__self__", None)
        return "-" if not hasattr(state, "received") else str(int(state.received is not None))

    def _event(kind: str, con: Any | None, statement: str = "SELECT count(*) FROM range(2000000)") -> None:
        """Report `kind:n cases received`; at the HB_PROBE_AT moment, hold inside DuckDB until the test says go."""
        with _lock:
            _seen[kind] += 1
            name = f"{kind}:{_seen[kind]}"
            os.write(_FD, f"{name} {_seen['case']} {_received()}\n".encode())
        if name != _AT or con is None:
            return
        os.write(_FD, b"holding\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            con.execute(statement).fetchall()  # ~10 ms inside DuckDB
            if select.select([_GO], [], [], 0)[0]:
                return

    _real_migrate = _migrations.migrate

    def _migrate(con: duckdb.DuckDBPyConnection, *args: Any, **kw: Any) -> Any:
        _event("claim", con)  # the writer's first statements, when it opens (or creates) the file
        return _real_migrate(con, *args, **kw)

    _migrations.migrate = _migrate  # type: ignore[assignment]

    def _tool(cls: Any) -> None:
        real = cls.run

        def run(self: Any, parsed: Any) -> Any:
            _event("tool", self._cursor)
            return real(self, parsed)

        cls.run = run

    _tool(_db_query.DatabaseQuery)
    _tool(_log_search.LogSearch)

    class _Connection:
        """The writer's connection: reports the first INSERT of each write transaction."""

        def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
            self._con = con

        def execute(self, sql: str, *args: Any) -> Any:
            if sql.startswith("INSERT INTO case_runs"):
                _event("flush", self._con)  # inside the transaction: BEGIN already ran
            return self._con.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._con, name)

    _real_writer_init = _writer.MetricsWriter.__init__

    def _writer_init(self: Any, con: duckdb.DuckDBPyConnection, **kw: Any) -> None:
        if os.environ.get("HB_PROBE_FLUSH_SECONDS"):  # e.g. 0: one write transaction per case run
            kw["flush_seconds"] = float(os.environ["HB_PROBE_FLUSH_SECONDS"])
        _real_writer_init(self, _Connection(con), **kw)  # type: ignore[arg-type]

    _writer.MetricsWriter.__init__ = _writer_init  # type: ignore[method-assign]

    _real_add = _writer.MetricsWriter.add

    def _add(self: Any, rows: Any) -> None:
        _real_add(self, rows)
        _event("case", None)

    _writer.MetricsWriter.add = _add  # type: ignore[method-assign]

    _real_run_point = _bench.run_point

    def _run_point(con: Any, plan: Any, **kw: Any) -> Any:
        _event("point", con)
        return _real_run_point(con, plan, **kw)

    _sweep.run_point = _run_point

    # The whole-file commands' patches only where a moment of theirs is asked for, each command's alone: importing
    # the gate (scipy) or the Inspect export costs a probed process that does not use it about a second of CPU, and
    # the interrupt tests start dozens of them.
    _KIND = _AT.partition(":")[0]
    # ~50 ms of hashing per statement: the main thread is inside DuckDB nearly all the time it holds (a count of a
    # range is answered from its bounds in well under a millisecond)
    _BUSY = "SELECT sum(hash(i)) FROM range(5000000) t(i)"

    if _KIND in ("copy", "commit"):
        import runners.store.merge as _merge

        class _MergeConnection:
            """merge's connection to OUT: reports its first copy statement and the moment after its COMMIT."""

            def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
                self._con = con

            def execute(self, sql: str, *args: Any) -> Any:
                if sql.startswith("INSERT INTO case_runs"):
                    _event("copy", self._con, _BUSY)
                result = self._con.execute(sql, *args)
                if sql == "COMMIT":
                    _event("commit", self._con, _BUSY)
                return result

            def __getattr__(self, name: str) -> Any:
                return getattr(self._con, name)

        _real_merge_connect = _merge.connect

        def _merge_connect(path: Any, **kw: Any) -> Any:
            return _MergeConnection(_real_merge_connect(path, **kw))

        _merge.connect = _merge_connect  # type: ignore[assignment]

    if _KIND == "load":
        import runners.interchange.inspect_export as _inspect_export

        _real_load = _inspect_export.load_case_runs

        def _load(con: Any, db: str, case_run_ids: Any) -> Any:
            _event("load", con, _BUSY)
            return _real_load(con, db, case_run_ids)

        _inspect_export.load_case_runs = _load  # type: ignore[assignment]

    if _KIND == "pairs":
        import runners.decisions.gate as _gate

        _real_pairs = _gate.load_pairs

        def _pairs(con: Any, *args: Any, **kw: Any) -> Any:
            _event("pairs", con, _BUSY)
            return _real_pairs(con, *args, **kw)

        _gate.load_pairs = _pairs  # type: ignore[assignment]
