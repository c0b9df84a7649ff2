"""conversation: a chat in a stored conversation (README "Conversations"), in two parts.

`Conversation` (a step, before the response): reads the caller's conversation from the retriever, which
answers only the owner (RLS) and withdraws an answer whose documents the caller can no longer read; the
remaining turns become the history the follow-up is rewritten from and the answerer sees. A withdrawn answer
is left out with its question. An unknown or foreign conversation is 404 (the retriever says NOT_FOUND).

`RecordTurn` (a hook on the final event, answered or declined): appends the turn, with the ids of every
document whose text went into it (the sources given to the model, and those of the history turns used), and
puts `conversation_id` and `message_id` in the final event. The answer is already streamed when it runs, so
a failure to store degrades (logged, traced, in `degraded`) and `message_id` is null.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from grpc import aio
from opentelemetry import trace

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import MAX_HISTORY_TURNS, ChatRequest, Outcome, Turn
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

HISTORY_TURN_CHARS = 8000  # as models.Turn's content
# what of the final event is stored with the turn, besides its answer (the `draft` of a withheld answer is not)
DETAIL_KEYS = (
    "sources",
    "evidence",
    "citations",
    "sentences",
    "verified",
    "withheld",
    "grounded",
    "grounding_score",
    "warnings",
)


def history_turns(messages: list[retriever_pb2.ConversationMessage]) -> tuple[list[Turn], list[str]]:
    """The stored turns as chat history, newest MAX_HISTORY_TURNS messages (question and answer each), and the
    documents their answers drew on. Withdrawn turns are left out whole; a turn without an answer (a declined
    question) gives its question only, and so does a withheld one (its text says that nothing verified, and the
    quotes it shows unverified name no antecedent). A question that was rewritten is given as rewritten: "Who
    invented it?" after "What is it made of?" (read as "What is the Boots nut made of?") refers to the Boots nut.
    An answer is given with its short answer first (`_with_short_answer`)."""
    turns: list[Turn] = []
    documents: list[str] = []
    kept = [m for m in messages if not m.withdrawn][-MAX_HISTORY_TURNS // 2 :]
    for message in kept:
        # stored by this gateway: valid as it was when it was asked; only cut to the history's bound
        asked = message.rewritten_question or message.question
        turns.append(Turn.model_construct(role="user", content=asked[:HISTORY_TURN_CHARS]))
        if message.outcome == Outcome.ANSWER.value and message.answer and not _withheld(message):
            said = _with_short_answer(message.short_answer, message.answer)
            turns.append(Turn.model_construct(role="assistant", content=said[:HISTORY_TURN_CHARS]))
            documents.extend(message.source_document_ids)
    return turns, list(dict.fromkeys(documents))


def _with_short_answer(short: str, answer: str) -> str:
    """The answer as the user read it: its short answer first (where the answer does not open with it), so that
    "he" after "Who patented the Electric Tabulating Machine?" is "Herman Hollerith", the short answer, not the
    first name of the quoted sentence ("Julius E. Pitrap patented the computing scale …; Herman Hollerith …")."""
    short = short.strip()
    if not short or answer.lstrip().startswith(short):
        return answer
    return f"{short.rstrip('.')}.\n\n{answer}"


def _withheld(message: retriever_pb2.ConversationMessage) -> bool:
    """The stored turn's answer was withheld (nothing verified: its text is the "could not verify" message)."""
    try:
        details = json.loads(message.details_json or "{}")
    except ValueError:
        return False
    return isinstance(details, dict) and details.get("withheld") is True


class Conversation(Step):
    name = "conversation"
    span = None  # the retriever call's client span

    def __init__(self, mesh: Mesh, timeout: float) -> None:
        self.mesh = mesh
        self.timeout = timeout

    def applies(self, state: RequestState) -> bool:
        return state.conversation_id is not None

    async def run(self, state: RequestState) -> dict[str, Any]:
        reply = await self.mesh.retriever.GetConversation(
            retriever_pb2.GetConversationRequest(conversation_id=state.conversation_id or ""),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        state.stored_history, state.history_documents = history_turns(list(reply.messages))
        return {"history_turns": len(state.stored_history)}


class RecordTurn:
    """Appends the chat's turn to its conversation when the final event is ready."""

    stage = "conversation"  # the step named in a degradation

    def __init__(self, mesh: Mesh, timeout: float) -> None:
        self.mesh = mesh
        self.timeout = timeout

    async def on_final(self, state: RequestState, data: dict[str, Any]) -> None:
        conversation_id = state.conversation_id
        if conversation_id is None:
            return
        request = state.request
        assert isinstance(request, ChatRequest)
        answered = data.get("outcome") == Outcome.ANSWER.value
        given = [item.chunk.document_id for item in state.answer_sources()] if answered else []
        if answered and state.cached is not None:
            # an answer from the semantic cache: every source given to the model that wrote it (cited or not)
            given = [str(source["document_id"]) for source in state.cached.payload.get("sources", [])]
        documents = list(dict.fromkeys([*given, *state.history_documents]))
        details = {key: data[key] for key in DETAIL_KEYS if data.get(key) is not None}
        data["conversation_id"] = conversation_id
        data["message_id"] = None
        with tracer.start_as_current_span("record turn") as span:
            try:
                reply = await self.mesh.retriever.AppendMessage(
                    retriever_pb2.AppendMessageRequest(
                        conversation_id=conversation_id,
                        question=state.question,
                        rewritten_question=state.rewritten_question or "",
                        answer=data.get("answer") or "",
                        short_answer=data.get("short_answer") or "",
                        outcome=str(data.get("outcome")),
                        trace_id=state.trace_id,
                        details_json=json.dumps(details),
                        source_document_ids=documents,
                    ),
                    metadata=state.user.metadata(),
                    timeout=self.timeout,
                )
            except aio.AioRpcError as exc:
                # the answer is out already: it stays, unstored, and the client is told
                state.degrade(RecordTurn.stage, f"conversation {exc.code().name}; the turn was not stored")
                span.set_status(trace.Status(trace.StatusCode.ERROR, exc.code().name))
                data["degraded"] = state.degraded
                return
        state.message_id = data["message_id"] = reply.message_id
