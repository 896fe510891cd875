"""Runs in and out of the bench: OpenTelemetry GenAI spans written to a file or an OTLP endpoint (`otel_export`),
traces and event logs read back as imported bench runs (`otel_import`; another agent's spans: `genai_spans`; tau-bench's
recorded runs: `tau_bench`; the run they become: `observed_runs`, and its rows: `observed_rows`; their verdicts:
`outcomes`), a run read from a trace to capture (`otel_trace`), Inspect AI logs (`inspect_export`), a stored or
traced run captured as a new evaluation case (`capture`; a suite's run through `_capture_suite`), and HolmesGPT's
evaluation cases converted into a suite (`holmesgpt`). Private helpers: `_trace_values` (what a trace's values
must be), `_foreign_events` (another agent's calls as the Harness's events).
"""
