"""Arize Phoenix, the trace backend the OpenTelemetry export is checked against, in an environment of its own.

Phoenix is a server a team runs beside its agents, not a library of ours, and it does not resolve against
`constraints.txt` (its pydantic-ai-slim pulls google-genai, which needs an older tenacity). So it gets a venv of its
own in the cache folder (`$HARNESS_BENCH_PHOENIX_DIR`, default `~/.cache/harness-bench/phoenix`), installed once
from `phoenix-constraints.txt` (every transitive version pinned) and keyed by a stamp: a fresh clone on the same
machine reuses it, and a changed pin reinstalls it. `make phoenix` (part of `make ci-deps`) runs `python -m
scripts.phoenix`; `tests/e2e/test_phoenix.py` starts the server with `serve` on 127.0.0.1.

Standard library only: it runs before the project's own venv exists.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PHOENIX", "PhoenixServer", "SetupError", "ensure_phoenix", "installed", "phoenix_dir", "serve"]

ROOT = Path(__file__).resolve().parent.parent
PHOENIX = "arize-phoenix==20.26.1"
"""The server's distribution, pinned."""
PIP = "pip==26.3"
"""The resolver the constraints were generated with (the venv's bundled pip is older)."""
CONSTRAINTS = ROOT / "phoenix-constraints.txt"
"""Every package of the Phoenix venv at its pinned version (`pip freeze` of a clean install of PHOENIX)."""
INSTALL_TIMEOUT_S = 1800.0
"""One pip step (the install downloads ≈ 150 packages, ≈ 850 MB installed)."""
START_TIMEOUT_S = 180.0
"""From `phoenix serve` to a healthy `/healthz` (its database migrations run first; ≈ 20 s on two busy cores)."""

SERVER_ENV = {
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE",
}
"""Nothing leaves the machine: no analytics pixels, no downloads (its WASM sandbox), no code sandboxes."""


class SetupError(RuntimeError):
    """Phoenix could not be installed or started (the message names the log)."""


def _log(msg: str) -> None:
    print(f"[phoenix] {msg}", flush=True)


def phoenix_dir() -> Path:
    """The cache folder: the venv (`venv/`), the install log."""
    return Path(os.environ.get("HARNESS_BENCH_PHOENIX_DIR") or Path.home() / ".cache" / "harness-bench" / "phoenix")


def install_key() -> str:
    """Changes whenever what the venv must hold changes: the pins, pip, the interpreter's minor version."""
    text = "\n".join((PHOENIX, PIP, f"{sys.version_info.major}.{sys.version_info.minor}", CONSTRAINTS.read_text()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _stamp(folder: Path) -> Path:
    return folder / "venv" / f".installed-{install_key()}"


def _executable(folder: Path) -> Path:
    return folder / "venv" / "bin" / "phoenix"


def installed(folder: Path | None = None) -> Path | None:
    """The `phoenix` executable when the venv holds today's pins, else None."""
    folder = folder or phoenix_dir()
    exe = _executable(folder)
    return exe if _stamp(folder).exists() and exe.exists() else None


def _step(cmd: Sequence[str], what: str, log: Path) -> None:
    """One install command, its output appended to `log`; a failure is a SetupError naming `log`."""
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S).returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SetupError(f"{what}: {exc}; see {log}") from None
    if code:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise SetupError(f"{what} failed (exit {code}); see {log}: {' | '.join(tail)}")


def ensure_phoenix(folder: Path | None = None) -> Path:
    """The `phoenix` executable of the cached venv, installed first if the stamp is missing (idempotent)."""
    folder = folder or phoenix_dir()
    exe = installed(folder)
    if exe is not None:
        _log(f"{PHOENIX} ready (cached): {exe}")
        return exe
    venv = folder / "venv"
    if venv.exists():  # other pins: start clean, so no package of the old set stays behind
        _log(f"the venv in {venv} holds other pins: removing it")
        shutil.rmtree(venv)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "install.log"
    log.write_bytes(b"")
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input"]
    _log(f"creating {venv} (log: {log})")
    _step([sys.executable, "-m", "venv", str(venv)], "python -m venv", log)
    _log(f"installing {PIP}")
    _step([*pip, "install", "--quiet", PIP], f"pip install {PIP}", log)
    pins = sum(1 for line in CONSTRAINTS.read_text().splitlines() if "==" in line and not line.startswith("#"))
    _log(f"installing {PHOENIX} and its {pins - 1} pinned dependencies from {CONSTRAINTS.name} (minutes, once)")
    t0 = time.monotonic()
    _step([*pip, "install", "--progress-bar", "off", "-c", str(CONSTRAINTS), PHOENIX], f"pip install {PHOENIX}", log)
    if not _executable(folder).exists():
        raise SetupError(f"pip installed {PHOENIX} but {_executable(folder)} is missing; see {log}")
    _stamp(folder).touch()
    _log(f"{PHOENIX} ready in {time.monotonic() - t0:.0f} s: {_executable(folder)}")
    return _executable(folder)


@dataclass(frozen=True, slots=True)
class PhoenixServer:
    """A running Phoenix on 127.0.0.1."""

    url: str
    """The web UI, REST API (`/v1`) and OTLP/HTTP (`/v1/traces`) base, e.g. `http://127.0.0.1:6006`."""
    grpc_port: int
    """Its OTLP/gRPC port."""
    log: Path
    """The server's stdout and stderr."""

    @property
    def otlp_endpoint(self) -> str:
        """Where OTLP/HTTP spans go."""
        return f"{self.url}/v1/traces"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@contextmanager
def serve(
    workdir: Path, *, executable: Path | None = None, timeout_s: float = START_TIMEOUT_S
) -> Iterator[PhoenixServer]:
    """`phoenix serve` on free ports of 127.0.0.1 with its database in `workdir`, until the block ends (then its
    whole process group is ended)."""
    exe = executable or installed()
    if exe is None:
        raise SetupError(f"{PHOENIX} is not installed in {phoenix_dir()}: run make phoenix")
    port, grpc_port = _free_port(), _free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **SERVER_ENV, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_WORKING_DIR": str(workdir)}  # fmt: skip
    log = workdir / "phoenix.log"
    server = PhoenixServer(url=f"http://127.0.0.1:{port}", grpc_port=grpc_port, log=log)
    with log.open("wb") as out:
        proc = subprocess.Popen([str(exe), "serve"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    try:
        until = time.monotonic() + timeout_s
        while not _healthy(server.url):
            if proc.poll() is not None:
                raise SetupError(f"phoenix serve exited {proc.returncode} before it was healthy; see {log}")
            if time.monotonic() > until:
                raise SetupError(f"phoenix serve was not healthy after {timeout_s:.0f} s; see {log}")
            time.sleep(0.5)
        yield server
    finally:
        _end_group(proc)


def _end_group(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM to the server's process group, SIGKILL to whatever is left after `grace_s`."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Install Phoenix into the cache folder (nothing when the stamp is there); exit 1 naming the log if pip fails."""
    if argv:
        print(f"python -m scripts.phoenix: takes no arguments (got {' '.join(argv)})", file=sys.stderr)
        return 2
    try:
        ensure_phoenix()
    except SetupError as exc:
        print(f"make phoenix: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
