"""The bench's domain: the evaluation cases (loading, validation, content hash, JSON schema), the suites they
belong to (`suite`: declared tools, families, role; `tool_fixtures`: a declared tool's results matched on arguments),
and the scripted model profiles that drive the harness without a network (`profiles`, `mocked_path`).
"""
