"""Conversations and their messages and feedback, in PostgreSQL under row-level security: only the owner reads
or changes a conversation (the policies in sql/schema.sql compare `owner_user` with the verified identity,
`rag_user()`), so a foreign conversation is as absent as an unknown one (NOT_FOUND, never PERMISSION_DENIED).

A message keeps the ids of every document whose text went into its answer. Whether the answer may still be
shown is decided when it is read, in the same statement, against the documents the reader may read now (the
`documents` table under its RLS): one missing (deleted, or its ACL changed) and the answer, its rewritten
question and its details (sources, quotes, verification) never leave the database; the question stays."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import limits
from ragmesh_common.context import UserContext
from ragmesh_common.errors import InvalidArgument, NotFound
from ragmesh_retriever.audit import cursor_time, cursor_uuid, decode_cursor, encode_cursor, page_size
from ragmesh_retriever.session import Database

MAX_TITLE_CHARS = limits.CONVERSATION_TITLE.value
MAX_COMMENT_CHARS = limits.FEEDBACK_COMMENT.value
MAX_QUESTION_CHARS = 20_000
MAX_ANSWER_CHARS = 200_000
MAX_DETAILS_BYTES = 2_000_000
MAX_SOURCE_DOCUMENTS = 1000
RATINGS = ("up", "down")
OUTCOMES = ("answer", "no_permission", "no_match_in_filter", "ingesting", "no_sources")
TITLE_FROM_QUESTION_CHARS = 80

# The message as the reader may see it now: `withdrawn` when any document it drew on is not among the
# documents the reader can read (RLS on `documents` decides; this is not a copy made at answer time).
_MESSAGE = """
SELECT m.id, m.conversation_id, m.question, m.outcome, m.trace_id, m.created_at, m.position, w.withdrawn,
       CASE WHEN w.withdrawn THEN '' ELSE m.rewritten_question END AS rewritten_question,
       CASE WHEN w.withdrawn THEN '' ELSE m.answer END AS answer,
       CASE WHEN w.withdrawn THEN '' ELSE m.short_answer END AS short_answer,
       CASE WHEN w.withdrawn THEN '{{}}'::jsonb ELSE m.details END AS details,
       CASE WHEN w.withdrawn THEN '{{}}'::uuid[] ELSE m.source_document_ids END AS source_document_ids,
       coalesce(f.rating, '') AS rating, coalesce(f.comment, '') AS comment
FROM conversation_messages m
CROSS JOIN LATERAL (SELECT EXISTS (
    SELECT 1 FROM unnest(m.source_document_ids) s(id) WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = s.id)
) AS withdrawn) w
LEFT JOIN message_feedback f ON f.message_id = m.id
{where}
"""


def parse_id(name: str, value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument(f"{name} must be a UUID, got {value!r}") from None


def clean_title(title: str) -> str:
    title = " ".join(title.split())
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidArgument(f"title has {len(title)} characters; at most {MAX_TITLE_CHARS}")
    return title


def title_from(question: str) -> str:
    """A conversation's title from its first question: its first words, cut at a word boundary."""
    text = " ".join(question.split())
    if len(text) <= TITLE_FROM_QUESTION_CHARS:
        return text
    cut = text[:TITLE_FROM_QUESTION_CHARS].rsplit(" ", 1)[0] or text[:TITLE_FROM_QUESTION_CHARS]
    return cut + " …"


def check_rating(rating: str, *, allow_empty: bool) -> str:
    if rating in RATINGS or (allow_empty and rating == ""):
        return rating
    raise InvalidArgument(f"rating must be 'up' or 'down', got {rating!r}")


def conversation_message(row: dict[str, Any]) -> retriever_pb2.Conversation:
    return retriever_pb2.Conversation(
        conversation_id=str(row["id"]),
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message_count=row.get("message_count", 0),
    )


def message_message(row: dict[str, Any]) -> retriever_pb2.ConversationMessage:
    return retriever_pb2.ConversationMessage(
        message_id=str(row["id"]),
        conversation_id=str(row["conversation_id"]),
        question=row["question"],
        rewritten_question=row["rewritten_question"],
        answer=row["answer"],
        short_answer=row["short_answer"],
        outcome=row["outcome"],
        trace_id=row["trace_id"],
        created_at=row["created_at"],
        details_json=json.dumps(row["details"]),
        source_document_ids=[str(d) for d in row["source_document_ids"]],
        withdrawn=row["withdrawn"],
        feedback_rating=row["rating"],
        feedback_comment=row["comment"],
    )


