"""Every numeric flag of every command has a lower and an upper bound: a value outside is one line naming the flag
and the value with the allowed range, exit 2, nothing written. The flags are read off the parser, so a new numeric
flag without declared bounds fails here. The sequential gate's memory stays flat at its largest budget."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from runners import cli
from runners.cli import build_parser, main
from runners.decisions.gate_thresholds import MAX_LOOKS
from runners.plan.flags import Bounded
from runners.plan.rules import MAX_EPOCHS
from runners.plan.settings import declaration
from tests._cli_batch import Ran, batch_argv, read_batch
from tests._db import open_read_only
from tests.runners.domain.test_input_bounds import _MEASURE, PEAK_MB

ROOT = Path(__file__).resolve().parents[3]
GATE_ADDRESS_SPACE = 4 << 30
"""The gate child's address space: DuckDB and numpy map more than the 1 GiB a YAML reader gets, while levels
sized by an unbounded budget (32 GB at --budget 10000 --stage 1) still fail fast instead of taking the machine."""
CASES = ["diagnosable_gateway_risk_pool_exhausted_t1", "diagnosable_duplicate_settlement_batch_rerun_shop42"]


@dataclass(frozen=True)
class Range:
    """A numeric flag's declared range, as the test reads it off the parser."""

    command: str
    """The subcommand."""
    flag: str
    """The option string."""
    names: tuple[str, ...]
    """Every option string of the flag (the refusal names one of them)."""
    lo: float
    """Lower bound."""
    hi: float
    """Upper bound."""
    integer: bool
    """An integer flag."""
    lo_open: bool
    """`lo` itself is refused."""
    hi_open: bool
    """`hi` itself is refused."""


def _numeric(parse: object) -> bool:
    """Whether an argparse type accepts a number and gives one (or a tuple of them: a sweep axis)."""
    for text in ("1", "2", "0.5", "300"):
        try:
            value = parse(text)  # type: ignore[operator]
        except Exception:  # any refusal of the probe means "not this number"
            continue
        values = value if isinstance(value, tuple) else (value,)
        if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return True
    return False


def numeric_flags(parser: argparse.ArgumentParser) -> tuple[list[Range], list[str]]:
    """(the numeric flags with their declared ranges, the numeric flags with none: `command --flag`)."""
    settings = {s.name: s for s in declaration().settings}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    ranges: list[Range] = []
    unbounded: list[str] = []
    for command, p in sub.choices.items():
        for action in p._actions:
            parse = action.type
            if parse is None or action.choices or not callable(parse):
                continue
            flag = action.option_strings[0] if action.option_strings else action.dest
            names = tuple(action.option_strings) or (flag,)
            if isinstance(parse, Bounded):
                ranges.append(Range(command, flag, names, parse.lo, parse.hi, parse.integer, parse.lo_open,
                                    parse.hi_open))  # fmt: skip
            elif action.dest in settings and getattr(parse, "__name__", None) == action.dest:
                s = settings[action.dest]
                if s.kind.value in ("int", "float"):
                    if s.lower is None or s.upper is None:
                        unbounded.append(f"{command} {flag}")
                    else:
                        ranges.append(Range(command, flag, names, s.lower, s.upper, s.kind.value == "int",
                                            s.lower_strict, s.upper_strict))  # fmt: skip
            elif parse in (int, float) or _numeric(parse):
                unbounded.append(f"{command} {flag}")
    return ranges, unbounded


PARSER = build_parser()
"""The parser the ranges are read from. `main` builds its own on every call (about 16 ms, hundreds of times in this
module): the in-process refusals below are parsed by this one, built by the same code."""
RANGES, UNBOUNDED = numeric_flags(PARSER)


def _outside(r: Range, side: str) -> str:
    """The nearest value outside `r` on `side` (or, for `huge`, the issue's 10**20 with the sign of `side`)."""
    if side == "above":
        if r.integer:
            return str(int(r.hi) + 1)
        return repr(r.hi if r.hi_open else math.nextafter(r.hi, math.inf))
    if side == "below":
        if r.integer:
            return str(int(r.lo) - 1)
        return repr(r.lo if r.lo_open else math.nextafter(r.lo, -math.inf))
    return "100000000000000000000" if side == "huge" else "-100000000000000000000"


def _spellings(bound: float) -> set[str]:
    texts = {f"{bound:g}", repr(bound)}
    if float(bound).is_integer():
        texts.add(str(int(bound)))
    return texts


