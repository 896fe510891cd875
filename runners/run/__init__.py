"""Executing a plan: the bench loop over cases and epochs, one case run through the harness, the serial/process/Ray
executors, the settings sweep, the interrupt handling that marks a run stale, and the preflight that checks an
endpoint before any case runs; the tag probe (`tag_probe`: one model call right after an observation of a reference
trajectory, teacher-forced through the Harness) and its bench run (`probe_bench`). The code here reads a validated
plan, never command-line flags.
"""
