"""`harness-bench real-models`: replay every committed real-model recording offline, check it against its summary,
then `recommend` per model and the gate on each real upgrade and downgrade, written as Markdown + HTML."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import (
    EXIT_OK,
    EXIT_REGRESSION,
    ArgumentError,
    Parser,
    _check_outputs,
    _error,
    _fail,
    _say,
    _sub,
)
from runners.domain.input_files import what_is
from runners.domain.repository import hint_for_missing
from runners.plan.flags import Flag, FlagModel
from runners.store.output_files import NamedPath

__all__ = ["register", "run"]


class _RealModelsFlags(FlagModel):
    """`real-models`' flags: where the recordings are, where the replay and the report go."""

    cassettes: Annotated[
        Path, Flag(help="folder holding <model>/summary.json and its cassettes (default {default})")
    ] = Path("cassettes")
    """The folder of the recordings."""
    db: Annotated[Path | None, Flag(help="keep the replay's database here (default: a temporary file, removed)")] = None
    """Where the replay's database is kept (None: a temporary file)."""
    out: Annotated[Path, Flag(help="output folder (default {default})")] = Path("reports/real-models")
    """The report's folder."""


def register(sub: Any) -> None:
    p = _sub(sub, "real-models", "replay the committed real-model recordings; recommend and gate them; write a report",
             "Replays each cassettes/<model>/summary.json's sweep offline (--record-mode none, no server, no key)"
             " into one database (label = the model), checks it yields the committed summary (exit 1 naming the"
             " differing numbers), then writes OUT/report.md and OUT/report.html: pass rates per family, what the"
             " Harness did, recommend per model, which stop rule pays per model (compare-stops' table and plot,"
             " OUT/stop-rules-<model>.png) and the gate on each upgrade and downgrade at NO_GAIN threshold 2."
             " Exit 0 written, 1 a replay differs from its summary, 2 unusable input.")  # fmt: skip
    _RealModelsFlags.add_flags(p, "real-models")
    p.set_defaults(func=run)


def _settings(sweep_args: tuple[str, ...], where: Path) -> Any:
    """The recording's settings, read by a parser of the sweep's flags (defaults filled in)."""
    from runners.commands._bench import _add_bench
    from runners.plan import settings
    from runners.rendering.real_report import RecordingSettings

    parser = Parser(prog="harness-bench sweep")
    _add_bench(parser, sweep=True)  # the flags `harness-bench sweep` declares, as runners/commands/sweep.py does
    try:
        args = parser.parse_args(list(sweep_args))
        values = settings.settings_from_args(args)
        axes = settings.axes_from_args(args)
    except (ArgumentError, ValueError) as exc:
        _fail(f"{where}: sweep_args are not `harness-bench sweep` flags ({exc})")
    thresholds = axes.get("no_gain_threshold") or (values.config.no_gain_threshold,)
    return RecordingSettings(
        model=values.model_settings.model.raw, tool_call_format=str(values.model_settings.tool_call_format),
        tool_choice=values.model_settings.tool_choice, temperature=values.model_settings.temperature,
        deadline_seconds=values.config.deadline_seconds, thresholds=tuple(t for t in thresholds if isinstance(t, int)),
        epochs=args.epochs or 3,
    )  # fmt: skip


def _sweep_of(recording: Any, db: Path) -> Any:
    """The sweep that replays `recording` into `db`: its flags, offline from its cassettes under its label, read by
    the parser of `harness-bench sweep` as that command reads them."""
    from runners.commands._bench import _add_bench, _bench_options
    from runners.pipelines.real_models import ReplaySweep
    from runners.plan import settings

    summary = recording.summary
    argv = [*summary.sweep_args, "--cassettes", str(recording.folder), "--record-mode", "none", "--db", str(db),
            "--label", summary.label]  # fmt: skip
    parser = Parser(prog="harness-bench sweep")
    _add_bench(parser, sweep=True)
    args = parser.parse_args(argv)
    options = _bench_options(args, command="sweep")
    return ReplaySweep(grid={} if options.resume else settings.axes_from_args(args), options=options)


