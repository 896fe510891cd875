"""Per-run metrics in DuckDB: schema, migrations, views, and a batched writer.

The settings columns of `bench_runs` (every declared setting) and `case_runs` (every sweepable one)
and the analyst views come from `runners/plan/settings.py`: at every writer connect, a column missing
for a declared setting is added (`ADD COLUMN IF NOT EXISTS`) and the views are recreated, so a
setting declared later appears without a migration.

A case run's rows (case_runs + tool_calls + events) always land in the same transaction; the
writer groups several finished case runs per transaction (measured: a DataFrame insert costs
~4 ms of fixed overhead per statement on this machine, so one transaction per case run would
eat a third of a 50-runs/s budget). Buffered runs are flushed at least every `flush_seconds`,
at the end, and on interruption; a SIGKILL loses at most that window, which `--resume` re-runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from harness.agent import RunResult
from harness.trace import GainApplied, ToolInvocation, ToolRequestRejected, TraceEvent, event_columns
from runners.plan import run_options, settings
from runners.run.case_runner import CaseRun
from runners.store.redact import NO_SECRETS, Secrets, redact, redact_cells

SCHEMA_VERSION = 7

_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS bench_runs (
            bench_run_id VARCHAR PRIMARY KEY,
            sweep_id VARCHAR,
            started_at TIMESTAMP,
            finished_at TIMESTAMP,
            status VARCHAR,              -- running | completed | interrupted | failed
            git_commit VARCHAR,
            model VARCHAR,
            label VARCHAR,
            config_json VARCHAR,         -- before v3 only (settings_json holds every setting since)
            evalset_hash VARCHAR,
            evalset_specs VARCHAR,
            case_ids_json VARCHAR,
            epochs INTEGER,
            planned_case_runs INTEGER,
            harness_bench_version VARCHAR,
            cassettes VARCHAR,
            record_mode VARCHAR,
            base_url VARCHAR,
            error VARCHAR
        )""",
        """CREATE TABLE IF NOT EXISTS case_runs (
            bench_run_id VARCHAR,
            case_run_id VARCHAR PRIMARY KEY,
            case_id VARCHAR,
            family VARCHAR,
            model VARCHAR,
            label VARCHAR,
            epoch INTEGER,
            no_gain_threshold INTEGER,
            protocol_violation_threshold INTEGER,
            max_tool_calls INTEGER,
            max_model_calls INTEGER,
            max_tokens INTEGER,
            outcome VARCHAR,
            fallback_kind VARCHAR,
            stop_reason VARCHAR,
            expected_outcome VARCHAR,
            expected_fallback_kind VARCHAR,
            expected_stop_reason VARCHAR,
            passed BOOLEAN,
            failures VARCHAR,
            model_calls INTEGER,
            guard_calls INTEGER,
            tool_invocations INTEGER,
            failed_invocations INTEGER,
            tool_rejections INTEGER,
            duplicate_scope_rejections INTEGER,
            protocol_violations INTEGER,
            no_gain_count INTEGER,
            gained_count INTEGER,
            stop_required_delivered BOOLEAN,
            wasted_invocations INTEGER,
            input_tokens BIGINT,
            output_tokens BIGINT,
            wall_ms DOUBLE,
            reason VARCHAR,
            conclusion VARCHAR,
            error VARCHAR,
            finished_at TIMESTAMP
        )""",
        """CREATE TABLE IF NOT EXISTS tool_calls (
            bench_run_id VARCHAR,
            case_run_id VARCHAR,
            seq INTEGER,
            tool_call_id VARCHAR,
            tool VARCHAR,
            scope VARCHAR,
            invocation_status VARCHAR,   -- COMPLETED | FAILED | REJECTED
            evidence_status VARCHAR,
            result_count INTEGER,
            gain VARCHAR,
            gain_producer VARCHAR,
            rejection_reason VARCHAR,
            violation VARCHAR,
            observation_bytes INTEGER,
            truncated BOOLEAN,
            latency_ms DOUBLE
        )""",
        """CREATE TABLE IF NOT EXISTS events (
            bench_run_id VARCHAR,
            case_run_id VARCHAR,
            seq INTEGER,
            kind VARCHAR,
            t_ms DOUBLE,
            tool_call_id VARCHAR,
            tool VARCHAR,
            scope VARCHAR,
            invocation_status VARCHAR,
            evidence_status VARCHAR,
            count INTEGER,
            truncated BOOLEAN,
            observation_bytes INTEGER,
            rejection VARCHAR,
            violation VARCHAR,
            gain VARCHAR,
            producer VARCHAR,
            stop_reason VARCHAR,
            budget VARCHAR,
            purpose VARCHAR,
            attempt INTEGER,
            input_tokens INTEGER,
            output_tokens INTEGER,
            latency_ms DOUBLE,
            error_kind VARCHAR,
            guard VARCHAR,
            verdict VARCHAR,
            outcome VARCHAR,
            fallback_kind VARCHAR,
            detail VARCHAR
        )""",
        """CREATE OR REPLACE VIEW v_pass_rate AS
            SELECT family, model, label, no_gain_threshold, protocol_violation_threshold, max_tool_calls,
                   max_model_calls, max_tokens, count(*) AS case_runs, avg(passed::INT) AS pass_rate
            FROM case_runs GROUP BY ALL""",
        """CREATE OR REPLACE VIEW v_wasted_calls AS
            SELECT family, model, label, no_gain_threshold, max_tool_calls,
                   avg(wasted_invocations) AS mean_wasted_invocations,
                   avg(tool_rejections) AS mean_rejections,
                   avg(tool_invocations) AS mean_tool_invocations
            FROM case_runs GROUP BY ALL""",
        """CREATE OR REPLACE VIEW v_outcomes AS
            SELECT family, model, label, outcome, fallback_kind, stop_reason, count(*) AS case_runs
            FROM case_runs GROUP BY ALL""",
    ],
    # v2: sweeps (a grid of bench runs sharing one sweep id), resumable as a whole.
    2: [
        """CREATE TABLE IF NOT EXISTS sweeps (
            sweep_id VARCHAR PRIMARY KEY,
            started_at TIMESTAMP,
            finished_at TIMESTAMP,
            status VARCHAR,
            model VARCHAR,
            label VARCHAR,
            grid_json VARCHAR,
            options_json VARCHAR
        )""",
        """CREATE OR REPLACE VIEW v_sweep_points AS
            SELECT b.sweep_id, c.no_gain_threshold, c.protocol_violation_threshold, c.max_tool_calls,
                   c.max_model_calls, c.max_tokens, count(*) AS case_runs, avg(c.passed::INT) AS pass_rate,
                   avg(c.tool_invocations) AS mean_tool_invocations, avg(c.wasted_invocations) AS mean_wasted
            FROM case_runs c JOIN bench_runs b USING (bench_run_id)
            WHERE b.sweep_id IS NOT NULL GROUP BY ALL""",
    ],
    # v3: one declaration of run settings (runners/plan/settings.py). Budgets are BIGINT (a budget above
    # 2^31 overflowed INTEGER and left the run `running`); every setting of a run is kept as JSON
    # (resume restores it) and as one column each (added at connect, see `ensure_settings_columns`).
    3: [
        *(
            f"ALTER TABLE case_runs ALTER {col} TYPE BIGINT"
            for col in ("no_gain_threshold", "protocol_violation_threshold", "max_tool_calls", "max_model_calls")
        ),
        "ALTER TABLE case_runs ALTER max_tokens TYPE BIGINT",
        "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS settings_json VARCHAR",
        # multi-call turns, exact STOP_REQUIRED counts, the run-wide observation budget
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS awaiting_rejections INTEGER",
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS stop_required_deliveries INTEGER",
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS observation_bytes BIGINT",
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS budget_hit VARCHAR",
    ],
    # v4: shards. A bench run split by `--shard I/N` has one row per shard written into its
    # file; `harness-bench merge` gathers them, so a merged run knows which shards it holds.
    4: [
        """CREATE TABLE IF NOT EXISTS shards (
            bench_run_id VARCHAR,
            shard_index INTEGER,         -- 1-based
            shard_count INTEGER,
            planned_case_runs INTEGER,   -- this shard's share of the plan
            status VARCHAR,              -- running | completed | interrupted | failed
            started_at TIMESTAMP,
            finished_at TIMESTAMP,
            host VARCHAR,
            PRIMARY KEY (bench_run_id, shard_index)
        )""",
    ],
    # v5: transcripts (runners/store/transcripts.py). Every case run's conversation as the model saw it, one row
    # per message, tool call, failed attempt or guard verdict, with the Harness's decision beside each tool
    # call; prompts shared by many case runs are stored once by hash. `bench_runs.transcripts` says
    # whether the run stored them (`--no-transcripts` turns it off).
    5: [
        """CREATE TABLE IF NOT EXISTS messages (
            bench_run_id VARCHAR,
            case_run_id VARCHAR,
            seq INTEGER,                 -- order within the case run, from 0
            purpose VARCHAR,             -- DIAGNOSIS | SEMANTIC_GUARD (the conversation)
            kind VARCHAR,                -- SYSTEM USER ASSISTANT TOOL_CALL OBSERVATION MODEL_ERROR GUARD_VERDICT
            model_call INTEGER,          -- the model call attempt that sent or produced it (0: never sent)
            content VARCHAR,             -- the text as the model saw it (NULL when prompt_hash names it)
            prompt_hash VARCHAR,         -- SYSTEM/USER prompts: the text is in `prompts`
            tool_call_id VARCHAR,
            tool VARCHAR,
            arguments VARCHAR,           -- TOOL_CALL: the raw arguments text
            sent BOOLEAN,                -- OBSERVATION: false when the run ended before sending it
            input_tokens INTEGER,
            output_tokens INTEGER,
            finish_reason VARCHAR,
            error_kind VARCHAR,
            -- TOOL_CALL: the Harness's decision on it (from the trace)
            harness_call_id VARCHAR,     -- the id the Harness answered (the model's, or one it assigned)
            invocation_status VARCHAR,   -- COMPLETED | FAILED (admitted) | REJECTED
            evidence_status VARCHAR,
            rejection VARCHAR,
            violation VARCHAR,
            decision_detail VARCHAR,     -- the violation text, failure message or budget note
            scope VARCHAR,
            gain VARCHAR,                -- the gain applied to this call, and by whom
            gain_producer VARCHAR,
            stop_required BOOLEAN,       -- this call's answer delivered STOP_REQUIRED
            budget_hit VARCHAR,          -- the budget this call ran into
            used_model_calls INTEGER,    -- budget state after the decision
            used_tool_invocations INTEGER,
            used_tokens BIGINT,
            -- GUARD_VERDICT
            guard VARCHAR,
            verdict VARCHAR
        )""",
        """CREATE TABLE IF NOT EXISTS prompts (
            prompt_hash VARCHAR PRIMARY KEY,
            content VARCHAR
        )""",
        "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS transcripts BOOLEAN",
    ],
    # v6: typed events and run errors. Each event class's fields are columns (harness.trace.event_columns; a
    # test keeps the two in step): RUN_STARTED names its model, DRAFT_RECEIVED says whether the Draft was
    # valid (no longer "detail IS NULL"), the EvidenceGuard's verdict is EVIDENCE_CHECKED with PASSED/FAILED
    # (no longer a SemanticVerdict). `case_runs.error_kind`: the typed classification of `error`, from where
    # the call failed (an endpoint, the network, a cassette miss, or the model's own unusable answer).
    6: [
        "ALTER TABLE events ADD COLUMN IF NOT EXISTS model VARCHAR",
        "ALTER TABLE events ADD COLUMN IF NOT EXISTS draft_valid BOOLEAN",
        """UPDATE events SET model = substr(detail, 7), detail = NULL
           WHERE kind = 'RUN_STARTED' AND detail LIKE 'model=%'""",
        "UPDATE events SET draft_valid = (detail IS NULL) WHERE kind = 'DRAFT_RECEIVED'",
        """UPDATE events SET kind = 'EVIDENCE_CHECKED',
                             verdict = CASE verdict WHEN 'SUPPORTED' THEN 'PASSED' ELSE 'FAILED' END
           WHERE kind = 'GUARD_VERDICT' AND guard = 'EVIDENCE'""",
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS error_kind VARCHAR",
        # the agent loop (`--agent`) the bench run's cases went through; NULL: native (written before it existed)
        "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS agent VARCHAR",
    ],
    # v7: calls a model wrote as text (`--tool-call-format json`), counted apart from the endpoint's `tool_calls`:
    # per model call (MODEL_CALL) and per case run. Runs written before it had none.
    7: [
        "ALTER TABLE events ADD COLUMN IF NOT EXISTS text_tool_calls INTEGER",
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS text_tool_calls INTEGER",
        "UPDATE case_runs SET text_tool_calls = 0 WHERE text_tool_calls IS NULL",
    ],
}