def test_every_numeric_flag_has_declared_bounds() -> None:
    assert UNBOUNDED == []
    names = {f"{r.command} {r.flag}" for r in RANGES}
    wanted = {
        "gate --budget", "gate --stage", "gate --k", "gate --alpha", "gate --max-mde", "gate --max-pass-rate-drop",
        "gate --max-cost-increase", "gate --target-mde", "show --width", "show --epoch", "diff --width",
        "diff --epoch", "run --epochs", "run --concurrency", "run --max-in-flight", "run --max-tokens",
        "run --max-model-calls", "sweep --epochs", "sweep --max-tool-calls", "sweep --concurrency",
        "report --margin", "recommend --margin", "serve-sim --port", "run --record-ttl-seconds",
    }  # fmt: skip
    assert wanted <= names, wanted - names


def test_a_new_numeric_flag_without_bounds_is_found() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))

    def custom(text: str) -> int:
        return int(text)

    sub.choices["gate"].add_argument("--new-int", type=int)
    sub.choices["show"].add_argument("--new-float", type=float)
    sub.choices["diff"].add_argument("--new-custom", type=custom)
    _, unbounded = numeric_flags(parser)
    assert unbounded == ["gate --new-int", "show --new-float", "diff --new-custom"]


@pytest.mark.parametrize("side", ["above", "below", "huge", "-huge"])
@pytest.mark.parametrize("r", RANGES, ids=[f"{r.command} {r.flag}" for r in RANGES])
def test_a_value_outside_a_numeric_flag_is_one_line_exit_2_writing_nothing(
    r: Range, side: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # a command that ran would write here (bench.duckdb, gate-summary.md, ...)
    monkeypatch.setattr(cli, "build_parser", lambda command=None: PARSER)
    value = _outside(r, side)
    assert main([r.command, f"{r.flag}={value}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    line = captured.err
    assert any(line.startswith(f"error: {name} {value}: ") for name in r.names), line
    bound = r.hi if side in ("above", "huge") else r.lo
    refusal = line.split(f" {value}: ", 1)[1]
    assert any(t in refusal for t in _spellings(bound)), line  # the allowed range is named after the value
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("r", RANGES, ids=[f"{r.command} {r.flag}" for r in RANGES])
def test_the_bounds_themselves_are_allowed_unless_open(r: Range) -> None:
    parse = next(a.type for a in _subparser(r.command)._actions if a.option_strings and a.option_strings[0] == r.flag)
    assert callable(parse)
    for bound, is_open in ((r.lo, r.lo_open), (r.hi, r.hi_open)):
        text = str(int(bound)) if r.integer else repr(float(bound))
        if is_open:
            with pytest.raises(argparse.ArgumentTypeError):
                parse(text)
        else:
            value = parse(text)
            assert (value[0] if isinstance(value, tuple) else value) == bound


def _subparser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[command]
    return found


def test_the_gate_bounds_are_what_they_size() -> None:
    ranges = {r.flag: r for r in RANGES if r.command == "gate"}
    assert ranges["--budget"].hi == ranges["--stage"].hi == ranges["--k"].hi == MAX_EPOCHS  # epochs, like --epochs
    alpha = ranges["--alpha"]
    assert (alpha.lo, alpha.hi, alpha.lo_open, alpha.hi_open) == (0, 1, True, True)
    show = {r.flag: r for r in RANGES if r.command == "show"}
    assert (show["--width"].lo, show["--width"].hi) == (40, 1_000)


# -- the commands that read a database ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runners.plan.options import BenchOptions
    from runners.run.bench import plan_run, run_bench

    db = tmp_path_factory.mktemp("bounds") / "two.duckdb"
    for label, model in (("base", "scripted"), ("cand", "scripted:rewriter?k=3")):
        options = BenchOptions.of(case_ids=CASES, model=model, label=label, db=db, epochs=1)
        run_bench(plan_run(options))
    return db


@pytest.mark.parametrize("side", ["A", "B"])
@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "x\x1b]0;T\x07", " lead", "L" * 201])
def test_diff_checks_a_label_argument_like_label(
    two_labels: Path, side: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = (name, "base") if side == "A" else ("base", name)
    before = two_labels.read_bytes()
    assert main(["diff", "--db", str(two_labels), a, b, "--case", CASES[0]]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"error: {side} ") and "a label is 1-200 letters" in captured.err
    assert "\x1b" not in captured.err and "\x07" not in captured.err
    assert two_labels.read_bytes() == before


def test_diff_still_takes_a_bench_run_id_and_a_label(two_labels: Path, capsys: pytest.CaptureFixture[str]) -> None:

    con = open_read_only(two_labels)
    try:
        row = con.execute("SELECT bench_run_id FROM bench_runs WHERE label = 'base'").fetchone()
    finally:
        con.close()
    assert row is not None
    assert main(["diff", "--db", str(two_labels), row[0], "cand", "--case", CASES[0]]) == 0
    assert capsys.readouterr().err == ""


def _measure(argv: list[str], cwd: Path) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MB) of `argv` run from the small launcher, under GATE_ADDRESS_SPACE."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(GATE_ADDRESS_SPACE), *argv], cwd=cwd, env=env, capture_output=True,
        text=True, errors="replace", timeout=300,
    )  # fmt: skip
    code, maxrss_kb = done.stdout.split()
    return int(code), done.stderr, int(maxrss_kb) / 1024


