"""The package as a user gets it: the wheel built from the sources, checked (`check-wheel-contents`: exactly the
files of `harness`, `runners` and `evalsets`, data included; `twine check`), installed with its pinned
dependencies into a fresh venv, and run from an empty folder with no checkout in sight: `--version`, `cases` and
the main job (`run --db x.duckdb`), the chat templates found where the package is installed.

Offline: the dependencies come from the wheelhouse `make venv` fills from pip's cache (`.venv/wheelhouse`), with
`--no-index`. Built once per content (tests/_content_cache.py): the checked wheel is kept under a hash of the
sources it is built from and of the build and check tools' versions; the venv (about 400 MB in 10,000 files) under a
hash of what its installation reads besides the project (the wheel's requirements, constraints.txt, the wheelhouse),
with the wheel of the sources under test installed into it again (uninstalled, then installed offline, its
requirements resolved against what the venv holds) whenever that wheel changed. Building the venv anew for every
run took a minute of a loaded machine's CPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from harness import __version__
from tests._content_cache import Key, cached, tree_files

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "harness", "runners", "evalsets")
"""What the build reads: copied out of the checkout first, so that the build's own folders (`build/`, the
`.egg-info`) never land in it while other tests read it."""
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"
"""The pinned dependencies' wheels, beside the dev venv that runs the tests (`make venv` fills it)."""
BUILD_TOOLS = ("build", "setuptools", "wheel", "check-wheel-contents", "twine")
"""What builds and checks the wheel: their versions are part of the cached wheel's key."""


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    return done.stdout


def _skipped(path: Path) -> bool:
    return path.suffix == ".pyc" or any(part == "__pycache__" or part.endswith(".egg-info") for part in path.parts)


def sources_key(kind: str) -> Key:
    """The hash of what a wheel built from the sources depends on: every source file and the tools' versions."""
    return Key(kind).versions(*BUILD_TOOLS).files(ROOT, tree_files(ROOT, SOURCES, _skipped))


def _copy_sources(into: Path) -> Path:
    into.mkdir()
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, into / name, ignore=_SKIP)
        else:
            shutil.copy2(src, into / name)
    return into


def build_wheel(src: Path, out: Path) -> Path:
    """The wheel of the sources in `src`, built with the dev venv's pinned setuptools (no build isolation: nothing
    to resolve or download)."""
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)], cwd=src)
    (wheel,) = out.glob("*.whl")
    return wheel


def check_wheel(src: Path, wheel: Path) -> None:
    """`check-wheel-contents` (its settings in the sources' pyproject.toml) and `twine check --strict`."""
    bin_dir = Path(sys.executable).parent
    _run([str(bin_dir / "check-wheel-contents"), "--config", str(src / "pyproject.toml"), str(wheel)], cwd=src)
    _run([str(bin_dir / "twine"), "check", "--strict", str(wheel)], cwd=src)


def _built_and_checked(entry: Path) -> None:
    src = _copy_sources(entry / "src")
    check_wheel(src, build_wheel(src, entry / "dist"))
    shutil.rmtree(src)


