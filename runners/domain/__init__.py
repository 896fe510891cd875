"""The bench's domain: the evaluation cases and what a case run is given and keeps, the scripted models that drive
the harness without a network, and the vocabularies every layer above shares.

- cases: `case_model.py` (a case as frozen pydantic models), `evalset.py` (evaluation sets: loading, validation,
  content hash, JSON schema), read one at a time by `_case_file.py` over the YAML event stream (`_yaml_stream.py`,
  its bounds in `_yaml_bounds.py`, the event path `_yaml_events.py` and libyaml's fast path `_yaml_fast.py`);
  `splits.py` (the declared development split), `evidence_marks.py` (which tool records carry evidence),
  `truth_grades.py` (what each trajectory step's observation really held);
- suites: `suite.py` (a folder's `suite.yaml`: its declared tools, families and role), `tool_fixtures.py` (a
  declared tool's results, matched on a call's arguments), `mocked_path.py` (a suite's case played from its fixtures);
- a case run: `case_setup.py` (its task and tools, faults applied), `case_run.py` (what the bench keeps of it),
  `prompt.py` (the bench's Diagnosis Agent prompt, or a suite's role), `tools/` (the three domain tools over a case's
  fixtures, and a suite's declared tools);
- models: `model_spec.py` (the model under test as the bench names it), `scripted.py` (`ScriptedChatModel`),
  `profiles.py` (seeded behaviour profiles), `probe_answers.py` (what a model answered at a tag probe);
- the judge's material: `judge.py` (the interface every judge implements, its verdict, the judges' names),
  `root_cause.py` (a case's root cause as the judge reads it: statement, facts, distractors), `labelled_lines.py`
  (the one reader of labelled JSON-lines sets), `labelled_answers.py`
  (the judge's labelled answers), `labelled_conclusions.py` (the SemanticGuard's labelled conclusions),
  `fallback_source.py` (where a FALLBACK came from);
- `stop_rules.py` (stop rules as declared policies), `redaction.py` (the secrets boundary every writer and printed
  line goes through, below every layer that writes), `object_columns.py` (rows handed to DuckDB as object columns,
  by the tools' fixtures and the metrics writer);
- what every command shares about files and names: `input_files.py` (the input-path rule: a regular file of bounded
  size, refused before it is opened), `repository.py` (whether the bench runs from a clone, for the commands that read
  its committed recordings), `suggest.py` (the "did you mean" of a mistyped name).
"""
