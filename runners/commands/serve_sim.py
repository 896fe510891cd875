"""`harness-bench serve-sim`: an OpenAI-compatible simulator that plays the selected cases' trajectories over HTTP."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from runners.commands._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    _add_selection,
    _fail,
    _float_in,
    _int_in,
    _say,
    _sub,
)

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "serve-sim", "serve an OpenAI-compatible simulator that plays the cases' trajectories over HTTP")
    _add_selection(p, "serve-sim")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_int_in(0, 65535), default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.add_argument("--latency-ms", type=_float_in(0, 600_000), default=0.0, metavar="MS",
                   help="each chat answer arrives this long after its request (default 0)")  # fmt: skip
    p.add_argument("--jitter-ms", type=_float_in(0, 600_000), default=0.0, metavar="MS",
                   help="latency varies uniformly by ± this much (default 0)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.domain.profiles import trajectory_for_model
    from runners.endpoints.simulator import SimulatorServer
    from runners.plan.run_plan import select_cases

    cases = select_cases(args.evalsets or [], args.case_ids or [])
    try:
        server = SimulatorServer(cases, args.host, args.port, trajectory_for=trajectory_for_model,
                                 log=(lambda line: _say(line, stderr=True)) if args.verbose else None,
                                 latency_ms=args.latency_ms, jitter_ms=args.jitter_ms)  # fmt: skip
    except OSError as exc:
        import errno

        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; choose another --port"
                  " (0 = any free)")  # fmt: skip
        _fail(f"--host {args.host}: cannot listen there ({exc.strerror or exc}); give an address of this machine,"
              " e.g. 127.0.0.1")  # fmt: skip
    delay = f", latency {args.latency_ms:g}±{args.jitter_ms:g} ms" if args.latency_ms or args.jitter_ms else ""
    _say(f"serve-sim: {len(cases)} cases on {server.base_url}{delay} (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
        return EXIT_INTERRUPTED
    return EXIT_OK
