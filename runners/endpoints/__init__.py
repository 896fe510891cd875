"""Model endpoints: cassettes that record and replay OpenAI-compatible HTTP traffic, the scripted simulator server on
127.0.0.1, and the re-recording of the built-in cassettes (the live local LLM check is `runners/live/`).
"""
