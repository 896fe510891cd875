"""Model endpoints: cassettes that record and replay OpenAI-compatible HTTP traffic, the scripted simulator server on
127.0.0.1, the live local LLM check (llama.cpp's server with Gemma 3 and its chat template), and the re-recording of
the built-in cassettes.
"""
