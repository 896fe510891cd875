"""The library without a tracer never imports OpenTelemetry (checked in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from runners.domain.evalset import load_cases
from runners.run.case_runner import run_case
run = run_case(load_cases()[0])
assert run.result.events, "the case ran"
print(sorted(m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")))
"""


def test_no_opentelemetry_import_without_a_tracer() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