def test_the_sequential_gate_at_its_most_looks_stays_under_300_mb(two_labels: Path, tmp_path: Path) -> None:
    # The looks are what the gate's memory grows with (3.2 MB each for their levels): --budget 25 --stage 1 is the
    # most looks allowed, and the labels' one epoch reaches the first look, so every level is simulated.
    argv = [sys.executable, "-m", "runners.cli", "gate", "--db", str(two_labels), "--baseline", "base",
            "--candidate", "cand", "--sequential", "--budget", str(MAX_LOOKS), "--stage", "1"]  # fmt: skip
    code, stderr, peak = _measure(argv, tmp_path)
    assert code in (0, 3) and "Traceback" not in stderr, stderr[-2000:]  # a verdict: pass or inconclusive
    assert (tmp_path / "gate-summary.md").exists()
    assert peak < PEAK_MB, peak


def test_the_levels_of_the_largest_budget_stay_under_300_mb(tmp_path: Path) -> None:
    # The largest --budget with the fewest --stage it allows: the levels the gate would simulate for it.
    script = (
        "from runners.decisions import power; from runners.decisions.gate import sequential_looks;"
        f" looks = sequential_looks({MAX_EPOCHS}, {MAX_EPOCHS // MAX_LOOKS});"
        f" assert len(looks) == {MAX_LOOKS};"
        f" power.sequential_levels(tuple(e / {MAX_EPOCHS} for e in looks), 0.05)"
    )
    code, stderr, peak = _measure([sys.executable, "-c", script], tmp_path)
    assert code == 0, stderr[-2000:]
    assert peak < PEAK_MB, peak


TOO_MANY = [
    (MAX_EPOCHS, 1, f"--budget {MAX_EPOCHS} / --stage 1: {MAX_EPOCHS} looks; at most {MAX_LOOKS}"),
    (MAX_EPOCHS, MAX_EPOCHS // MAX_LOOKS - 1, f"looks; at most {MAX_LOOKS}"),
    (100, 1, f"--budget 100 / --stage 1: 100 looks; at most {MAX_LOOKS} (give --stage 4 or more)"),
    (MAX_EPOCHS, MAX_EPOCHS // MAX_LOOKS, "the first look of --stage 400 needs 400"),
    (10**20, 4, f"--budget 100000000000000000000: must be an integer from 1 to {MAX_EPOCHS}"),
]
"""Gates refused before any level is simulated: (--budget, --stage, what the one line says)."""


@pytest.fixture(scope="module")
def too_many(two_labels: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Ran], float]:
    """Every gate of TOO_MANY refused in turn by one process (its imports, most of each refusal's cost, paid once):
    (the folder it ran in, each refusal's exit code and stderr, the process's peak RSS in MB). A peak is a maximum:
    under the bound for the process, it is under the bound for each refusal in it."""
    cwd = tmp_path_factory.mktemp("refusals")
    results = tmp_path_factory.mktemp("results") / "results.json"  # outside `cwd`, which must stay empty
    argvs = [["gate", "--db", str(two_labels), "--baseline", "base", "--candidate", "cand", "--sequential",
              "--budget", str(budget), "--stage", str(stage)] for budget, stage, _ in TOO_MANY]  # fmt: skip
    code, stderr, peak = _measure(batch_argv(sys.executable, results, argvs), cwd)
    assert code == 0 and "Traceback" not in stderr, stderr[-2000:]
    return cwd, read_batch(results), peak


@pytest.mark.parametrize(("index", "needle"), [(i, needle) for i, (_, _, needle) in enumerate(TOO_MANY)],
                         ids=[f"{b}-{s}" for b, s, _ in TOO_MANY])  # fmt: skip
def test_too_many_looks_or_epochs_are_one_line_exit_2_in_flat_memory(
    too_many: tuple[Path, list[Ran], float], index: int, needle: str
) -> None:
    cwd, results, peak = too_many
    ran = results[index]
    assert ran.code == 2, ran.stderr[-2000:]
    assert ran.stderr.count("\n") == 1 and needle in ran.stderr and ran.stdout == "", ran.stderr
    assert list(cwd.iterdir()) == []
    assert peak < PEAK_MB, peak
