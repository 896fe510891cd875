"""Planning a run: the one flag engine (`flags.py`, its numeric ranges in `_bounds.py`: every flag of every command
is a field of a `FlagModel`), the run settings as fields viewed through it (`settings.py`; `model_settings.py`,
`bench_config.py`: CLI flag, help, bounds, DuckDB column, resume), which models declare them (`declarations.py`,
passed in), the run options (`options.py`), the shard arithmetic and run ids, and the rules that refuse a flag that
would be ignored or contradicts another; and the plans themselves (`run_plan`, `sweep_plan`), built and validated
before the first file is written, with the one reader of a stored run (`stored_plan`: a resume is planned from what
the run stored, read only); and the run's secrets (`redact.py`: which values are secret and the one redaction every
writer and every printed line goes through — below the store, which calls it on every row it writes).
"""