def run(args: argparse.Namespace) -> int:
    from runners.live.models import MODELS
    from runners.pipelines.real_models import RecordingError, build, find_recordings
    from runners.rendering.real_report import ReplayMismatch, render_html, render_markdown, stops_figures
    from runners.store.output_files import write_bytes, write_text

    flags = _RealModelsFlags.from_args(args, "real-models")
    if flags.out.exists() and not flags.out.is_dir():
        _fail(f"--out {flags.out} is {what_is(flags.out)}; give a folder (it will hold report.md and report.html)")
    inputs = [NamedPath("--cassettes", flags.cassettes)]
    if flags.db is not None:
        inputs.append(NamedPath("--db", flags.db))
        if flags.db.exists():
            _fail(f"--db {flags.db} exists; give a new file (the replay writes every model into it)")
    md_path, html_path = flags.out / "report.md", flags.out / "report.html"
    _check_outputs([NamedPath("--out", md_path), NamedPath("--out", html_path)], inputs)
    if any(flags.cassettes.resolve() in (p.resolve(), *p.resolve().parents) for p in (md_path,)):
        _fail(f"--out {flags.out} is inside --cassettes {flags.cassettes}: the report would land among its inputs")
    if not flags.cassettes.exists() and hint_for_missing(flags.cassettes):
        _fail(f"--cassettes {flags.cassettes}: no such folder{hint_for_missing(flags.cassettes)}")
    try:
        recordings = find_recordings(flags.cassettes)
    except RecordingError as exc:
        _fail(str(exc))
    settings = {r.summary.label: _settings(r.summary.sweep_args, r.folder / "summary.json") for r in recordings}
    with tempfile.TemporaryDirectory(prefix="hb-real-models-") as tmp:
        db = flags.db if flags.db is not None else Path(tmp) / "replay.duckdb"
        try:
            built = build(recordings, db, settings, list(MODELS), _sweep_of)
        except RecordingError as exc:
            _fail(str(exc))
        if isinstance(built, list):
            for mismatch in built:
                assert isinstance(mismatch, ReplayMismatch)
                shown = "; ".join(mismatch.differences[:12])
                more = f" (+{len(mismatch.differences) - 12} more)" if len(mismatch.differences) > 12 else ""
                _error(f"{mismatch.model}: the replay does not yield the committed summary: {shown}{more}")
            return EXIT_REGRESSION
        probes = _probes(flags.cassettes, Path(tmp) / "probes.duckdb", built)  # apart: --db holds the sweeps
        if probes is None:
            return EXIT_REGRESSION
        built = built.model_copy(update={"probes": probes})
    command = "harness-bench real-models" + ("" if flags.cassettes == Path("cassettes") else f" --cassettes"
                                             f" {flags.cassettes}")  # fmt: skip
    figures = stops_figures(built)
    pngs = {flags.out / name: png for name, png in figures.items()}
    _check_outputs([NamedPath("--out", p) for p in (*pngs, md_path, html_path)], inputs)  # names known only now
    for path, png in pngs.items():
        write_bytes(NamedPath("--out", path), png)
    write_text(NamedPath("--out", md_path), render_markdown(built, command))
    write_text(NamedPath("--out", html_path), render_html(built, command, figures))
    for gate in built.gates:
        if gate.downgrade_passed:
            _say(f"warning: the downgrade {gate.baseline} → {gate.candidate} PASSED the gate", stderr=True)
    _say(f"wrote {md_path} and {html_path}")
    return EXIT_OK


def _probes(cassettes: Path, db: Path, built: Any) -> tuple[Any, ...] | None:
    """Every committed tag-probe recording replayed offline into `db` and checked against its summary (None, each
    mismatch said, when one does not replay to it); beside each, what the model's sweep recommends."""
    from runners.pipelines.real_probes import find_probe_recordings, replay_probe
    from runners.plan.rules import UsageError
    from runners.rendering.real_probes import ProbeReport

    try:
        recordings = find_probe_recordings(cassettes)
    except ValueError as exc:
        _fail(str(exc))
    # the Harness as it ships (an ablation or the new held-out cases alone would answer another question)
    swept = {m.summary.model: m.recommended.threshold for m in built.models if m.summary.baseline}
    out, ok = [], True
    for rec in recordings:
        try:
            got = replay_probe(rec, db, _plan_of)
        except (ValueError, UsageError) as exc:  # a flag the plan refuses: one line
            _fail(str(exc))
        if got != rec.summary.measured:
            _error(f"{rec.folder / 'summary.json'}: the probe's replay does not yield the committed summary"
                   f" (judged {got.judged} vs {rec.summary.measured.judged}, right {got.right} vs"
                   f" {rec.summary.measured.right})")  # fmt: skip
            ok = False
        out.append(ProbeReport(model=rec.summary.model, folder=rec.folder.name, cases=rec.summary.cases,
                               measured=got, swept=swept.get(rec.summary.model)))  # fmt: skip
    return tuple(out) if ok else None


def _plan_of(recording: Any, db: Path) -> Any:
    """The plan (and `--probe` points) that replay a probe recording into `db`: its flags, offline from its cassettes
    under the model's name, read by the parser of `harness-bench tag-probe` as that command reads them."""
    from runners.commands._bench import TagProbeFlags, _add_bench, _bench_options, probe_points_given
    from runners.plan.run_plan import plan_run
    from runners.store.resume import STORED_RUNS

    summary = recording.summary
    argv = [*summary.probe_args, "--cassettes", str(recording.folder), "--record-mode", "none",
            "--db", str(db), "--label", f"{summary.model}-probe"]  # fmt: skip
    parser = Parser(prog="harness-bench tag-probe")  # tag-probe's own arguments, as that command declares them
    _add_bench(parser, sweep=False)
    TagProbeFlags.add_flags(parser, "tag-probe")
    args = parser.parse_args(argv)
    args.command = "tag-probe"
    plan = plan_run(_bench_options(args, command="run"), STORED_RUNS)
    flags = TagProbeFlags.from_args(args, "tag-probe")
    return plan, (probe_points_given(flags.probe, plan.cases) if flags.probe else None)
