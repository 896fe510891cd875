"""`harness-bench serve-sim`: an OpenAI-compatible simulator that plays the selected cases' trajectories over HTTP."""

from __future__ import annotations

import argparse
import sys
from typing import Annotated, Any

from pydantic import Field

from runners.commands._common import EXIT_INTERRUPTED, EXIT_OK, _add_selection, _fail, _say, _sub
from runners.plan.flags import Flag, FlagModel

__all__ = ["register", "run"]


class _ServeSimFlags(FlagModel):
    """`serve-sim`'s flags: where it listens and how its answers arrive."""

    host: Annotated[str, Flag(help="bind address (default {default})")] = "127.0.0.1"
    """The address to listen on."""
    port: Annotated[int, Flag(help="port (default {default}; 0 picks a free one)")] = Field(
        default=8765, ge=0, le=65535
    )
    """The port (0: a free one)."""
    verbose: bool = False
    """log every request"""
    latency_ms: Annotated[
        float, Flag(metavar="MS", help="each chat answer arrives this long after its request (default {default})")
    ] = Field(default=0.0, ge=0, le=600_000)
    """How long after its request each chat answer arrives."""
    jitter_ms: Annotated[
        float, Flag(metavar="MS", help="latency varies uniformly by ± this much (default {default})")
    ] = Field(default=0.0, ge=0, le=600_000)
    """How much the latency varies, uniformly."""


def register(sub: Any) -> None:
    p = _sub(sub, "serve-sim", "serve an OpenAI-compatible simulator that plays the cases' trajectories over HTTP")
    _add_selection(p, "serve-sim")
    _ServeSimFlags.add_flags(p, "serve-sim")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.domain.profiles import trajectory_for_model
    from runners.endpoints.simulator import SimulatorServer
    from runners.plan.run_plan import select_cases

    flags = _ServeSimFlags.from_args(args, "serve-sim")
    cases = select_cases(args.evalsets or [], args.case_ids or [])
    try:
        server = SimulatorServer(cases, flags.host, flags.port, trajectory_for=trajectory_for_model,
                                 log=(lambda line: _say(line, stderr=True)) if flags.verbose else None,
                                 latency_ms=flags.latency_ms, jitter_ms=flags.jitter_ms)  # fmt: skip
    except OSError as exc:
        import errno

        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            _fail(f"cannot listen on {flags.host}:{flags.port}: {exc.strerror or exc}; choose another --port"
                  " (0 = any free)")  # fmt: skip
        _fail(f"--host {flags.host}: cannot listen there ({exc.strerror or exc}); give an address of this machine,"
              " e.g. 127.0.0.1")  # fmt: skip
    delay = f", latency {flags.latency_ms:g}±{flags.jitter_ms:g} ms" if flags.latency_ms or flags.jitter_ms else ""
    _say(f"serve-sim: {len(cases)} cases on {server.base_url}{delay} (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
        return EXIT_INTERRUPTED
    return EXIT_OK
