"""One declaration of run settings: every declared setting round-trips
CLI -> DuckDB -> resume, and a setting declared only here reaches --help, the sweep grid,
bench_runs and resume with no other edit."""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import duckdb
import pytest
from pydantic import Field

from harness.config import HarnessConfig
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan import settings
from runners.plan.bench_config import BenchHarnessConfig
from runners.plan.declarations import Declarations
from runners.plan.run_plan import select_cases
from runners.plan.settings import BenchSetting, RunSettings, SettingsError, declaration
from runners.store.connection import connect
from runners.store.migrations import SCHEMA_VERSION, migrate
from tests._db import open_read_only
from tests._fake_endpoint import completion, serve
from tests._rows import query as _q

ONE = "empty_logs_gateway_timeout_t1"
PUBLIC_NAMES = {
    "no_gain_threshold": "no_gain_threshold", "protocol_violation_threshold": "protocol_violation_threshold",
    "max_tool_invocations": "max_tool_invocations", "max_model_calls": "max_model_calls",
    "max_total_tokens": "max_total_tokens", "deadline_seconds": "deadline",
}  # fmt: skip


def _reads(db: Path, *sqls: str) -> list[list[tuple[Any, ...]]]:
    """The rows of each of `sqls` on the DuckDB file `db`, read over one read-only connection (each connection builds
    a DuckDB instance: a test reading several things at one moment opens the file once)."""
    con = open_read_only(db)
    try:
        return [con.execute(sql).fetchall() for sql in sqls]
    finally:
        con.close()


def _drop_epoch(db: Path, bench_run_id: str, epoch: int) -> None:
    """What a crash leaves: the run `interrupted`, one case run missing."""
    con = duckdb.connect(str(db))
    try:
        ids = [r[0] for r in con.execute(
            "SELECT case_run_id FROM case_runs WHERE bench_run_id = ? AND epoch = ?", [bench_run_id, epoch]
        ).fetchall()]  # fmt: skip
        assert ids
        for table in ("case_runs", "tool_calls", "events"):
            con.execute(f"DELETE FROM {table} WHERE case_run_id IN (SELECT unnest(?))", [ids])
        con.execute("UPDATE bench_runs SET status = 'interrupted' WHERE bench_run_id = ?", [bench_run_id])
    finally:
        con.close()


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as server:
        yield server


# -- the declaration ----------------------------------------------------------------------------------
def test_every_harness_config_field_is_a_setting_with_its_bounds_and_docstring() -> None:
    decl = declaration()
    harness = {s.field: s for s in decl.settings if s.owner is settings.SettingOwner.HARNESS}
    # the bench adds its loop detectors and the plain loop's prompt
    assert set(harness) == set(HarnessConfig.model_fields) | {"stop_rule", "plain_prompt"}
    for field, public in PUBLIC_NAMES.items():
        assert harness[field].name == public, "public names (CLI flags, DuckDB columns) are the library's"
    assert {s.name for s in decl.sweepable} >= {
        "no_gain_threshold", "protocol_violation_threshold", "max_tool_invocations", "max_model_calls",
        "max_total_tokens",
    }  # fmt: skip
    ng = harness["no_gain_threshold"]
    assert ng.help == "Consecutive NO_GAIN observations that make the run SATURATED."
    assert (ng.default, ng.lower, ng.lower_strict) == (2, 1, False)
    assert harness["deadline_seconds"].upper == 86_400 and harness["deadline_seconds"].lower_strict
    assert harness["schema_mode"].choices == ("adaptive", "static")
    model = {s.name for s in decl.settings if s.owner is settings.SettingOwner.MODEL}
    assert model == {
        "model",
        "base_url",
        "guard_model",
        "guard_base_url",
        "api_key_env",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "tool_call_format",
    }


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"max_tool_invocations": 0}, "--max-tool-invocations 0: must be an integer ≥ 1"),
        ({"max_total_tokens": 2**63}, "≤ 9223372036854775807"),
        ({"deadline": 86_401.0}, "--deadline 86401: must be a finite number > 0 and ≤ 86400"),
        ({"schema_mode": "dynamic"}, "--schema-mode 'dynamic': must be one of adaptive, static"),
        ({"model": "openai:x", "tool_choice": "sql_search"}, "--tool-choice 'sql_search'"),
        ({"tool_choice": "kb_search"}, "--tool-choice applies to openai:<model-name> only"),
        ({"model": "openai:x", "api_key_env": "MY KEY"}, "--api-key-env 'MY KEY'"),
    ],
)
def test_bad_values_name_the_flag_and_the_allowed_range(values: dict[str, object], needle: str) -> None:
    with pytest.raises(SettingsError) as exc:
        RunSettings.from_values(values)  # type: ignore[arg-type]
    assert needle in str(exc.value)