_EVENT_COLUMNS = list(event_columns())
"""The events table's columns after the two ids: every field of every event class (harness.trace)."""


class MetricsDbError(RuntimeError):
    """The database cannot be used (locked by another writer, not a DuckDB file, newer schema)."""


_DUCKDB_MAGIC = b"DUCK"  # at byte 8 of every DuckDB database file
_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_database_file(path: str | Path, *, must_exist: bool = False) -> None:
    """Refuse, without opening it, a path that is not a DuckDB database (DuckDB would otherwise try to
    download the sqlite extension for a SQLite file); a missing file is fine unless `must_exist`."""
    p = Path(path)
    if p.is_dir():
        raise MetricsDbError(f"{p} is a folder, not a DuckDB database file")
    if not p.exists():
        if must_exist:
            raise MetricsDbError(f"{p}: no such DuckDB file")
        if not p.parent.is_dir():
            raise MetricsDbError(f"{p}: folder {p.parent} does not exist")
        return
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


def connect(path: str | Path, *, read_only: bool = False, upgrade: bool = True) -> duckdb.DuckDBPyConnection:
    """Open (and migrate) a metrics database with readable errors.

    Read-only, a database written by an older harness-bench (an older schema version, or settings
    declared since) is read through an upgraded temporary copy, so every reading command reads every
    version this project wrote; the file itself is never changed (`upgrade=False`: the file as it is).
    """
    target = str(path)
    check_database_file(path, must_exist=read_only)
    existed = Path(path).exists()
    try:
        con = duckdb.connect(target, read_only=read_only)
        # Nothing here needs an extension: never reach the network for one.
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
    except duckdb.IOException as exc:
        text = str(exc)
        if not read_only and not existed:  # creating the file failed: the storage (full disk, read-only)
            for created in (Path(path), Path(f"{target}.wal")):
                created.unlink(missing_ok=True)
            raise MetricsWriteError(exc) from None
        if "lock" in text.lower():
            raise MetricsDbError(
                f"{target} is locked by another process (another `harness-bench run` writing to it?). "
                "Wait for it to finish or use another --db file."
            ) from None
        raise MetricsDbError(f"{target}: cannot open as a DuckDB database ({text.splitlines()[0]})") from None
    except duckdb.Error as exc:
        raise MetricsDbError(f"{target}: not a usable DuckDB database ({str(exc).splitlines()[0]})") from None
    try:
        if not read_only:
            try:
                migrate(con, target)
                ensure_settings_columns(con)
            except duckdb.TransactionException as exc:  # the only writer's COMMIT failed: the storage (full disk)
                raise MetricsWriteError(exc) from exc
        else:
            _check_version(con, target)
            if upgrade and _outdated(con):
                version = _current_version(con)
                con.close()
                return _upgraded_copy(Path(path), version)
    except MetricsWriteError:
        con.close()
        raise
    except duckdb.Error as exc:
        con.close()
        raise MetricsDbError(_damaged(target, exc)) from None
    except BaseException:
        con.close()
        raise
    return con


