"""A label: the name a user gives a run to compare it by (the gate pairs labels), and the argparse type of every
flag that names one (`--label`, the gate's `--baseline`/`--candidate`, `show`/`diff`/`export`'s)."""

from __future__ import annotations

import argparse
import re

from runners.domain.redaction import redact

__all__ = ["LABEL_PATTERN", "label_arg"]

LABEL_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 ._:/+@=-]{0,198}[A-Za-z0-9._:/+@=-])?")
"""A label: an allowlist like the run id's (it is shown in terminals, Markdown headings, HTML and JUnit names, and
quoted into printed commands), plus spaces inside and the `:/+@=` of model names and settings; 1-200 characters."""


def label_arg(text: str) -> str:
    """The argparse type of every flag that names a label (`--label`, the gate's `--baseline`/`--candidate`)."""
    if not LABEL_PATTERN.fullmatch(text):
        shown = repr(text) if len(text) <= 60 else f"{text[:60]!r}… ({len(text)} characters)"
        raise argparse.ArgumentTypeError(
            f"{shown}: a label is 1-200 letters, digits, spaces or '._-:/+@=', starting with a letter or digit and"
            " not ending with a space"
        )
    if redact(text) != text:  # stored and printed as given, so never a credential (it could not be selected again)
        raise argparse.ArgumentTypeError(f"{redact(text)!r}: the label looks like a credential; name the run otherwise")
    return text
