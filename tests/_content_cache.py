"""Build artefacts of the suite (the wheel, its venv, the documentation site) kept between runs, keyed by content.

A test that builds something from the repository's files keys it by a hash of every input the build reads (the
files' paths and bytes, the versions of the tools that build it, Python's): the same inputs give the artefact the
last run built, any changed input builds it again. The cache lives outside the clone, in
`$HARNESS_BENCH_TEST_CACHE` (default `~/.cache/harness-bench/tests`), so a fresh clone of a commit already tested
on the machine reuses it. An entry is built under a file lock and marked whole last, so a concurrent session waits
for it instead of building it twice or reading half of it; the newest few entries of each kind are kept.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

from filelock import FileLock

KEEP = 3
"""Entries kept per kind (the newest): a few branches tested in turn each find theirs."""


def cache_root() -> Path:
    """Where the suite's build artefacts are kept (created)."""
    default = Path.home() / ".cache" / "harness-bench" / "tests"
    root = Path(os.environ.get("HARNESS_BENCH_TEST_CACHE") or default)
    root.mkdir(parents=True, exist_ok=True)
    return root


class Key:
    """A running hash of a build's inputs."""

    def __init__(self, kind: str) -> None:
        # The Python installation, not the dev venv's interpreter: a venv made here runs on the installation (its
        # pyvenv.cfg names it), and a wheel or a site holds nothing of the venv's path, which is new in every clone:
        # keyed by it, each fresh clone built everything again.
        self._hash = hashlib.sha256(f"{kind}\0{sys.version}\0{sys.base_prefix}\0".encode())

    def text(self, *parts: str) -> Key:
        """Mix in strings (a tool's version, a setting)."""
        for part in parts:
            self._hash.update(f"{len(part)}:{part}\0".encode())
        return self

    def versions(self, *distributions: str) -> Key:
        """Mix in the installed version of each distribution (the tools that build the artefact)."""
        return self.text(*(f"{name}=={metadata.version(name)}" for name in distributions))

    def files(self, root: Path, paths: Iterable[Path]) -> Key:
        """Mix in each file's path (relative to `root`) and bytes, in path order."""
        for path in sorted(paths):
            self.text(path.relative_to(root).as_posix())
            self._hash.update(path.read_bytes())
        return self

    def hexdigest(self) -> str:
        """The key, as a folder name."""
        return self._hash.hexdigest()[:24]


def tree_files(root: Path, names: Iterable[str], skip: Callable[[Path], bool]) -> list[Path]:
    """Every file under the folders (or the files) `names` of `root`, but those `skip` accepts."""
    found: list[Path] = []
    for name in names:
        top = root / name
        candidates = [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
        found += [p for p in candidates if not skip(p)]
    return found


def cached(kind: str, key: str, build: Callable[[Path], None], *, keep: int = KEEP) -> Path:
    """The folder `build` fills for `key`: built now unless an earlier run built it whole. Built in place (a venv's
    scripts name their folder), and marked whole last: a build that failed or was cut short is removed and redone."""
    base = cache_root() / kind
    base.mkdir(exist_ok=True)
    entry = base / key
    whole = entry / ".whole"
    with FileLock(str(base / ".lock"), timeout=1800):
        if whole.is_file():
            os.utime(entry)  # recently used: kept by the pruning below
            return entry
        shutil.rmtree(entry, ignore_errors=True)
        entry.mkdir()
        try:
            build(entry)
        except BaseException:
            shutil.rmtree(entry, ignore_errors=True)
            raise
        whole.touch()
        prune(base, keep=keep)
    return entry


def prune(base: Path, *, keep: int) -> None:
    """Remove all but the `keep` most recently used entries of `base` (and any half-built one)."""
    entries = sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)
