"""What a person reads: console tables (`tables`), the transcript views `show` and `diff` (`show`), the HTML/Markdown
bench report (`report`; its sections and the Markdown and HTML they are written in: `report_document`), the
real-models report (`real_report`: it renders what `runners/pipelines/real_models.py` built; what it says of who
judged in `real_report_judging`; its sections on the new held-out cases and on what each control costs and buys in
`one_change`), the judges' error rates (`judge_rates`), the SemanticGuard's (`guard_rates`), compare-stops' table and
plot (`compare_stops`), the tag probe's tables and its real-models section (`tag_probe`, `real_probes`), the
calibration study's figures and tables (`calibration`), the gate's verdict files (`gate/`), and the one function per
medium that makes text a case, a model or a user wrote inert there (`safe_text`: terminal, Markdown, HTML, XML). It
only renders: it starts no process and imports no command.
"""
