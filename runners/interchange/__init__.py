"""Runs in and out of the bench: OpenTelemetry GenAI spans written to a file or an OTLP endpoint (`otel_export`),
traces and event logs read back as imported bench runs (`otel_import`, a piece at a time; another agent's spans:
`genai_spans`; tau-bench's recorded runs: `tau_bench`; the run they become: `observed_runs`, and its rows:
`observed_rows`; what an import's first reading learns of them: `trace_survey`; their verdicts: `outcomes`), a run
read from a trace to capture (`otel_trace`), Inspect AI logs (`inspect_export`), a stored or traced run captured as a
new evaluation case (`capture`; a suite's run through `_capture_suite`), and HolmesGPT's evaluation cases converted
into a suite (`holmesgpt`). Private helpers: `_trace_values` (what a trace's values must be), `_foreign_events`
(another agent's calls as the Harness's events), `_json_stream` (JSON read from a file a value at a time),
`_otlp_spans` (an OTLP/JSON file's spans, one at a time), `_event_log` (the event log a run at a time, and the file
reading the trace readers share).
"""
