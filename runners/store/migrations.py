"""The metrics database's schema history: one list of statements per schema version, applied in order, and the
settings columns and views brought up to date at every writer connect.

The settings columns of `bench_runs` (every declared setting) and `case_runs` (every sweepable one)
and the analyst views come from `runners/plan/settings.py`: at every writer connect, a column missing
for a declared setting is added (`ADD COLUMN IF NOT EXISTS`) and the views are recreated, so a
setting declared later appears without a migration.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator

import duckdb

from runners.plan import settings
from runners.plan.options import DeclaredColumns, declared_columns
from runners.store.catalog import catalog_columns
from runners.store.declared_columns import RENAMED_COLUMNS
from runners.store.errors import MetricsDbError
from runners.store.runs import store_settings
from runners.store.views import VIEWS, view_statements

__all__ = [
    "SCHEMA_VERSION", "check_version", "current_version", "ensure_settings_columns", "migrate", "outdated", "prepare",
]  # fmt: skip

SCHEMA_VERSION = 11

Step = str | Callable[[duckdb.DuckDBPyConnection], None]
"""A migration step: a statement, or a function for what SQL cannot say (rewriting stored JSON)."""

_MIGRATIONS: dict[int, list[Step]] = {
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
    # v6: typed events and run errors. Each event class's fields are columns (schema.event_columns; a
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
    # v8: where a bench run's case runs come from. NULL: run by the bench (every run written before v8 was);
    # `imported`: runs observed elsewhere and read from their traces (`harness-bench import`), without expectations.
    8: [
        "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS source VARCHAR",
    ],
    # v9: two settings take the library's names (HarnessConfig's) in columns and stored settings: `max_tool_calls`
    # becomes `max_tool_invocations`, `max_tokens` (a run total, read as a chat request's per-response cap)
    # becomes `max_total_tokens`. The views name the columns, so they go first (recreated at connect).
    9: [
        *(f"DROP VIEW IF EXISTS {view}" for view in VIEWS),
        lambda con: _rename_settings(con, RENAMED_COLUMNS),
    ],
    # v10: two verdicts instead of one. `outcome_passed`: the outcome, fallback kind, root-cause words and the
    # Harness's invariants (any agent); `trajectory_passed`: the reference trajectory's bounds (a scripted run at the
    # default thresholds and budgets; NULL where they do not apply). `passed` is both where both apply. Rows written
    # before v10 were judged on everything at once: their two new columns stay NULL (not known apart).
    # `tool_calls.carries_evidence`: whether a completed call's records carry the case's evidence, the truth an
    # agent's gain tag is scored against (NULL: not known).
    10: [
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS outcome_passed BOOLEAN",
        "ALTER TABLE case_runs ADD COLUMN IF NOT EXISTS trajectory_passed BOOLEAN",
        "ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS carries_evidence BOOLEAN",
    ],
    # v11: `tag_probes`, one row per probe of `harness-bench tag-probe` (its case run is a `case_runs` row whose `epoch`
    # is the step probed): the model's answer (TAGGED, UNTAGGED, DRAFT, INVALID_DRAFT, NO_ANSWER), the tag applied,
    # what a Draft implies, and the observation's truth grade as the case declared it when the probe ran.
    11: [
        """CREATE TABLE IF NOT EXISTS tag_probes (bench_run_id VARCHAR, case_run_id VARCHAR PRIMARY KEY,
            case_id VARCHAR, step INTEGER, tool_call_id VARCHAR, answer VARCHAR, tag VARCHAR, implied VARCHAR,
            grade VARCHAR)""",
    ],
}


def _rename_settings(con: duckdb.DuckDBPyConnection, renamed: dict[str, str]) -> None:
    """Rename settings' columns where a table has them (`bench_runs` gets its settings columns at connect, so a
    file older than v3 has none yet) and their keys in the stored JSON."""
    catalog = catalog_columns(con)
    for table in ("case_runs", "bench_runs"):
        present = catalog.get(table, set())
        for old, new in renamed.items():
            if old in present and new not in present:
                con.execute(f'ALTER TABLE {table} RENAME COLUMN "{old}" TO "{new}"')
    _rename_stored_keys(con, renamed)


def _rename_stored_keys(con: duckdb.DuckDBPyConnection, renamed: dict[str, str]) -> None:
    """Rename setting keys in the stored JSON that `--resume` reads back: a bench run's settings, a sweep's grid
    axes and the settings its shared options hold."""

    def keyed(values: dict[str, object]) -> dict[str, object]:
        return {renamed.get(k, k): v for k, v in values.items()}

    def rewrite(table: str, key: str, column: str, change: Callable[[dict[str, object]], dict[str, object]]) -> None:
        rows = con.execute(f"SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL").fetchall()
        for row_key, text in rows:
            try:
                values = json.loads(text)
            except ValueError:
                continue  # an unreadable row stays as it was: resume names it, as before
            if isinstance(values, dict):
                con.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", [json.dumps(change(values)), row_key])

    def options(values: dict[str, object]) -> dict[str, object]:
        inner = values.get("settings")
        return {**values, "settings": keyed(inner)} if isinstance(inner, dict) else values

    rewrite("bench_runs", "bench_run_id", "settings_json", keyed)
    rewrite("sweeps", "sweep_id", "grid_json", keyed)
    rewrite("sweeps", "sweep_id", "options_json", options)


_REQUIRED_TABLES = ("bench_runs", "case_runs", "tool_calls", "events")


def _columns_of(con: duckdb.DuckDBPyConnection, relation: str) -> set[str] | None:
    """The columns of view `relation` as it binds today; None when there is none by that name or it no longer binds
    (the catalog lists a view's columns as they were when it was created). Outside a transaction only: a missing
    name fails the query, which would abort the caller's transaction."""
    try:
        cur = con.execute(f'SELECT * FROM "{relation}" LIMIT 0')
    except (duckdb.CatalogException, duckdb.BinderException):
        return None
    return {d[0] for d in cur.description or ()}


def outdated(con: duckdb.DuckDBPyConnection, catalog: dict[str, set[str]] | None = None) -> bool:
    """Whether the database lacks what this harness-bench reads: a newer schema version's tables or a
    column of a setting declared since it was written (`catalog`: `catalog_columns(con)` when the caller has it)."""
    catalog = catalog_columns(con) if catalog is None else catalog
    version = _catalog_version(con, set(catalog))
    if version is None or version < SCHEMA_VERSION:
        return True
    wanted = (("bench_runs", settings.bench_run_columns()), ("case_runs", settings.case_run_columns()))
    for table, columns in wanted:
        present = catalog.get(table, set())
        if any(name not in present for name, _ in columns):
            return True
    return False


def current_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The file's schema version, None when it has no schema_version table (a new or a foreign file). Outside a
    transaction only (a missing table fails the query, which would abort the caller's transaction);
    `_catalog_version` answers inside one."""
    try:
        row = con.execute("SELECT max(version) FROM schema_version").fetchone()
    except duckdb.CatalogException:
        return None
    return int(row[0]) if row and row[0] is not None else None


def _catalog_version(con: duckdb.DuckDBPyConnection, tables: set[str]) -> int | None:
    """`current_version` inside a transaction: asked only when the catalog's table names hold schema_version, so
    its query cannot fail."""
    return current_version(con) if "schema_version" in tables else None


def check_version(con: duckdb.DuckDBPyConnection, target: str) -> dict[str, set[str]]:
    """Refuse a file that is no harness-bench database, a newer one's or an incomplete one; returns its catalog
    (`catalog_columns`), which `outdated` reads too."""
    catalog = catalog_columns(con)
    version = _catalog_version(con, set(catalog))
    if version is None:
        raise MetricsDbError(f"{target} holds no harness-bench metrics (no schema_version table)")
    if version > SCHEMA_VERSION:
        raise MetricsDbError(
            f"{target} has schema version {version}, newer than this harness-bench ({SCHEMA_VERSION}); upgrade it"
        )
    _check_complete(target, version, set(catalog))
    return catalog


def _check_complete(target: str, version: int, tables: set[str]) -> None:
    """A schema_version row without the tables it promises (`tables`: the catalog's): a file that was never a whole
    database."""
    missing = [t for t in _REQUIRED_TABLES if t not in tables]
    if missing:
        raise MetricsDbError(
            f"{target} says schema version {version} but has no {', '.join(missing)} table: not a complete"
            " harness-bench database; use another --db"
        )


def prepare(con: duckdb.DuckDBPyConnection, target: str = "<db>", columns: DeclaredColumns | None = None) -> None:
    """What a writer's connection needs before its first row: `migrate`, then `ensure_settings_columns` (`columns`:
    the declared ones, a run's plan has them; None: today's declaration). A new database gets both in one
    transaction — its creation is one commit instead of a dozen (a third of the time a one-case run spends), and a
    file whose creation failed holds no half-made schema. Once the history has given a process one new database, its
    later empty new files get that schema at once (`_FreshSchema`)."""
    declared = columns or declared_columns()
    tables = _table_names(con)
    if _catalog_version(con, tables) is not None:
        migrate(con, target, tables=tables)
        ensure_settings_columns(con, columns=declared)
        return
    with _transaction(con):
        fresh = _fresh_schema(declared)
        if fresh is not None and not _table_names(con):  # an empty file (anything else: the history's checks)
            fresh.create(con)
            return
        migrate(con, target, transaction=False)
        ensure_settings_columns(con, transaction=False, columns=declared)
        _FRESH[:] = [_FreshSchema.of(con, declared)]


@dataclasses.dataclass(frozen=True)
class _FreshSchema:
    """What every migration and `ensure_settings_columns` leave in a new database, as the statements that create it
    at once: a new file opens in 35 instead of 65 ms, connection included (the 80-odd statements of the whole
    history were most of a new file's creation, paid again by a process that writes many, as the tests do). It
    holds for the migrations and the declared settings it was read under, and is read again when either differs."""

    migrations: dict[int, list[Step]]
    """The schema history it was read under (the object itself: a replaced history is another schema)."""
    declared: DeclaredColumns
    """The declared settings' columns and the swept names it was read under."""
    statements: tuple[str, ...]
    """Each table's and then each view's CREATE statement, in creation order."""
    versions: tuple[int, ...]
    """The schema_version rows' versions."""

    @staticmethod
    def of(con: duckdb.DuckDBPyConnection, declared: DeclaredColumns) -> _FreshSchema:
        """The schema `con`'s new database was just given (inside its creating transaction), under `declared`."""
        mine = "WHERE database_name = current_database() AND NOT internal ORDER BY"
        tables = con.execute(f"SELECT sql FROM duckdb_tables() {mine} table_oid").fetchall()
        views = con.execute(f"SELECT sql FROM duckdb_views() {mine} view_oid").fetchall()
        versions = con.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        return _FreshSchema(_MIGRATIONS, declared, tuple(str(r[0]) for r in (*tables, *views)),
                            tuple(int(r[0]) for r in versions))  # fmt: skip

    def create(self, con: duckdb.DuckDBPyConnection) -> None:
        """Give `con`'s empty new database this schema (inside the caller's transaction)."""
        for statement in self.statements:
            con.execute(statement)
        # one statement: executemany runs the insert once a row (a millisecond of a new file's few dozen)
        con.execute("INSERT INTO schema_version SELECT unnest(?::INTEGER[]), now()", [list(self.versions)])


_FRESH: list[_FreshSchema] = []
"""The schema this process last gave a new database through the history (at most one entry)."""


def _fresh_schema(declared: DeclaredColumns) -> _FreshSchema | None:
    """The schema a new database is given at once, if this process has read it under today's migrations and
    `declared` columns (else None: the history is applied, and read)."""
    if not _FRESH:
        return None
    fresh = _FRESH[0]
    if fresh.migrations is not _MIGRATIONS or fresh.declared != declared:
        _FRESH.clear()
        return None
    return fresh


@contextlib.contextmanager
def _transaction(con: duckdb.DuckDBPyConnection, *, begin: bool = True) -> Iterator[None]:
    """BEGIN … COMMIT around the block (ROLLBACK when it raises); nothing when `begin` is False (the caller's)."""
    if not begin:
        yield
        return
    con.execute("BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def migrate(
    con: duckdb.DuckDBPyConnection, target: str = "<db>", upto: int = SCHEMA_VERSION, *, transaction: bool = True,
    tables: set[str] | None = None,
) -> int:  # fmt: skip
    """Apply missing migrations (each in one transaction, or all in the caller's when `transaction` is False) up
    to `upto`; refuse a foreign or newer database (`tables`: `_table_names(con)` when the caller has just read it)."""
    tables = _table_names(con) if tables is None else tables  # a catalog query: nothing fails in a transaction
    version = _catalog_version(con, tables)
    if version is None:
        if tables - {"schema_version"}:
            raise MetricsDbError(
                f"{target} already holds tables {sorted(tables)[:5]} from another program; use a new --db file"
            )
        con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMP)")
    elif version > SCHEMA_VERSION:
        raise MetricsDbError(
            f"{target} has schema version {version}, newer than this harness-bench ({SCHEMA_VERSION}); upgrade it"
        )
    else:
        _check_complete(target, version, tables)
    for v in range(int(version or 0) + 1, upto + 1):
        with _transaction(con, begin=transaction):
            for step in _MIGRATIONS[v]:
                if isinstance(step, str):
                    con.execute(step)
                else:
                    step(con)
            con.execute("INSERT INTO schema_version VALUES (?, now())", [v])
    return upto


def _table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The names of the tables and views of the connection's own database (`catalog_columns`)."""
    return set(catalog_columns(con))


def ensure_settings_columns(
    con: duckdb.DuckDBPyConnection, *, transaction: bool = True, columns: DeclaredColumns | None = None
) -> None:
    """Idempotent: a column per declared setting and kept option (bench_runs) and per sweepable setting (case_runs),
    legacy bench runs given their settings, and the views recreated when they lack a swept setting — in one
    transaction, or in the caller's when `transaction` is False (`columns`: the declared ones; None: today's)."""
    existing = catalog_columns(con)
    if transaction:  # no caller's transaction: each view asked how it binds today (see `_columns_of`)
        for view in VIEWS:
            existing[view] = _columns_of(con, view) or set()
    declared = columns or declared_columns()
    missing = [(table, name, sql_type)
               for table, columns in (("bench_runs", declared.bench_columns), ("case_runs", declared.case_columns))
               for name, sql_type in columns if name not in existing.get(table, set())]  # fmt: skip
    swept = list(declared.swept)
    keys = {"bench_run_id", "sweep_id", *swept}
    stale_views = any(not keys <= existing.get(view, set()) for view in VIEWS)
    legacy = con.execute(
        "SELECT bench_run_id, config_json, model, base_url FROM bench_runs WHERE settings_json IS NULL"
    ).fetchall()
    if not (missing or stale_views or legacy):
        return  # an up-to-date file: no transaction at all
    with _transaction(con, begin=transaction):
        for table, name, sql_type in missing:
            con.execute(f'ALTER TABLE {table} ADD COLUMN IF NOT EXISTS "{name}" {sql_type}')
        _backfill_settings(con, legacy)
        if stale_views:
            for statement in view_statements(swept):
                con.execute(statement)


def _backfill_settings(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, str, str, str | None]]) -> None:
    """Bench runs written before schema v3 get their settings from config_json, model and base_url."""
    for bench_run_id, config_json, model, base_url in rows:
        try:
            run = settings.legacy_settings(config_json, model, base_url)
        except ValueError:
            continue  # unreadable legacy row: left without settings; resume says so
        store_settings(con, bench_run_id, run.stored_values(), run.to_json())
