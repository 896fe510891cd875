"""Writing the gate's files: the Markdown summary, the JUnit XML and the JSON result, each whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

from runners.decisions.gate.result import GateResult
from runners.rendering.gate.render import finite, junit, markdown, to_json
from runners.store.output_files import NamedPath, write_text

__all__ = ["write_outputs"]


def write_outputs(
    result: GateResult,
    summary_path: Path,
    junit_path: Path,
    *,
    json_path: Path | None = None,
    allow_inconclusive: bool = False,
) -> None:
    """Write the Markdown summary and the JUnit XML (and the JSON result when asked), each whole or not at all
    (OutputWriteError names the path)."""
    write_text(NamedPath("--summary", summary_path), markdown(result))
    write_text(NamedPath("--junit", junit_path), junit(result, allow_inconclusive=allow_inconclusive))
    if json_path is not None:
        text = json.dumps(finite(to_json(result, allow_inconclusive=allow_inconclusive)), indent=1, allow_nan=False)
        write_text(NamedPath("--json", json_path), text + "\n")