def _damaged(target: str, exc: BaseException) -> str:
    """One line for a database DuckDB opened but could not read (truncated, half-written)."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{target}: a damaged or incomplete harness-bench database ({first}); use another --db"


_REQUIRED_TABLES = ("bench_runs", "case_runs", "tool_calls", "events")


def _outdated(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database lacks what this harness-bench reads: a newer schema version's tables or a
    column of a setting declared since it was written."""
    version = _current_version(con)
    if version is None or version < SCHEMA_VERSION:
        return True
    present: dict[str, set[str]] = {}
    rows = con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE table_name IN ('bench_runs', 'case_runs')"
    ).fetchall()
    for table, column in rows:
        present.setdefault(table, set()).add(column)
    wanted = (("bench_runs", settings.bench_run_columns()), ("case_runs", settings.case_run_columns()))
    return any(name not in present.get(table, set()) for table, columns in wanted for name, _ in columns)


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
        con = duckdb.connect(str(copy))
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
    except (OSError, duckdb.Error) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise MetricsDbError(
            f"{path} has schema version {version}, older than this harness-bench's ({SCHEMA_VERSION}), and cannot be"
            f" read through a temporary upgraded copy ({reason}); {how}"
        ) from None
    try:
        migrate(con, str(path))
        ensure_settings_columns(con)
    except (duckdb.Error, MetricsDbError) as exc:
        con.close()
        raise MetricsDbError(
            f"{path} has schema version {version}, older than this harness-bench's ({SCHEMA_VERSION}), and cannot be"
            f" migrated ({str(exc).splitlines()[0]}); it was not changed"
        ) from None
    return con


