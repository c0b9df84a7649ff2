"""Paging and the audit trail: opaque page cursors (the sort key of the last row returned), the times they
carry, and the append-only `document_audit` rows a change writes in its own transaction."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime
from typing import Any

import psycopg

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.context import UserContext
from ragmesh_common.errors import InvalidArgument

MAX_PAGE = 1000


def page_size(limit: int) -> int:
    if limit < 0:
        raise InvalidArgument("limit must not be negative")
    return min(limit or 100, MAX_PAGE)


def encode_cursor(*parts: Any) -> str:
    """An opaque page cursor: the sort key of the last row returned."""
    return base64.urlsafe_b64encode(json.dumps(parts, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(value: str, arity: int) -> list[Any]:
    try:
        parts = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
        if not isinstance(parts, list) or len(parts) != arity:
            raise ValueError("wrong shape")
        return parts
    except (ValueError, TypeError):
        raise InvalidArgument("cursor is not valid: pass a next_cursor unchanged, with the same filters") from None


def parse_time(name: str, value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name} must be an RFC 3339 time (2025-01-31T12:00:00Z), got {value!r}") from None
    if parsed.tzinfo is None:
        raise InvalidArgument(f"{name} needs a time zone (Z or +hh:mm), got {value!r}")
    return parsed


def cursor_time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise InvalidArgument("cursor is not valid: pass a next_cursor unchanged, with the same filters")
    try:
        return parse_time("cursor", value)
    except InvalidArgument:
        raise InvalidArgument("cursor is not valid: pass a next_cursor unchanged, with the same filters") from None


def cursor_uuid(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgument("cursor is not valid: pass a next_cursor unchanged, with the same filters") from None


async def write_audit(
    conn: psycopg.AsyncConnection[Any],
    user: UserContext,
    doc_id: uuid.UUID,
    action: str,
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    # only the owner changes a document, so the owner is the actor (the policy checks it)
    await conn.execute(
        "INSERT INTO document_audit (document_id, owner_user, actor, action, before, after) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (doc_id, user.user_id, user.user_id, action, json.dumps(before), json.dumps(after)),
    )


def audit_message(row: dict[str, Any]) -> retriever_pb2.DocumentAuditEntry:
    return retriever_pb2.DocumentAuditEntry(
        audit_id=str(row["id"]),
        document_id=str(row["document_id"]),
        actor=row["actor"],
        time=row["at"],
        action=row["action"],
        before_json=row["before"],
        after_json=row["after"],
    )
