"""`harness-bench serve-model` serving a real GGUF with the xllamacpp server, when both are already in the cache
folder (`make live` or an earlier `serve-model` put them there): it serves `/v1/models` under the registry name,
prints the flags to use, and SIGTERM stops it with exit 143, the server gone. Never downloads anything: without
the cached wheel and a verified GGUF it skips and says which is missing."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from runners.live import models as registry
from runners.live.server import XLLAMACPP, llama_dir
from runners.live.weights import _stamp_matches, _stamp_path

ROOT = Path(__file__).resolve().parents[3]
PREFERRED = ("qwen2.5-coder-0.5b", "gemma3-270m")
"""The smallest instruct model first, then the base one (the live check's)."""


def _cached_model() -> registry.LocalModel:
    folder = llama_dir()
    if not (folder / f"xllamacpp-{XLLAMACPP.partition('==')[2]}" / ".ok").exists():
        pytest.skip(f"the {XLLAMACPP} wheel is not installed in {folder} (make live installs it)")
    for name in PREFERRED:
        model = registry.get(name)
        target = folder / "models" / model.file_name
        if target.exists() and _stamp_matches(_stamp_path(model, folder), target):
            return model
    pytest.skip(f"no verified GGUF of {' or '.join(PREFERRED)} in {folder} (harness-bench serve-model NAME puts one)")


def test_serve_model_serves_a_real_gguf_and_sigterm_stops_it() -> None:
    model = _cached_model()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_BENCH_LLAMA_DIR": str(llama_dir())}
    proc = subprocess.Popen(
        [sys.executable, "-m", "runners.cli", "serve-model", model.name, "--port", "0"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    log: Path | None = None
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]  # printed once /health answered
        assert lines[0].startswith(f"serve-model: {model.name} on http://127.0.0.1:"), lines
        base_url = lines[0].split(" on ", 1)[1].split()[0]
        log = llama_dir() / f"serve-{model.name}-{base_url.rsplit(':', 1)[1].split('/')[0]}.log"
        assert log.is_file(), "the server's log, as the command said"
        r = model.request
        flags = shlex.split(lines[1].strip().removeprefix("flags: "))
        assert dict(zip(flags[::2], flags[1::2], strict=True)) == {
            "--model": f"openai:{model.name}", "--base-url": base_url, "--temperature": f"{r.temperature:g}",
            "--tool-choice": r.tool_choice, "--schema-mode": r.schema_mode.value,
            "--tool-call-format": r.tool_call_format.value,
        }  # fmt: skip
        assert lines[2].startswith("try:   harness-bench run --case ")
        with urllib.request.urlopen(f"{base_url}/models", timeout=10) as resp:
            served = json.load(resp)
        assert [m["id"] for m in served["data"]] == [model.name]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
        time.sleep(0.5)
        with pytest.raises(OSError):  # the server process went with it
            urllib.request.urlopen(f"{base_url}/models", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if log is not None:
            log.unlink(missing_ok=True)  # the cache folder is shared: leave only what serve-model keeps


def test_serve_model_of_a_file_the_server_cannot_load_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Verified bytes that are no GGUF: the server exits while loading; one line naming its log, nothing served."""
    from runners.cli import main

    wheel = llama_dir() / f"xllamacpp-{XLLAMACPP.partition('==')[2]}"
    if not (wheel / ".ok").exists():
        pytest.skip(f"the {XLLAMACPP} wheel is not installed in {llama_dir()} (make live installs it)")
    folder = tmp_path / "cache"
    (folder / "models").mkdir(parents=True)
    (folder / wheel.name).symlink_to(wheel)
    junk = b"not a GGUF at all\n" * 64
    (folder / "models" / "junk.gguf").write_bytes(junk)
    import hashlib

    model = registry.LocalModel(
        name="junk-test", description="bytes that are no model", file_name="junk.gguf",
        parts=registry.parts_of("hbjunk-part", "1.0.0", 1, "{module}/data/part{n:02d}.bin"), size_bytes=len(junk),
        sha256=hashlib.sha256(junk).hexdigest(), chat_template=None,
    )  # fmt: skip
    monkeypatch.setitem(registry.MODELS, model.name, model)
    monkeypatch.setenv("HARNESS_BENCH_LLAMA_DIR", str(folder))
    assert main(["serve-model", model.name, "--port", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    errors = [line for line in captured.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and captured.err.rstrip().endswith(errors[0]), captured.err
    assert "the server for junk-test is not healthy: xllamacpp exited with" in errors[0], errors[0]
    assert str(folder / "serve-junk-test-") in errors[0], "names the server's log"