_CONVERSATION = (
    "SELECT c.id, c.title, c.created_at, c.updated_at, "
    "(SELECT count(*) FROM conversation_messages m WHERE m.conversation_id = c.id)::integer AS message_count "
    "FROM conversations c"
)


class Conversations:
    """The caller's conversations (RLS: the owner's rows only)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, user: UserContext, title: str) -> retriever_pb2.Conversation:
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "INSERT INTO conversations (owner_user, title) VALUES (%s, %s) "
                "RETURNING id, title, created_at, updated_at",
                (user.user_id, clean_title(title)),
            )
            row = await cur.fetchone()
        assert row is not None
        return conversation_message(row)

    async def page(self, user: UserContext, limit: int, cursor: str) -> tuple[list[retriever_pb2.Conversation], str]:
        size = page_size(limit)
        where, params = "", []
        if cursor:
            at, last = decode_cursor(cursor, 2)
            where = " WHERE (c.updated_at, c.id) < (%s, %s)"
            params = [cursor_time(at), cursor_uuid(last)]
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                f"{_CONVERSATION}{where} ORDER BY c.updated_at DESC, c.id DESC LIMIT %s", (*params, size + 1)
            )
            rows = await cur.fetchall()
        more = len(rows) > size
        rows = rows[:size]
        next_cursor = encode_cursor(rows[-1]["updated_at"].isoformat(), str(rows[-1]["id"])) if more else ""
        return [conversation_message(r) for r in rows], next_cursor

    async def _conversation(self, conn: psycopg.AsyncConnection[Any], conversation_id: uuid.UUID) -> dict[str, Any]:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(f"{_CONVERSATION} WHERE c.id = %s", (conversation_id,))
        row = await cur.fetchone()
        if row is None:  # unknown, or another user's: the same answer, so nobody learns it exists
            raise NotFound(f"conversation {conversation_id} not found")
        return row

    async def get(self, user: UserContext, conversation_id: str) -> retriever_pb2.GetConversationResponse:
        cid = parse_id("conversation_id", conversation_id)
        async with self.db.transaction(user) as conn:
            conversation = await self._conversation(conn, cid)
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_MESSAGE.format(where="WHERE m.conversation_id = %s ORDER BY m.position"), (cid,))
            rows = await cur.fetchall()
        return retriever_pb2.GetConversationResponse(
            conversation=conversation_message(conversation), messages=[message_message(r) for r in rows]
        )

    async def rename(self, user: UserContext, conversation_id: str, title: str) -> retriever_pb2.Conversation:
        cid = parse_id("conversation_id", conversation_id)
        title = clean_title(title)
        if not title:
            raise InvalidArgument("title must not be empty")
        async with self.db.transaction(user) as conn:
            await conn.execute("UPDATE conversations SET title = %s, updated_at = now() WHERE id = %s", (title, cid))
            row = await self._conversation(conn, cid)
        return conversation_message(row)

    async def delete(self, user: UserContext, conversation_id: str) -> None:
        cid = parse_id("conversation_id", conversation_id)
        async with self.db.transaction(user) as conn:
            # the messages and their feedback go with it (ON DELETE CASCADE)
            deleted = (await conn.execute("DELETE FROM conversations WHERE id = %s", (cid,))).rowcount
        if not deleted:
            raise NotFound(f"conversation {conversation_id} not found")

    async def append(
        self, user: UserContext, request: retriever_pb2.AppendMessageRequest
    ) -> retriever_pb2.AppendMessageResponse:
        cid = parse_id("conversation_id", request.conversation_id)
        if not request.question.strip():
            raise InvalidArgument("question is required")
        if len(request.question) > MAX_QUESTION_CHARS or len(request.rewritten_question) > MAX_QUESTION_CHARS:
            raise InvalidArgument(f"question and rewritten_question: at most {MAX_QUESTION_CHARS} characters")
        if len(request.answer) > MAX_ANSWER_CHARS or len(request.short_answer) > MAX_ANSWER_CHARS:
            raise InvalidArgument(f"answer and short_answer: at most {MAX_ANSWER_CHARS} characters")
        if request.outcome not in OUTCOMES:
            raise InvalidArgument(f"outcome must be one of {', '.join(OUTCOMES)}, got {request.outcome!r}")
        if len(request.details_json) > MAX_DETAILS_BYTES:
            raise InvalidArgument(f"details_json: at most {MAX_DETAILS_BYTES} bytes")
        try:
            details = json.loads(request.details_json or "{}")
        except ValueError:
            raise InvalidArgument("details_json must be a JSON object") from None
        if not isinstance(details, dict):
            raise InvalidArgument("details_json must be a JSON object")
        if len(request.source_document_ids) > MAX_SOURCE_DOCUMENTS:
            raise InvalidArgument(f"at most {MAX_SOURCE_DOCUMENTS} source_document_ids")
        sources = list(dict.fromkeys(parse_id("source_document_ids", d) for d in request.source_document_ids))
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "UPDATE conversations SET updated_at = now(), title = CASE WHEN title = '' THEN %s ELSE title END "
                "WHERE id = %s RETURNING id",
                (title_from(request.question), cid),
            )
            if await cur.fetchone() is None:
                raise NotFound(f"conversation {request.conversation_id} not found")
            await cur.execute(
                "INSERT INTO conversation_messages (conversation_id, owner_user, question, rewritten_question, "
                "answer, short_answer, outcome, trace_id, details, source_document_ids) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (
                    cid,
                    user.user_id,
                    request.question,
                    request.rewritten_question,
                    request.answer,
                    request.short_answer,
                    request.outcome,
                    request.trace_id,
                    json.dumps(details),
                    sources,
                ),
            )
            message = await cur.fetchone()
            assert message is not None
            conversation = await self._conversation(conn, cid)
        return retriever_pb2.AppendMessageResponse(
            message_id=str(message["id"]), conversation=conversation_message(conversation)
        )

    async def feedback(
        self, user: UserContext, request: retriever_pb2.SetMessageFeedbackRequest
    ) -> retriever_pb2.MessageFeedback:
        cid = parse_id("conversation_id", request.conversation_id)
        mid = parse_id("message_id", request.message_id)
        rating = check_rating(request.rating, allow_empty=False)
        if len(request.comment) > MAX_COMMENT_CHARS:
            raise InvalidArgument(f"comment has {len(request.comment)} characters; at most {MAX_COMMENT_CHARS}")
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "INSERT INTO message_feedback (message_id, owner_user, rating, comment, trace_id) "
                "SELECT m.id, %s, %s, %s, m.trace_id FROM conversation_messages m "
                "WHERE m.id = %s AND m.conversation_id = %s "
                "ON CONFLICT (message_id) DO UPDATE SET rating = excluded.rating, comment = excluded.comment, "
                "updated_at = now() RETURNING message_id, owner_user, rating, comment, trace_id, updated_at",
                (user.user_id, rating, request.comment.strip(), mid, cid),
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"message {request.message_id} not found in conversation {request.conversation_id}")
        return feedback_message(row)

    async def all_feedback(self, user: UserContext, rating: str, limit: int) -> list[retriever_pb2.MessageFeedback]:
        """Every user's feedback, without question or answer: `rag_feedback` refuses a non-admin."""
        rating = check_rating(rating, allow_empty=True)
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute("SELECT * FROM rag_feedback(%s, %s)", (rating, page_size(limit)))
            rows = await cur.fetchall()
        return [feedback_message(r) for r in rows]

    async def rated(self, user: UserContext, rating: str, limit: int) -> list[retriever_pb2.ConversationMessage]:
        """The caller's own rated messages, as `get` shows them (withdrawn ones without their answer)."""
        rating = check_rating(rating, allow_empty=True)
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                _MESSAGE.format(
                    where="WHERE f.message_id IS NOT NULL AND (%s = '' OR f.rating = %s) "
                    "ORDER BY f.updated_at DESC, m.id LIMIT %s"
                ),
                (rating, rating, page_size(limit)),
            )
            rows = await cur.fetchall()
        return [message_message(r) for r in rows]


def feedback_message(row: dict[str, Any]) -> retriever_pb2.MessageFeedback:
    return retriever_pb2.MessageFeedback(
        message_id=str(row["message_id"]),
        user_id=row["owner_user"],
        rating=row["rating"],
        comment=row["comment"],
        trace_id=row["trace_id"],
        time=row["updated_at"],
    )
