"""The re-record command is derived from the run's stored plan: the flags that reproduce it (evaluation sets, the
case, label, epochs, every non-default setting, the agent loop, the cassettes, `--record-mode all`). Printed by a
replay whose cassettes miss, it records against the 127.0.0.1 simulator, and the same replay then passes."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from runners.cli import build_parser, main
from runners.commands._bench import _bench_options
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.agent import AgentFramework
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings, RunSettings
from runners.plan.shard import ShardSpec
from runners.plan.stored_plan import read_bench_run, run_argv
from runners.store.runs import stored_bench_run
from tests._db import open_read_only
from tests._rows import query as _q

ONE = "empty_logs_gateway_timeout_t1"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(load_cases(["empty_logs"]), trajectory_for=trajectory_for_model) as server:
        yield server


def _parsed(argv: list[str]) -> BenchOptions:
    """The options the `run` command builds from `harness-bench run ARGV`."""
    assert argv[:2] == ["harness-bench", "run"], argv
    args = build_parser().parse_args(argv[1:])
    return _bench_options(args, command="run")


def _kept(opts: BenchOptions) -> list[object]:
    """The value of every option a run keeps (declared `Stored`), in declaration order."""
    return [getattr(getattr(opts, name), d.name) for name, concern in BenchOptions.CONCERNS.items()
            for d in concern.declared() if d.stored is not None]  # fmt: skip


def _plan_inputs(opts: BenchOptions) -> tuple[object, ...]:
    return (opts.settings.values(), *_kept(opts))


def test_every_run_option_and_setting_round_trips_through_the_reproducing_flags(tmp_path: Path) -> None:
    """A run option (or setting) the re-record command would drop is caught here: every declared one is given a
    value other than its default, and the flags `run_argv` writes parse back to the same plan inputs."""
    run = RunSettings.of().with_values({"model": "openai:m", "no_gain_threshold": 3, "tool_choice": "log_search"})
    opts = BenchOptions.of(
        evalsets=["empty_logs", "missing_context"], case_ids=[ONE, "x"], label="a label", epochs=4,
        cassettes=tmp_path / "c d", record_mode="new_episodes", shard=ShardSpec(2, 3), run_id="ci-7",
        transcripts=False, agent=AgentFramework.PYDANTIC_AI, config=run.config, model_settings=run.model_settings,
    )  # fmt: skip
    defaults = BenchOptions.of()
    assert all(a != b for a, b in zip(_kept(opts), _kept(defaults), strict=True)), "every option is non-default"
    argv = run_argv(opts)
    assert _plan_inputs(_parsed(argv)) == _plan_inputs(opts), shlex.join(argv)
    assert _plan_inputs(_parsed(run_argv(defaults))) == _plan_inputs(defaults)
    assert run_argv(defaults) == ["harness-bench", "run"], "defaults are not spelled out"


def test_the_printed_rerecord_command_is_the_stored_plan_and_makes_the_replay_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim: SimulatorServer
) -> None:
    monkeypatch.chdir(tmp_path)
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()  # empty: every request misses
    replay = ["--evalset", "empty_logs", "--case", ONE, "--label", "nightly", "--epochs", "2",
              "--agent", "pydantic-ai", "--no-gain-threshold", "3", "--model", "openai:scripted",
              "--base-url", "http://127.0.0.1:9/v1", "--cassettes", str(cassettes)]  # fmt: skip
    assert main(["run", "--db", "miss.duckdb", *replay]) == 2  # nothing was measured: exit 2, the rows keep it
    ((error,),) = _q(tmp_path / "miss.duckdb", "SELECT error FROM case_runs WHERE epoch = 2")
    command = str(error).split("re-record with: ", 1)[1].rsplit(" (", 1)[0]
    argv = shlex.split(command)

    # the command is the stored plan, narrowed to the case and its epoch, recording
    con = open_read_only(tmp_path / "miss.duckdb")
    try:
        (bench_run_id,) = con.execute("SELECT bench_run_id FROM bench_runs").fetchone() or ("",)
        stored = read_bench_run_any(con, str(bench_run_id))
    finally:
        con.close()
    recording = stored.replaced(record_mode="all")  # the stored run holds one case, two epochs
    expected = run_argv(recording, always=("model", "tool_choice", "schema_mode"), skip=("base_url",))
    assert argv[: argv.index("--base-url")] == expected, command
    given = (("--evalset", "empty_logs"), ("--case", ONE), ("--label", "nightly"), ("--epochs", "2"),
             ("--agent", "pydantic-ai"), ("--no-gain-threshold", "3"), ("--record-mode", "all"))  # fmt: skip
    for flag, value in given:
        assert argv[argv.index(flag) + 1] == value, command

    argv[argv.index("LIVE_BASE_URL")] = sim.base_url  # this run replayed offline: it names no live endpoint
    assert main([*argv[1:], "--db", "record.duckdb"]) == 0
    assert main(["run", "--db", "replay.duckdb", *replay]) == 0
    counts = "SELECT epoch, error, outcome, stop_reason, model_calls, tool_invocations FROM case_runs ORDER BY epoch"
    replayed = _q(tmp_path / "replay.duckdb", counts)
    assert replayed == _q(tmp_path / "record.duckdb", counts), "the replay reads what the command recorded"
    assert [r[1] for r in replayed] == [None, None], "no cassette miss left"


def read_bench_run_any(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> BenchOptions:
    """The stored plan inputs of a bench run, whatever its status (`read_bench_run` refuses a completed one,
    which only a resume must)."""
    cur = con.execute("SELECT * FROM bench_runs WHERE bench_run_id = ?", [bench_run_id])
    row = cur.fetchone()
    assert row is not None
    from runners.plan.stored_plan import StoredForm, restore_options

    stored = dict(zip([d[0] for d in cur.description], row, strict=True))
    return restore_options(stored, StoredForm.BENCH_RUN, BenchOptions.of(), f"bench run {bench_run_id}")


def test_a_stored_bench_run_is_read_back_as_the_options_it_ran_with(tmp_path: Path) -> None:
    """One reader over the stored forms: an interrupted bench run's row restores its settings and run options."""
    db = tmp_path / "s.duckdb"
    assert main(["run", "--db", str(db), "--case", ONE, "--label", "x", "--epochs", "2", "--no-gain-threshold", "4",
                 "--no-transcripts"]) == 0  # fmt: skip
    con = duckdb.connect(str(db))
    con.execute("UPDATE bench_runs SET status = 'interrupted'")
    (bench_run_id,) = con.execute("SELECT bench_run_id FROM bench_runs").fetchone() or ("",)
    restored = read_bench_run(
        str(bench_run_id), stored_bench_run(con, str(bench_run_id)), BenchOptions.of(db=db, concurrency=3)
    )
    con.close()
    given = _parsed(["harness-bench", "run", "--case", ONE, "--label", "x", "--epochs", "2",
                     "--no-gain-threshold", "4", "--no-transcripts"])  # fmt: skip
    assert _plan_inputs(restored) == _plan_inputs(given)
    invocation = (restored.storage.db, restored.execution.concurrency)
    assert invocation == (db, 3), "where and how it executes: this invocation's"
    assert restored.settings.model_settings == ModelSettings()
