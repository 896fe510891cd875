"""One declaration of run options: the flags `--resume` refuses, a sweep's saved options and a bench run's
columns all come from runners/plan/run_options.py, and a run option declared only here reaches --help,
bench_runs, the sweep's saved options and resume with no other edit."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import json
from pathlib import Path

import duckdb
import pytest

from runners.cli import build_parser, main
from runners.plan import run_options
from runners.plan.options import SWEEP_EPOCHS, BenchOptions, default_epochs
from runners.plan.rules import MAX_EPOCHS
from runners.plan.run_options import RunOption
from runners.store.connection import connect
from tests._rows import query as _q
from tests.runners.plan.test_settings import ONE, _drop_epoch

ROOT = Path(__file__).resolve().parents[3]

PROBE = RunOption(
    "probe_note", "--probe-note", "probe_note", "probe_note", "probe_note",
    argument={"metavar": "TEXT", "help": "a note kept with the run, an option declared only by this test"},
)  # fmt: skip


@pytest.fixture
def new_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_options, "RUN_OPTIONS", (*run_options.RUN_OPTIONS, PROBE))


def test_every_declared_option_names_a_field_and_a_flag_of_run() -> None:
    fields = set(BenchOptions.__dataclass_fields__)
    for option in run_options.declared():
        assert option.name in fields, option
        assert option.flag.startswith("--"), option


def test_a_new_run_option_appears_in_help(new_option: None, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "sweep"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--probe-note TEXT" in text and "an option declared only by this test" in text


def test_a_new_run_option_is_stored_refused_on_resume_and_restored(new_option: None, tmp_path: Path) -> None:
    db = tmp_path / "run.duckdb"
    connect(db).close()  # a database made before the option existed: the column is added at connect
    assert main(["run", "--db", str(db), "--case", ONE, "--epochs", "2", "--probe-note", "kept"]) == 0
    ((bench_run_id, note),) = _q(db, "SELECT bench_run_id, probe_note FROM bench_runs")
    assert note == "kept"
    _drop_epoch(db, str(bench_run_id), 2)
    assert main(["run", "--db", str(db), "--resume", str(bench_run_id), "--probe-note", "other"]) == 2
    assert main(["run", "--db", str(db), "--resume", str(bench_run_id)]) == 0
    # the resume writes its options again: a value it did not restore would be lost here
    assert _q(db, "SELECT probe_note, status FROM bench_runs") == [("kept", "completed")]
    assert _q(db, "SELECT count(*) FROM case_runs") == [(2,)]


def test_a_new_run_option_is_saved_with_a_sweep_and_restored(new_option: None, tmp_path: Path) -> None:
    db = tmp_path / "sweep.duckdb"
    assert main(["sweep", "--db", str(db), "--case", ONE, "--epochs", "2", "--no-gain-threshold", "2,3",
                 "--probe-note", "swept"]) == 0  # fmt: skip
    ((sweep_id, saved),) = _q(db, "SELECT sweep_id, options_json FROM sweeps")
    assert json.loads(str(saved))["probe_note"] == "swept"
    ((point,),) = _q(db, "SELECT bench_run_id FROM bench_runs WHERE no_gain_threshold = 3")
    _drop_epoch(db, str(point), 2)
    con = duckdb.connect(str(db))
    con.execute("UPDATE sweeps SET status = 'interrupted'")
    con.close()
    assert main(["sweep", "--db", str(db), "--resume", str(sweep_id)]) == 0
    assert _q(db, "SELECT DISTINCT probe_note FROM bench_runs") == [("swept",)]
    assert _q(db, "SELECT count(*) FROM case_runs") == [(4,)]


def _subparser(command: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = action.choices[command]
    return parser


@pytest.mark.parametrize("command", ["run", "sweep", "cases", "serve-sim"])
def test_every_run_option_flag_comes_from_its_declaration(command: str) -> None:
    """Type (its bounds), metavar, help and default of each run-option flag are the declaration's, per command: a
    flag added by hand beside the declaration (with its own help or bounds) fails here."""
    parser = _subparser(command)
    wanted = run_options.declared() if command in ("run", "sweep") else [
        o for o in run_options.declared() if o.name in ("evalsets", "case_ids")
    ]  # fmt: skip
    for option in wanted:
        action = parser._option_string_actions.get(option.flag)
        assert action is not None, f"{command} has no {option.flag}"
        declared_keywords = option.flag_keywords(command)
        for key in ("help", "metavar", "type", "default", "dest"):
            if key in declared_keywords:
                assert getattr(action, key) == declared_keywords[key], f"{command} {option.flag}: {key}"
        if "choices" in declared_keywords:
            assert list(action.choices or []) == list(declared_keywords["choices"]), option.flag


def test_no_command_adds_a_run_option_flag_by_hand() -> None:
    """The commands that take run options place their flags with `run_options.add_argument`; none spells one out
    (`show --label`, which picks stored runs, is another flag of another command)."""
    flags = {o.flag for o in run_options.declared()}
    taking = ("_bench.py", "_common.py", "run.py", "sweep.py", "cases.py", "serve_sim.py")
    for path in [ROOT / "runners" / "commands" / name for name in taking]:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and first.value in flags:
                    raise AssertionError(f"{path.name}:{node.lineno} adds {first.value} by hand")


def test_the_epochs_flag_takes_its_bounds_and_default_from_the_declaration(tmp_path: Path) -> None:
    option = next(o for o in run_options.declared() if o.name == "epochs")
    assert "default 1)" in option.flag_keywords("run")["help"] and "default 3)" in option.flag_keywords("sweep")["help"]
    db = tmp_path / "never-written.duckdb"
    assert main(["run", "--epochs", str(MAX_EPOCHS + 1), "--db", str(db)]) == 2
    assert main(["sweep", "--epochs", "0", "--db", str(db)]) == 2
    assert not db.exists()


@pytest.mark.parametrize("agent", ["native", "pydantic-ai", "openai-agents"])
def test_resume_refuses_agent_even_when_it_names_the_default_loop(
    agent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--agent native` with --resume of an openai-agents run would be ignored (the stored loop runs): it is
    refused like another loop, before the database is opened."""
    db = tmp_path / "never-written.duckdb"
    capsys.readouterr()
    assert main(["run", "--db", str(db), "--resume", "br-x", "--agent", agent]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "remove --agent" in lines[0], lines
    assert not db.exists()


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_agent_is_not_listed_among_the_execution_flags(command: str) -> None:
    """`--agent` is stored and `--resume` refuses it: it belongs beside the run options, not under "execution
    (never part of a run's settings)"."""
    parser = _subparser(command)
    groups = {a.option_strings[0]: g.title for g in parser._action_groups for a in g._group_actions if a.option_strings}
    assert groups["--agent"] == groups["--no-transcripts"] == "bench"
    assert groups["--executor"].startswith("execution")


# -- one place for each default: the flags of run and sweep read BenchOptions' declaration ----------------------
_FLAG_DEFAULTS = {"--db": "db", "--concurrency": "concurrency", "--max-in-flight": "max_in_flight",
                  "--executor": "executor"}  # fmt: skip


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_bench_flags_default_to_the_options_declaration(command: str) -> None:
    """A flag's default (and the default its help names) is `BenchOptions`' (no second literal to drift)."""
    parser = _subparser(command)
    defaults = {f.name: f.default for f in dataclasses.fields(BenchOptions)}
    for flag, name in _FLAG_DEFAULTS.items():
        action = parser._option_string_actions[flag]
        value = defaults[name]
        assert action.default == (value.value if isinstance(value, enum.Enum) else value), flag
    args = parser.parse_args([])
    assert args.epochs is None  # the per-command epochs apply in `_bench_options`, below


def test_a_changed_declaration_changes_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check bites: a new default declared on `BenchOptions` alone reaches the flag and its help."""
    monkeypatch.setattr(BenchOptions.__dataclass_fields__["concurrency"], "default", 7)
    action = _subparser("run")._option_string_actions["--concurrency"]
    assert action.default == 7 and action.help == "case runs in flight (default 7)"


@pytest.mark.parametrize(("command", "epochs"), [("run", 1), ("sweep", SWEEP_EPOCHS)])
def test_each_command_plans_its_declared_epochs(command: str, epochs: int, tmp_path: Path) -> None:
    from harness.context import CancellationToken
    from runners.commands._bench import _bench_options
    from runners.plan import settings

    args = _subparser(command).parse_args(["--db", str(tmp_path / "x.duckdb")])
    opts = _bench_options(args, settings.settings_from_args(args), command=command, cancellation=CancellationToken())
    assert opts.epochs == epochs == default_epochs(command)
    assert f"(default {epochs})" in _subparser(command)._option_string_actions["--epochs"].help


def test_no_bench_flag_spells_its_default_out() -> None:
    """`_bench.py` passes no literal default other than None (a literal would be a second declaration)."""
    path = ROOT / "runners" / "commands" / "_bench.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for kw in node.keywords:
                if kw.arg == "default":
                    literal = isinstance(kw.value, ast.Constant) and kw.value.value is not None
                    assert not literal, f"_bench.py:{node.lineno} spells its default out"
                    assert not (isinstance(kw.value, ast.Attribute) and isinstance(kw.value.value, ast.Attribute)), (
                        f"_bench.py:{node.lineno} names an enum member as its default"
                    )


# -- the record mode: not given is `none`, told apart from a `none` given ----------------------------------------
def test_the_record_mode_not_given_replays_and_is_stored_as_none(tmp_path: Path) -> None:
    from runners.plan.options import RecordMode

    assert BenchOptions().record_mode is None and BenchOptions().mode is RecordMode.NONE
    assert BenchOptions(cassettes=tmp_path).replays and not BenchOptions(cassettes=tmp_path, record_mode="all").replays
    assert not BenchOptions().replays, "no cassettes: nothing to replay"
    option = next(o for o in run_options.declared() if o.name == "record_mode")
    assert option.column_value(BenchOptions(cassettes=tmp_path)) == "none"
    assert option.column_value(BenchOptions()) is None, "no cassettes: no record mode stored"
    assert run_options.saved_values(BenchOptions())["record_mode"] == "none"
    assert option.from_column("none") is None and option.from_column(None) is None
    assert option.from_column("all") is RecordMode.ALL
    assert option.from_arg("none") is RecordMode.NONE, "given on the command line: the rules see it"
