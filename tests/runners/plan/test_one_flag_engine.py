"""One flag engine: every argparse argument of the bench is added by runners/plan/flags.py, a choice list prints
one way, a new model setting is one field (every place it must reach, reached), and a field renamed without a
migration is caught here instead of adding an empty column."""

from __future__ import annotations

import argparse
import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from runners.cli import build_parser, main
from runners.endpoints.simulator import SimulatorServer
from runners.live._xllamacpp_serve import ServeFlags
from runners.live.models import get
from runners.plan.declarations import Declarations, declaring
from runners.plan.model_settings import BenchSetting, ModelSettings
from runners.plan.options import BenchOptions, DeclaredColumns, declared_columns
from runners.plan.settings import SettingValue
from runners.plan.stored_plan import run_argv
from runners.store.declared_columns import unmigrated_columns
from tests._rows import query as _q
from tests.runners.plan.test_settings import ONE, ConfigWithProbe, _drop_epoch

ROOT = Path(__file__).resolve().parents[3]
ENGINE = ROOT / "runners" / "plan" / "flags.py"


# -- one adder -----------------------------------------------------------------------------------------------------
def _arguments_added(source: str) -> list[int]:
    """The lines of `source` that add an argparse argument (`x.add_argument(...)`)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"]  # fmt: skip


def test_no_argument_is_added_outside_the_flag_engine() -> None:
    assert _arguments_added("import argparse\nargparse.ArgumentParser().add_argument('--x')\n") == [2], "it bites"
    paths = [*sorted((ROOT / "runners").rglob("*.py")), ROOT / "scripts" / "record_real.py"]
    found = [f"{path.relative_to(ROOT)}:{line}" for path in paths if path != ENGINE
             for line in _arguments_added(path.read_text())]  # fmt: skip
    assert found == [], "declare the flag as a field of a FlagModel (runners/plan/flags.py) instead"


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_every_choice_list_prints_one_way(command: str) -> None:
    """argparse's `{a,b,c}`, for an option's enum and for a setting's alike (never `a|b|c`)."""
    action = next(a for a in build_parser()._actions if a.dest == "command")
    text = action.choices[command].format_help()  # type: ignore[index]
    assert not re.search(r"[a-z0-9-]\|[a-z0-9-]", text), "a choice list printed as a|b (PATH|FAMILY names no choice)"
    for shown in (
        "{true,false,omit}",
        "{native,json}",
        "{adaptive,static}",
        "{native,pydantic-ai,openai-agents,plain}",
    ):
        assert shown in text, shown


# -- a new model setting is one field ------------------------------------------------------------------------------
class SeededModelSettings(ModelSettings):
    """ModelSettings plus one field, as if it had been added to ModelSettings itself."""

    seed: Annotated[int | None, BenchSetting(sweepable=True)] = Field(default=None, ge=0, le=2**31 - 1)
    """Sampling seed sent with each request (unset: none), a setting declared only by this test."""


SEEDED = Declarations(model_settings=SeededModelSettings)
"""The bench's declarations with the seed: passed to what is to know it."""
seeded = functools.partial(main, declarations=SEEDED)
"""`main` given those declarations."""


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    from runners.domain.evalset import load_cases
    from runners.domain.profiles import trajectory_for_model

    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as server:
        yield server


