"""One declaration per option: each option of a run is one field of its concern's model (runners/plan/options.py);
its flag, type, bounds, default and help in every command, the flags `--resume` refuses, a sweep's saved options and a
bench run's columns all come from that field, and an option declared only in a test reaches --help, bench_runs, the
sweep's saved options and resume with no other edit."""

from __future__ import annotations

import argparse
import ast
import functools
import json
from pathlib import Path
from typing import Annotated

import duckdb
import pytest
from pydantic import Field

from runners.cli import build_parser, main
from runners.plan.declarations import Declarations, declaring
from runners.plan.flags import Flag, FlagError, FlagModel, Kind, Stored
from runners.plan.options import (
    BENCH,
    MAX_CONCURRENCY,
    MAX_EPOCHS,
    SWEEP_EPOCHS,
    BenchOptions,
    Execution,
    RecordMode,
    Replay,
    Selection,
    Storage,
)
from runners.store.connection import connect
from tests._rows import query as _q
from tests.runners.plan.test_settings import ONE, _drop_epoch

ROOT = Path(__file__).resolve().parents[3]


class StorageWithProbe(Storage):
    """`Storage` plus one option, as if it had been added to `Storage` itself."""

    probe_note: Annotated[str | None, Flag(metavar="TEXT", group=BENCH), Stored()] = None
    """A note kept with the run, an option declared only by this test."""


WITH_NOTE = Declarations(concerns={"storage": StorageWithProbe})
"""The bench's declarations with the probe option: passed to the commands that are to know it."""
main_with_note = functools.partial(main, declarations=WITH_NOTE)
"""`main` given these declarations."""


