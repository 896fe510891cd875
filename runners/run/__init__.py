"""Executing a plan: the bench loop over cases and epochs (`bench.py`), one case run through the harness and its
judgement (`case_runner.py`, the verdicts in `verdict.py`, the rule judge of a conclusion's root cause in
`rule_judge.py`, reading conclusions through `_conclusion_text.py` (the interface in `runners/domain/judge.py`), what
every executor runs in `_execute.py`), the agent loops (`agents.py`: the native loop or a framework's; `plain_loop.py`:
the loop without the Harness), the serial/process/Ray executors (`executors.py`), the settings sweep (`sweep.py`), the
interrupt handling that marks a run stale (`interrupts.py`), the preflight that checks an endpoint before any case runs
(`preflight.py`), and the tag probe (`tag_probe.py`: one model call right after an observation of a reference
trajectory, teacher-forced through the Harness; its bench run in `probe_bench.py`), and what a case's reference run
shows the SemanticGuard (`guard_evidence.py`). The code here reads a validated plan, never command-line flags.
"""
