"""The gate's verdict as text and files: the verdict line, the Markdown summary, JUnit XML, JSON, the plan from a pilot,
and the cases behind a failed test with the commands that open their transcripts.

- `cases.py` — the cases that got worse and the failing case runs, as Markdown and plain lines;
- `render.py` — the verdict line, Markdown, JUnit, JSON and the plan from a pilot;
- `files.py` — writing the summary, JUnit and JSON files (whole or not at all).
"""

from __future__ import annotations

from runners.rendering.gate.cases import CASE_LIMIT, failing_case_lines, junit_text, markdown_section
from runners.rendering.gate.files import write_outputs
from runners.rendering.gate.render import junit, markdown, plan, to_json, verdict_line, verdict_line_with_power

__all__ = [
    "CASE_LIMIT",
    "failing_case_lines",
    "junit",
    "junit_text",
    "markdown",
    "markdown_section",
    "plan",
    "to_json",
    "verdict_line",
    "verdict_line_with_power",
    "write_outputs",
]
