"""Pipelines: the bench run in process through its API and the decisions composed over what it stored — above the
decisions and renderings they compose, below the commands that start them. `real_models.py` replays every committed
real-model recording offline into one database (`runners.api.sweep`), checks it against its committed summary, and
builds the real-models report (recommend, compare-stops, the gate, the plain-loop comparison) that
`runners.rendering.real_report` renders; `calibration.py` is the calibration study the project runs on itself (the
gate's false alarms and power, `recommend`'s picks on the scripted profiles), run through the bench and scored by the
gate and `recommend`.
"""
