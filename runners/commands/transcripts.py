"""`harness-bench show`, `diff` and `export`: a stored case run's transcript, two transcripts of one case side by
side from their first divergent turn, and stored bench runs as Inspect AI logs or OpenTelemetry GenAI spans."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from runners.commands._common import EXIT_OK, _add_db, _check_outputs, _fail, _say, _sub, say
from runners.domain.input_files import what_is
from runners.domain.redaction import safe_url
from runners.plan.flags import Flag, FlagModel
from runners.plan.labels import label_arg
from runners.plan.rules import MAX_EPOCHS
from runners.store.output_files import NamedPath

__all__ = ["register", "run"]


def _epoch() -> Any:
    """--epoch: epochs count from 1 to what --epochs allows."""
    return Field(default=None, ge=1, le=MAX_EPOCHS)


def _width() -> Any:
    """--width: below 40 columns a turn's header does not fit; above 1,000 no terminal or page shows a line whole,
    and the text written grows with the width (a frame line per turn is the width long)."""
    return Field(default=80, ge=40, le=1_000)


_WIDTH_HELP = "wrap at this width, 40 to 1000 columns (default {default})"


class _ShowFlags(FlagModel):
    """`show`'s arguments: which case run, and how it is printed."""

    case_run: Annotated[str | None, Flag(positional=True, metavar="CASE_RUN_ID")] = None
    """the case run to show"""
    bench_run: Annotated[str | None, Flag(metavar="ID")] = None
    """bench run holding the case"""
    label: Annotated[str | None, Flag(parse=label_arg, metavar="LABEL")] = None
    """the label's newest case run of --case (and --epoch)"""
    case: Annotated[str | None, Flag(metavar="CASE")] = None
    """case id (in --bench-run or --label; without them, the latest bench run that ran it)"""
    epoch: Annotated[int | None, Flag(metavar="N", help="epoch (default: the first)")] = _epoch()
    """The epoch (None: the first)."""
    html: Annotated[Path | None, Flag(metavar="FILE")] = None
    """write a self-contained HTML page (/dev/stdout: to stdout)"""
    full: bool = False
    """print the system prompt in full"""
    width: Annotated[int, Flag(metavar="COLS", help=_WIDTH_HELP)] = _width()
    """The column the text wraps at."""


class _DiffFlags(FlagModel):
    """`diff`'s arguments: the two runs, the case and how it is printed."""

    a: Annotated[str, Flag(positional=True, metavar="A")]
    """baseline: bench run id or label"""
    b: Annotated[str, Flag(positional=True, metavar="B")]
    """candidate: bench run id or label"""
    case: Annotated[str, Flag(metavar="CASE")]
    """case id"""
    epoch: Annotated[int | None, Flag(metavar="N", help="epoch (default: the first)")] = _epoch()
    """The epoch (None: the first)."""
    width: Annotated[int, Flag(metavar="COLS", help=_WIDTH_HELP)] = _width()
    """The column the text wraps at."""


class _ExportFlags(FlagModel):
    """`export`'s flags: the format and where it goes, which bench runs, what the spans carry."""

    exclusive_required: ClassVar[tuple[str, ...]] = ("to",)

    inspect: Annotated[Path | None, Flag(exclusive="to", metavar="DIR")] = None
    """folder for the .eval files"""
    otel: Annotated[Path | None, Flag(exclusive="to", metavar="FILE")] = None
    """OTLP/JSON file: one ExportTraceServiceRequest (one case run's trace) per line (/dev/stdout: the lines to
    stdout)"""
    otlp_endpoint: Annotated[str | None, Flag(exclusive="to", metavar="URL")] = None
    """OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces"""
    bench_run: Annotated[str | None, Flag(metavar="ID")] = None
    """only this bench run"""
    label: Annotated[str | None, Flag(parse=label_arg, metavar="LABEL")] = None
    """only bench runs with this label"""
    otel_content: bool = False
    """with --otel or --otlp-endpoint: include the message contents (gen_ai.*.messages)"""
    otlp_timeout: Annotated[
        float | None, Flag(metavar="SECONDS", help="with --otlp-endpoint: seconds the whole export may take, every"
                                                   " request and retry included (default 10)"),
    ] = Field(default=None, ge=0.1, le=600.0)  # fmt: skip
    """Seconds the whole export may take (below a tenth of a second no request completes; ten minutes is longer than
    any collector needs)."""