def _requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(name).decode()
    return [line for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _pip(venv: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *args]


def _install_argv(venv: Path, wheel: Path) -> list[str]:
    # the dev venv's pip installs into it (no pip of its own to bootstrap); no bytecode compiled ahead: a run
    # compiles what it imports
    return _pip(venv, "install", "--quiet", "--no-compile", "--disable-pip-version-check", "--no-index",
                "--find-links", str(WHEELHOUSE), "-c", str(ROOT / "constraints.txt"), str(wheel))  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], dict[str, float]]]:
    """A venv holding the wheel of the sources under test and its pinned dependencies, installed offline from the
    wheelhouse; its bin folder, a clean environment, and how long each step took (0 when cached). Held, under a
    lock, for this module's tests: a concurrent session installing another wheel into it waits."""
    assert WHEELHOUSE.is_dir(), f"{WHEELHOUSE}: no wheelhouse; run make venv"
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    entry = cached("wheel", sources_key("wheel").hexdigest(), _built_and_checked)
    (wheel,) = (entry / "dist").glob("*.whl")
    assert wheel.name == f"harness_bench-{__version__}-py3-none-any.whl", "the version is harness.__version__'s"
    seconds["build+check"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    key = Key("wheel-venv").text(*_requirements(wheel), *sorted(p.name for p in WHEELHOUSE.iterdir()))
    key.files(ROOT, [ROOT / "constraints.txt"])

    def fresh_venv(folder: Path) -> None:
        _run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], cwd=folder)
        _run(_install_argv(folder / "venv", wheel), cwd=folder, timeout=600)
        (folder / "installed.sha256").write_text(_sha256(wheel))

    home = cached("wheel-venv", key.hexdigest(), fresh_venv, keep=2)
    venv = home / "venv"
    with FileLock(str(home / ".in-use.lock"), timeout=1800):
        stamp = home / "installed.sha256"
        if not stamp.is_file() or stamp.read_text() != _sha256(wheel):
            stamp.unlink(missing_ok=True)
            _run(_pip(venv, "uninstall", "--quiet", "--yes", "harness-bench"), cwd=home)
            _run(_install_argv(venv, wheel), cwd=home, timeout=600)
            stamp.write_text(_sha256(wheel))
        seconds["install"] = time.perf_counter() - t0
        base = tmp_path_factory.mktemp("wheel-home")
        env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(base), "LANG": "C.UTF-8"}
        yield venv / "bin", env, seconds


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_wheel_runs_the_main_job_from_an_empty_folder(
    installed: tuple[Path, dict[str, str], dict[str, float]], tmp_path: Path
) -> None:
    bin_dir, env, seconds = installed
    empty = tmp_path / "empty"
    empty.mkdir()
    t0 = time.perf_counter()
    assert _run([str(bin_dir / "harness-bench"), "--version"], cwd=empty, env=env).strip() == (
        f"harness-bench {__version__}"
    )
    listed = _run([str(bin_dir / "harness-bench"), "cases"], cwd=empty, env=env)
    assert "diagnosable_" in listed and "generic_kb_" in listed, listed[-2000:]
    ran = _run([str(bin_dir / "harness-bench"), "run", "--db", "x.duckdb"], cwd=empty, env=env)
    assert "completed" in ran and (empty / "x.duckdb").is_file(), ran[-2000:]
    seconds["runs"] = time.perf_counter() - t0
    print(json.dumps({k: round(v, 1) for k, v in seconds.items()}))  # the test's own cost, shown with -s


def test_the_installed_package_finds_its_data_where_it_is_installed(
    installed: tuple[Path, dict[str, str], dict[str, float]], tmp_path: Path
) -> None:
    """Nothing resolves into a checkout: the bench, the evaluation sets, their schema and the chat templates are
    the venv's."""
    bin_dir, env, _ = installed
    probe = (
        "import json, runners, evalsets\n"
        "from runners.domain.evalset import BUILTIN_DIR\n"
        "from runners.live.models import GEMMA3_270M\n"
        "print(json.dumps([runners.__file__, str(BUILTIN_DIR), (BUILTIN_DIR / 'schema.json').is_file(),"
        " str(GEMMA3_270M.chat_template), GEMMA3_270M.chat_template.is_file()]))\n"
    )
    found = json.loads(_run([str(bin_dir / "python"), "-c", probe], cwd=tmp_path, env=env).strip())
    site = str(bin_dir.parent)
    assert [str(p).startswith(site) for p in (found[0], found[1], found[3])] == [True, True, True], found
    assert found[2] is True and found[4] is True, found


def test_repository_only_commands_say_so_from_the_wheel(
    installed: tuple[Path, dict[str, str], dict[str, float]], tmp_path: Path
) -> None:
    """The README's cassette gate and `real-models` read the repository's recordings: from a wheel they say so."""
    bin_dir, env, _ = installed
    for argv in (["run", "--model", "openai:scripted", "--cassettes", "cassettes", "--record-mode", "none",
                  "--db", "gate.duckdb", "--label", "baseline"], ["real-models"]):  # fmt: skip
        done = subprocess.run([str(bin_dir / "harness-bench"), *argv], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 2 and "run this in a clone of the repository" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_contents_check_bites(tmp_path: Path) -> None:
    """A wheel without its chat templates (their package-data line gone) is refused by check-wheel-contents (the
    wheel built once per content of the sources, checked on every run)."""
    line = '"runners.live" = ["templates/*.jinja"]\n'

    def without_templates(entry: Path) -> None:
        src = _copy_sources(entry / "src")
        project = src / "pyproject.toml"
        text = project.read_text(encoding="utf-8")
        assert line in text
        project.write_text(text.replace(line, ""), encoding="utf-8")
        build_wheel(src, entry / "dist")

    entry = cached("wheel-without-templates", sources_key("wheel-without-templates").hexdigest(), without_templates)
    (wheel,) = (entry / "dist").glob("*.whl")
    project = entry / "src" / "pyproject.toml"
    assert line not in project.read_text(encoding="utf-8")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "check-wheel-contents"), "--config", str(project), str(wheel)],
        cwd=entry / "src", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "W101" in done.stdout and "gemma3-tool-use.jinja" in done.stdout, done.stdout
