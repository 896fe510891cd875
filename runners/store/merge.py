"""`harness-bench merge OUT SHARD…`: shard files (or any harness-bench files) into one database.

Rules, all checked before OUT is created or changed (a refusal is one line, exit 2):

- every input is a harness-bench DuckDB file at this program's schema version (OUT may be older: it is
  migrated), with no column this program does not know;
- copies of one bench run (the same id in several files, OUT included) agree on what was measured:
  every setting but the endpoint ones (`settings_json`), label, sweep, evaluation-set hash, case
  selection, epochs, record mode, whether cassettes were used, the agent loop (`--agent`), whether
  transcripts were stored (`--no-transcripts`), and the shard count; copies of one
  sweep agree on the grid and the shared options. A shard run under the same `--run-id` with other
  settings is therefore refused, never added as a second run;
- unless `--partial`, every sharded run must end up with all its shards 1..N, each completed, and every
  other run completed: a CI job that lost a shard fails instead of gating on a subset.

Then, in one transaction (all or nothing): bench runs, sweeps and shard rows not yet in OUT are
copied; case runs are copied by `case_run_id` when OUT does not hold them yet, each with its
tool_calls and events (so no case run is duplicated and merging the same shard twice adds nothing;
of two copies of one case run, the one met first — OUT, then the inputs in order — is kept). A merged
run's planned count is the sum of its shards', its status `completed` when all N shards are there and
completed (else `failed` if one failed, else `interrupted`), and a sweep is `completed` when all its
grid points are.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from harness import CancellationToken
from runners.plan import settings
from runners.plan.options import BenchOptions
from runners.plan.shard import RunStatus
from runners.store._host import quoted_path
from runners.store.catalog import catalog_columns
from runners.store.connection import check_database_file, connect, connect_in_memory
from runners.store.errors import MetricsDbError
from runners.store.migrations import SCHEMA_VERSION, current_version
from runners.store.output_files import replacing, same_file

TABLES = ("bench_runs", "sweeps", "shards", "case_runs", "tool_calls", "events", "messages", "prompts")
# bench_runs fields that say what was measured; copies of one run must agree on all of them
PLAN_FIELDS = ("label", "sweep_id", "evalset_hash", "case_ids_json", "epochs", "record_mode")
# run-option columns copies of one run must agree on too: one merged row cannot say both loops, or both
FIT_COLUMNS = ("agent", "transcripts")
_RANK = {RunStatus.COMPLETED: 3, RunStatus.INTERRUPTED: 2, RunStatus.RUNNING: 1, RunStatus.FAILED: 0}


class MergeError(ValueError):
    """The files cannot be merged (exit 2); the message names the file, the id and the difference."""


class MergeInterrupted(Exception):
    """Ctrl-C or SIGTERM arrived before the merge committed: OUT is as it was (or, if new, absent)."""

    def __init__(self, out: Path, *, existed: bool) -> None:
        state = f"{out} is unchanged" if existed else f"{out} was not created"
        super().__init__(f"interrupted before the merge was committed: nothing was merged, {state}")


@dataclass
class _Copy:
    """One bench run as one file holds it."""

    file: Path
    """The file."""
    plan: dict[str, Any]
    """What was measured (compared across copies)."""
    status: str
    """Its status in that file."""
    shards: dict[int, tuple[int, str]]
    """Shard index -> (shard count, status) of the shard rows in that file."""


@dataclass
class _SweepCopy:
    """One sweep as one file holds it."""

    file: Path
    """The file."""
    grid: dict[str, list[Any]]
    """The grid axes."""
    shared: dict[str, Any]
    """The shared options, minus shard and endpoint settings (compared across copies)."""


@dataclass
class MergeSummary:
    """What a merge did."""

    out: Path
    """The merged database."""
    inputs: list[Path]
    """The files merged in (duplicates dropped)."""
    case_runs_added: int = 0
    """Case runs copied into OUT."""
    case_runs_present: int = 0
    """Case runs of the inputs that OUT already held (skipped)."""
    runs: list[str] = field(default_factory=list)
    """One line per bench run touched: id, shards held, case runs, status."""
    sweeps: list[str] = field(default_factory=list)
    """One line per sweep touched: id, grid points, status."""


def _expected_columns() -> dict[str, set[str]]:
    """The columns of every table as this program writes them (migrations + declared settings)."""
    con = connect_in_memory("<the expected schema>")
    try:
        return _columns(con)
    finally:
        con.close()


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    """The columns of each of TABLES the connection's database has."""
    return {table: columns for table, columns in catalog_columns(con).items() if table in TABLES}


