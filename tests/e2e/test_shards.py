"""Shards across machines: `--shard I/N` partitions by stable ids, `merge` joins the
files into one run that equals the unsharded run, case by case and count by count; merging twice adds
nothing; a shard of another configuration, a foreign file or another schema version is refused (exit 2,
one line, nothing written). Real DuckDB files, the real CLI (in-process `main`, and one real process)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pytest

from runners.cli import main
from runners.plan.agent import AgentFramework
from runners.plan.options import BenchOptions
from runners.plan.run_plan import select_cases
from runners.plan.settings import RunSettings
from runners.plan.shard import ShardError, ShardSpec, identity_json, shard_of
from runners.run.bench import plan_run, run_bench
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep
from runners.store.connection import connect
from runners.store.migrations import SCHEMA_VERSION
from tests._db import open_read_only
from tests._rows import behaviour_query as _behaviour
from tests._rows import behaviour_rows
from tests._rows import query as _q

ROOT = Path(__file__).resolve().parents[2]
N = 4
EPOCHS = 2
RUN = "acc"
_rows = behaviour_rows
TABLES = ("case_runs", "tool_calls", "events")


def _reads(db: Path, queries: Mapping[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of each named query on the DuckDB file `db`, read over one read-only connection (each connection
    builds a DuckDB instance: a test reading several things of one file at one moment opens it once)."""
    con = open_read_only(db)
    try:
        return {name: con.execute(sql).fetchall() for name, sql in queries.items()}
    finally:
        con.close()