def _subparser(command: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = action.choices[command]
    return parser


def test_every_option_is_a_flag_of_run_and_sweep() -> None:
    for command in ("run", "sweep"):
        parser = _subparser(command)
        for concern in BenchOptions.CONCERNS.values():
            for d in concern.declared():
                assert d.flag in parser._option_string_actions, f"{command} has no {d.flag}"
                assert parser._option_string_actions[d.flag].dest == d.name


def test_a_new_option_appears_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "sweep"):
        with pytest.raises(SystemExit):
            main_with_note([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--probe-note TEXT" in text and "an option declared only by this test" in text


def test_a_new_option_is_stored_refused_on_resume_and_restored(tmp_path: Path) -> None:
    db = tmp_path / "run.duckdb"
    connect(db).close()  # a database made before the option existed: the column is added at connect
    assert main_with_note(["run", "--db", str(db), "--case", ONE, "--epochs", "2", "--probe-note", "kept"]) == 0
    ((bench_run_id, note),) = _q(db, "SELECT bench_run_id, probe_note FROM bench_runs")
    assert note == "kept"
    _drop_epoch(db, str(bench_run_id), 2)
    assert main_with_note(["run", "--db", str(db), "--resume", str(bench_run_id), "--probe-note", "other"]) == 2
    assert main_with_note(["run", "--db", str(db), "--resume", str(bench_run_id)]) == 0
    # the resume writes its options again: a value it did not restore would be lost here
    assert _q(db, "SELECT probe_note, status FROM bench_runs") == [("kept", "completed")]
    assert _q(db, "SELECT count(*) FROM case_runs") == [(2,)]


def test_a_new_option_is_saved_with_a_sweep_and_restored(tmp_path: Path) -> None:
    db = tmp_path / "sweep.duckdb"
    assert main_with_note(["sweep", "--db", str(db), "--case", ONE, "--epochs", "2", "--no-gain-threshold", "2,3",
                 "--probe-note", "swept"]) == 0  # fmt: skip
    ((sweep_id, saved),) = _q(db, "SELECT sweep_id, options_json FROM sweeps")
    assert json.loads(str(saved))["probe_note"] == "swept"
    ((point,),) = _q(db, "SELECT bench_run_id FROM bench_runs WHERE no_gain_threshold = 3")
    _drop_epoch(db, str(point), 2)
    con = duckdb.connect(str(db))
    con.execute("UPDATE sweeps SET status = 'interrupted'")
    con.close()
    assert main_with_note(["sweep", "--db", str(db), "--resume", str(sweep_id)]) == 0
    assert _q(db, "SELECT DISTINCT probe_note FROM bench_runs") == [("swept",)]
    assert _q(db, "SELECT count(*) FROM case_runs") == [(4,)]


def test_a_new_option_is_a_python_api_name_and_reproduces() -> None:
    from runners.plan.stored_plan import run_argv

    with declaring(WITH_NOTE):
        opts = BenchOptions.of(probe_note="kept", epochs=2)
        assert opts.storage.probe_note == "kept"  # type: ignore[attr-defined]
        assert run_argv(opts)[-4:] == ["--epochs", "2", "--probe-note", "kept"]


@pytest.mark.parametrize("command", ["run", "sweep", "cases", "serve-sim"])
def test_every_option_flag_comes_from_its_declaration(command: str) -> None:
    """Type (its bounds), metavar, help, choices and default of each option's flag are its declaration's, per
    command: a flag added by hand beside the declaration (with its own help or bounds) fails here."""
    parser = _subparser(command)
    selection_only = command in ("cases", "serve-sim")
    for concern in BenchOptions.CONCERNS.values():
        for d in concern.declared():
            if selection_only and d.name not in ("evalsets", "case_ids"):
                assert d.flag not in parser._option_string_actions or d.flag == "--db", (command, d.flag)
                continue
            action = parser._option_string_actions[d.flag]
            assert action.help == d.help_in(command), f"{command} {d.flag}: help"
            assert action.metavar == d.metavar_in(command), f"{command} {d.flag}: metavar"
            if d.kind is Kind.CHOICE:
                assert list(action.choices or []) == list(d.choices), d.flag
            elif d.kind is not Kind.SWITCH:
                assert action.type is d.arg_type(), f"{command} {d.flag}: type"
                assert action.default == (None if d.tells_given else d.arg_default(command)), d.flag


def test_no_command_adds_an_option_flag_by_hand() -> None:
    """The commands that take options place their flags from the declaration; none spells one out (`show --label`,
    which picks stored runs, is another flag of another command), and `run`/`sweep`'s shared module adds no flag
    at all by hand."""
    flags = {d.flag for concern in BenchOptions.CONCERNS.values() for d in concern.declared()}
    taking = ("_bench.py", "_common.py", "run.py", "sweep.py", "cases.py", "serve_sim.py")
    for path in [ROOT / "runners" / "commands" / name for name in taking]:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
                first = node.args[0]
                assert path.name != "_bench.py", f"_bench.py:{node.lineno} adds a flag by hand"
                if isinstance(first, ast.Constant) and first.value in flags:
                    raise AssertionError(f"{path.name}:{node.lineno} adds {first.value} by hand")


def hand_made_flags(folder: Path) -> list[str]:
    """`file:line` of every `add_argument(` call in the command modules of `folder` (a flag declared beside the
    mechanism, not as a field of a FlagModel)."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_every_command_declares_its_flags_as_fields(tmp_path: Path) -> None:
    """One mechanism for every command: no command module adds a flag with argparse itself; the check bites."""
    assert hand_made_flags(ROOT / "runners" / "commands") == []
    (tmp_path / "planted.py").write_text("def register(p):\n    p.add_argument('--x', type=int)\n")
    assert hand_made_flags(tmp_path) == ["planted.py:2"]


def test_the_epochs_flag_takes_its_bounds_and_default_from_the_declaration(tmp_path: Path) -> None:
    epochs = Selection.field("epochs")
    assert "default 1)" in epochs.help_in("run") and "default 3)" in epochs.help_in("sweep")
    assert epochs.bounds is not None and (epochs.bounds.lo, epochs.bounds.hi) == (1, MAX_EPOCHS)
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


# -- one place for each default: the flags of run and sweep read the options' declaration ----------------------
_FLAG_DEFAULTS = {"--db": (Storage, "db"), "--concurrency": (Execution, "concurrency"),
                  "--max-in-flight": (Execution, "max_in_flight"), "--executor": (Execution, "executor")}  # fmt: skip


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_bench_flags_default_to_the_options_declaration(command: str) -> None:
    """A flag's default (and the default its help names) is its field's (no second literal to drift)."""
    parser = _subparser(command)
    for flag, (concern, name) in _FLAG_DEFAULTS.items():
        default = concern.model_fields[name].default
        assert parser._option_string_actions[flag].default == getattr(default, "value", default), flag
    args = parser.parse_args([])
    assert args.epochs is None  # the per-command epochs apply when the options are read, below


def test_a_changed_declaration_changes_the_flags() -> None:
    """The check bites: a new default declared on the model alone reaches the flag and its help."""

    class Seven(Execution):
        concurrency: Annotated[int, Flag(metavar="N", group=BENCH, help="case runs in flight (default {default})")] = (
            Field(default=7, ge=1, le=MAX_CONCURRENCY)
        )

    with declaring(Declarations(concerns={"execution": Seven})):
        action = _subparser("run")._option_string_actions["--concurrency"]
    assert action.default == 7 and action.help == "case runs in flight (default 7)"


@pytest.mark.parametrize(("command", "epochs"), [("run", 1), ("sweep", SWEEP_EPOCHS)])
def test_each_command_plans_its_declared_epochs(command: str, epochs: int, tmp_path: Path) -> None:
    from runners.commands._bench import _bench_options

    args = _subparser(command).parse_args(["--db", str(tmp_path / "x.duckdb")])
    opts = _bench_options(args, command=command)
    assert opts.selection.epochs == epochs == Selection.field("epochs").default_in(command)
    assert f"(default {epochs})" in _subparser(command)._option_string_actions["--epochs"].help


# -- the Python API names the same options --------------------------------------------------------------------
def test_the_python_api_names_options_and_settings_and_refuses_in_one_line(tmp_path: Path) -> None:
    opts = BenchOptions.of(case_ids=[ONE], epochs=2, db=tmp_path / "a.duckdb", model="scripted:rewriter", label="x")
    assert (opts.selection.case_ids, opts.selection.epochs, opts.storage.label) == ((ONE,), 2, "x")
    assert opts.settings.model_settings.model.raw == "scripted:rewriter"
    for values, words in (({"epochs": 0}, "--epochs 0: must be an integer from 1 to 10000"),
                          ({"epoch": 2}, "unknown option(s) epoch; known: "),
                          ({"executor": "cloud"}, "--executor 'cloud'")):  # fmt: skip
        with pytest.raises(FlagError) as info:
            BenchOptions.of(**values)
        assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_a_numeric_option_declares_both_bounds() -> None:
    """The declaration refuses a number without a range (every numeric flag is bounded: runners/plan/flags.py)."""

    class Unbounded(FlagModel):
        n: int = Field(default=1, ge=1)
        """A count with no upper bound."""

    with pytest.raises(TypeError, match=r"Unbounded.n: a numeric flag declares both bounds"):
        Unbounded.declared()


# -- the record mode: not given is `none`, told apart from a `none` given ----------------------------------------
def test_the_record_mode_not_given_replays_and_is_stored_as_none(tmp_path: Path) -> None:
    assert Replay().record_mode is None and Replay().mode is RecordMode.NONE
    assert Replay(cassettes=tmp_path).replays and not Replay(cassettes=tmp_path, record_mode=RecordMode.ALL).replays
    assert not Replay().replays, "no cassettes: nothing to replay"
    assert Replay(cassettes=tmp_path).column_values()["record_mode"] == "none"
    assert Replay().column_values()["record_mode"] is None, "no cassettes: no record mode stored"
    assert BenchOptions().saved_values()["record_mode"] == "none"
    field = Replay.field("record_mode")
    assert field.decode("none") is None and field.decode(None) is None
    assert field.decode("all") is RecordMode.ALL
    assert field.from_arg("none") is RecordMode.NONE, "given on the command line: the rules see it"