def _identity(row: dict[str, Any]) -> str:
    """The measured settings of a stored bench run (endpoint settings dropped), as canonical JSON."""
    decl = settings.declaration()
    if row.get("settings_json"):
        values = json.loads(row["settings_json"])
    else:  # written before schema v3 (only OUT can be that old)
        values = settings.legacy_settings(row.get("config_json"), row.get("model"), row.get("base_url")).values()
    known = set(decl.names())
    kept = {k: v for k, v in values.items() if k not in known or not decl[k].endpoint}
    return json.dumps(kept, sort_keys=True)


def _plan(row: dict[str, Any]) -> dict[str, Any]:
    plan = {f: row.get(f) for f in PLAN_FIELDS}
    plan["settings"] = _identity(row)
    plan["cassettes"] = bool(row.get("cassettes"))
    # the agent loop and whether transcripts were stored, as `--resume` reads them back (a NULL column: the old
    # default), so a native shard and a NULL-agent one agree while an openai-agents shard does not
    for concern in BenchOptions.concerns().values():
        for d in concern.declared():
            if d.column in FIT_COLUMNS:
                plan[d.column] = d.encode(d.decode(row.get(d.column)))
    return plan


def _shared(options_json: str) -> dict[str, Any]:
    saved: dict[str, Any] = json.loads(options_json)
    decl = settings.declaration()
    endpoint = {s.name for s in decl.settings if s.endpoint}
    saved.pop("shard", None)
    # where things were on that machine, not what was measured; `model` is in `settings` (older files stored it twice)
    for key in ("model", "base_url", "evalsets", "cassettes"):
        saved.pop(key, None)
    if isinstance(saved.get("settings"), dict):
        saved["settings"] = {k: v for k, v in saved["settings"].items() if k not in endpoint}
    return saved


def _dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _read(
    path: Path, *, is_out: bool, expected: dict[str, set[str]]
) -> tuple[list[tuple[str, _Copy]], dict[str, _SweepCopy]]:
    """Validate one file and read its bench runs and sweeps (read-only)."""
    try:
        con = connect(path, read_only=True, upgrade=False)  # the file's own version decides
    except MetricsDbError as exc:
        raise MergeError(str(exc).replace("; use another --db", "")) from None
    try:
        version = current_version(con)
        if not is_out and version != SCHEMA_VERSION:
            raise MergeError(
                f"{path} has schema version {version}, this harness-bench writes {SCHEMA_VERSION}: shards must be"
                " written by the same harness-bench version"
            )
        present = _columns(con)
        if not is_out:
            for table in TABLES:
                unknown = sorted(present.get(table, set()) - expected[table])
                if unknown:
                    raise MergeError(
                        f"{path}: table {table} has column(s) {', '.join(unknown)} unknown to this harness-bench"
                        " (written by another version?)"
                    )
        shard_rows: dict[str, dict[int, tuple[int, str]]] = {}
        if "shards" in present:
            for r in con.execute("SELECT bench_run_id, shard_index, shard_count, status FROM shards").fetchall():
                shard_rows.setdefault(str(r[0]), {})[int(r[1])] = (int(r[2]), str(r[3]))
        copies = [
            (
                str(row["bench_run_id"]),
                _Copy(path, _plan(row), str(row["status"]), shard_rows.get(str(row["bench_run_id"]), {})),
            )
            for row in _dicts(con, "SELECT * FROM bench_runs ORDER BY bench_run_id")
        ]
        sweeps: dict[str, _SweepCopy] = {}
        if "sweeps" in present:
            for row in _dicts(con, "SELECT sweep_id, grid_json, options_json FROM sweeps"):
                sweeps[str(row["sweep_id"])] = _SweepCopy(
                    path, json.loads(row["grid_json"]), _shared(row["options_json"])
                )
    finally:
        con.close()
    return copies, sweeps


