"""Conversation routes (README "Conversations"): the caller's own conversations, their turns and feedback.
Thin over `ragmesh_gateway.conversations`; the chat itself appends turns (pipeline/conversation.py)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from ragmesh_gateway.deps import ConversationsDep, User
from ragmesh_gateway.models import (
    MAX_CONVERSATION_PAGE,
    ConversationDeleted,
    ConversationDetail,
    ConversationIn,
    ConversationList,
    ConversationOut,
    ConversationPatch,
    FeedbackEntry,
    FeedbackIn,
    RatedMessageList,
    error_responses,
)
from ragmesh_gateway.validation import StrictJSONRoute, Text

router = APIRouter(route_class=StrictJSONRoute)

Cursor = Annotated[Text, Query(max_length=2000, description="next_cursor of the previous page")]
Rating = Literal["up", "down"]


@router.post(
    "/api/v1/conversations",
    tags=["conversations"],
    status_code=201,
    summary="Start a conversation (no title: the first question's beginning)",
    response_model=ConversationOut,
    responses=error_responses(400, 401, 422, 503),
)
async def create(user: User, conversations: ConversationsDep, body: ConversationIn | None = None) -> Any:
    return await conversations.create(user, body.title if body else "")


@router.get(
    "/api/v1/conversations",
    tags=["conversations"],
    summary="Your conversations, most recently active first",
    response_model=ConversationList,
    responses=error_responses(400, 401, 422, 503),
)
async def list_conversations(
    user: User,
    conversations: ConversationsDep,
    limit: int = Query(50, ge=1, le=MAX_CONVERSATION_PAGE),
    cursor: Cursor = "",
) -> Any:
    return await conversations.page(user, limit, cursor)


@router.get(
    "/api/v1/conversations/rated",
    tags=["conversations"],
    summary="Your rated messages with question, answer and sources (an evaluation set)",
    response_model=RatedMessageList,
    responses=error_responses(400, 401, 422, 503),
)
async def rated(
    user: User,
    conversations: ConversationsDep,
    rating: Rating | None = None,
    limit: int = Query(100, ge=1, le=MAX_CONVERSATION_PAGE),
) -> Any:
    return await conversations.rated(user, rating or "", limit)


@router.get(
    "/api/v1/conversations/{conversation_id}",
    tags=["conversations"],
    summary="A conversation of yours with its turns, oldest first",
    response_model=ConversationDetail,
    responses=error_responses(400, 401, 404, 422, 503),
)
async def get(conversation_id: uuid.UUID, user: User, conversations: ConversationsDep) -> Any:
    return await conversations.get(user, str(conversation_id))


@router.patch(
    "/api/v1/conversations/{conversation_id}",
    tags=["conversations"],
    summary="Rename a conversation of yours",
    response_model=ConversationOut,
    responses=error_responses(400, 401, 404, 422, 503),
)
async def rename(
    conversation_id: uuid.UUID, body: ConversationPatch, user: User, conversations: ConversationsDep
) -> Any:
    return await conversations.rename(user, str(conversation_id), body.title)


@router.delete(
    "/api/v1/conversations/{conversation_id}",
    tags=["conversations"],
    summary="Delete a conversation of yours, its turns and their feedback",
    response_model=ConversationDeleted,
    responses=error_responses(400, 401, 404, 422, 503),
)
async def delete(conversation_id: uuid.UUID, user: User, conversations: ConversationsDep) -> Any:
    await conversations.delete(user, str(conversation_id))
    return {"conversation_id": str(conversation_id), "deleted": True}


@router.post(
    "/api/v1/conversations/{conversation_id}/messages/{message_id}/feedback",
    tags=["conversations"],
    summary="Rate an answer of yours (up or down, with an optional comment)",
    response_model=FeedbackEntry,
    responses=error_responses(400, 401, 404, 422, 503),
)
async def feedback(
    conversation_id: uuid.UUID, message_id: uuid.UUID, body: FeedbackIn, user: User, conversations: ConversationsDep
) -> Any:
    return await conversations.feedback(user, str(conversation_id), str(message_id), body.rating, body.comment)