def mark_stale_runs(con: duckdb.DuckDBPyConnection) -> int:
    """Bench runs and sweeps still marked `running` belong to a process that died (SIGKILL, power
    loss): this process holds the file's exclusive lock, so no one else is writing. Mark them
    `interrupted` so `--resume` and reports see the truth; returns how many bench runs changed."""
    stale = con.execute("SELECT count(*) FROM bench_runs WHERE status = 'running'").fetchone()
    con.execute("UPDATE bench_runs SET status = 'interrupted' WHERE status = 'running'")
    con.execute("UPDATE sweeps SET status = 'interrupted' WHERE status = 'running'")
    con.execute("UPDATE shards SET status = 'interrupted' WHERE status = 'running'")
    return int(stale[0]) if stale else 0


@dataclass(frozen=True, slots=True)
class StaleRuns:
    """Bench runs and sweeps left `running` by a process that died (what `mark_stale_runs` will mark)."""

    bench_runs: tuple[tuple[str, str | None], ...]
    """(bench run id, its sweep id or None), oldest first."""
    sweeps: tuple[str, ...]
    """Sweep ids left `running` and the sweeps of the bench runs above, oldest first."""


def stale_runs(con: duckdb.DuckDBPyConnection) -> StaleRuns:
    """The bench runs and sweeps still marked `running` (call before `mark_stale_runs` to name them)."""
    runs = con.execute(
        "SELECT bench_run_id, sweep_id FROM bench_runs WHERE status = 'running' ORDER BY started_at, bench_run_id"
    ).fetchall()
    sweeps = con.execute(
        "SELECT sweep_id FROM sweeps WHERE status = 'running' ORDER BY started_at, sweep_id"
    ).fetchall()
    ids = dict.fromkeys([str(r[0]) for r in sweeps] + [str(s) for _, s in runs if s is not None])
    return StaleRuns(tuple((str(b), None if s is None else str(s)) for b, s in runs), tuple(ids))


