"""Documents as the catalogue stores them: statuses, columns, identifiers, limits and the checks of what a
caller sends, and the version state machine of an ingestion (which version a status update or an index call
is for, and the swap of a pending version into the visible one)."""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from ragmesh.common.v1 import common_pb2
from ragmesh_common import limits
from ragmesh_common.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied

logger = logging.getLogger(__name__)

STATUS_NAMES = {
    common_pb2.DOCUMENT_STATUS_QUEUED: "queued",
    common_pb2.DOCUMENT_STATUS_PARSING: "parsing",
    common_pb2.DOCUMENT_STATUS_EMBEDDING: "embedding",
    common_pb2.DOCUMENT_STATUS_INDEXING: "indexing",
    common_pb2.DOCUMENT_STATUS_READY: "ready",
    common_pb2.DOCUMENT_STATUS_FAILED: "failed",
}
STATUS_VALUES = {name: value for value, name in STATUS_NAMES.items()}

COLUMNS = (
    "id, title, filename, mime_type, owner_user, owner_department, acl_public, acl_departments, "
    "acl_roles, acl_users, status, error, chunk_count, page_count, size_bytes, summary, created_at, updated_at, "
    "content_sha256, version, warnings, pending_version, pending_status, pending_error, title_given, parser_version"
)


def parse_document_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument(f"document_id must be a UUID, got {value!r}") from None


def document_message(row: dict[str, Any]) -> common_pb2.Document:
    return common_pb2.Document(
        document_id=str(row["id"]),
        title=row["title"],
        filename=row["filename"],
        mime_type=row["mime_type"],
        owner_user=row["owner_user"],
        owner_department=row["owner_department"],
        acl=common_pb2.Acl(
            public=row["acl_public"], departments=row["acl_departments"], roles=row["acl_roles"], users=row["acl_users"]
        ),
        status=STATUS_VALUES.get(row["status"], common_pb2.DOCUMENT_STATUS_UNSPECIFIED),
        error=row["error"],
        chunk_count=row["chunk_count"],
        page_count=row["page_count"],
        size_bytes=row["size_bytes"],
        summary=row["summary"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        content_sha256=row["content_sha256"],
        version=row["version"],
        warnings=row["warnings"],
        pending_version=row["pending_version"],
        pending_error=row["pending_error"],
        pending_status=STATUS_VALUES.get(row["pending_status"], common_pb2.DOCUMENT_STATUS_UNSPECIFIED),
        title_given=row["title_given"],
        parser_version=row["parser_version"],
    )


IN_PROGRESS = ("queued", "parsing", "embedding", "indexing")
MAX_TITLE_LENGTH = limits.TITLE.value
MAX_WARNINGS = 100
_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_sha256(value: str, *, required: bool) -> str:
    """The lower-case hex SHA-256 in `value` (empty when not given and not required)."""
    value = value.strip().lower()
    if not value and not required:
        return ""
    if not _SHA256.fullmatch(value):
        raise InvalidArgument(f"content_sha256 must be the 64 hexadecimal characters of a SHA-256, got {value!r}")
    return value


def clean_acl(acl: common_pb2.Acl) -> dict[str, Any]:
    """The ACL as stored (names deduplicated in order), or INVALID_ARGUMENT naming the bad entry (the ACL rules:
    `ragmesh_common.limits.check_acl_names`)."""
    cleaned: dict[str, Any] = {"public": acl.public}
    for field in ("departments", "roles", "users"):
        try:
            cleaned[field] = limits.check_acl_names(f"acl.{field}", list(getattr(acl, field)))
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
    return cleaned


def acl_json(public: bool, departments: list[str], roles: list[str], users: list[str]) -> dict[str, Any]:
    return {"public": public, "departments": list(departments), "roles": list(roles), "users": list(users)}


def clean_warnings(warnings: Any) -> list[str]:
    if len(warnings) > MAX_WARNINGS:
        raise InvalidArgument(f"at most {MAX_WARNINGS} warnings, got {len(warnings)}")
    return [w.strip()[:2000] for w in warnings if w.strip()]


async def raise_missing_or_denied(conn: psycopg.AsyncConnection[Any], doc_id: uuid.UUID) -> None:
    """NOT_FOUND when the user cannot read the document, PERMISSION_DENIED when they read it but do not own it."""
    visible = await (await conn.execute("SELECT 1 FROM documents WHERE id = %s", (doc_id,))).fetchone()
    if visible:
        raise PermissionDenied(f"only the owner may change document {doc_id}")
    raise NotFound(f"document {doc_id} not found")


@dataclass(frozen=True)
class IndexTarget:
    """Which version an ingestion call is for: `pending` swaps the new chunks in and makes that version the
    visible one; otherwise the visible version's chunks are replaced."""

    document_id: uuid.UUID
    pending: bool
    version: int


async def lock_version(conn: psycopg.AsyncConnection[Any], doc_id: uuid.UUID, version: int) -> IndexTarget:
    """Locks the document row (the owner only) and decides which version a status update or an index call
    for `version` (0 = the pending one if any, else the visible one) is for; a superseded version is
    FAILED_PRECONDITION, so a late call of an old ingestion never overwrites a newer one."""
    if version < 0:
        raise InvalidArgument(f"version must not be negative, got {version}")
    row = await (
        await conn.execute("SELECT version, pending_version FROM documents WHERE id = %s FOR UPDATE", (doc_id,))
    ).fetchone()
    if row is None:
        await raise_missing_or_denied(conn, doc_id)
    assert row is not None
    current, pending = row
    if pending and version in (0, pending):
        return IndexTarget(doc_id, True, pending)
    if not pending and version in (0, current):
        return IndexTarget(doc_id, False, current)
    raise FailedPrecondition(
        f"version {version} of document {doc_id} is not being ingested: the visible version is "
        f"{current}" + (f" and version {pending} is pending" if pending else "")
    )


async def finish_index(conn: psycopg.AsyncConnection[Any], target: IndexTarget, paragraph_chunks: int) -> None:
    """After the chunks of `target` were written (same transaction): the chunk count and, for a pending
    version, the swap: it becomes the visible version with the metadata sent for it."""
    if not target.pending:
        await conn.execute(
            "UPDATE documents SET chunk_count = %s, updated_at = now() WHERE id = %s",
            (paragraph_chunks, target.document_id),
        )
        return
    await conn.execute(
        "UPDATE documents SET chunk_count = %s, version = pending_version, filename = pending_filename, "
        "mime_type = pending_mime_type, size_bytes = pending_size_bytes, content_sha256 = pending_sha256, "
        "title = CASE WHEN title_given THEN title ELSE coalesce(nullif(pending_meta->>'title', ''), title) END, "
        "summary = coalesce(nullif(pending_meta->>'summary', ''), summary), "
        "page_count = coalesce((pending_meta->>'page_count')::integer, page_count), "
        "parser_version = coalesce((pending_meta->>'parser_version')::integer, parser_version), "
        "warnings = coalesce(ARRAY(SELECT jsonb_array_elements_text(pending_meta->'warnings')), '{}'), "
        "error = '', pending_version = 0, pending_status = '', pending_error = '', pending_filename = '', "
        "pending_mime_type = '', pending_size_bytes = 0, pending_sha256 = '', pending_meta = '{}', "
        "updated_at = now() WHERE id = %s",
        (paragraph_chunks, target.document_id),
    )
    logger.info("document %s: version %d is now the visible one", target.document_id, target.version)