def register(sub: Any) -> None:
    p = _sub(sub, "show", "print one case run's transcript: every turn, the Harness's decisions, the outcome",
             "Give a case run id (BENCH_RUN_ID/CASE/EPOCH, as `run` prints and the gate lists) or --bench-run ID"
             " (or --label L: its newest case run of that case and epoch) with --case CASE [--epoch N]. Plain text at"
             " 80 columns; --html FILE writes one self-contained page instead.")  # fmt: skip
    _add_db(p)
    _ShowFlags.add_flags(p, "show")
    p.set_defaults(func=run)

    p = _sub(sub, "diff", "two transcripts of one case (two labels or bench runs), the first divergent turn marked",
             "A and B are each a bench run id or a label (its newest case run of --case and --epoch). The turns both"
             " runs share are printed once, then each run from the first turn where they differ.")  # fmt: skip
    _add_db(p)
    _DiffFlags.add_flags(p, "diff")
    p.set_defaults(func=run)

    p = _sub(
        sub,
        "export",
        "write stored bench runs in another tool's format (Inspect AI .eval logs, OpenTelemetry GenAI spans)",
        "--inspect DIR writes one Inspect AI log per bench run (all of them, or --bench-run ID, or every"
        " run with --label L), readable by `inspect view --log-dir DIR` and inspect_ai.log.read_eval_log."
        " --otel FILE.jsonl writes each case run as OpenTelemetry GenAI spans, one OTLP/JSON request per line;"
        " --otlp-endpoint URL sends them to an OTLP/HTTP traces endpoint (a collector, Phoenix, Langfuse).",
    )
    _add_db(p)
    _ExportFlags.add_flags(p, "export")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The transcript command `args.command` names."""
    return _COMMANDS[args.command](args)


def _open(db: Path) -> Any:
    from runners.store.connection import connect

    return connect(db, read_only=True)


def _show(args: argparse.Namespace) -> int:
    from runners.rendering.show import render_html, render_text
    from runners.store.transcripts import latest_bench_run_of_case, load_case_run, resolve_case_run

    if args.case_run and (args.bench_run or args.label or args.case):
        _fail(f"give a case run id ({args.case_run}) or --bench-run/--label with --case, not both")
    if not args.case_run and not args.case:
        _fail("name the case run: CASE_RUN_ID, or --bench-run ID --case CASE [--epoch N]")
    if args.bench_run and args.label is not None:  # the label would be ignored: the bench run names the case run
        _fail(f"give --bench-run {args.bench_run!r} or --label {args.label!r}, not both")
    html = NamedPath("--html", args.html, stream=True) if args.html is not None else None
    if html is not None:  # never the database it reads, however named
        _check_outputs([html], [NamedPath("--db", args.db)])
    con = _open(args.db)
    try:
        bench_run = args.bench_run
        if args.case and not (bench_run or args.label is not None):  # the only run, or the latest: said on stderr
            bench_run, held_by = latest_bench_run_of_case(con, str(args.db), args.case)
            if held_by > 1:
                say(f"showing bench run {bench_run}, the latest of {held_by} that ran {args.case}"
                    " (--bench-run ID or --label LABEL picks another)", stderr=True)  # fmt: skip
        run_id = args.case_run or resolve_case_run(
            con, str(args.db), bench_run=bench_run, label=args.label, case=args.case, epoch=args.epoch
        )
        info = load_case_run(con, str(args.db), run_id)
    finally:
        con.close()
    if html is not None:
        from runners.store.output_files import write_text

        write_text(html, render_html(info))
        _wrote(html, f"wrote {args.html}")
    else:
        sys.stdout.write(render_text(info, width=args.width, full=args.full))
    return EXIT_OK


def _side(con: Any, db: str, which: str, name: str, case: str, epoch: int | None) -> Any:
    """The case run `which` (A or B) names: a bench run id, else a label (checked as `--label` is)."""
    from runners.store.runs import bench_run_exists
    from runners.store.transcripts import load_case_run, resolve_case_run

    is_run = bench_run_exists(con, name)
    if not is_run:
        try:
            label_arg(name)
        except argparse.ArgumentTypeError as exc:
            _fail(f"{which} {exc} (see harness-bench diff --help)")
    kwargs = {"bench_run": name} if is_run else {"label": name}
    return load_case_run(con, db, resolve_case_run(con, db, case=case, epoch=epoch, **kwargs))


def _diff(args: argparse.Namespace) -> int:
    from runners.rendering.show import render_diff

    con = _open(args.db)
    try:
        a = _side(con, str(args.db), "A", args.a, args.case, args.epoch)
        b = _side(con, str(args.db), "B", args.b, args.case, args.epoch)
    finally:
        con.close()
    sys.stdout.write(render_diff(a, b, args.a, args.b, width=args.width))
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from runners.interchange.inspect_export import InspectUnavailable, export_inspect

    if args.bench_run and args.label is not None:
        _fail("give --bench-run or --label, not both")
    if args.otel_content and args.inspect is not None:
        _fail("--otel-content goes with --otel or --otlp-endpoint (an Inspect log holds the conversation anyway)")
    if args.otlp_timeout is not None and args.otlp_endpoint is None:
        _fail("--otlp-timeout goes with --otlp-endpoint")
    if args.inspect is None:
        return _export_otel(args)
    if args.inspect.exists() and not args.inspect.is_dir():
        _fail(f"--inspect {args.inspect} is {what_is(args.inspect)}; give a folder")
    try:
        written = export_inspect(args.db, args.inspect, bench_run=args.bench_run, label=args.label)
    except InspectUnavailable as exc:
        _fail(str(exc))
    for path, samples in written:  # paths shown as text: an escape sequence in a folder's name stays inert
        say(f"wrote {path} ({samples} samples)", wrap=False)
    say(f"open with: inspect view --log-dir {shlex.quote(str(args.inspect))}", wrap=False)
    return EXIT_OK


def _export_otel(args: argparse.Namespace) -> int:
    if args.otel is not None:
        _check_outputs([NamedPath("--otel", args.otel, stream=True)], [NamedPath("--db", args.db)])
    else:
        _check_url(args.otlp_endpoint)
    try:
        from runners.interchange import otel_export
    except ImportError:
        flag = "--otel" if args.otel is not None else "--otlp-endpoint"
        _fail(f"export {flag} needs OpenTelemetry: pip install 'harness-bench[otel]' (make venv installs it)")
    if args.otel is not None:
        done = otel_export.export_otel_file(args.db, args.otel, bench_run=args.bench_run, label=args.label,
                                            content=args.otel_content)  # fmt: skip
        _wrote(NamedPath("--otel", args.otel, stream=True), f"wrote {args.otel} ({done.case_runs} case runs,"
                                                              f" {done.spans} spans)")  # fmt: skip
    else:
        done = otel_export.export_otlp_endpoint(args.db, args.otlp_endpoint, bench_run=args.bench_run,
                                                label=args.label, content=args.otel_content,
                                                timeout=args.otlp_timeout)  # fmt: skip
        url = safe_url(args.otlp_endpoint)
        say(f"sent {done.case_runs} case runs ({done.spans} spans) to {url}", wrap=False)
    return EXIT_OK


def _wrote(output: NamedPath, note: str) -> None:
    """What was written: on stdout, or on stderr when the output itself went to stdout (a stream)."""
    from runners.store.output_files import OutputKind, check_output_path

    _say(note, stderr=check_output_path(output) is OutputKind.STREAM, wrap=False)


def _check_url(url: str) -> None:
    """--otlp-endpoint: an http(s) URL with a host (the exporter would take anything and fail on each batch)."""
    from urllib.parse import urlsplit

    example = "e.g. http://127.0.0.1:4318/v1/traces"
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        _fail(f"--otlp-endpoint {safe_url(url)}: give an http:// or https:// URL, {example}")
    try:
        port = parts.port  # None: the scheme's own
    except ValueError:  # past 65535, or not a number
        port = 0
    if port == 0:
        shown = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        _fail(f"--otlp-endpoint {safe_url(url)}: port {shown!r} is not a port (1 to 65535), {example}")


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"show": _show, "diff": _diff, "export": _export}