def _current_version(con: duckdb.DuckDBPyConnection) -> int | None:
    has = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'").fetchone()
    if not has or not has[0]:
        return None
    row = con.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _check_version(con: duckdb.DuckDBPyConnection, target: str) -> None:
    version = _current_version(con)
    if version is None:
        raise MetricsDbError(f"{target} holds no harness-bench metrics (no schema_version table)")
    if version > SCHEMA_VERSION:
        raise MetricsDbError(
            f"{target} has schema version {version}, newer than this harness-bench ({SCHEMA_VERSION}); upgrade it"
        )
    _check_complete(con, target, version)


def _check_complete(con: duckdb.DuckDBPyConnection, target: str, version: int) -> None:
    """A schema_version row without the tables it promises: a file that was never a whole database."""
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    missing = [t for t in _REQUIRED_TABLES if t not in tables]
    if missing:
        raise MetricsDbError(
            f"{target} says schema version {version} but has no {', '.join(missing)} table: not a complete"
            " harness-bench database; use another --db"
        )


def migrate(con: duckdb.DuckDBPyConnection, target: str = "<db>", upto: int = SCHEMA_VERSION) -> int:
    """Apply missing migrations (each in one transaction) up to `upto`; refuse a foreign or newer database."""
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    version = _current_version(con)
    if version is None and tables - {"schema_version"}:
        raise MetricsDbError(
            f"{target} already holds tables {sorted(tables)[:5]} from another program; use a new --db file"
        )
    if version is not None and version > SCHEMA_VERSION:
        raise MetricsDbError(
            f"{target} has schema version {version}, newer than this harness-bench ({SCHEMA_VERSION}); upgrade it"
        )
    if version is not None:
        _check_complete(con, target, version)
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMP)")
    for v in range(int(version or 0) + 1, upto + 1):
        con.execute("BEGIN")
        for stmt in _MIGRATIONS[v]:
            con.execute(stmt)
        con.execute("INSERT INTO schema_version VALUES (?, now())", [v])
        con.execute("COMMIT")
    return upto


def ensure_settings_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Idempotent: a column per declared setting (bench_runs) and per sweepable one (case_runs), legacy
    bench runs given their settings, and the views recreated when they lack a swept setting."""
    existing: dict[str, set[str]] = {}
    rows = con.execute(  # duckdb_columns() costs a third of information_schema.columns
        "SELECT table_name, column_name FROM duckdb_columns() WHERE table_name IN (SELECT unnest(?))",
        [["bench_runs", "case_runs", *VIEWS]],
    ).fetchall()
    for table, column in rows:
        existing.setdefault(table, set()).add(column)
    bench_columns = settings.bench_run_columns() + run_options.bench_run_columns()
    for table, columns in (("bench_runs", bench_columns), ("case_runs", settings.case_run_columns())):
        for name, sql_type in columns:
            if name not in existing.get(table, set()):
                con.execute(f'ALTER TABLE {table} ADD COLUMN IF NOT EXISTS "{name}" {sql_type}')
    _backfill_settings(con)
    swept = settings.swept_names()
    keys = {"bench_run_id", "sweep_id", *swept}
    if any(not keys <= existing.get(view, set()) for view in VIEWS):
        for statement in _views(swept):
            con.execute(statement)


def _backfill_settings(con: duckdb.DuckDBPyConnection) -> None:
    """Bench runs written before schema v3 get their settings from config_json, model and base_url."""
    rows = con.execute(
        "SELECT bench_run_id, config_json, model, base_url FROM bench_runs WHERE settings_json IS NULL"
    ).fetchall()
    if not rows:
        return
    con.execute("BEGIN")
    try:
        for bench_run_id, config_json, model, base_url in rows:
            try:
                run = settings.legacy_settings(config_json, model, base_url)
            except ValueError:
                continue  # unreadable legacy row: left without settings; resume says so
            store_settings(con, bench_run_id, run)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def store_settings(con: duckdb.DuckDBPyConnection, bench_run_id: str, run: settings.RunSettings) -> None:
    """Write every setting of a bench run: one column each and the JSON that resume reads."""
    values = run.stored_values()
    assignments = ", ".join(f'"{name}" = ?' for name in values)
    con.execute(
        f"UPDATE bench_runs SET settings_json = ?, {assignments} WHERE bench_run_id = ?",
        [run.to_json(), *values.values(), bench_run_id],
    )


def store_run_options(con: duckdb.DuckDBPyConnection, bench_run_id: str, values: Mapping[str, Any]) -> None:
    """Write a bench run's run options (runners/plan/run_options.py): column -> value."""
    assignments = ", ".join(f'"{name}" = ?' for name in values)
    con.execute(f"UPDATE bench_runs SET {assignments} WHERE bench_run_id = ?", [*values.values(), bench_run_id])


