"""The bench's domain: the evaluation cases (loading, validation, content hash, JSON schema) and the scripted model
profiles that drive the harness without a network.
"""
