"""Executing a plan: the bench loop over cases and epochs, one case run through the harness, the serial/process/Ray
executors, the settings sweep, the interrupt handling that marks a run stale, and the preflight that checks an
endpoint before any case runs; the two verdicts of a case run (`verdict`) and the judge of a conclusion's root cause
(`judge`, the protocol; `rule_judge`, the default, reading conclusions through `_conclusion_text`). The code here
reads a validated plan, never command-line flags.
"""
