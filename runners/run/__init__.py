"""Executing a plan: the bench loop over cases and epochs (`bench.py`), one case run through the harness and its
judgement (`case_runner.py`, the verdicts in `verdict.py`, what every executor runs in `_execute.py`), the agent
loops (`agents.py`: the native loop or a framework's; `plain_loop.py`: the loop without the Harness), the
serial/process/Ray executors (`executors.py`), the settings sweep (`sweep.py`), the interrupt handling that marks a
run stale (`interrupts.py`), and the preflight that checks an endpoint before any case runs (`preflight.py`). The
code here reads a validated plan, never command-line flags.
"""
