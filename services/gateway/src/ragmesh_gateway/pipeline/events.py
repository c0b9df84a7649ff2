"""What the pipeline tells the client: the events of a chat (progress, token, final, error), the sources and
evidence as the API shows them, and the messages of the outcomes that are not an answer. Their models, for
the OpenAPI spec, are in `ragmesh_gateway.models` (ProgressEvent, TokenEvent, FinalEvent, StepError)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh_gateway.messages import CATALOGUE, DEFAULT, for_question, language, localize_withheld
from ragmesh_gateway.models import Outcome

if TYPE_CHECKING:
    from ragmesh_gateway.pipeline.state import RequestState

Event = dict[str, Any]

# the English texts of the outcomes that are not an answer; a chat gets them in its language (messages.py)
NO_PERMISSION = CATALOGUE["no_permission"][DEFAULT]
NO_SOURCES = CATALOGUE["no_sources"][DEFAULT]
NO_MATCH_IN_FILTER = CATALOGUE["no_match_in_filter"][DEFAULT]
INGESTING = CATALOGUE["ingesting"][DEFAULT]
MESSAGES = {
    Outcome.NO_PERMISSION: NO_PERMISSION,
    Outcome.NO_SOURCES: NO_SOURCES,
    Outcome.NO_MATCH_IN_FILTER: NO_MATCH_IN_FILTER,
    Outcome.INGESTING: INGESTING,
}
SNIPPET_CHARS = 320


def event(name: str, **data: Any) -> Event:
    return {"event": name, "data": data}


def chunk_origin(item: common_pb2.ScoredChunk) -> str:
    """The API's name of why the chunk is there ("search", "summary", "sibling", ...)."""
    origin = item.origin or common_pb2.CHUNK_ORIGIN_SEARCH
    return common_pb2.ChunkOrigin.Name(origin).removeprefix("CHUNK_ORIGIN_").lower()


def chunk_kind(chunk: common_pb2.Chunk) -> str:
    """The API's name of the chunk's kind ("paragraph", "table", ...; "" when unset)."""
    return common_pb2.ChunkKind.Name(chunk.kind).removeprefix("CHUNK_KIND_").lower() if chunk.kind else ""


def source_payload(index: int, item: common_pb2.ScoredChunk, snippet: bool = True) -> dict[str, Any]:
    chunk = item.chunk
    text = chunk.text.strip()
    if snippet and len(text) > SNIPPET_CHARS:
        text = text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
    return {
        "index": index + 1,
        "document_id": chunk.document_id,
        "chunk_id": chunk.chunk_id,
        "title": chunk.title,
        "section_path": list(chunk.section_path),
        "page": chunk.page or None,
        "kind": chunk_kind(chunk),
        "snippet": text,
        "origin": chunk_origin(item),
        "scores": {
            "score": round(item.score, 6),
            "hybrid": round(item.hybrid_score, 6),
            "lexical": round(item.lexical_score, 6),
            "vector": round(item.vector_score, 6),
            "rerank": round(item.rerank_score, 6) if item.reranked else None,
        },
    }


def evidence_payload(quote: answerer_pb2.EvidenceQuote, items: list[common_pb2.ScoredChunk]) -> dict[str, Any]:
    """An answer's evidence quote with the document, section and page of the source it is cut from."""
    chunk = items[quote.source_index].chunk if 0 <= quote.source_index < len(items) else common_pb2.Chunk()
    return {
        "source": quote.source_index + 1,
        "document_id": chunk.document_id,
        "title": chunk.title,
        "section_path": list(chunk.section_path),
        "page": chunk.page or None,
        "quote": quote.text,
        "start": quote.start,
        "end": quote.end,
    }


def sentence_payload(verdict: answerer_pb2.SentenceVerdict) -> dict[str, Any]:
    """One answer sentence's verification verdict."""
    return {
        "text": verdict.text,
        "supported": verdict.supported,
        "sources": [j + 1 for j in verdict.source_indexes],
        "unsupported_tokens": list(verdict.unsupported_tokens),
        "reason": verdict.reason,
        "verdict": answerer_pb2.Verdict.Name(verdict.verdict).removeprefix("VERDICT_").lower(),
        "short_answer": verdict.short_answer,
    }


def respelled_note(respelled: Iterable[tuple[str, str]]) -> str:
    """What the user is told when words of the question were read with the documents' spelling (written, read)."""
    read = ", ".join(f'"{written}" as "{as_read}"' for written, as_read in respelled)
    return f"Your question was read with your documents' spelling: {read}."


