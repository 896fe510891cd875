"""What a person reads: console tables (`tables`), the transcript views `show` and `diff` (`show`), the HTML/Markdown
bench report (`report`) and the real-models report (`real_report`; its sections on the new held-out cases and on
what each control costs and buys in `one_change`), the gate's verdict files (`gate/`), and the one function per medium
that makes text a case, a model or a user wrote inert there (`safe_text`: terminal, Markdown, HTML, XML).
"""
