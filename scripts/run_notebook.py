"""Execute a notebook on the project's own kernel (this interpreter), failing on any cell error.

    .venv/bin/python -m scripts.run_notebook notebooks/threshold_sweep.ipynb [--out executed.ipynb]

The executed copy goes to `reports/notebook/<name>.executed.ipynb` unless `--out` says otherwise; the
notebook saves its figures next to it (the kernel gets the folder as HARNESS_BENCH_NOTEBOOK_OUT).

Exit 0 ok, 1 a cell failed, 2 unusable input (missing notebook, no ipykernel in this environment).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path


class NotebookKernelError(RuntimeError):
    """The project's kernel cannot be started."""


def project_kernel_dir(root: Path) -> Path:
    """A kernelspec that runs *this* interpreter, so the notebook sees the project's pinned packages."""
    if importlib.util.find_spec("ipykernel") is None:
        raise NotebookKernelError(
            f"ipykernel is not installed for {sys.executable}; run `make venv` (it installs the dev extras)"
        )
    spec_dir = root / "kernels" / "harness-bench"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "harness-bench (project venv)",
            "language": "python",
        })
    )  # fmt: skip
    return root


DEFAULT_OUT_DIR = Path("reports/notebook")


def execute(path: Path, out: Path | None = None, timeout: int = 600) -> Path:
    """Run every cell and save the executed copy (default `reports/notebook/<name>.executed.ipynb`).

    Raises nbclient's CellExecutionError on the first failing cell; the executed copy is still
    written, so the failing cell's traceback can be read there.
    """
    import nbformat
    from nbclient import NotebookClient

    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such notebook")
    out = out or DEFAULT_OUT_DIR / f"{path.stem}.executed.ipynb"
    check_output_folder(out.parent, "--out folder")
    figures = os.environ.get("HARNESS_BENCH_NOTEBOOK_OUT")
    if figures is not None:
        check_output_folder(Path(figures), "HARNESS_BENCH_NOTEBOOK_OUT")
    nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "HARNESS_BENCH_NOTEBOOK_OUT")}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["JUPYTER_PATH"] = os.pathsep.join(
            filter(None, [str(project_kernel_dir(Path(tmp))), saved["JUPYTER_PATH"]])
        )
        os.environ.setdefault("HARNESS_BENCH_NOTEBOOK_OUT", str(out.parent.resolve()))
        try:
            client = NotebookClient(
                nb, timeout=timeout, kernel_name="harness-bench", resources={"metadata": {"path": str(Path.cwd())}}
            )
            client.execute()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            nbformat.write(nb, out)  # type: ignore[no-untyped-call]
    return out


class NotebookOutputError(RuntimeError):
    """The executed copy's folder (or HARNESS_BENCH_NOTEBOOK_OUT) cannot be written."""


def check_output_folder(folder: Path, what: str) -> None:
    """Refuse, before any cell runs, a folder the notebook's figures or executed copy cannot be written to."""
    try:
        if folder.exists() and not folder.is_dir():
            raise NotebookOutputError(f"{what} {folder} is a file, not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except NotebookOutputError:
        raise
    except OSError as exc:
        raise NotebookOutputError(
            f"{what} {folder}: cannot write there ({exc.strerror or exc}); give a writable folder"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path)
    parser.add_argument(
        "--out", type=Path, default=None, help="executed copy (default reports/notebook/<name>.executed.ipynb)"
    )
    args = parser.parse_args(argv)
    try:
        written = execute(args.notebook, args.out)
    except (NotebookKernelError, NotebookOutputError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"notebook failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"executed {args.notebook} -> {written} (figures beside it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
