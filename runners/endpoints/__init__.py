"""Model endpoints the bench serves or drives: the scripted simulator server on 127.0.0.1 (`simulator.py`,
`serve-sim`, which plays the scripted trajectories over OpenAI-compatible HTTP) and the re-recording of the built-in
cassettes through it; `_serving.py` is what the bench's background HTTP servers share. The cassettes themselves are
files, so the store owns them (`runners/store/cassettes.py`); the live local LLM check is `runners/live/`.
"""
