"""Planning a run: the one flag engine (`flags.py`, its numeric ranges in `_bounds.py`: every flag of every command
is a field of a typed `FlagModel`), the run settings as fields viewed through it (`settings.py`; the model under test
and how it is asked in `model_settings.py`, the Harness's in `bench_config.py`), which models declare the settings
and options (`declarations.py`, passed in, never replaced), the run options by concern (`options.py`, with the agent
loop in `agent.py` and the executor in `executor.py`), labels (`labels.py`), the shard arithmetic and run ids
(`shard.py`), the rules that refuse a flag that would be ignored or contradicts another (`rules.py`), the checks on
the Python API's arguments that are not option fields (`python_values.py`); and the
plans themselves (`run_plan`, `sweep_plan`), built and validated before the first file is written, with the one
reader of a stored run (`stored_plan`: a resume is planned from what the run stored, read only). The run's secrets
and the one redaction every writer calls are the domain's (`runners/domain/redaction.py`).
"""