def _fingerprint(db: Path) -> str:
    """A hash of every row of every table (timing included): equal means nothing changed."""
    con = open_read_only(db)
    try:
        h = hashlib.sha256()
        for table in ("bench_runs", "sweeps", "shards", "case_runs", "tool_calls", "events"):
            rows = con.execute(f"SELECT * FROM {table}").fetchall()
            h.update(repr(sorted(map(repr, rows))).encode())
        return h.hexdigest()
    finally:
        con.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One unsharded run and its 4 shards (same --run-id), every built-in case × 2 epochs."""
    d = tmp_path_factory.mktemp("shards")
    paths = {"full": d / "full.duckdb", **{f"s{i}": d / f"shard-{i}.duckdb" for i in range(1, N + 1)}}
    run_bench(plan_run(BenchOptions.of(db=paths["full"], run_id=RUN, epochs=EPOCHS)))
    for i in range(1, N + 1):
        run_bench(plan_run(BenchOptions.of(db=paths[f"s{i}"], run_id=RUN, epochs=EPOCHS, shard=ShardSpec(i, N))))
    paths["merged"] = d / "merged.duckdb"
    assert main(["merge", str(paths["merged"]), *(str(paths[f"s{i}"]) for i in range(1, N + 1))]) == 0
    return paths


SMALL = ["empty_logs", "missing_context"]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """4 shards of a smaller run (two families × 2 epochs), for the refusals."""
    d = tmp_path_factory.mktemp("small")
    paths = {f"s{i}": d / f"shard-{i}.duckdb" for i in range(1, N + 1)}
    for i in range(1, N + 1):
        run_bench(plan_run(BenchOptions.of(db=paths[f"s{i}"], run_id=RUN, epochs=EPOCHS, evalsets=SMALL,
                                        shard=ShardSpec(i, N))))  # fmt: skip
    return paths


# -- the partition --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "needle"),
    [("0/4", "1-based"), ("5/4", "from 1 to 4"), ("1/0", "N must be"), ("2", "expected I/N"), ("a/b", "expected I/N"),
     ("1/10001", "N must be"), ("-1/4", "expected I/N")],
)  # fmt: skip
def test_bad_shard_values_are_refused(text: str, needle: str) -> None:
    with pytest.raises(ShardError, match=needle):
        ShardSpec.parse(text)


def test_partition_is_stable_disjoint_complete_and_independent_of_selection() -> None:
    cases = select_cases([], [])
    settings = RunSettings.of()
    identity = identity_json(settings)
    items = [(c, e) for e in range(1, 4) for c in cases]
    owners = {(c.id, e): shard_of(identity, c.id, e, N) for c, e in items}
    # every item in exactly one shard, each shard a fair share (hash mod N over 264 items)
    sizes = Counter(owners.values())
    assert sorted(sizes) == [1, 2, 3, 4] and sum(sizes.values()) == len(items)
    assert min(sizes.values()) >= len(items) // N // 2, sizes
    # the same item lands in the same shard whatever else is selected and in whatever order
    few = [c for c in cases if c.family.value == "empty_logs"]
    for spec in (ShardSpec(i, N) for i in range(1, N + 1)):
        chosen = {(c.id, e) for c in reversed(few) for e in range(1, 4) if spec.holds(identity, c.id, e)}
        assert chosen == {(c.id, e) for c in few for e in range(1, 4) if owners[(c.id, e)] == spec.index}
    # pinned: the partition is part of the file format (two machines, two Python processes must agree;
    # a salted hash() would not)
    assert [shard_of('{"a":1}', "case", e, 4) for e in (1, 2, 3, 4, 5)] == [1, 1, 4, 4, 3]
    # endpoint settings say where the model is reached: they never move an item to another shard
    moved = RunSettings.of().with_values({"model": "openai:m", "base_url": "http://a/v1"})
    elsewhere = moved.with_values({"base_url": "http://b/v1", "api_key_env": "OTHER"})
    assert identity_json(moved) == identity_json(elsewhere)
    assert identity_json(settings) != identity_json(settings.with_values({"no_gain_threshold": 3}))


# -- acceptance: 4 shards merged equal the unsharded run ------------------------------------------------
def test_four_shards_merged_equal_the_unsharded_run_case_by_case(built: dict[str, Path]) -> None:
    shard_counts = [_q(built[f"s{i}"], "SELECT count(*) FROM case_runs")[0][0] for i in range(1, N + 1)]
    assert all(n > 0 for n in shard_counts)
    # the run itself: one bench run, the same id, every setting, planned count and status
    cols = "bench_run_id, settings_json, planned_case_runs, status, epochs, evalset_hash, case_ids_json, label"
    views = ("v_pass_rate", "v_outcomes", "v_wasted_calls")
    both = {"count": "SELECT count(*) FROM case_runs", "run": f"SELECT {cols} FROM bench_runs",
            **{t: _behaviour(t) for t in TABLES}, **{v: f"SELECT * FROM {v} ORDER BY ALL" for v in views}}  # fmt: skip
    full = _reads(built["full"], both)
    merged = _reads(
        built["merged"], {**both, "shards": "SELECT shard_index, shard_count, status FROM shards ORDER BY 1"}
    )
    ((total,),) = full["count"]
    assert sum(shard_counts) == total == EPOCHS * len(select_cases([], []))
    for table in TABLES:
        full_rows, merged_rows = full[table], merged[table]
        assert len(full_rows) == len(merged_rows) > 0, table
        first = next((i for i, (a, b) in enumerate(zip(full_rows, merged_rows, strict=True)) if a != b), None)
        assert first is None, f"{table} row {first}: {full_rows[first]} != {merged_rows[first]}"
    assert merged["run"] == full["run"]
    assert merged["shards"] == [(i, N, "completed") for i in range(1, N + 1)]
    # the per-family table the CLI prints reads the same
    for view in views:
        assert merged[view] == full[view], view


def test_merging_the_same_shard_again_adds_nothing(built: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "again.duckdb"
    s = [str(built[f"s{i}"]) for i in range(1, N + 1)]
    # what `merge OUT` of the 4 shards writes: `built` ran that very command (a copy, as the merges below change it)
    shutil.copy(built["merged"], out)
    before = _fingerprint(out)
    assert main(["merge", str(out), s[1], s[1], s[2]]) == 0  # twice in one command, and again later
    assert main(["merge", str(out), *s]) == 0
    assert _fingerprint(out) == before
    counts = "SELECT count(*), count(DISTINCT case_run_id) FROM case_runs"
    merged = _reads(out, {"counts": counts, **{t: _behaviour(t) for t in TABLES}})  # OUT is not written below
    assert merged["counts"][0] == (EPOCHS * len(select_cases([], [])),) * 2
    # incremental merges reach the same database as one merge
    step = tmp_path / "step.duckdb"
    assert main(["merge", "--partial", str(step), s[3]]) == 0
    assert _q(step, "SELECT status FROM bench_runs") == [("interrupted",)], "3 of 4 shards missing"
    assert main(["merge", str(step), s[0], s[1], s[2]]) == 0
    stepped = _reads(step, {"status": "SELECT status FROM bench_runs", **{t: _behaviour(t) for t in TABLES}})
    assert stepped["status"] == [("completed",)]
    for table in TABLES:
        assert stepped[table] == merged[table]


# -- refusals: exit 2, one line, nothing written --------------------------------------------------------
def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def _refused(argv: list[str], needle: str, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _snapshot(root)
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert needle in lines[0], lines[0]
    assert _snapshot(root) == before, "nothing created or changed"


def _one_shard(db: Path, index: int = N, count: int = N, run_id: str = RUN, **opts: Any) -> Path:
    run_bench(plan_run(BenchOptions.of(db=db, run_id=run_id, shard=ShardSpec(index, count),
                           **{"epochs": EPOCHS, "evalsets": SMALL, **opts})))  # fmt: skip
    return db


def test_a_shard_of_another_configuration_is_refused(
    small: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    s = [str(small[f"s{i}"]) for i in range(1, N)]
    other = _one_shard(work / "threshold.duckdb", config=RunSettings.of().with_values({"no_gain_threshold": 3}).config)
    _refused(["merge", str(work / "out.duckdb"), *s, str(other)], "no_gain_threshold 3 vs 2", work, capsys)
    epochs = _one_shard(work / "epochs.duckdb", epochs=3)
    _refused(["merge", str(work / "out.duckdb"), *s, str(epochs)], "epochs 3 vs 2", work, capsys)
    fewer = _one_shard(work / "cases.duckdb", evalsets=["empty_logs"])  # another case selection
    _refused(["merge", str(work / "out.duckdb"), *s, str(fewer)], "evalset_hash", work, capsys)
    label = _one_shard(work / "label.duckdb", label="candidate")
    _refused(["merge", str(work / "out.duckdb"), *s, str(label)], "label 'candidate' vs None", work, capsys)
    count = _one_shard(work / "count.duckdb", index=3, count=3)
    _refused(["merge", str(work / "out.duckdb"), *s, str(count)], "[3, 4] shards", work, capsys)
    # …and into an existing merged file: it is left exactly as it was
    out = work / "merged.duckdb"
    assert main(["merge", str(out), *(str(small[f"s{i}"]) for i in range(1, N + 1))]) == 0
    _refused(["merge", str(out), str(other)], "no_gain_threshold 3 vs 2", work, capsys)
    assert _q(out, "SELECT count(*) FROM bench_runs") == [(1,)]


def test_a_shard_of_another_agent_loop_or_without_transcripts_is_refused(
    small: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One merged row cannot say both loops, nor that transcripts are stored when one shard stored none."""
    work = tmp_path / "w"
    work.mkdir()
    s = [str(small[f"s{i}"]) for i in range(1, N)]
    bare = _one_shard(work / "bare.duckdb", transcripts=False)
    _refused(["merge", str(work / "out.duckdb"), *s, str(bare)], "transcripts False vs True", work, capsys)
    loop = _one_shard(work / "loop.duckdb", agent=AgentFramework.OPENAI_AGENTS)
    _refused(["merge", str(work / "out.duckdb"), *s, str(loop)], "agent 'openai-agents' vs 'native'", work, capsys)
    assert main(["merge", str(work / "out.duckdb"), str(loop), *s]) == 2
    line = capsys.readouterr().err
    assert str(loop) in line and str(small["s1"]) in line, line  # both files named
    # a shard written before the column existed (NULL) is native: it merges with native shards
    legacy = work / "legacy.duckdb"
    legacy.write_bytes(small["s4"].read_bytes())
    con = duckdb.connect(str(legacy))
    con.execute("UPDATE bench_runs SET agent = NULL, transcripts = NULL")
    con.close()
    assert main(["merge", str(work / "out.duckdb"), *s, str(legacy)]) == 0


