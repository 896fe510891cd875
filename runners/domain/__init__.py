"""The bench's domain: the evaluation cases (loading, validation, content hash, JSON schema), a case's root cause as
the judge reads it (`root_cause`), the judge's labelled answers (`labelled_answers`), where a FALLBACK came from
(`fallback_source`), and the scripted model profiles that drive the harness without a network.
"""
