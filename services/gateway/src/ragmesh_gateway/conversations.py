"""Conversations as the HTTP API shows them: thin over the retriever's conversation RPCs, which answer only the
caller's own conversations (RLS) and withdraw an answer whose documents the caller can no longer read; this
module maps them to JSON and the retriever's errors to HTTP (an unknown or foreign id is 404, never 403)."""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from grpc import aio

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.context import UserContext
from ragmesh_gateway.documents import rpc_http_error
from ragmesh_gateway.mesh import Mesh

WITHDRAWN_NOTE = (
    "This answer is no longer available: a document it was based on was deleted or you can no longer read it. "
    "Ask again to get an answer from the documents you can read now."
)
STEP = "conversation"


def iso(stamp: Timestamp) -> str:
    return stamp.ToDatetime(tzinfo=UTC).isoformat() if stamp.seconds or stamp.nanos else ""


def conversation_json(conversation: retriever_pb2.Conversation) -> dict[str, Any]:
    return {
        "conversation_id": conversation.conversation_id,
        "title": conversation.title,
        "created_at": iso(conversation.created_at),
        "updated_at": iso(conversation.updated_at),
        "message_count": conversation.message_count,
    }


def message_json(message: retriever_pb2.ConversationMessage) -> dict[str, Any]:
    details: dict[str, Any] = json.loads(message.details_json or "{}")
    answered = message.outcome == "answer" and not message.withdrawn
    return {
        "message_id": message.message_id,
        "question": message.question,
        "rewritten_question": message.rewritten_question or None,
        "answer": message.answer,
        "short_answer": message.short_answer or None,
        "evidence": details.get("evidence", []),
        "sources": details.get("sources", []),
        "verification": {
            "verified": details.get("verified"),
            "withheld": details.get("withheld"),
            "grounded": details.get("grounded"),
            "grounding_score": details.get("grounding_score"),
            "warnings": details.get("warnings", []),
            "sentences": details.get("sentences", []),
            "citations": details.get("citations", []),
        }
        if answered
        else None,
        "outcome": message.outcome,
        "trace_id": message.trace_id,
        "time": iso(message.created_at),
        "withdrawn": message.withdrawn,
        "note": WITHDRAWN_NOTE if message.withdrawn else None,
        "feedback": {"rating": message.feedback_rating, "comment": message.feedback_comment}
        if message.feedback_rating
        else None,
    }


class ConversationClient:
    """The retriever's conversation RPCs as the caller, with the catalogue's deadline."""

    def __init__(self, mesh: Mesh, timeout: float) -> None:
        self.mesh = mesh
        self.timeout = timeout

    async def _call(self, method: str, request: Any, user: UserContext) -> Any:
        try:
            return await getattr(self.mesh.retriever, method)(request, metadata=user.metadata(), timeout=self.timeout)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, STEP) from exc

    async def create(self, user: UserContext, title: str) -> dict[str, Any]:
        reply = await self._call("CreateConversation", retriever_pb2.CreateConversationRequest(title=title), user)
        return conversation_json(reply)

    async def page(self, user: UserContext, limit: int, cursor: str) -> dict[str, Any]:
        reply = await self._call(
            "ListConversations", retriever_pb2.ListConversationsRequest(limit=limit, cursor=cursor), user
        )
        return {"conversations": [conversation_json(c) for c in reply.conversations], "next_cursor": reply.next_cursor}

    async def get(self, user: UserContext, conversation_id: str) -> dict[str, Any]:
        reply = await self._call(
            "GetConversation", retriever_pb2.GetConversationRequest(conversation_id=conversation_id), user
        )
        return {**conversation_json(reply.conversation), "messages": [message_json(m) for m in reply.messages]}

    async def rename(self, user: UserContext, conversation_id: str, title: str) -> dict[str, Any]:
        reply = await self._call(
            "UpdateConversation",
            retriever_pb2.UpdateConversationRequest(conversation_id=conversation_id, title=title),
            user,
        )
        return conversation_json(reply)

    async def delete(self, user: UserContext, conversation_id: str) -> None:
        await self._call(
            "DeleteConversation", retriever_pb2.DeleteConversationRequest(conversation_id=conversation_id), user
        )

    async def feedback(
        self, user: UserContext, conversation_id: str, message_id: str, rating: str, comment: str
    ) -> dict[str, Any]:
        reply = await self._call(
            "SetMessageFeedback",
            retriever_pb2.SetMessageFeedbackRequest(
                conversation_id=conversation_id, message_id=message_id, rating=rating, comment=comment
            ),
            user,
        )
        return feedback_json(reply)

    async def all_feedback(self, user: UserContext, rating: str, limit: int) -> dict[str, Any]:
        reply = await self._call("ListFeedback", retriever_pb2.ListFeedbackRequest(rating=rating, limit=limit), user)
        return {"feedback": [feedback_json(f) for f in reply.feedback]}

    async def rated(self, user: UserContext, rating: str, limit: int) -> dict[str, Any]:
        reply = await self._call(
            "ListRatedMessages", retriever_pb2.ListRatedMessagesRequest(rating=rating, limit=limit), user
        )
        messages = []
        for m in reply.messages:
            shown = message_json(m)
            messages.append(
                {
                    "message_id": m.message_id,
                    "conversation_id": m.conversation_id,
                    "question": m.question,
                    "answer": m.answer,
                    "sources": shown["sources"],
                    "rating": m.feedback_rating,
                    "comment": m.feedback_comment,
                    "trace_id": m.trace_id,
                    "withdrawn": m.withdrawn,
                }
            )
        return {"messages": messages}


def feedback_json(feedback: retriever_pb2.MessageFeedback) -> dict[str, Any]:
    return {
        "message_id": feedback.message_id,
        "user_id": feedback.user_id,
        "rating": feedback.rating,
        "comment": feedback.comment,
        "trace_id": feedback.trace_id,
        "time": iso(feedback.time),
    }
