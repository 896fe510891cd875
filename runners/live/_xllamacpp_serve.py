"""llama.cpp's native server from the prebuilt `xllamacpp` wheel, as a process of its own.

    python -m runners.live._xllamacpp_serve --model M.gguf --port P --alias A [--chat-template-file T.jinja] \\
        [--host 127.0.0.1] [--threads 1] [--ctx-size 16384] [--n-predict 384] [--parallel 1]

The same server `llama-server --jinja` is (llama.cpp's `tools/server`, compiled into the wheel): the
OpenAI-compatible routes, `/health`, `/apply-template`, the Jinja chat template and the native
tool-call parsing. `xllamacpp.Server` serves HTTP from its own threads; this process only starts it,
prints the address and waits until it is terminated (SIGTERM, or its parent closing stdin). Its own
process, not a thread of the caller: a terminate ends the generation at once and frees the model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field

from runners.plan.flags import Flag, FlagModel

__all__ = ["ServeFlags", "main"]


class ServeFlags(FlagModel):
    """The server process's flags (`runners/live/server.py` renders them with `argv`)."""

    model: Annotated[Path, Flag(required=True, metavar="GGUF")]
    """The GGUF file served."""
    port: int = Field(ge=0, le=65535)
    """The port (0: a free one)."""
    host: str = "127.0.0.1"
    """The address to listen on."""
    alias: Annotated[str, Flag(required=True)]
    """The model's name in the OpenAI routes."""
    chat_template_file: Annotated[
        Path | None,
        Flag(metavar="T.jinja", help="a Jinja chat template (default: the GGUF's own tokenizer.chat_template)"),
    ] = None
    """A Jinja chat template (None: the GGUF's own)."""
    threads: int = Field(default=1, ge=1, le=1024)
    """Generation and batch threads."""
    ctx_size: int = Field(default=16384, ge=1, le=1 << 24)
    """Context window in tokens."""
    n_predict: int = Field(default=384, ge=1, le=1 << 24)
    """Server-side cap on generated tokens per request."""
    parallel: int = Field(default=1, ge=1, le=1024)
    """Slots served at once."""


def main(argv: list[str] | None = None) -> int:
    """Start the server and block until stdin closes (exit 0) or a signal ends the process."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ServeFlags.add_flags(parser, "serve")
    args = ServeFlags.from_args(parser.parse_args(argv), "serve")
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    if args.chat_template_file is not None:  # else llama.cpp renders with the template the GGUF carries
        params.chat_template = args.chat_template_file.read_text()  # what --chat-template-file reads
    params.use_jinja = True
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_predict = args.n_predict
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    print(f"xllamacpp {xllamacpp.__version__}: loading {args.model}", flush=True)
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    sys.stdin.read()  # until the parent closes our stdin (or terminates us)
    return 0


if __name__ == "__main__":
    sys.exit(main())