def test_a_new_model_setting_reaches_every_place(
    tmp_path: Path, sim: SimulatorServer, capsys: pytest.CaptureFixture[str]
) -> None:
    for command, shown in (("run", "--seed N "), ("sweep", "--seed N[,…] ")):  # run and sweep --help
        with pytest.raises(SystemExit):
            seeded([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert shown in text and "Sampling seed sent with each request" in text, command
    endpoint = ["--model", "openai:scripted", "--base-url", sim.base_url]

    db = tmp_path / "sweep.duckdb"  # a sweep axis, a column of bench_runs and of case_runs
    assert seeded(["sweep", "--db", str(db), "--case", ONE, "--epochs", "1", "--no-gain-threshold", "2", *endpoint,
                   "--seed", "3,5"]) == 0  # fmt: skip
    assert sorted(_q(db, "SELECT seed FROM bench_runs")) == [(3,), (5,)]
    assert sorted(_q(db, "SELECT seed FROM case_runs")) == [(3,), (5,)]
    assert seeded(["run", "--seed", "-1"]) == 2 and "--seed -1: must be an integer ≥ 0" in capsys.readouterr().err

    db = tmp_path / "run.duckdb"  # kept by the run, restored by --resume, refused when given again
    assert seeded(["run", "--db", str(db), "--case", ONE, "--epochs", "2", *endpoint, "--seed", "9"]) == 0
    ((run_id,),) = _q(db, "SELECT bench_run_id FROM bench_runs")
    _drop_epoch(db, str(run_id), 2)
    assert seeded(["run", "--db", str(db), "--resume", str(run_id), "--seed", "4"]) == 2
    assert seeded(["run", "--db", str(db), "--resume", str(run_id)]) == 0
    assert _q(db, "SELECT epoch, seed FROM case_runs ORDER BY epoch") == [(1, 9), (2, 9)]

    with declaring(SEEDED):  # the command line of a recorded model, and of a run, rendered from the settings
        local = get("qwen2.5-coder-1.5b")
        seeded_settings = local.run_settings("http://127.0.0.1:8081/v1").with_values({"seed": 7})
        flags = local.run_flags(settings=seeded_settings)
        assert flags[flags.index("--seed") + 1] == "7"
        argv = run_argv(BenchOptions.of(settings=seeded_settings), always=("model",))
        assert argv[argv.index("--seed") + 1] == "7"
    assert "--seed" not in get("qwen2.5-coder-1.5b").run_flags(), "the bench's own declarations know no seed"


# -- a column renamed needs its migration --------------------------------------------------------------------------
def test_every_declared_column_is_known_to_the_migrations() -> None:
    assert unmigrated_columns(declared_columns()) == []


def test_a_renamed_field_without_a_migration_is_caught() -> None:
    today = declared_columns()
    renamed = DeclaredColumns(
        tuple(("run_label" if name == "label" else name, kind) for name, kind in today.bench_columns),
        today.case_columns, today.swept,
    )  # fmt: skip
    problems = unmigrated_columns(renamed)
    assert len(problems) == 2 and problems[0].startswith("bench_runs.run_label: a column no migration knows")
    assert problems[1].startswith("bench_runs.label: no field declares it any more")
    with declaring(Declarations(harness_config=ConfigWithProbe)):  # a new field: listed, or caught
        assert [p.split(":")[0] for p in unmigrated_columns(declared_columns())] == [
            "bench_runs.probe_budget", "case_runs.probe_budget",
        ]  # fmt: skip


# -- a command line rendered from a model parses back to it ----------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    port=st.integers(0, 65535), threads=st.integers(1, 1024), ctx=st.integers(1, 1 << 24),
    alias=st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=20),
    template=st.none() | st.just(Path("t.jinja")), every=st.booleans(),
)  # fmt: skip
def test_a_rendered_command_line_parses_back(
    port: int, threads: int, ctx: int, alias: str, template: Path | None, every: bool
) -> None:
    flags = ServeFlags(model=Path("m.gguf"), port=port, alias=alias, threads=threads, ctx_size=ctx,
                       chat_template_file=template)  # fmt: skip
    parser = argparse.ArgumentParser()
    ServeFlags.add_flags(parser, "serve")
    assert ServeFlags.from_args(parser.parse_args(flags.argv(every=every)), "serve") == flags


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_rendered_sweep_axes_parse_back(data: st.DataObject) -> None:
    from runners.plan import settings as run_settings

    axes: dict[str, tuple[SettingValue, ...]] = {}
    for s in run_settings.declaration().sweepable:
        if data.draw(st.booleans()):
            values = st.sampled_from(s.choices) if s.choices else st.integers(int(s.lower or 1), 10_000)
            axes[s.name] = tuple(dict.fromkeys(data.draw(st.lists(values, min_size=1, max_size=4))))
    action = next(a for a in build_parser()._actions if a.dest == "command")
    args = action.choices["sweep"].parse_args(run_settings.axis_flags(axes))  # type: ignore[index]
    parsed = run_settings.axes_from_args(args)
    assert {name: parsed[name] for name in axes} == axes


def test_the_recording_sweep_is_rendered_from_the_registry() -> None:
    """`scripts/record_real.py`'s sweep flags are the registry's request settings, parsed back by `sweep` itself."""
    from runners.plan import settings as run_settings
    from scripts.record_real import sweep_flags

    local = get("qwen2.5-coder-0.5b")
    action = next(a for a in build_parser()._actions if a.dest == "command")
    args = action.choices["sweep"].parse_args(sweep_flags(local.name, "plain", "1,3"))  # type: ignore[index]
    values = run_settings.settings_from_args(args).values()
    assert values["model"] == f"openai:{local.name}" and values["tool_choice"] == local.request.tool_choice
    assert values["tool_call_format"] == local.request.tool_call_format.value and values["deadline"] == 3600
    assert run_settings.axes_from_args(args)["no_gain_threshold"] == (1, 3)
    assert (args.epochs, args.agent) == (1, "plain")
