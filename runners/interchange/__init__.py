"""Runs in and out of the bench: OpenTelemetry GenAI spans written to a file or an OTLP endpoint (`otel_export`),
traces and event logs read back as imported bench runs (`otel_import`, `otel_trace`, the values they must hold in
`_trace_values`), Inspect AI logs (`inspect_export`), and a stored or traced run captured as a new evaluation case
(`capture`).
"""
