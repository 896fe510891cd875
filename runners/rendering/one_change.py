"""The real-models report's two sections that measure against the Harness as it ships: the new held-out cases
(reported apart) and what each control costs and buys (one thing changed per row), as table rows and their texts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runners.decisions.ablation import NewHeldOutLine, OneChange

__all__ = ["NEW_HELD_OUT_HEADER", "NEW_HELD_OUT_TEXT", "ONE_CHANGE_HEADER", "one_change_rows", "one_change_text",
           "new_held_out_rows"]  # fmt: skip

NEW_HELD_OUT_TEXT = (
    "The cases listed under `[new-held-out]` in `evalsets/splits/held-out.txt` were written after the Harness's "
    "model-facing text froze; no text or tool behaviour was developed on them and no model had run on them before "
    "they were committed. Every one expects SUCCESS. SUCCESS counts a conclusion that passed both guards and, by the "
    "rule judge, states the case's root cause (the outcome verdict), with its 95% Wilson interval."
)
NEW_HELD_OUT_HEADER = ["recording", "NO_GAIN", "runs", "outcome verdict", "SUCCESS with the root cause [95%]",
                       "EvidenceGuard", "SemanticGuard"]  # fmt: skip

ONE_CHANGE_HEADER = ["switched off", "recording", "cases", "measure", "Harness", "switched off",
                     "off − on [95%]"]  # fmt: skip


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "—"


def new_held_out_rows(lines: Sequence[NewHeldOutLine]) -> list[list[str]]:
    """One row per recording that ran new held-out cases."""
    return [[line.label, str(line.no_gain_threshold), str(line.runs), f"{line.outcome_passed}/{line.runs}",
             f"{line.success_reached}/{line.success_expected} ({line.reached.fmt(pct=True)})",
             _counts(line.evidence_checks), _counts(line.semantic_verdicts)] for line in lines]  # fmt: skip


def one_change_text(changes: Sequence[OneChange], held_out: int) -> str:
    """What the table measures, and how many cases it covers."""
    covered = sorted({c.comparison.cases for c in changes})
    cover = ", ".join(str(n) for n in covered) or "0"
    return (
        "Each row changes one thing against the same model through the Harness as it ships (NO_GAIN threshold 2): one "
        "control switched off (`--ablate`), or every control off in the plain loop sent the Harness's own system "
        "prompt (`--agent plain --plain-prompt harness`), so that the comparison with the plain loop no longer "
        "changes the prompt too. Paired by case over the cases both recordings ran "
        f"({cover} of the {held_out} held-out cases: the recording of a changed run goes on where it stopped); "
        "off − on is the changed run's mean minus the Harness's, with its 95% bootstrap interval over cases. What a "
        "control buys is what switching it off loses (recall with verified citations, honest fallback); what it "
        "costs is what switching it off saves (tokens, calls)."
    )


def one_change_rows(changes: Sequence[OneChange]) -> list[list[str]]:
    """Per change, its paired measures and the conclusions the Harness blocked against those the change published."""
    rows: list[list[str]] = []
    for c in changes:
        cmp, what = c.comparison, c.changed.text
        for m in cmp.metrics:
            value, low, high = m.difference.bounds()
            if m.share:
                values = [f"{m.harness:.0%}", f"{m.plain:.0%}",
                          f"{value * 100:+.0f} pts [{low * 100:+.0f}, {high * 100:+.0f}]"]  # fmt: skip
            else:
                values = [f"{m.harness:,.1f}", f"{m.plain:,.1f}", f"{value:+,.1f} [{low:+,.1f}, {high:+,.1f}]"]
            rows.append([what, c.label, str(m.cases), m.name, *values])
        rows.append([what, c.label, str(cmp.cases), "conclusions with rejected citations: blocked / published",
                     f"{cmp.harness_blocked} blocked", f"{cmp.plain_published_rejected} published", "—"])  # fmt: skip
        rows.append([what, c.label, str(cmp.cases), "SUCCESS published (of them, failing the outcome verdict)",
                     f"{c.harness_published} ({c.harness_wrong})", f"{c.changed_published} ({c.changed_wrong})",
                     "—"])  # fmt: skip
        rows.append([what, c.label, str(cmp.cases), "FAILED releases", str(cmp.harness_failed),
                     str(cmp.plain_failed), "—"])  # fmt: skip
    return rows