def _by_id(copies: list[tuple[str, _Copy]]) -> dict[str, list[_Copy]]:
    out: dict[str, list[_Copy]] = {}
    for run_id, copy in copies:
        out.setdefault(run_id, []).append(copy)
    return out


def _describe_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    for key in a:
        if a[key] == b[key]:
            continue
        if key == "settings":
            sa, sb = json.loads(a[key]), json.loads(b[key])
            diff = [k for k in sorted(set(sa) | set(sb)) if sa.get(k) != sb.get(k)]
            return "; ".join(f"{k} {sb.get(k)!r} vs {sa.get(k)!r}" for k in diff[:3])
        return f"{key} {b[key]!r} vs {a[key]!r}"
    return "?"


def _best(statuses: Sequence[str]) -> str:
    return max(statuses, key=lambda s: _RANK.get(RunStatus(s), 0) if s in RunStatus._value2member_map_ else -1)


def _shard_status(count: int, shards: dict[int, str]) -> str:
    if len(shards) == count and all(s == RunStatus.COMPLETED for s in shards.values()):
        return RunStatus.COMPLETED
    if any(s == RunStatus.FAILED for s in shards.values()):
        return RunStatus.FAILED
    return RunStatus.INTERRUPTED


def _ranges(indexes: Sequence[int]) -> str:
    return ",".join(str(i) for i in sorted(indexes))


