"""The bench's domain tools: knowledge-base search, log search and database query over a case's fixtures, and a
suite's declared tools answered from its cases' fixtures (`declared`)."""