def test_missing_or_unfinished_shards_are_refused_without_partial(
    built: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    three = [str(built[f"s{i}"]) for i in (1, 2, 4)]  # the full-size run: its 3rd shard is re-run below
    _refused(["merge", str(work / "out.duckdb"), *three], "shard(s) 3 of 4 missing (have 1,2,4)", work, capsys)
    # an interrupted shard: refused, resumable in its own file (it keeps its shard), then merges
    db = work / "shard-3.duckdb"

    def stop(done: int, total: int, run: object) -> None:
        if run is not None and done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bench(plan_run(BenchOptions.of(db=db, run_id=RUN, epochs=EPOCHS, shard=ShardSpec(3, N))),
                  on_progress=stop)  # fmt: skip
    assert _q(db, "SELECT status FROM shards") == [("interrupted",)]
    _refused(["merge", str(work / "out.duckdb"), *three, str(db)], "shard 3/4 is interrupted", work, capsys)
    assert main(["merge", "--partial", str(work / "partial.duckdb"), *three, str(db)]) == 0
    assert _q(work / "partial.duckdb", "SELECT status FROM bench_runs") == [("interrupted",)]
    assert main(["run", "--db", str(db), "--resume", f"br-{RUN}"]) == 0
    assert _rows(db, "case_runs") == _rows(built["s3"], "case_runs"), "the resumed shard ran its own share only"
    assert main(["merge", str(work / "partial.duckdb"), str(db)]) == 0
    assert _q(work / "partial.duckdb", "SELECT status FROM bench_runs") == [("completed",)]
    assert _rows(work / "partial.duckdb", "events") == _rows(built["full"], "events")
    # a merged run is resumed shard by shard, never as one
    _refused(["run", "--db", str(work / "partial.duckdb"), "--resume", f"br-{RUN}"], "already completed", work, capsys)


def test_files_that_are_not_harness_bench_shards_are_refused(
    small: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    shard = str(small["s1"])
    foreign = work / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE orders (id INTEGER)")
    con.close()
    lite = work / "app.sqlite"
    sq = sqlite3.connect(lite)
    sq.execute("CREATE TABLE t (id INTEGER)")
    sq.commit()
    sq.close()
    garbage = work / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 8)
    older = work / "older.duckdb"
    con = connect(older)
    con.execute("DELETE FROM schema_version WHERE version = ?", [SCHEMA_VERSION])
    con.close()
    newer = work / "newer.duckdb"
    con = connect(newer)
    con.execute("INSERT INTO schema_version VALUES (?, now())", [SCHEMA_VERSION + 1])
    con.close()
    out = str(work / "out.duckdb")
    _refused(["merge", out, shard, str(foreign)], "holds no harness-bench metrics", work, capsys)
    _refused(["merge", out, shard, str(lite)], "is a SQLite database", work, capsys)
    _refused(["merge", out, shard, str(garbage)], "not a DuckDB database file", work, capsys)
    _refused(["merge", out, shard, str(older)], f"schema version {SCHEMA_VERSION - 1}, this harness-bench writes", work,
             capsys)  # fmt: skip
    _refused(["merge", out, shard, str(newer)], f"schema version {SCHEMA_VERSION + 1}", work, capsys)
    _refused(["merge", out, shard, str(work / "nope.duckdb")], "no such DuckDB file", work, capsys)
    _refused(["merge", str(foreign), shard], "foreign.duckdb holds no harness-bench metrics", work, capsys)
    _refused(["merge", str(lite), shard], "is a SQLite database", work, capsys)
    _refused(["merge", shard, shard], "both OUT and an input", work, capsys)


@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database holding bench run br-taken and sweep sw-taken (one family), built once: each test copies it."""
    metrics = tmp_path_factory.mktemp("taken") / "metrics.duckdb"
    run_bench(plan_run(BenchOptions.of(db=metrics, run_id="taken", evalsets=["missing_context"])))
    base = BenchOptions.of(db=metrics, run_id="taken", evalsets=["missing_context"], epochs=1)
    run_sweep(plan_sweep(SweepOptions(SweepGrid(no_gain_threshold=(2,)), base)))
    return metrics


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--shard", "1/4"], "--shard 1/4 needs --run-id"),
        (["run", "--shard", "0/4", "--run-id", "x"], "--shard 0/4: I is 1-based"),
        (["sweep", "--shard", "5/4", "--run-id", "x"], "--shard 5/4"),
        (["run", "--run-id", "a/b"], "--run-id 'a/b'"),
        (["run", "--run-id", ""], "--run-id ''"),
        (["run", "--ray-address", "auto"], "--ray-address auto applies to --executor ray only"),
        (["run", "--executor", "dask"], "--executor invalid choice"),
        (["run", "--db", "{metrics}", "--resume", "br-x", "--shard", "1/2"], "remove --shard"),
        (["sweep", "--db", "{metrics}", "--resume", "sw-x", "--run-id", "y"], "remove --run-id"),
        (["run", "--db", "{metrics}", "--run-id", "taken"], "br-taken already exists"),
        (["sweep", "--db", "{metrics}", "--run-id", "taken", "--evalset", "empty_logs"], "sw-taken already exists"),
        (["merge", "{tmp}/out.duckdb"], "the following arguments are required: SHARD"),
    ],
)
def test_bad_execution_flags_are_one_line_exit_2(
    argv: list[str], needle: str, taken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    metrics = tmp_path / "metrics.duckdb"
    shutil.copy(taken, metrics)  # a copy in the folder `_refused` watches: a refusal must leave it as it was
    world = {"metrics": str(metrics), "tmp": str(tmp_path)}
    _refused([a.format(**world) for a in argv], needle, tmp_path, capsys)


def test_a_real_merge_process_exits_2_with_one_line(small: dict[str, Path], tmp_path: Path) -> None:
    config = RunSettings.of().with_values({"max_tool_invocations": 4}).config
    other = _one_shard(tmp_path / "other.duckdb", config=config)
    out = tmp_path / "out.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "runners.cli", "merge", str(out), str(small["s1"]), str(other)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {other}: bench run br-{RUN} was run with other settings than in {small['s1']}"
        " (max_tool_invocations 4 vs 10); shards of one run must share every setting, the case selection and the epochs"
    ]
    assert not out.exists()


# -- sweeps: a sharded sweep merged reads as one in recommend, report and the views ---------------------
def test_an_interrupted_sweep_shard_resumes_its_own_share(
    small: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sweep --resume` restores the shard and the run id from the sweep row: the finished shard file equals one
    that was never interrupted, and the shards merge into the unsharded sweep."""
    common = ["--evalset", SMALL[0], "--evalset", SMALL[1], "--epochs", "2", "--no-gain-threshold", "1,3",
              "--run-id", "swp"]  # fmt: skip
    whole = tmp_path / "whole.duckdb"
    assert main(["sweep", *common, "--db", str(whole)]) == 0
    files = [tmp_path / f"sw-{i}.duckdb" for i in range(1, N + 1)]
    for i, db in enumerate(files, start=1):
        assert main(["sweep", *common, "--shard", f"{i}/{N}", "--db", str(db)]) == 0
    again = tmp_path / "again-2.duckdb"
    base = BenchOptions.of(db=again, evalsets=SMALL, epochs=2, run_id="swp", shard=ShardSpec(2, N))

    def stop(done: int, total: int) -> None:
        if done >= 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(plan_sweep(SweepOptions(SweepGrid(no_gain_threshold=(1, 3)), base)), on_progress=stop)
    assert _q(again, "SELECT status FROM sweeps") == [("interrupted",)]
    assert _q(again, "SELECT count(*) FROM case_runs") == [(3,)], "half-way through the first grid point"
    capsys.readouterr()
    assert main(["sweep", "--db", str(again), "--resume", "sw-swp"]) == 0
    assert "shard" not in capsys.readouterr().err
    assert _rows(again, "case_runs") == _rows(files[1], "case_runs")
    merged = tmp_path / "merged.duckdb"
    assert main(["merge", str(merged), str(files[0]), str(again), *map(str, files[2:])]) == 0
    read = _reads(merged, {"sweeps": "SELECT sweep_id, status FROM sweeps", "case_runs": _behaviour("case_runs")})
    assert read["sweeps"] == [("sw-swp", "completed")]
    assert read["case_runs"] == _rows(whole, "case_runs")


def test_a_four_shard_sweep_merged_recommends_like_the_unsharded_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def sweep(db: Path, shard: ShardSpec | None, concurrency: int = 1) -> None:
        # three grid points: the lowest, the highest (the point the report compares stop rules on) and one between
        run_sweep(plan_sweep(SweepOptions(SweepGrid(no_gain_threshold=(1, 2, 4)), BenchOptions.of(
            db=db,
            model="scripted:rewriter",
            evalsets=["diagnosable", "empty_logs"], epochs=2, run_id="cal",
            shard=shard, concurrency=concurrency,
        ))))  # fmt: skip

    # the unsharded sweep on 4 threads: its rows are written in another order than the shards' (threads finish case
    # runs out of order), and the recommendation reads the same, intervals included
    full = tmp_path / "full.duckdb"
    sweep(full, None, concurrency=4)
    shards = [tmp_path / f"sweep-{i}.duckdb" for i in range(1, N + 1)]
    for i, db in enumerate(shards, start=1):
        sweep(db, ShardSpec(i, N))
    assert _q(shards[0], "SELECT count(*) FROM bench_runs")[0][0] == 3, "every shard holds every grid point"
    merged = tmp_path / "merged.duckdb"
    assert main(["merge", str(merged), *map(str, shards)]) == 0
    # what both files hold, read once each (the commands below only read them)
    both = {t: _behaviour(t) for t in ("case_runs", "events")} | {"points": "SELECT * FROM v_sweep_points ORDER BY ALL"}
    full_read = _reads(full, both)
    merged_read = _reads(merged, {**both, "sweeps": "SELECT sweep_id, status FROM sweeps"})
    assert merged_read["sweeps"] == [("sw-cal", "completed")]
    for table in ("case_runs", "events"):
        assert merged_read[table] == full_read[table]

    def recommend(db: Path) -> str:
        capsys.readouterr()
        assert main(["recommend", "--db", str(db), "--sweep", "sw-cal"]) == 0
        return capsys.readouterr().out

    expected = recommend(full)
    assert "Recommendation" in expected and "[" in expected  # intervals compared too
    assert recommend(merged) == expected
    assert merged_read["points"] == full_read["points"]
    reports = []
    for db in (full, merged):
        out = tmp_path / f"report-{db.stem}"
        assert main(["report", "--db", str(db), "--sweep", "sw-cal", "--out", str(out)]) == 0
        reports.append((out / "report.md").read_text().replace(str(db), "DB"))
    assert reports[0] == reports[1]
