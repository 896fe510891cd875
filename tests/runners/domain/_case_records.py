"""What a case's fixtures hold, read as the tests of the case data need it: every record a tool could return, and
the case's own language (question and fixture text)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from runners.domain.case_setup import build_tools
from runners.domain.evalset import EvalCase
from runners.domain.tools.kb_search import chunk_markdown


def fixture_records(case: EvalCase, tool: str) -> Iterator[Mapping[str, object]]:
    """Every record `tool` could return for the case, shaped as the tool returns it (faults left out)."""
    fx = case.fixtures
    if tool == "log_search":
        yield from (event.model_dump(mode="json") for event in fx.logs)
    elif tool == "kb_search":
        for doc in fx.kb:
            for _, text in chunk_markdown(doc.text):
                yield {"doc_id": doc.doc_id, "title": doc.title, "text": text}
    elif tool == "db_query":
        healthy = case.model_copy(update={"fixtures": fx.model_copy(update={"faults": []})})
        db = next(t for t in build_tools(healthy) if t.name == "db_query")
        for table in fx.tables:
            yield from db.run(db.parse_input({"sql": f"SELECT * FROM {table.name}"})).records


def case_text(case: EvalCase) -> str:
    """The case's own words, case-folded: its question and every text its fixtures hold."""
    fx = case.fixtures
    parts = [case.question, *(f"{d.title}\n{d.text}" for d in fx.kb), *(e.message for e in fx.logs)]
    parts.extend(str(v) for t in fx.tables for row in t.rows for v in row if v is not None)
    return "\n".join(parts).casefold()
