"""Benchmark 6: the same 6-turn tool-calling loop (trivial tool, 500 samples) in Inspect AI (`mockllm`),
pydantic-ai (`FunctionModel`) and harness-bench (scripted model). Each peer is installed by this
script into its own virtual environment under benchmarks/.venvs/ (they are not project
dependencies); an installation failure is reported and skipped, never fatal."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE.parent / ".venvs"
SAMPLES = 500
PEERS = {
    "inspect_ai": ("inspect-ai==0.3.285", "inspect_loop.py"),
    "pydantic_ai": ("pydantic-ai-slim==2.68.0", "pydantic_ai_loop.py"),
}


def ensure_venv(name: str, requirement: str) -> Path | None:
    """The peer's interpreter, installing it on first use; None (with a message) if that fails."""
    target = VENVS / name
    python = target / "bin" / "python"
    stamp = target / f".installed-{requirement}"
    if stamp.exists():
        return python
    print(f"[6] installing {requirement} into {target} (first run only) …", flush=True)
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(target)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement],
                       check=True, capture_output=True, text=True, timeout=1200)  # fmt: skip
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        print(f"[6] {name}: installation failed, skipped: {str(detail).strip().splitlines()[-1:]}")
        return None
    stamp.touch()
    return python


def run(python: Path | str, script: str) -> dict[str, object] | None:
    try:
        out = subprocess.run([str(python), str(HERE / script), str(SAMPLES)], capture_output=True, text=True,
                             timeout=1800, check=True)  # fmt: skip
    except subprocess.SubprocessError as exc:
        print(f"[6] {script} failed: {(getattr(exc, 'stderr', '') or str(exc)).strip()[-300:]}")
        return None
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    results = {}
    ours = run(sys.executable, "harness_loop.py")
    if ours:
        results["harness_bench"] = ours
    for name, (req, script) in PEERS.items():
        python = ensure_venv(name, req)
        if python is not None and (r := run(python, script)):
            results[name] = r
    base = results.get("harness_bench")
    for name, r in results.items():
        rate = float(r["samples"]) / float(r["wall"])  # type: ignore[arg-type]
        line = f"[6] {name:14s} {int(r['samples'])} samples x {r['turns_per_sample']} turns in {float(r['wall']):.2f} s = {rate:,.0f} samples/s"  # type: ignore[call-overload]  # noqa: E501
        if base and name != "harness_bench":
            ratio = (float(base["samples"]) / float(base["wall"])) / rate  # type: ignore[arg-type]
            line += f"  -> harness-bench is {ratio:.1f}x faster"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
