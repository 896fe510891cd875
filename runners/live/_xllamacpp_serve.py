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

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Start the server and block until stdin closes (exit 0) or a signal ends the process."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--alias", required=True)
    parser.add_argument("--chat-template-file", type=Path, default=None,
                        help="a Jinja chat template (default: the GGUF's own tokenizer.chat_template)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx-size", type=int, default=16384)
    parser.add_argument("--n-predict", type=int, default=384)
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args(argv)
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
