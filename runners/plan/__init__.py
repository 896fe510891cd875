"""Planning a run: every flag declared once (`flags.py`: a typed `FlagModel` per command), the run settings
(`settings.py`; the model under test and how it is asked in `model_settings.py`, the Harness's in `bench_config.py`),
the run options by concern (`options.py`, with the agent loop in `agent.py` and the executor in `executor.py`), labels
(`labels.py`), the shard arithmetic and run ids (`shard.py`), and the rules that refuse a flag that would be ignored
or contradicts another (`rules.py`); and the plans themselves (`run_plan`, `sweep_plan`), built and validated before
the first file is written, with the one reader of a stored run (`stored_plan`: a resume is planned from what the run
stored, read only). The run's secrets and the one redaction every writer calls are the domain's
(`runners/domain/redaction.py`).
"""
