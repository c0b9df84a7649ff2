"""The one state a request carries through the pipeline's steps: the HTTP request model as validated, the
user, and what each step has found so far (query, route, results, grade, facts, the answer's final message)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.context import UserContext
from ragmesh_gateway.cache import Hit
from ragmesh_gateway.models import ChatRequest, Outcome, SearchRequest, Turn
from ragmesh_gateway.query import Route

logger = logging.getLogger(__name__)


@dataclass
class RequestState:
    """Read and written by the steps in their order. `request` is the HTTP body as FastAPI validated it (a chat
    or a search); nothing of it is copied, except the text searched (`question`), named differently by the two."""

    user: UserContext
    request: ChatRequest | SearchRequest
    candidates: int  # retrieved before rerank and grade
    stages: list[dict[str, Any]] = field(default_factory=list)  # one record per step run, as progress reports it
    degraded: list[dict[str, str]] = field(default_factory=list)
    outcome: Outcome = Outcome.ANSWER  # "answer" until a step decides there is nothing to answer from
    query: str = ""  # the self-contained question actually searched (the follow-up rewritten)
    route: Route | None = None
    language: str = ""  # the user's language hint for the search (request field, else Accept-Language); "" = none
    levels: list[str] = field(default_factory=list)
    strategy: str = "direct"
    results: list[common_pb2.ScoredChunk] = field(default_factory=list)
    # the rest of the table a superlative or how-many question is about, given after the first `top_k`
    # (pipeline/table.py)
    table_chunks: list[common_pb2.ScoredChunk] = field(default_factory=list)
    tables_partial: bool = False  # a table was read only in part: a count of its rows is a lower bound
    accessible: int = 0
    ingesting: int = 0
    vector_used: bool = True  # the search had a vector leg (the grade may trust cosine scores)
    relevance: dict[str, Any] | None = None  # the grade, its reasons and the corrective retrieval, if any
    rewritten_question: str | None = None  # the follow-up as rewritten, when it was
    notes: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # graph relations, as given to the answerer
    graph: dict[str, Any] | None = None  # the `graph` field of the reply (entities, facts, communities)
    final: answerer_pb2.AnswerFinal | None = None
    trace_id: str = ""
    # a chat in a stored conversation: its turns as the history (withdrawn answers left out), the documents
    # those answers drew on (a turn that uses them as history depends on them too), the stored turn's id
    stored_history: list[Turn] | None = None
    history_documents: list[str] = field(default_factory=list)
    message_id: str | None = None
    query_vector: list[float] | None = None  # the question's embedding, when the cache step embedded it
    respelled: list[tuple[str, str]] = field(default_factory=list)  # the question's slips, searched again as read
    embed_ms: float | None = None  # the time of that embedding
    cache_bucket: str | None = None  # the semantic cache's bucket of this request's options (cache on)
    cached: Hit | None = None  # the answer served from the semantic cache
    cache_stamps: dict[str, str] | None = None  # the sources' stamps before the answer, for the store
    # multi-step answers (pipeline/agentic.py): the mode the plan chose, its sub-questions, one record per
    # step (as the `step` events show it), the LLM tokens the agent spent, a search cut by the time limit
    mode: str = "direct"
    sub_questions: list[str] = field(default_factory=list)
    agent_steps: list[dict[str, Any]] = field(default_factory=list)
    bridges: list[str] = field(default_factory=list)  # what filled the walk's bridge slots: never the answer
    resolved_question: str = ""  # the last step's question with its bridge filled (the answer is checked on it)
    llm_tokens: int = 0
    answer_max_tokens: int | None = None  # the answer's reply cap lowered by the LLM token bound
    timed_out: bool = False

    @classmethod
    def for_chat(cls, user: UserContext, request: ChatRequest, candidates: int) -> RequestState:
        """A chat retrieves `candidates` (the gateway's setting), never fewer than it answers from."""
        return cls(user=user, request=request, candidates=max(candidates, request.top_k), query=request.question)

    @classmethod
    def for_search(cls, user: UserContext, request: SearchRequest) -> RequestState:
        return cls(
            user=user,
            request=request,
            candidates=request.candidates or max(request.top_k, 10),
            query=request.query,
        )

    @property
    def question(self) -> str:
        """The text as the user sent it."""
        return self.request.question if isinstance(self.request, ChatRequest) else self.request.query

    @property
    def history(self) -> list[Turn]:
        if self.stored_history is not None:
            return self.stored_history
        return self.request.history if isinstance(self.request, ChatRequest) else []

    @property
    def conversation_id(self) -> str | None:
        conversation = self.request.conversation_id if isinstance(self.request, ChatRequest) else None
        return str(conversation) if conversation is not None else None

    def answer_sources(self) -> list[common_pb2.ScoredChunk]:
        """The sources a chat's answer is given, cited by their place: the first `top_k` results, then the rest of
        the table a superlative or how-many question is about (`table_chunks`)."""
        top_k = self.request.top_k if isinstance(self.request, ChatRequest) else len(self.results)
        return [*self.results[:top_k], *self.table_chunks]

    @property
    def answering(self) -> bool:
        """Still something to find and answer: no outcome other than an answer, and no cached answer."""
        return self.outcome == Outcome.ANSWER and self.cached is None

    @property
    def document_ids(self) -> list[str]:
        return [str(d) for d in self.request.document_ids]

    def answer_history(self) -> list[answerer_pb2.ChatTurn]:
        return [answerer_pb2.ChatTurn(role=t.role, content=t.content) for t in self.history]

    def degrade(self, step: str, reason: str) -> None:
        """An optional step did not do its part: logged, on the current span, and in the final event."""
        logger.warning("degraded: %s skipped (%s)", step, reason)
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_DEGRADED, True)
        span.add_event("degraded", {attr.RAG_STAGE: step, attr.RAG_DEGRADED_REASON: reason})
        self.degraded.append({"step": step, "reason": reason})

    def degraded_in(self, step: str) -> bool:
        return any(d["step"] == step for d in self.degraded)
