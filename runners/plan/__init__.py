"""Planning a run: the declared settings (one entry per knob: CLI flag, help, bounds, DuckDB column, resume), the run
options, the shard arithmetic and run ids, and the rules that refuse a flag that would be ignored or contradicts
another; and the plans themselves (`run_plan`, `sweep_plan`), built and validated before the first file is
written, with the one reader of a stored run (`stored_plan`: a resume is planned from what the run stored, read
only); the run's secrets and the one redaction every writer calls are the domain's
(`runners/domain/redaction.py`).
"""