VIEWS = ("v_pass_rate", "v_wasted_calls", "v_outcomes", "v_sweep_points")


def _views(swept: list[str]) -> list[str]:
    """The analyst views: never merge two bench runs, sweeps, or points that differ in any swept setting."""
    cols = "".join(f'c."{name}", ' for name in swept)
    keys = f"c.bench_run_id, b.sweep_id, c.model, c.label, {cols}"
    source = "FROM case_runs c JOIN bench_runs b USING (bench_run_id)"
    return [
        f"""CREATE OR REPLACE VIEW v_pass_rate AS
            SELECT {keys}c.family, count(*) AS case_runs, avg(c.passed::INT) AS pass_rate
            {source} GROUP BY ALL""",
        f"""CREATE OR REPLACE VIEW v_wasted_calls AS
            SELECT {keys}c.family, avg(c.wasted_invocations) AS mean_wasted_invocations,
                   avg(c.tool_rejections) AS mean_rejections, avg(c.tool_invocations) AS mean_tool_invocations
            {source} GROUP BY ALL""",
        f"""CREATE OR REPLACE VIEW v_outcomes AS
            SELECT {keys}c.family, c.outcome, c.fallback_kind, c.stop_reason, count(*) AS case_runs
            {source} GROUP BY ALL""",
        f"""CREATE OR REPLACE VIEW v_sweep_points AS
            SELECT {keys}count(*) AS case_runs, avg(c.passed::INT) AS pass_rate,
                   avg(c.tool_invocations) AS mean_tool_invocations, avg(c.wasted_invocations) AS mean_wasted
            {source} WHERE b.sweep_id IS NOT NULL GROUP BY ALL""",
    ]


def _enum(v: Any) -> Any:
    return getattr(v, "value", v)


def case_run_rows(
    bench_run_id: str, case_run_id: str, model: str, label: str | None, epoch: int,
    swept: Mapping[str, settings.SettingValue], run: CaseRun,
) -> tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[Any, ...]]]:  # fmt: skip
    """The case_runs row, tool_calls rows and events rows of one case run (`swept`: the sweepable settings)."""
    r: RunResult = run.result
    d = r.decision
    m = run.metrics
    exp = run.case.expect
    case_row = {
        "bench_run_id": bench_run_id, "case_run_id": case_run_id, "case_id": run.case.id,
        "family": run.case.family.value, "model": model, "label": label, "epoch": epoch, **swept,
        "outcome": d.outcome.value, "fallback_kind": _enum(d.fallback_kind), "stop_reason": _enum(d.stop_reason),
        "expected_outcome": exp.outcome.value, "expected_fallback_kind": _enum(exp.fallback_kind),
        "expected_stop_reason": _enum(exp.stop_reason), "passed": run.passed,
        "failures": json.dumps(list(run.failures), ensure_ascii=False) if run.failures else None,
        "model_calls": m.model_calls, "guard_calls": m.guard_calls, "tool_invocations": m.tool_invocations,
        "failed_invocations": m.failed_invocations, "tool_rejections": m.tool_rejections,
        "duplicate_scope_rejections": m.duplicate_scope_rejections, "protocol_violations": m.protocol_violations,
        "no_gain_count": m.no_gain_count, "gained_count": m.gained_count,
        "stop_required_delivered": m.stop_required_delivered, "wasted_invocations": m.wasted_invocations,
        "awaiting_rejections": m.awaiting_rejections, "stop_required_deliveries": m.stop_required_deliveries,
        "observation_bytes": m.observation_bytes, "budget_hit": _enum(m.budget_hit),
        "text_tool_calls": m.text_tool_calls,
        "input_tokens": m.input_tokens, "output_tokens": m.output_tokens, "wall_ms": r.wall_ms,
        "reason": d.reason[:500], "conclusion": (d.draft.conclusion if d.draft else None),
        "error": r.error, "error_kind": _enum(r.error_kind),
        "finished_at": pd.Timestamp.now(tz="UTC").tz_localize(None),
    }  # fmt: skip
    tool_rows = _tool_call_rows(bench_run_id, case_run_id, r.events)
    event_rows = [(bench_run_id, case_run_id, *(_enum(getattr(e, c, None)) for c in _EVENT_COLUMNS)) for e in r.events]
    return case_row, tool_rows, event_rows


