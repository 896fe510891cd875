"""serve-sim in a process of its own for the benchmarks: the endpoint's work runs beside the measured loop, not in
its process (its own GIL, like a real model server)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "harness-bench"


def start_simulator(latency_ms: float = 0.0, jitter_ms: float = 0.0) -> tuple[subprocess.Popen[str], str]:
    """serve-sim in its own process; returns it and its base URL."""
    proc = subprocess.Popen(
        [str(BIN), "serve-sim", "--port", "0", "--latency-ms", str(latency_ms), "--jitter-ms", str(jitter_ms)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = re.search(r"http://\S+/v1", line)
    if url is None:
        proc.kill()
        raise SystemExit(f"serve-sim did not start: {line!r}")
    return proc, url.group(0)