def merge(
    out: Path, inputs: Sequence[Path], *, partial: bool = False, cancellation: CancellationToken | None = None
) -> MergeSummary:
    """Merge `inputs` into `out` (created if missing); MergeError before anything is written. Once `cancellation`
    is set (Ctrl-C, SIGTERM) the merge stops at its next statement with MergeInterrupted, OUT as it was."""
    if not inputs:
        raise MergeError("merge: give at least one shard file after OUT")
    unique: list[Path] = []
    for p in inputs:  # the same file under two names (a hard link, a symlink, ../x) counts once
        if not any(same_file(p, u) for u in unique):
            unique.append(p)
    both = next((p for p in unique if same_file(p, out)), None)
    if both is not None:
        named = "" if both == out else f" (as {both})"
        raise MergeError(f"{out} is both OUT and an input{named}; merge into another file")
    try:
        check_database_file(out, must_exist=False, writing=True, flag="OUT")
    except MetricsDbError as exc:
        raise MergeError(str(exc).replace("; use another --db", "")) from None
    expected = _expected_columns()

    # 1. read and validate everything (read-only)
    copies: list[tuple[str, _Copy]] = []
    sweep_copies: dict[str, list[_SweepCopy]] = {}
    files = ([out] if out.exists() else []) + unique
    out_exists = out.exists()
    for i, path in enumerate(files):
        if cancellation is not None and cancellation.cancelled:
            raise MergeInterrupted(out, existed=out_exists)
        file_copies, file_sweeps = _read(path, is_out=out_exists and i == 0, expected=expected)
        copies += file_copies
        for sid, sc in file_sweeps.items():
            sweep_copies.setdefault(sid, []).append(sc)
    runs = _by_id(copies)
    # the runs and sweeps the inputs bring (OUT's others are left as they are)
    from_inputs = copies[sum(1 for _, c in copies if out_exists and c.file == out) :]
    input_ids = {run_id for run_id, _ in from_inputs}
    input_sweeps = sorted(
        {sid for sid, group in sweep_copies.items() if any(c.file != out or not out_exists for c in group)}
    )
    for run_id, group in runs.items():
        first = group[0]
        for other in group[1:]:
            if other.plan != first.plan:
                raise MergeError(
                    f"{other.file}: bench run {run_id} was run with other settings than in {first.file}"
                    f" ({_describe_difference(first.plan, other.plan)}); shards of one run must share every"
                    " setting, the case selection and the epochs"
                )
            if bool(other.shards) != bool(first.shards):
                sharded, whole = (other, first) if other.shards else (first, other)
                raise MergeError(
                    f"bench run {run_id} is sharded in {sharded.file} but unsharded in {whole.file}; merge only"
                    " shards of one sharded run"
                )
            counts = {n for n, _ in other.shards.values()} | {n for n, _ in first.shards.values()}
            if len(counts) > 1:
                raise MergeError(
                    f"{other.file}: bench run {run_id} was split into {sorted(counts)} shards in different files;"
                    " every shard of one run takes the same --shard I/N count"
                )
    for sid, sgroup in sweep_copies.items():
        points = math.prod(len(v) for v in sgroup[0].grid.values())
        present = {run_id for run_id, c in copies if c.plan["sweep_id"] == sid}
        if not partial and sid in input_sweeps and len(present) < points:
            raise MergeError(
                f"sweep {sid}: {len(present)} of its {points} grid points are in the files (a shard stopped before"
                f" reaching the others?); resume it with `harness-bench sweep --resume {sid}`, or --partial"
            )
        for sweep_copy in sgroup[1:]:
            if sweep_copy.grid != sgroup[0].grid:
                raise MergeError(
                    f"{sweep_copy.file}: sweep {sid} has grid {sweep_copy.grid}, {sgroup[0].file} has {sgroup[0].grid}"
                )
            if sweep_copy.shared != sgroup[0].shared:
                diff = [k for k in sorted(set(sweep_copy.shared) | set(sgroup[0].shared))
                        if sweep_copy.shared.get(k) != sgroup[0].shared.get(k)]  # fmt: skip
                raise MergeError(
                    f"{sweep_copy.file}: sweep {sid} differs from {sgroup[0].file} in {', '.join(diff)}; shards of one"
                    " sweep must share every option"
                )

    # what OUT will hold: per run, the best status of each shard over every copy
    final: dict[str, tuple[int | None, dict[int, str], str]] = {}
    for run_id, group in runs.items():
        shards: dict[int, str] = {}
        count: int | None = None
        for c in group:
            for idx, (n, st) in c.shards.items():
                count = n
                shards[idx] = _best([shards[idx], st]) if idx in shards else st
        status = _shard_status(count, shards) if count else _best([c.status for c in group])
        final[run_id] = (count, shards, status)
    if not partial:
        for run_id in sorted(input_ids):
            count, shards, status = final[run_id]
            if count:
                missing = sorted(set(range(1, count + 1)) - set(shards))
                if missing:
                    raise MergeError(
                        f"bench run {run_id}: shard(s) {_ranges(missing)} of {count} missing (have"
                        f" {_ranges(list(shards)) or 'none'}); give every shard's file, or --partial to merge what"
                        " is there"
                    )
                unfinished = sorted(i for i, s in shards.items() if s != RunStatus.COMPLETED)
                if unfinished:
                    where = next(c.file for c in runs[run_id] if unfinished[0] in c.shards)
                    raise MergeError(
                        f"bench run {run_id}: shard {unfinished[0]}/{count} is {shards[unfinished[0]]} in {where};"
                        f" finish it with `harness-bench run --resume {run_id} --db {where}`, or --partial"
                    )
            elif status != RunStatus.COMPLETED:
                where = runs[run_id][0].file
                raise MergeError(
                    f"bench run {run_id} is {status} in {where}; finish it with --resume {run_id}, or --partial"
                )

    # 2. write, all or nothing: an existing OUT takes one transaction; a new OUT is built beside it and renamed
    # into place once committed, so a failure or an interrupt leaves no OUT (not even an empty one)
    if cancellation is not None and cancellation.cancelled:
        raise MergeInterrupted(out, existed=out_exists)
    summary = MergeSummary(out, unique)
    if out_exists:
        _write(out, unique, final, input_ids, input_sweeps, summary, cancellation)
    else:
        with replacing(out, companions=(".wal",)) as building:
            _write(building, unique, final, input_ids, input_sweeps, summary, cancellation)
    return summary


