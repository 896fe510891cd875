"""kb_search: BM25 retrieval over the case's Markdown knowledge base (runbooks, design notes).

Documents are chunked by heading and paragraph and indexed with bm25s. The index is cached by the
documents' content hash, so constructing the tool again for the same knowledge base is cheap.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from harness import BusinessTool, EvidenceStatus, JsonObject, Relevance, ToolResult
from runners.domain.tools._remembered import Remembered

if TYPE_CHECKING:
    import bm25s

DEFAULT_STRONG_SCORE = 3.0
"""BM25 score from which a hit is STRONG.

bm25s' Lucene BM25 (k1=1.5, b=0.75) adds, per distinct query term in a chunk, idf * tf / (tf + k1 * norm):
about 1.0-1.7 for a term found in one or two chunks of a knowledge base of tens of chunks, about 0.3-0.8
for a word found in a third or more of them. 3.0 therefore takes roughly three specific terms shared
with one chunk; one or two generic words (payment, status, tenant) stay well below it.
"""
DEFAULT_MIN_SCORE = 0.3
"""BM25 score below which a hit is dropped: one word found in most chunks scores under it, so it is no evidence."""

MAX_CHUNK_CHARS = 800
"""Paragraphs of one section are merged up to about this size; longer paragraphs are split."""

_CACHE_SIZE = 64
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
_CJK_RUN = re.compile(rf"^[{_CJK}]")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_BOUNDARY = re.compile(r"\n|[。！？；]|[.!?;](?=\s)")


@functools.cache
def _stopwords() -> frozenset[str]:
    # bm25s brings numpy and scipy (a third of a second to import): it is imported when text is first tokenised,
    # so a command that only reads cases or stored runs never pays for it (see also `load_backend`).
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def load_backend() -> None:
    """Import bm25s (with numpy and scipy) now, on the calling thread. Whatever runs case runs on threads calls it
    before they start: importing numpy parses signatures with `ast.parse`, which CPython 3.11 does not make safe
    against another thread parsing at the same moment (python/cpython#106905: "AST constructor recursion depth
    mismatch")."""
    _stopwords()


def tokenize(text: str) -> list[str]:
    """Case-folded word tokens without English stopwords; CJK runs become overlapping character bigrams.

    Bigrams need no dictionary and match Chinese compounds well: 网关超时 -> 网关, 关超, 超时.
    Snake-case identifiers (error codes, metric names) give the whole word and its parts, so
    GW_TIMEOUT matches exactly and also matches "timeout".
    """
    tokens: list[str] = []
    stopwords = _stopwords()
    for match in _TOKEN.finditer(text.casefold()):
        run = match.group()
        if _CJK_RUN.match(run):
            tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
            continue
        parts = [p for p in run.split("_") if p and p not in stopwords]
        whole = run.strip("_")
        if "_" in whole:
            tokens.append(whole)
        tokens.extend(parts)
    return tokens


def _normalise_query(text: str) -> str:
    # Exactly the differences tokenize() ignores (case, whitespace runs), so one scope means one result.
    normal = " ".join(text.split()).casefold()
    if not normal:
        raise ValueError("query must contain non-whitespace text")
    return normal


class KbDocument(BaseModel):
    """One knowledge-base document."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    doc_id: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    """Stable identifier of the document."""
    title: str
    """Document title; it is indexed with every chunk."""
    text: str
    """The document body as Markdown."""


class KbSearchInput(BaseModel):
    """Business input of kb_search."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    query: Annotated[str, StringConstraints(min_length=1, max_length=500), AfterValidator(_normalise_query)]
    """Keywords to search for (English or Chinese); specific terms such as error codes and component names work best."""
    top_k: int = Field(default=3, ge=1, le=10)
    """Maximum number of passages to return."""


@dataclass(frozen=True, slots=True)
class _Chunk:
    doc_id: str
    title: str
    chunk_id: str
    text: str


@dataclass(frozen=True, slots=True)
class _Index:
    chunks: tuple[_Chunk, ...]
    retriever: bm25s.BM25 | None
    """None when the documents contain no indexable token at all."""


_cache: Remembered[str, _Index] = Remembered(_CACHE_SIZE)


class KnowledgeBaseSearch(BusinessTool[KbSearchInput]):
    """BM25 search over the case's knowledge-base chunks, with STRONG/REFERENCE relevance per hit."""

    name: ClassVar[str] = "kb_search"
    description: str = (
        "Search the payment platform's knowledge base (runbooks, incident reviews, design notes; English and "
        "Chinese) by keywords. Returns at most top_k passages ranked by BM25 score, each with doc_id, title, "
        "chunk_id, text and score, and a relevance of STRONG (shares several specific terms with the query) or "
        "REFERENCE (weaker keyword overlap; background only). Passages below a minimum score are dropped, so an "
        "empty result means nothing matched. truncated=true means more passages passed than top_k."
    )
    input_model = KbSearchInput
    runs_inline: ClassVar[bool] = True  # in-memory BM25: bounded latency

    def __init__(
        self,
        documents: Sequence[KbDocument],
        *,
        strong_score: float = DEFAULT_STRONG_SCORE,
        min_score: float = DEFAULT_MIN_SCORE,
    ) -> None:
        if not 0 < min_score <= strong_score:
            raise ValueError(f"need 0 < min_score <= strong_score, got {min_score} and {strong_score}")
        ids = [d.doc_id for d in documents]
        if len(set(ids)) != len(ids):
            raise ValueError("doc_id values must be unique")
        self._strong = strong_score
        self._min = min_score
        self._index = _index_for(documents)

    def actual_scope(self, parsed: KbSearchInput) -> JsonObject:
        """The applied scope: the normalised query and top_k."""
        return {"query": parsed.query, "top_k": parsed.top_k}

    def normalize_scope(self, parsed: KbSearchInput) -> str:
        # The query is already normalised by the input model; only it and top_k change the result.
        # (ToolScopeNormalizer would also rewrite a timestamp-looking query, which tokenises differently.)
        return json.dumps(self.actual_scope(parsed), sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    def run(self, parsed: KbSearchInput) -> ToolResult:
        scope = self.actual_scope(parsed)
        retriever = self._index.retriever
        # Distinct terms only: repeating a word must not turn a hit STRONG. Unknown terms score nothing.
        terms = list(dict.fromkeys(tokenize(parsed.query)))
        ids = [] if retriever is None else retriever.get_tokens_ids(terms)
        if retriever is None or not ids:
            return ToolResult(EvidenceStatus.NO_EVIDENCE, 0, scope, ())
        scores = retriever.get_scores_from_ids(ids)
        passing = (scores >= self._min).nonzero()[0]
        ranked = sorted(passing.tolist(), key=lambda i: (-float(scores[i]), i))[: parsed.top_k]
        records: list[JsonObject] = []
        relevance: list[Relevance] = []
        for i in ranked:
            chunk, score = self._index.chunks[i], float(scores[i])
            records.append(
                {
                    "doc_id": chunk.doc_id,
                    "title": chunk.title,
                    "chunk_id": chunk.chunk_id,
                    "text": chunk.text,
                    "score": round(score, 3),
                }
            )
            relevance.append(Relevance.STRONG if score >= self._strong else Relevance.REFERENCE)
        return ToolResult(
            evidence_status=EvidenceStatus.EVIDENCE if records else EvidenceStatus.NO_EVIDENCE,
            count=len(records),
            actual_scope=scope,
            records=tuple(records),
            truncated=len(passing) > len(ranked),
            relevance=tuple(relevance),
        )


def _index_for(documents: Sequence[KbDocument]) -> _Index:
    digest = hashlib.sha256()
    for doc in documents:
        for part in (doc.doc_id, doc.title, doc.text):
            data = part.encode("utf-8")
            digest.update(f"{len(data)}:".encode())  # length prefix: ("ab", "c") and ("a", "bc") differ
            digest.update(data)
    return _cache.get(digest.hexdigest(), lambda: _build(documents))


def _build(documents: Sequence[KbDocument]) -> _Index:
    chunks: list[_Chunk] = []
    corpus: list[list[str]] = []
    for doc in documents:
        for n, (headings, body) in enumerate(chunk_markdown(doc.text)):
            chunks.append(_Chunk(doc.doc_id, doc.title, f"{doc.doc_id}#{n}", body))
            # Title and heading path are indexed with the chunk: they name what the paragraph is about.
            corpus.append(tokenize(" ".join((doc.title, *headings, body))))
    if not any(corpus):
        return _Index(tuple(chunks), None)
    import bm25s  # see _stopwords

    retriever = bm25s.BM25(method="lucene", k1=1.5, b=0.75)  # pinned: the default thresholds assume it
    retriever.index(corpus, show_progress=False)
    return _Index(tuple(chunks), retriever)


def chunk_markdown(text: str, max_chars: int = MAX_CHUNK_CHARS) -> list[tuple[tuple[str, ...], str]]:
    """Split Markdown into (heading path, chunk text) pairs; the chunk text starts with its section heading."""
    out: list[tuple[tuple[str, ...], str]] = []
    for headings, heading_line, paragraphs in _sections(text):
        pieces = [p for para in paragraphs for p in _split_long(para, max_chars)]
        merged: list[str] = []
        for piece in pieces:
            if merged and len(merged[-1]) + 2 + len(piece) <= max_chars:
                merged[-1] = f"{merged[-1]}\n\n{piece}"
            else:
                merged.append(piece)
        for body in merged:
            out.append((headings, f"{heading_line}\n\n{body}" if heading_line else body))
    return out


def _sections(text: str) -> Iterator[tuple[tuple[str, ...], str, list[str]]]:
    """(heading path, heading line, paragraphs) per section; headings inside code fences are text."""
    stack: list[tuple[int, str]] = []
    heading_line = ""
    paragraphs: list[str] = []
    lines: list[str] = []
    in_fence = False

    def flush_paragraph() -> None:
        if any(line.strip() for line in lines):
            paragraphs.append("\n".join(lines).strip("\n"))
        lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            lines.append(line)
            continue
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            flush_paragraph()
            if paragraphs:
                yield tuple(h for _, h in stack), heading_line, paragraphs
            paragraphs = []
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2)))
            heading_line = line.strip()
        elif not in_fence and not line.strip():
            flush_paragraph()
        else:
            lines.append(line)
    flush_paragraph()
    if paragraphs:
        yield tuple(h for _, h in stack), heading_line, paragraphs


def _split_long(paragraph: str, max_chars: int) -> list[str]:
    """Cut an oversized paragraph at line and sentence ends (hard cuts as a last resort), text unchanged."""
    if len(paragraph) <= max_chars:
        return [paragraph]
    cuts = [m.end() for m in _BOUNDARY.finditer(paragraph)]
    pieces: list[str] = []
    current = ""
    for start, end in zip([0, *cuts], [*cuts, len(paragraph)], strict=True):
        part = paragraph[start:end]
        if current and len(current) + len(part) > max_chars:
            pieces.append(current)
            current = ""
        current += part
        while len(current) > max_chars:  # one run-on sentence
            pieces.append(current[:max_chars])
            current = current[max_chars:]
    pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]