def _tool_call_rows(bench_run_id: str, case_run_id: str, events: Sequence[TraceEvent]) -> list[tuple[Any, ...]]:
    """One row per tool request: invocation or rejection, with the gain applied *to* that call."""
    gains = {e.tool_call_id: e for e in events if isinstance(e, GainApplied)}
    rows: list[tuple[Any, ...]] = []
    for e in events:
        facts: tuple[Any, ...]
        match e:
            case ToolInvocation():
                facts = (_enum(e.evidence_status), e.count, None, None, e.observation_bytes, e.truncated, e.latency_ms)
            case ToolRequestRejected():
                facts = (None, None, _enum(e.rejection), _enum(e.violation), None, None, None)
            case _:
                continue
        g = gains.get(e.tool_call_id)
        ev, count, rejection, violation, obs_bytes, truncated, latency = facts
        rows.append((
            bench_run_id, case_run_id, e.seq, e.tool_call_id, e.tool, e.scope, _enum(e.invocation_status),
            ev, count, _enum(g.gain) if g else None, _enum(g.producer) if g else None,
            rejection, violation, obs_bytes, truncated, latency,
        ))  # fmt: skip
    return rows


_TOOL_COLUMNS = [
    "bench_run_id", "case_run_id", "seq", "tool_call_id", "tool", "scope", "invocation_status", "evidence_status",
    "result_count", "gain", "gain_producer", "rejection_reason", "violation", "observation_bytes", "truncated",
    "latency_ms",
]  # fmt: skip


class MetricsWriteError(Exception):
    """The database could not be written (full disk, I/O error): the rows of the failed transaction are not
    stored, and the connection may be unusable; the bench run must stop as interrupted and be resumed."""

    def __init__(self, cause: BaseException) -> None:
        first = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        super().__init__(first)
        self.cause = cause


STORAGE_ERRORS: tuple[type[Exception], ...] = (duckdb.IOException, duckdb.FatalException, OSError)
"""What a full disk or a failing device raises while DuckDB writes (FatalException: the database was
invalidated by an earlier failed write)."""


WRITE_FAILURES: tuple[type[Exception], ...] = (MetricsWriteError, *STORAGE_ERRORS)
"""A write that failed on the storage, raised by this module or by DuckDB."""
_STATEMENT_FAILURES: tuple[type[Exception], ...] = (*STORAGE_ERRORS, duckdb.TransactionException)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back after a failed write; a transaction DuckDB already aborted (or an invalidated database)
    must not hide the failure that caused it."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass


def commit(con: duckdb.DuckDBPyConnection) -> None:
    """COMMIT the open transaction. This process is the file's only writer (it holds the exclusive lock), so
    a failed COMMIT is the storage failing (full disk, I/O error): rolled back, raised as MetricsWriteError."""
    try:
        con.execute("COMMIT")
    except duckdb.Error as exc:
        _rollback(con)
        raise MetricsWriteError(exc) from exc


def write_statement(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] = ()) -> None:
    """One auto-committed write; its failure is the storage failing (see `commit`)."""
    try:
        con.execute(sql, list(params))
    except _STATEMENT_FAILURES as exc:
        raise MetricsWriteError(exc) from exc


