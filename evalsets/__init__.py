"""The built-in evaluation sets: one YAML file of cases per family, and `schema.json`, their JSON Schema.

Data, not code: a package so that the wheel carries the files and the bench finds them where it is installed
(`importlib.resources.files("evalsets")`; `runners.domain.evalset.builtin_dir`). README.md says how to write a case.
"""
