"""Model endpoints the bench serves or drives: the scripted simulator server on 127.0.0.1 (`serve-sim`, which plays
the scripted trajectories over OpenAI-compatible HTTP) and the re-recording of the built-in cassettes through it. The
cassettes themselves are files, so the store owns them (`runners/store/cassettes.py`); the live local LLM check is
`runners/live/`.
"""