class MetricsWriter:
    """Buffers finished case runs and writes them in transactions (all rows of a case run together)."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, *, flush_seconds: float = 1.0, max_buffer: int = 200,
        secrets: Secrets = NO_SECRETS,
    ) -> None:  # fmt: skip
        self._con = con
        self._secrets = secrets  # every text cell is redacted here, on its way into the database
        self._flush_seconds = flush_seconds
        self._max_buffer = max_buffer
        self._cases: list[dict[str, Any]] = []
        self._tools: list[tuple[Any, ...]] = []
        self._events: list[tuple[Any, ...]] = []
        self._messages: list[tuple[Any, ...]] = []
        self._prompts: dict[str, str] = {}
        self._prompts_written: set[str] = set()
        self._last_flush = time.monotonic()
        self.rows_written = 0
        self.write_seconds = 0.0
        self.lost = 0
        """Case runs of transactions that failed on a storage error (not stored)."""
        self.cases_written = 0
        """Case runs stored by this writer."""

    def add_transcript(self, messages: Sequence[tuple[Any, ...]], prompts: Mapping[str, str]) -> None:
        """Buffer the transcript rows of the case run `add` is called with next (same transaction)."""
        from runners.store.transcripts import MESSAGE_COLUMNS, prompt_hash

        # A prompt is stored under the hash of its redacted text (the key names what is stored).
        texts = {key: redact(text, self._secrets) for key, text in prompts.items()}
        rekeyed = {key: prompt_hash(text) for key, text in texts.items() if text != prompts[key]}
        at = MESSAGE_COLUMNS.index("prompt_hash")
        for row in messages:
            row = redact_cells(row, self._secrets)
            if row[at] in rekeyed:
                row = (*row[:at], rekeyed[row[at]], *row[at + 1 :])
            self._messages.append(row)
        for key, text in texts.items():
            key = rekeyed.get(key, key)
            if key not in self._prompts_written:
                self._prompts[key] = text

    def add(self, rows: tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[Any, ...]]]) -> None:
        """Buffer one case run; flush when the buffer is full or old."""
        case_row, tool_rows, event_rows = rows
        secrets = self._secrets
        self._cases.append(redact_cells(case_row, secrets))
        self._tools.extend(redact_cells(r, secrets) for r in tool_rows)
        self._events.extend(redact_cells(r, secrets) for r in event_rows)
        if len(self._cases) >= self._max_buffer or time.monotonic() - self._last_flush >= self._flush_seconds:
            self.flush()

    def flush(self) -> int:
        """Write everything buffered in one transaction; returns the number of case runs written."""
        if not self._cases:
            return 0
        t0 = time.perf_counter()
        cases = pd.DataFrame(self._cases, dtype=object)
        tools = pd.DataFrame(self._tools, columns=_TOOL_COLUMNS, dtype=object)
        events = pd.DataFrame(self._events, columns=["bench_run_id", "case_run_id", *_EVENT_COLUMNS], dtype=object)
        con = self._con
        con.execute("BEGIN")
        try:
            con.register("_hb_cases", cases)
            con.register("_hb_tools", tools)
            con.register("_hb_events", events)
            columns = ", ".join(f'"{c}"' for c in cases.columns)
            con.execute(f"INSERT INTO case_runs ({columns}) SELECT * FROM _hb_cases")
            if len(tools):
                con.execute(f"INSERT INTO tool_calls ({', '.join(_TOOL_COLUMNS)}) SELECT * FROM _hb_tools")
            if len(events):
                cols = ", ".join(["bench_run_id", "case_run_id", *_EVENT_COLUMNS])
                con.execute(f"INSERT INTO events ({cols}) SELECT * FROM _hb_events")
            if self._messages:
                _write_transcripts(con, self._messages, self._prompts)
            commit(con)
        except WRITE_FAILURES as exc:
            _rollback(con)
            self.lost += len(self._cases)
            self._cases, self._tools, self._events = [], [], []  # not stored: --resume runs them again
            self._messages, self._prompts = [], {}
            raise exc if isinstance(exc, MetricsWriteError) else MetricsWriteError(exc) from exc
        except BaseException:
            _rollback(con)
            raise
        finally:
            for name in ("_hb_cases", "_hb_tools", "_hb_events"):
                try:
                    con.unregister(name)
                except duckdb.Error:
                    pass
        n = len(self._cases)
        self.cases_written += n
        self.rows_written += n + len(self._tools) + len(self._events)
        self._cases, self._tools, self._events = [], [], []
        self.rows_written += len(self._messages)
        self._prompts_written.update(self._prompts)
        self._messages, self._prompts = [], {}
        self._last_flush = time.monotonic()
        self.write_seconds += time.perf_counter() - t0
        return n


def _write_transcripts(
    con: duckdb.DuckDBPyConnection, messages: list[tuple[Any, ...]], prompts: dict[str, str]
) -> None:
    """Insert buffered transcript rows, and the prompts not stored yet (inside the writer's transaction)."""
    from runners.store.transcripts import MESSAGE_COLUMNS

    frame = pd.DataFrame(messages, columns=MESSAGE_COLUMNS, dtype=object)
    con.register("_hb_messages", frame)
    # Scanned as text and cast by the INSERT to the table's types: skips DuckDB's per-column sampling of
    # Python objects (measured: half the cost of this insert).
    con.execute("SET pandas_analyze_sample = 0")
    try:
        con.execute(f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS)}) SELECT * FROM _hb_messages")
    finally:
        con.execute("RESET pandas_analyze_sample")
        con.unregister("_hb_messages")
    if prompts:  # one statement (executemany costs ~1 ms a row); prompts already stored are skipped
        con.register("_hb_prompts", pd.DataFrame(list(prompts.items()), columns=["prompt_hash", "content"]))
        try:
            con.execute(
                "INSERT INTO prompts SELECT * FROM _hb_prompts"
                " WHERE prompt_hash NOT IN (SELECT prompt_hash FROM prompts)"
            )
        finally:
            con.unregister("_hb_prompts")
