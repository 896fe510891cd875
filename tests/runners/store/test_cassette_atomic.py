"""A cassette is saved whole or not at all: a save that fails mid-write (here: the file-size limit is reached part
way through, as a full disk would) leaves the old cassette byte-identical and no temporary file beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runners.store.cassettes import make_vcr

ROOT = Path(__file__).resolve().parents[3]

_SAVE = """
import resource, signal, sys
from pathlib import Path
from vcr.request import Request
from runners.store.cassettes import make_vcr

path, size, limit = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cfg = make_vcr("all").get_merged_config(path=str(path))
request = Request("POST", "http://model-endpoint/v1/chat/completions", b'{"messages": []}', {})
response = {"status": {"code": 200, "message": "OK"}, "headers": {}, "body": {"string": "x" * size}}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG instead of killing us
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    cfg["persister"].save_cassette(path, {"requests": [request], "responses": [response]}, cfg["serializer"])
except Exception as exc:
    print(type(exc).__name__, exc, file=sys.stderr)
    sys.exit(3)
"""


def _save(path: Path, size: int, limit: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SAVE, str(path), str(size), str(limit)], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_bench_vcr_saves_through_the_atomic_persister() -> None:
    from runners.store.cassettes import AtomicPersister

    cfg = make_vcr("once").get_merged_config(path="x.json")
    assert cfg["persister"] is AtomicPersister


def test_a_save_failing_mid_write_leaves_the_old_cassette_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "model" / "case" / "epoch1.json"
    first = _save(path, 100)
    assert first.returncode == 0, first.stderr
    old = path.read_bytes()
    failed = _save(path, 200_000, limit=len(old) + 8192)  # the new cassette outgrows the limit part way through
    assert failed.returncode == 3, failed.stderr
    assert "File too large" in failed.stderr
    assert path.read_bytes() == old
    assert sorted(p.name for p in path.parent.iterdir()) == ["epoch1.json"]  # no temporary file left


def test_a_complete_save_replaces_the_cassette(tmp_path: Path) -> None:
    path = tmp_path / "epoch1.json"
    assert _save(path, 100).returncode == 0
    assert _save(path, 5000).returncode == 0
    cfg = make_vcr("none").get_merged_config(path=str(path))
    requests, responses = cfg["persister"].load_cassette(path, cfg["serializer"])
    assert len(requests) == 1 and responses[0]["body"]["string"] in ("x" * 5000, b"x" * 5000)


def test_a_write_error_raised_in_a_worker_process_reaches_the_driver_whole() -> None:
    import pickle

    from runners.store.output_files import OutputWriteError

    error = OutputWriteError(Path("c/epoch1.json"), OSError(27, "File too large"))
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is OutputWriteError and str(back) == str(error) and back.path == error.path