def test_parallel_tool_calls_maps_to_the_client_argument() -> None:
    wire = {v.value: v.wire for v in settings.ParallelToolCalls}
    assert wire == {"true": True, "false": False, "omit": None}


def test_reproduce_flags_are_the_non_default_settings_and_parse_back() -> None:
    run = RunSettings.from_values(
        {"model": "openai:m", "tool_choice": "db_query", "max_total_tokens": 3_000_000_000, "deadline": 12.5}
    )
    flags = settings.reproduce_flags(run)
    assert flags == [
        "--model", "openai:m", "--tool-choice", "db_query", "--max-total-tokens", "3000000000", "--deadline", "12.5",
    ]  # fmt: skip
    by_flag = {s.flag: s for s in declaration().settings}
    parsed = {by_flag[f].name: by_flag[f].parse(v) for f, v in zip(flags[::2], flags[1::2], strict=True)}
    assert RunSettings.from_values(parsed) == run


def test_the_model_defaults_are_declared_beside_the_model_parser() -> None:
    """The default model and key variable are the parser module's constants, the one place each is written; the
    settings' declaration (flags, columns, help) and a pre-v3 stored run read them from there."""
    from runners.domain.model_spec import DEFAULT_API_KEY_ENV, DEFAULT_MODEL

    decl = declaration()
    assert decl["model"].default == DEFAULT_MODEL and decl["api_key_env"].default == DEFAULT_API_KEY_ENV
    assert settings.ModelSettings().model.raw == DEFAULT_MODEL
    assert settings.legacy_settings(None, None, None).model_settings.model.raw == DEFAULT_MODEL
    with pytest.raises(ValueError, match=f"like {DEFAULT_API_KEY_ENV}"):
        settings.ModelSettings(model="openai:m", api_key_env="1 bad")


# -- the library keeps its own names ------------------------------------------------------------------
def test_the_library_carries_no_bench_markup() -> None:
    """HarnessConfig's fields have no bench marker: the bench declares how it exposes them on its side."""
    import harness.config

    assert not hasattr(harness.config, "BenchSetting")
    for name, info in HarnessConfig.model_fields.items():
        assert not any(isinstance(m, BenchSetting) for m in info.metadata), name
    for name, info in HarnessConfig.model_fields.items():  # the bench's class adds its marker and nothing else
        bench = BenchHarnessConfig.model_fields[name]
        assert (bench.annotation, bench.default, bench.description) == (info.annotation, info.default, info.description)
        assert [m for m in bench.metadata if not isinstance(m, BenchSetting)] == info.metadata, name


@pytest.mark.parametrize(("field", "old"), [("max_tool_invocations", "--max-tool-calls"),
                                             ("max_total_tokens", "--max-tokens")])  # fmt: skip