def _write(
    target: Path,
    inputs: list[Path],
    final: dict[str, tuple[int | None, dict[int, str], str]],
    input_ids: set[str],
    input_sweeps: list[str],
    summary: MergeSummary,
    cancellation: CancellationToken | None,
) -> None:
    """Copy the inputs into `target` in one transaction, rolled back when an interrupt arrives before COMMIT."""

    def stop_if_cancelled() -> None:
        if cancellation is not None and cancellation.cancelled:
            raise MergeInterrupted(summary.out, existed=target == summary.out)

    con = connect(target)
    aliases: list[str] = []
    try:
        # the inputs are attached to the store's one instance, which outlives this connection and whose aliases are
        # the whole process's: named after OUT's own, and each one attached is detached whatever ends the merge (an
        # input that fails to attach included)
        out = str(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
        for i, path in enumerate(inputs):
            alias = f'"{out}_in_{i}"'
            con.execute(f"ATTACH {quoted_path(path)} AS {alias} (READ_ONLY)")
            aliases.append(alias)
        con.execute("BEGIN")
        committed = False
        try:
            for alias in aliases:
                stop_if_cancelled()
                _copy(con, alias, summary)
            _settle(con, final, summary, sorted(input_ids))
            _settle_sweeps(con, input_sweeps, summary)
            stop_if_cancelled()
            con.execute("COMMIT")
            committed = True
        except BaseException:
            if not committed:  # the error that ended the transaction is the one to report, not ROLLBACK's
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
            raise
    finally:
        try:
            for alias in aliases:
                con.execute(f"DETACH {alias}")
        finally:
            con.close()


def _copy(con: duckdb.DuckDBPyConnection, alias: str, summary: MergeSummary) -> None:
    """Copy what OUT lacks from one attached input (inside the merge transaction)."""
    src = f"{alias}.main"
    con.execute(
        f"INSERT INTO bench_runs BY NAME SELECT * FROM {src}.bench_runs "
        "WHERE bench_run_id NOT IN (SELECT bench_run_id FROM bench_runs)"
    )
    con.execute(
        f"INSERT INTO sweeps BY NAME SELECT * FROM {src}.sweeps WHERE sweep_id NOT IN (SELECT sweep_id FROM sweeps)"
    )
    con.execute(
        f"INSERT INTO shards BY NAME SELECT * FROM {src}.shards s WHERE NOT EXISTS "
        "(SELECT 1 FROM shards m WHERE m.bench_run_id = s.bench_run_id AND m.shard_index = s.shard_index)"
    )
    # a shard finished elsewhere (resumed in its own file) replaces an unfinished copy
    con.execute(
        f"UPDATE shards SET status = s.status, finished_at = s.finished_at, planned_case_runs = s.planned_case_runs,"
        f" host = s.host FROM {src}.shards s WHERE shards.bench_run_id = s.bench_run_id"
        " AND shards.shard_index = s.shard_index AND s.status = 'completed' AND shards.status <> 'completed'"
    )
    con.execute("CREATE OR REPLACE TEMP TABLE hb_new_case_runs (case_run_id VARCHAR)")
    con.execute(
        f"INSERT INTO hb_new_case_runs SELECT case_run_id FROM {src}.case_runs "
        "WHERE case_run_id NOT IN (SELECT case_run_id FROM case_runs)"
    )
    added = con.execute("SELECT count(*) FROM hb_new_case_runs").fetchone()
    total = con.execute(f"SELECT count(*) FROM {src}.case_runs").fetchone()
    n_added = int(added[0]) if added else 0
    summary.case_runs_added += n_added
    summary.case_runs_present += (int(total[0]) if total else 0) - n_added
    new = "(SELECT case_run_id FROM hb_new_case_runs)"
    con.execute(f"INSERT INTO case_runs BY NAME SELECT * FROM {src}.case_runs WHERE case_run_id IN {new}")
    con.execute(f"INSERT INTO tool_calls BY NAME SELECT * FROM {src}.tool_calls WHERE case_run_id IN {new}")
    con.execute(f"INSERT INTO events BY NAME SELECT * FROM {src}.events WHERE case_run_id IN {new}")
    con.execute(f"INSERT INTO messages BY NAME SELECT * FROM {src}.messages WHERE case_run_id IN {new}")
    con.execute(
        f"INSERT INTO prompts BY NAME SELECT * FROM {src}.prompts"
        " WHERE prompt_hash NOT IN (SELECT prompt_hash FROM prompts)"
    )
    con.execute("DROP TABLE hb_new_case_runs")


def _settle(
    con: duckdb.DuckDBPyConnection,
    final: dict[str, tuple[int | None, dict[int, str], str]],
    summary: MergeSummary,
    touched: list[str],
) -> None:
    """Give every merged run its planned count, time span and status from its shards."""
    for run_id in touched:
        count, _, status = final[run_id]
        if count:
            con.execute(
                "UPDATE bench_runs SET planned_case_runs = s.planned, started_at = s.started, finished_at = s.finished,"
                " status = ? FROM (SELECT sum(planned_case_runs) AS planned, min(started_at) AS started,"
                " max(finished_at) AS finished FROM shards WHERE bench_run_id = ?) s WHERE bench_run_id = ?",
                [status, run_id, run_id],
            )
            held = [r[0] for r in con.execute(
                "SELECT shard_index FROM shards WHERE bench_run_id = ? ORDER BY 1", [run_id]).fetchall()]  # fmt: skip
            part = f"shards {_ranges(held)} of {count}"
        else:
            con.execute("UPDATE bench_runs SET status = ? WHERE bench_run_id = ?", [status, run_id])
            part = "unsharded"
        row = con.execute(
            "SELECT b.planned_case_runs, (SELECT count(*) FROM case_runs c WHERE c.bench_run_id = b.bench_run_id)"
            " FROM bench_runs b WHERE bench_run_id = ?",
            [run_id],
        ).fetchone()
        planned, have = (int(row[0] or 0), int(row[1])) if row else (0, 0)
        if status == RunStatus.COMPLETED and have != planned:  # never claim a run complete with rows missing
            con.execute("UPDATE bench_runs SET status = 'interrupted' WHERE bench_run_id = ?", [run_id])
            status = RunStatus.INTERRUPTED
        summary.runs.append(f"{run_id}: {part}, {have} of {planned} case runs, {status}")


def _settle_sweeps(con: duckdb.DuckDBPyConnection, sweep_ids: list[str], summary: MergeSummary) -> None:
    """A merged sweep is completed when every grid point is a completed bench run."""
    for sid in sweep_ids:
        row = con.execute("SELECT grid_json FROM sweeps WHERE sweep_id = ?", [sid]).fetchone()
        if row is None:
            continue
        points = math.prod(len(v) for v in json.loads(row[0]).values())
        done = con.execute(
            "SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FROM bench_runs WHERE sweep_id = ?", [sid]
        ).fetchone()
        completed, present = (int(done[0]), int(done[1])) if done else (0, 0)
        status = RunStatus.COMPLETED if completed == points else RunStatus.INTERRUPTED
        con.execute(
            "UPDATE sweeps SET status = ?, finished_at = (SELECT max(finished_at) FROM bench_runs WHERE sweep_id = ?)"
            " WHERE sweep_id = ?",
            [status, sid, sid],
        )
        summary.sweeps.append(f"{sid}: {completed} of {points} grid points completed ({present} present), {status}")
