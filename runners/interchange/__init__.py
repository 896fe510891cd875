"""Runs in and out of the bench: OpenTelemetry GenAI spans written to a file or an OTLP endpoint (`otel_export`),
traces and event logs read back as imported bench runs (`otel_import`, `otel_trace`), Inspect AI logs
(`inspect_export`), a stored or traced run captured as a new evaluation case (`capture`, a suite's through
`_capture_suite`), and HolmesGPT's evaluation cases converted into a suite (`holmesgpt`).
"""