def test_the_budget_flags_are_the_library_names_and_the_old_ones_still_work(
    field: str, old: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = next(s for s in declaration().settings if s.field == field)
    new = "--" + field.replace("_", "-")
    assert s.flag == new and s.aliases == (old,)
    assert s.name == PUBLIC_NAMES[field], "the column is the library's name"
    from runners.cli import build_parser

    parser = build_parser()
    for command in ("run", "sweep"):
        given = settings.given(parser.parse_args([command, new, "7"]))
        assert given == settings.given(parser.parse_args([command, old, "7"]))
        assert given[s.name] in (7, (7,))
    with pytest.raises(SystemExit):  # --help lists the library's flag only
        parser.parse_args(["run", "--help"])
    text = capsys.readouterr().out
    assert new in text and old + " " not in text
    assert main(["run", old, "0"]) == 2
    assert f"{old} 0: must be an integer ≥ 1" in capsys.readouterr().err, "a bad value names the flag as typed"


# -- every declared setting: CLI -> DuckDB -> resume ---------------------------------------------------
def _example(s: settings.Setting, sim: SimulatorServer) -> settings.SettingValue:
    # the base URL must be a live endpoint for the run to work: the simulator's (not the default None)
    return sim.base_url if s.name == "base_url" else s.example()


@pytest.mark.parametrize("name", declaration().names())
def test_every_setting_round_trips_cli_duckdb_resume(name: str, tmp_path: Path, sim: SimulatorServer) -> None:
    s = declaration()[name]
    value = _example(s, sim)
    assert value != s.default
    db = tmp_path / "rt.duckdb"
    argv = {"--model": "openai:scripted", "--base-url": sim.base_url, s.flag: s.cli_text(value)}
    if name == "plain_prompt":  # the plain loop's prompt is refused for any other loop
        argv["--agent"] = "plain"
    flat = [a for kv in argv.items() for a in kv]
    assert main(["run", "--db", str(db), "--case", ONE, "--epochs", "2", *flat]) == 0
    per_case = [f'SELECT "{name}" FROM case_runs'] if s.sweepable else []  # a sweep axis is a case_runs column too
    (((bench_run_id, column, stored_json),), *case_values) = _reads(
        db, f'SELECT bench_run_id, "{name}", settings_json FROM bench_runs', *per_case
    )
    assert column == value and json.loads(str(stored_json))[name] == value
    if s.sweepable:
        assert {r[0] for r in case_values[0]} == {value}

    _drop_epoch(db, str(bench_run_id), 2)
    assert main(["run", "--db", str(db), "--resume", str(bench_run_id)]) == 0
    # resume rewrites the settings it ran with: a lost setting would show up as its default here
    (((column_after, json_after, status),), epoch_2, *case_values) = _reads(
        db, f'SELECT "{name}", settings_json, status FROM bench_runs', "SELECT count(*) FROM case_runs WHERE epoch = 2",
        *per_case,
    )  # fmt: skip
    assert (column_after, json_after, status) == (value, stored_json, "completed")
    assert epoch_2 == [(1,)]
    if s.sweepable:
        assert {r[0] for r in case_values[0]} == {value}


def test_resume_sends_the_stored_model_settings_on_the_wire(tmp_path: Path) -> None:
    db = tmp_path / "tc.duckdb"
    wire = {"tool_choice": {"type": "function", "function": {"name": "kb_search"}}, "parallel_tool_calls": True,
            "temperature": 0.7}  # fmt: skip
    with serve() as ep:
        for _ in range(3):  # one model call per case run: a text answer is an invalid Draft
            ep.push(200, completion("no idea"))
        argv = ["--model", "openai:m", "--base-url", ep.base_url, "--tool-choice", "kb_search",
                "--parallel-tool-calls", "true", "--temperature", "0.7"]  # fmt: skip
        assert main(["run", "--db", str(db), "--case", ONE, "--epochs", "2", *argv]) == 0
        ((bench_run_id,),) = _q(db, "SELECT bench_run_id FROM bench_runs")
        _drop_epoch(db, str(bench_run_id), 2)
        assert len(ep.requests) == 2
        assert main(["run", "--db", str(db), "--resume", str(bench_run_id)]) == 0
    assert len(ep.requests) == 3, "the resumed case run reached the endpoint"
    for body in ep.requests:  # the resumed request too: tool_choice is not lost on resume
        assert {k: body.get(k) for k in wire} == wire


def test_resume_refuses_settings_it_would_ignore_but_takes_a_new_endpoint(
    tmp_path: Path, sim: SimulatorServer, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    with SimulatorServer(select_cases([], [ONE])) as first:
        assert main(["run", "--db", str(db), "--case", ONE, "--epochs", "2", "--model", "openai:scripted",
                     "--base-url", first.base_url, "--max-model-attempts", "1"]) == 0  # fmt: skip
        first_requests = first.requests
    ((bench_run_id,),) = _q(db, "SELECT bench_run_id FROM bench_runs")
    _drop_epoch(db, str(bench_run_id), 2)
    capsys.readouterr()
    assert main(["run", "--db", str(db), "--resume", str(bench_run_id), "--max-tool-calls", "3"]) == 2
    assert "remove --max-tool-invocations" in capsys.readouterr().err  # the old flag names the setting
    before = sim.requests
    assert main(["run", "--db", str(db), "--resume", str(bench_run_id), "--base-url", sim.base_url]) == 0
    run, case_runs = _reads(db, "SELECT base_url, max_model_attempts, status FROM bench_runs",
                            "SELECT epoch, passed FROM case_runs ORDER BY epoch")  # fmt: skip
    assert run == [(sim.base_url, 1, "completed")]
    # the resumed epoch reached the new endpoint (the first one is gone), with the stored settings
    assert sim.requests - before > 0 and first_requests > 0
    assert case_runs == [(1, True), (2, True)]


def test_huge_budgets_are_stored_exactly(tmp_path: Path) -> None:
    db = tmp_path / "big.duckdb"
    argv = ["--max-tool-calls", "1000000000000", "--max-tokens", "3000000000", "--max-model-calls", str(2**40)]
    assert main(["run", "--db", str(db), "--case", ONE, *argv]) == 0
    case_runs, status = _reads(
        db, "SELECT max_tool_invocations, max_total_tokens, max_model_calls, passed FROM case_runs",
        "SELECT status FROM bench_runs",
    )  # fmt: skip
    assert case_runs == [(1_000_000_000_000, 3_000_000_000, 2**40, True)]
    assert status == [("completed",)]


# -- a setting declared later: one edit ----------------------------------------------------------------
class ConfigWithProbe(BenchHarnessConfig):
    """The bench's HarnessConfig plus one field, as if it had been added to HarnessConfig itself."""

    probe_budget: Annotated[int, BenchSetting(sweepable=True)] = Field(default=3, ge=1, le=50)
    """Probe calls allowed, a setting declared only by this test."""


WITH_PROBE = Declarations(harness_config=ConfigWithProbe)
"""The bench's declarations with the probe setting: passed to the commands that are to know it."""
main_with_probe = functools.partial(main, declarations=WITH_PROBE)
"""`main` given these declarations."""


def test_a_new_setting_appears_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command, metavar in (("run", "--probe-budget N"), ("sweep", "--probe-budget N[,…]")):
        with pytest.raises(SystemExit):
            main_with_probe([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert metavar in text and "Probe calls allowed, a setting declared only by this test" in text
    assert main_with_probe(["run", "--probe-budget", "51"]) == 2
    assert "--probe-budget 51: must be an integer ≥ 1 and ≤ 50" in capsys.readouterr().err


def test_a_new_setting_is_a_sweep_axis_a_column_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "new.duckdb"
    connect(db).close()  # a database made before the setting existed: the column is added at connect
    assert main_with_probe(["sweep", "--db", str(db), "--case", ONE, "--epochs", "2", "--no-gain-threshold", "2",
                 "--probe-budget", "2,7"]) == 0  # fmt: skip
    runs, case_runs, points, sweep, second = _reads(
        db, "SELECT probe_budget, status FROM bench_runs", "SELECT probe_budget, count(*) FROM case_runs GROUP BY 1",
        "SELECT probe_budget, case_runs FROM v_sweep_points", "SELECT sweep_id, grid_json FROM sweeps",
        "SELECT bench_run_id FROM bench_runs WHERE probe_budget = 7",
    )  # fmt: skip
    assert sorted(runs) == [(2, "completed"), (7, "completed")]
    assert sorted(case_runs) == [(2, 2), (7, 2)]
    assert sorted(points) == [(2, 2), (7, 2)]
    ((sweep_id, grid),) = sweep
    assert json.loads(str(grid))["probe_budget"] == [2, 7]

    # crash in the second point: resume the sweep, which restores the axis and the point's value
    ((point,),) = second
    _drop_epoch(db, str(point), 2)
    con = duckdb.connect(str(db))
    con.execute("UPDATE sweeps SET status = 'interrupted'")
    con.close()
    assert main_with_probe(["sweep", "--db", str(db), "--resume", str(sweep_id)]) == 0
    case_runs, runs, sweep = _reads(
        db, "SELECT probe_budget, count(*) FROM case_runs GROUP BY 1", "SELECT count(*), min(status) FROM bench_runs",
        "SELECT status FROM sweeps",
    )  # fmt: skip
    assert sorted(case_runs) == [(2, 2), (7, 2)]
    assert runs == [(2, "completed")], "no duplicate point"
    assert sweep == [("completed",)]


def test_a_new_setting_resumes_a_run(tmp_path: Path) -> None:
    db = tmp_path / "run.duckdb"
    assert main_with_probe(["run", "--db", str(db), "--case", ONE, "--epochs", "2", "--probe-budget", "9"]) == 0
    ((bench_run_id, stored),) = _q(db, "SELECT bench_run_id, settings_json FROM bench_runs")
    assert json.loads(str(stored))["probe_budget"] == 9
    _drop_epoch(db, str(bench_run_id), 2)
    assert main_with_probe(["run", "--db", str(db), "--resume", str(bench_run_id)]) == 0
    assert _q(db, "SELECT epoch, probe_budget FROM case_runs ORDER BY epoch") == [(1, 9), (2, 9)]


# -- a new file -------------------------------------------------------------------------------------
def test_a_new_file_is_created_in_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration failing part-way through a new file's creation leaves no table of the versions before it (each
    version in its own commit would leave them, and the file would say it is at that version)."""
    from runners.store import migrations

    broken = {**migrations._MIGRATIONS, 5: [*migrations._MIGRATIONS[5], "SELECT * FROM no_such_table"]}
    monkeypatch.setattr(migrations, "_MIGRATIONS", broken)
    db = tmp_path / "new.duckdb"
    with pytest.raises(Exception, match="no_such_table"):
        connect(db)
    con = duckdb.connect(str(db))
    try:
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == []
    finally:
        con.close()
    monkeypatch.undo()
    connect(db).close()  # the same file is then created whole
    assert _q(db, "SELECT max(version) FROM schema_version") == [(SCHEMA_VERSION,)]


# -- schema v2 -> v3 --------------------------------------------------------------------------------
def test_a_v2_database_is_migrated_and_its_interrupted_run_resumes(tmp_path: Path) -> None:
    db = tmp_path / "v2.duckdb"
    con = duckdb.connect(str(db))
    migrate(con, str(db), upto=2)
    cfg = HarnessConfig(no_gain_threshold=3, max_total_tokens=150_000)
    con.execute(
        "INSERT INTO bench_runs VALUES ('br-old', NULL, now(), NULL, 'interrupted', NULL, 'scripted', 'old', ?, 'h',"
        " '[]', ?, 1, 1, '0.1.0', NULL, NULL, NULL, NULL)",
        [cfg.model_dump_json(exclude={"schema_mode", "max_run_observation_bytes"}), json.dumps([ONE])],
    )
    con.close()
    assert main(["run", "--db", str(db), "--resume", "br-old"]) == 0
    version, columns, row, case_runs = _reads(
        db, "SELECT max(version) FROM schema_version",
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'case_runs'",
        "SELECT no_gain_threshold, max_total_tokens, schema_mode, model, status FROM bench_runs",
        "SELECT case_id, no_gain_threshold, max_total_tokens FROM case_runs",
    )  # fmt: skip
    assert version == [(SCHEMA_VERSION,)]
    types = dict(columns)
    assert types["max_total_tokens"] == types["max_tool_invocations"] == "BIGINT"
    assert row == [(3, 150_000, "adaptive", "scripted", "completed")]
    assert case_runs == [(ONE, 3, 150_000)]


# -- schema v8 -> v9: the budgets take the library's names ------------------------------------------
_V8_NAMES = {"max_tool_invocations": "max_tool_calls", "max_total_tokens": "max_tokens"}


def _v8_keys(values: dict[str, object]) -> dict[str, object]:
    return {_V8_NAMES.get(k, k): v for k, v in values.items()}


def test_a_v8_database_renames_the_budget_columns_and_keys_and_its_run_resumes(tmp_path: Path) -> None:
    """A file written before v9 holds `max_tool_calls` / `max_tokens` as columns and as keys in the stored
    settings, sweep grids and sweep options; after the upgrade every one is the library's name, and an
    interrupted run resumes with its own budgets (not the defaults)."""
    db = tmp_path / "v8.duckdb"
    con = duckdb.connect(str(db))
    migrate(con, str(db), upto=8)
    con.execute("ALTER TABLE bench_runs ADD COLUMN max_tool_calls BIGINT")
    con.execute("ALTER TABLE bench_runs ADD COLUMN max_tokens BIGINT")
    stored = _v8_keys(json.loads(RunSettings.of().with_values(
        {"max_tool_invocations": 5, "max_total_tokens": 90_000, "no_gain_threshold": 3}).to_json()))  # fmt: skip
    con.execute(
        "INSERT INTO bench_runs (bench_run_id, started_at, status, model, label, case_ids_json, epochs,"
        " planned_case_runs, settings_json, max_tool_calls, max_tokens) VALUES"
        " ('br-v8', now(), 'interrupted', 'scripted', 'v8', ?, 1, 1, ?, 5, 90000)",
        [json.dumps([ONE]), json.dumps(stored)],
    )
    con.execute(
        "INSERT INTO sweeps (sweep_id, status, grid_json, options_json) VALUES ('sw-v8', 'interrupted', ?, ?)",
        [json.dumps({"max_tool_calls": [4, 6], "no_gain_threshold": [1]}),
         json.dumps({"epochs": 1, "settings": {"max_tokens": 7, "label": "v8"}})],
    )  # fmt: skip
    con.close()

    assert main(["run", "--db", str(db), "--resume", "br-v8"]) == 0
    tables = ("bench_runs", "case_runs")
    *names_of, run, case_runs, resumed_settings, sweep, pass_rate = _reads(
        db, *(f"SELECT column_name FROM duckdb_columns() WHERE table_name = '{t}'" for t in tables),
        "SELECT max_tool_invocations, max_total_tokens, no_gain_threshold, status FROM bench_runs",
        "SELECT max_tool_invocations, max_total_tokens, no_gain_threshold FROM case_runs",
        "SELECT settings_json FROM bench_runs", "SELECT grid_json, options_json FROM sweeps",
        "SELECT max_tool_invocations, count(*) FROM v_pass_rate GROUP BY 1",
    )  # fmt: skip
    columns = {t: {c for (c,) in rows} for t, rows in zip(tables, names_of, strict=True)}
    for names in columns.values():
        assert {"max_tool_invocations", "max_total_tokens"} <= names
        assert not {"max_tool_calls", "max_tokens"} & names
    assert run == [(5, 90_000, 3, "completed")]
    assert case_runs == [(5, 90_000, 3)]
    ((settings_json,),) = resumed_settings
    assert {"max_tool_invocations": 5, "max_total_tokens": 90_000}.items() <= json.loads(str(settings_json)).items()
    ((grid, options),) = sweep
    assert json.loads(str(grid)) == {"max_tool_invocations": [4, 6], "no_gain_threshold": [1]}
    assert json.loads(str(options)) == {"epochs": 1, "settings": {"max_total_tokens": 7, "label": "v8"}}
    assert pass_rate == [(5, 1)]


# -- the re-record command reproduces the run ---------------------------------------------------------
def test_the_printed_rerecord_command_records_what_the_replay_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim: SimulatorServer
) -> None:
    monkeypatch.chdir(tmp_path)
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()  # an empty folder: every request misses (a missing folder is refused before anything runs)
    replay = ["--model", "openai:scripted", "--base-url", "http://127.0.0.1:9/v1", "--tool-choice", "log_search",
              "--schema-mode", "static", "--no-gain-threshold", "3", "--cassettes", str(cassettes)]  # fmt: skip
    # every case run missed its cassette: nothing was measured, so exit 2 (the rows keep the command)
    assert main(["run", "--db", "miss.duckdb", "--case", ONE, *replay, "--record-mode", "none"]) == 2
    ((error,),) = _q(tmp_path / "miss.duckdb", "SELECT error FROM case_runs")
    command = str(error).split("re-record with: ", 1)[1].rsplit(" (", 1)[0]
    argv = shlex.split(command)
    assert argv[:2] == ["harness-bench", "run"] and "LIVE_BASE_URL" in argv
    for flag, value in (("--tool-choice", "log_search"), ("--schema-mode", "static"), ("--no-gain-threshold", "3"),
                        ("--record-mode", "all")):  # fmt: skip
        assert argv[argv.index(flag) + 1] == value
    argv[argv.index("LIVE_BASE_URL")] = sim.base_url
    assert main([*argv[1:], "--db", "record.duckdb"]) == 0
    assert main(["run", "--db", "replay.duckdb", "--case", ONE, *replay, "--record-mode", "none"]) == 0
    counts = "SELECT error, outcome, stop_reason, model_calls, tool_invocations, tool_rejections FROM case_runs"
    replayed = _q(tmp_path / "replay.duckdb", counts)
    assert replayed == _q(tmp_path / "record.duckdb", counts) and replayed[0][0] is None


def test_sweep_resume_restores_every_setting(tmp_path: Path, sim: SimulatorServer) -> None:
    db = tmp_path / "sw.duckdb"
    argv: list[str] = []
    for s in declaration().settings:  # every setting away from its default at once
        if s.name != "no_gain_threshold":
            argv += [s.flag, s.cli_text(_example(s, sim))]
    argv += ["--no-gain-threshold", "1,2"]
    assert main(["sweep", "--db", str(db), "--case", ONE, "--epochs", "2", *argv]) == 0
    runs, point_1, sweep = _reads(db, "SELECT no_gain_threshold, settings_json FROM bench_runs",
                                  "SELECT bench_run_id FROM bench_runs WHERE no_gain_threshold = 1",
                                  "SELECT sweep_id FROM sweeps")  # fmt: skip
    before = dict(runs)
    assert sorted(before) == [1, 2]
    for ng, stored in before.items():
        expected = {s.name: _example(s, sim) for s in declaration().settings} | {"no_gain_threshold": ng}
        assert json.loads(str(stored)) == expected
    # point 1 half done (resumed from its own bench run), point 2 never started (rebuilt from the sweep)
    ((first,),) = point_1
    _drop_epoch(db, str(first), 2)
    con = duckdb.connect(str(db))
    for table in ("events", "tool_calls", "case_runs", "bench_runs"):
        con.execute(f"DELETE FROM {table} WHERE bench_run_id IN (SELECT bench_run_id FROM bench_runs"
                    " WHERE no_gain_threshold = 2)")  # fmt: skip
    con.execute("UPDATE sweeps SET status = 'interrupted'")
    con.close()
    ((sweep_id,),) = sweep  # the crash changed the sweep's status only
    assert main(["sweep", "--db", str(db), "--resume", str(sweep_id)]) == 0
    runs, count, case_runs = _reads(
        db, "SELECT no_gain_threshold, settings_json FROM bench_runs", "SELECT count(*), min(status) FROM bench_runs",
        "SELECT count(*) FROM case_runs",
    )  # fmt: skip
    assert dict(runs) == before
    assert count == [(2, "completed")]
    assert case_runs == [(4,)]