def retrieval_fields(state: RequestState) -> dict[str, Any]:
    """The final event's fields about retrieval: the relevance grade, the rewritten question, notes."""
    return {
        "relevance": state.relevance,
        "rewritten_question": state.rewritten_question,
        "notes": state.notes,
        "ingesting_documents": state.ingesting,
        "cache_hit": False,
        "cached_trace_id": None,
        "mode": state.mode,
        "steps": state.agent_steps if state.mode == "agentic" else None,
        "graph": state.graph,
    }


def decline_events(state: RequestState) -> Iterator[Event]:
    """A chat with nothing to answer from: the outcome's message as the answer, no sources."""
    message = for_question(state.outcome.value, state.question)
    yield event("token", text=message)
    yield event(
        "final",
        outcome=state.outcome.value,
        answer=message,
        sources=[],
        citations=[],
        grounding_score=None,
        grounded=None,
        warnings=[],
        degraded=state.degraded,
        accessible_documents=state.accessible,
        trace_id=state.trace_id,
        **retrieval_fields(state),
    )


def sentence_event(sentence: answerer_pb2.VerifiedSentence) -> Event:
    """A verified answer sentence for the client: shown as it comes (sources numbered from 1)."""
    return event(
        "sentence",
        index=sentence.index,
        text=sentence.text,
        sources=[j + 1 for j in sentence.source_indexes],
        extractive=sentence.extractive,
    )


def answer_span_payload(final: answerer_pb2.AnswerFinal) -> dict[str, Any] | None:
    """The extractive short answer with its quote and offsets in the source's text (None when nothing verified)."""
    if not final.HasField("answer_span"):
        return None
    span = final.answer_span
    return {
        "source": span.source_index + 1,
        "chunk_id": span.chunk_id,
        "text": span.text,
        "start": span.start,
        "end": span.end,
        "quote": span.quote,
        "quote_start": span.quote_start,
        "quote_end": span.quote_end,
    }


def usage_payload(final: answerer_pb2.AnswerFinal) -> dict[str, int] | None:
    if not final.HasField("usage"):
        return None  # the model server did not count them
    return {"input_tokens": final.usage.input_tokens, "output_tokens": final.usage.output_tokens}


def cached_events(state: RequestState) -> Iterator[Event]:
    """A chat answered from the semantic cache: the cached answer as one token, then its final event with what
    is this request's own (trace, degradations, rewritten question, the asker's document count) and without
    what was the first asker's (their relevance grade, notes and counts)."""
    hit = state.cached
    assert hit is not None
    payload = hit.payload
    yield event("token", text=payload["answer"])
    yield event(
        "final",
        **{
            **payload,
            "degraded": state.degraded,
            "accessible_documents": hit.accessible_documents,
            "trace_id": state.trace_id,
            "relevance": None,
            "rewritten_question": state.rewritten_question,
            "notes": [],
            "ingesting_documents": 0,
            "cache_hit": True,
            "cached_trace_id": hit.trace_id,
            "usage": {"input_tokens": 0, "output_tokens": 0},  # no model was asked for this one
            "graph": None,  # the first asker's graph view is not this user's
        },
    )


def answer_event(state: RequestState, final: answerer_pb2.AnswerFinal, items: list[common_pb2.ScoredChunk]) -> Event:
    """The final event of an answered chat: the answer, its sources (cited or not), citations, and the
    answerer's verification (short answer, verified/withheld, evidence quotes, per-sentence verdicts)."""
    sources = [source_payload(i, item) for i, item in enumerate(items)]
    support = {c.source_index: c.support for c in final.citations}
    for i, source in enumerate(sources):
        source["cited"] = i in support
        source["support"] = round(support.get(i, 0.0), 4)
    lang = language(state.question) if final.withheld else DEFAULT
    return event(
        "final",
        outcome=Outcome.ANSWER.value,
        answer=localize_withheld(final.answer, lang),
        sources=sources,
        citations=[
            {"source": c.source_index + 1, "chunk_id": c.chunk_id, "support": round(c.support, 4)}
            for c in final.citations
        ],
        grounding_score=round(final.grounding_score, 4),
        grounded=final.grounded,
        warnings=list(final.warnings),
        degraded=state.degraded,
        model=final.model,
        accessible_documents=state.accessible,
        trace_id=state.trace_id,
        short_answer=localize_withheld(final.short_answer, lang),
        verified=final.verified,
        withheld=final.withheld,
        draft=final.draft if final.HasField("draft") else None,
        overruled=final.overruled,
        answer_span=answer_span_payload(final),
        evidence=[evidence_payload(q, items) for q in final.evidence],
        sentences=[sentence_payload(v) for v in final.sentences],
        usage=usage_payload(final),
        **retrieval_fields(state),
    )
