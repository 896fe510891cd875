"""The bench's domain: the evaluation cases (loading, validation, content hash, JSON schema; the truth grade of each
trajectory step, `truth_grades`; what a model answered at a tag probe, `probe_answers`) and the scripted model
profiles that drive the harness without a network.
"""
