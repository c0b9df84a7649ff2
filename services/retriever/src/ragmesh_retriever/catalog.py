"""The document catalogue in PostgreSQL. Every query runs in a transaction as the request's user:
`rag.user_id`, `rag.department` and `rag.roles` are set with set_config(..., true) and the
row-level-security policies of `documents` and `chunks` decide what the user sees and may change.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import limits
from ragmesh_common.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from ragmesh_common.identity import UserContext

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

_COLUMNS = (
    "id, title, filename, mime_type, owner_user, owner_department, acl_public, acl_departments, "
    "acl_roles, acl_users, status, error, chunk_count, page_count, size_bytes, summary, created_at, updated_at, "
    "content_sha256, version, warnings, pending_version, pending_status, pending_error"
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
    )


IN_PROGRESS = ("queued", "parsing", "embedding", "indexing")
MAX_TITLE_LENGTH = limits.TITLE.value
MAX_WARNINGS = 100
MAX_PAGE = 1000
_SHA256 = re.compile(r"[0-9a-f]{64}")
_EXTENSION = re.compile(r"[a-z0-9]{1,16}")


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


# aliases for annotations inside Catalog, where `list` is a method's name
ProblemList = list[retriever_pb2.ProblemDocument]
AuditEntries = list[retriever_pb2.DocumentAuditEntry]
ChunkRows = list[dict[str, Any]]


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
        await Catalog._raise_missing_or_denied(conn, doc_id)
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
        "title = coalesce(nullif(pending_meta->>'title', ''), title), "
        "summary = coalesce(nullif(pending_meta->>'summary', ''), summary), "
        "page_count = coalesce((pending_meta->>'page_count')::integer, page_count), "
        "warnings = coalesce(ARRAY(SELECT jsonb_array_elements_text(pending_meta->'warnings')), '{}'), "
        "error = '', pending_version = 0, pending_status = '', pending_error = '', pending_filename = '', "
        "pending_mime_type = '', pending_size_bytes = 0, pending_sha256 = '', pending_meta = '{}', "
        "updated_at = now() WHERE id = %s",
        (paragraph_chunks, target.document_id),
    )
    logger.info("document %s: version %d is now the visible one", target.document_id, target.version)


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


async def check_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """psycopg_pool's check_connection (an empty query), on a plain cursor: `conn.execute` goes through the
    OpenTelemetry psycopg instrumentation and would store a span per connection checkout."""
    await conn.set_autocommit(True)
    try:
        async with psycopg.AsyncCursor(conn) as cur:
            await cur.execute("")
    finally:
        if not conn.closed:
            await conn.set_autocommit(False)


@dataclass(frozen=True)
class DocumentCounts:
    """Why a search scope may be empty: readable documents (any status), those still ingesting (within the
    filter, if any), and the readable documents a `document_ids` filter named (0 without a filter)."""

    readable: int
    ingesting: int
    filter_matched: int


class Database:
    """An async connection pool whose transactions run as a given user under RLS."""

    def __init__(self, dsn: str, *, pool_size: int = 8, statement_timeout_ms: int = 10000) -> None:
        # Custom plans always: every search binds the caller's accessible document ids as an array, and a
        # cached generic plan (psycopg prepares a statement after 5 runs) cannot hash an array parameter, so
        # the filter would scan the whole array per row (measured: vector leg 9 → 65 ms at 10k chunks).
        # Recovery after a PostgreSQL restart: `check` drops a connection the restart broke when it is taken
        # from the pool (one empty round trip), instead of failing the request that took it; the short
        # reconnect_timeout caps the pool's doubling reconnect backoff (1, 2, 4, 8 s ... left alone it made
        # recovery take ~18 s): a given-up attempt is started afresh, at once, by the next request or health
        # probe. `timeout` bounds how long a request waits for a connection while the database is down.
        self._pool = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=5,
            check=check_connection,
            reconnect_timeout=2,
            kwargs={
                "connect_timeout": 3,
                "application_name": "ragmesh-retriever",
                "options": "-c plan_cache_mode=force_custom_plan",
            },
        )
        self._timeout = statement_timeout_ms

    async def open(self) -> None:
        await self._pool.open(wait=True, timeout=30)
        async with self._pool.connection() as conn:
            row = await (
                await conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            ).fetchone()
            if row is None or row[0] or row[1]:
                # RLS would silently not apply: refuse to serve rather than leak documents
                raise RuntimeError("RETRIEVER_DATABASE_URL must name a role without SUPERUSER and BYPASSRLS")

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self, timeout: float = 2.0) -> str | None:
        """None when the database answers within `timeout`, else why not (for the health status)."""
        try:
            async with asyncio.timeout(timeout):
                async with self._pool.connection(timeout=timeout) as conn, psycopg.AsyncCursor(conn) as cur:
                    await cur.execute("SELECT 1")  # a plain cursor: the health probe is not traced
        except (psycopg.Error, PoolTimeout, TimeoutError, OSError) as exc:
            return f"{type(exc).__name__}: {exc}".strip()[:300]
        return None

    @asynccontextmanager
    async def transaction(
        self, user: UserContext, settings: dict[str, str] | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A transaction as `user` (RLS reads the rag.* settings), with more transaction-local `settings`
        set in the same round trip.

        The settings statement runs on a plain `psycopg.AsyncCursor`, which the OpenTelemetry psycopg
        instrumentation (it wraps the connection's cursor factory) does not trace: like BEGIN and COMMIT it is
        part of opening the transaction, and a traced statement costs ~0.15 ms plus a stored span. Every
        statement run on `conn` is traced."""
        extra = settings or {}
        async with self._pool.connection() as conn, conn.transaction():
            async with psycopg.AsyncCursor(conn) as setup:
                await setup.execute(
                    "SELECT set_config('rag.user_id', %s, true), set_config('rag.department', %s, true), "
                    "set_config('rag.roles', %s, true), set_config('statement_timeout', %s, true)"
                    + ", set_config(%s, %s, true)"
                    * len(extra),
                    (
                        user.user_id,
                        user.department,
                        ",".join(user.roles),
                        str(self._timeout),
                        *(x for item in extra.items() for x in item),
                    ),
                )
            yield conn


class Catalog:
    """Documents and their ACLs."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(
        self,
        user: UserContext,
        title: str,
        filename: str,
        mime_type: str,
        acl: common_pb2.Acl,
        size_bytes: int,
        content_sha256: str = "",
    ) -> common_pb2.Document:
        if not filename.strip():
            raise InvalidArgument("filename is required")
        sha = check_sha256(content_sha256, required=False)
        async with self.db.transaction(user) as conn:
            row = await self._insert(conn, user, title, filename, mime_type, acl, size_bytes, sha)
        return document_message(row)

    async def create_or_get(
        self,
        user: UserContext,
        title: str,
        filename: str,
        mime_type: str,
        acl: common_pb2.Acl,
        size_bytes: int,
        content_sha256: str,
    ) -> tuple[common_pb2.Document, bool]:
        """The owner's document with these bytes (its visible or pending version, unless failed) and True, or
        a new document and False. Concurrent uploads of the same bytes by one owner are serialised by a
        transaction-level advisory lock on (owner, hash), so they create one document."""
        if not filename.strip():
            raise InvalidArgument("filename is required")
        sha = check_sha256(content_sha256, required=True)
        async with self.db.transaction(user) as conn:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"ragmesh-dedup:{user.user_id}:{sha}",)
            )
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                f"SELECT {_COLUMNS} FROM documents WHERE owner_user = %(owner)s AND ("
                "(content_sha256 = %(sha)s AND status <> 'failed') "
                "OR (pending_version > 0 AND pending_sha256 = %(sha)s AND pending_status <> 'failed')) "
                "ORDER BY created_at, id LIMIT 1",
                {"owner": user.user_id, "sha": sha},
            )
            row = await cur.fetchone()
            if row is not None:
                logger.info("document %s: %s uploaded the same bytes again", row["id"], user.user_id)
                return document_message(row), True
            row = await self._insert(conn, user, title, filename, mime_type, acl, size_bytes, sha)
        return document_message(row), False

    async def _insert(
        self,
        conn: psycopg.AsyncConnection[Any],
        user: UserContext,
        title: str,
        filename: str,
        mime_type: str,
        acl: common_pb2.Acl,
        size_bytes: int,
        sha: str,
    ) -> dict[str, Any]:
        cleaned = clean_acl(acl)
        departments = cleaned["departments"]
        if not (acl.public or departments or cleaned["roles"] or cleaned["users"]) and user.department:
            departments = [user.department]  # default ACL: the uploader's department
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            f"INSERT INTO documents (title, filename, mime_type, owner_user, owner_department, acl_public, "
            f"acl_departments, acl_roles, acl_users, size_bytes, content_sha256) "
            f"VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING {_COLUMNS}",
            (
                title.strip() or filename,
                filename,
                mime_type,
                user.user_id,
                user.department,
                acl.public,
                departments,
                cleaned["roles"],
                cleaned["users"],
                size_bytes,
                sha,
            ),
        )
        row = await cur.fetchone()
        assert row is not None
        await write_audit(
            conn,
            user,
            row["id"],
            "create",
            {},
            {
                "title": row["title"],
                "filename": filename,
                "content_sha256": sha,
                "acl": acl_json(acl.public, departments, cleaned["roles"], cleaned["users"]),
            },
        )
        logger.info("document %s created by %s", row["id"], user.user_id)
        return row

    async def get(self, user: UserContext, document_id: str) -> common_pb2.Document:
        doc_id = parse_document_id(document_id)
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(f"SELECT {_COLUMNS} FROM documents WHERE id = %s", (doc_id,))
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"document {document_id} not found")
        return document_message(row)

    async def list(
        self,
        user: UserContext,
        limit: int,
        offset: int,
        *,
        statuses: list[common_pb2.DocumentStatus.ValueType] | None = None,
        owner: str = "",
        mime_type: str = "",
        extension: str = "",
        updated_since: datetime | None = None,
        cursor: str = "",
    ) -> tuple[list[common_pb2.Document], int, str]:
        """The documents the user may read, newest change first (updated_at, id), filtered; the matching total
        and the cursor of the next page ("" on the last)."""
        if offset < 0:
            raise InvalidArgument("offset must not be negative")
        if offset and cursor:
            raise InvalidArgument("page with cursor or offset, not both")
        limit = page_size(limit)
        where: list[str] = []
        params: list[Any] = []
        if statuses:
            names = [STATUS_NAMES.get(s) for s in statuses]
            if None in names:
                raise InvalidArgument("statuses must be queued, parsing, embedding, indexing, ready or failed")
            where.append("status = ANY(%s)")
            params.append(names)
        if owner:
            where.append("owner_user = %s")
            params.append(owner)
        if mime_type:
            if mime_type.endswith("/"):
                where.append("starts_with(mime_type, %s)")
            else:
                where.append("mime_type = %s")
            params.append(mime_type)
        if extension:
            ext = extension.lower().removeprefix(".")
            if not _EXTENSION.fullmatch(ext):
                raise InvalidArgument(f"extension must be 1..16 letters or digits (pdf, docx), got {extension!r}")
            where.append("lower(filename) LIKE %s")
            params.append(f"%.{ext}")
        if updated_since is not None:
            where.append("updated_at >= %s")
            params.append(updated_since)
        page_where, page_params = list(where), list(params)
        if cursor:
            at, last_id = decode_cursor(cursor, 2)
            page_where.append("(updated_at, id) < (%s, %s)")
            page_params += [cursor_time(at), cursor_uuid(last_id)]
        filters = " AND ".join(where) or "true"
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                f"SELECT {_COLUMNS} FROM documents WHERE {' AND '.join(page_where) or 'true'} "
                "ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s",
                (*page_params, limit + 1, offset),
            )
            rows = await cur.fetchall()
            total_row = await (await conn.execute(f"SELECT count(*) FROM documents WHERE {filters}", params)).fetchone()
        total = int(total_row[0]) if total_row else 0
        next_cursor = ""
        if len(rows) > limit:
            rows = rows[:limit]
            next_cursor = encode_cursor(rows[-1]["updated_at"].isoformat(), str(rows[-1]["id"]))
        return [document_message(r) for r in rows], total, next_cursor

    async def update_status(self, user: UserContext, request: Any) -> common_pb2.Document:
        doc_id = parse_document_id(request.document_id)
        status = STATUS_NAMES.get(request.status)
        if status is None:
            raise InvalidArgument("status must be one of queued, parsing, embedding, indexing, ready, failed")
        warnings = clean_warnings(request.warnings)
        async with self.db.transaction(user) as conn:
            target = await lock_version(conn, doc_id, request.version)
            cur = conn.cursor(row_factory=dict_row)
            if target.pending:
                # the visible version stays as it is; what is sent for the new one waits for its swap
                meta: dict[str, Any] = {}
                if request.page_count:
                    meta["page_count"] = request.page_count
                if request.title:
                    meta["title"] = request.title
                if request.summary:
                    meta["summary"] = request.summary
                if warnings:
                    meta["warnings"] = warnings
                await cur.execute(
                    f"UPDATE documents SET pending_status = %s, pending_error = %s, "
                    f"pending_meta = pending_meta || %s::jsonb, updated_at = now() WHERE id = %s RETURNING {_COLUMNS}",
                    (status, request.error, json.dumps(meta), doc_id),
                )
                row = await cur.fetchone()
                if status == "failed":
                    logger.warning(
                        "document %s: version %d failed (version %d stays visible): %s",
                        doc_id,
                        target.version,
                        row["version"] if row else 0,
                        request.error,
                    )
            else:
                sets = ["status = %s", "error = %s", "updated_at = now()"]
                params: list[Any] = [status, request.error]
                if request.page_count:
                    sets.append("page_count = %s")
                    params.append(request.page_count)
                if request.title:
                    sets.append("title = %s")
                    params.append(request.title)
                if request.summary:
                    sets.append("summary = %s")
                    params.append(request.summary)
                if warnings:
                    sets.append("warnings = %s")
                    params.append(warnings)
                await cur.execute(
                    f"UPDATE documents SET {', '.join(sets)} WHERE id = %s RETURNING {_COLUMNS}", (*params, doc_id)
                )
                row = await cur.fetchone()
        assert row is not None
        return document_message(row)

    async def delete(self, user: UserContext, document_id: str) -> None:
        doc_id = parse_document_id(document_id)
        async with self.db.transaction(user) as conn:
            cur = await conn.execute(
                "DELETE FROM documents WHERE id = %s RETURNING title, filename, version", (doc_id,)
            )
            row = await cur.fetchone()
            if row is None:
                await self._raise_missing_or_denied(conn, doc_id)
            assert row is not None
            await write_audit(
                conn, user, doc_id, "delete", {"title": row[0], "filename": row[1], "version": row[2]}, {}
            )
        logger.info("document %s deleted by %s", document_id, user.user_id)

    async def begin_new_version(
        self, user: UserContext, request: retriever_pb2.BeginNewVersionRequest
    ) -> tuple[common_pb2.Document, int, bool]:
        """Starts version N+1 (new bytes) or a re-ingest of the visible version's bytes (same N); the owner only.
        A ready document stays searchable with its chunks, its status unchanged, until IndexChunks for the new
        version swaps them; a document that is not ready (failed, or an ingestion that never finished) has
        nothing to keep and starts over as `queued`. Returns the document, the version to ingest, and whether
        the bytes were those of the visible version already (nothing started)."""
        doc_id = parse_document_id(request.document_id)
        sha = "" if request.reingest else check_sha256(request.content_sha256, required=True)
        if request.size_bytes < 0:
            raise InvalidArgument("size_bytes must not be negative")
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(f"SELECT {_COLUMNS} FROM documents WHERE id = %s FOR UPDATE", (doc_id,))
            row = await cur.fetchone()
            if row is None:
                await self._raise_missing_or_denied(conn, doc_id)
            assert row is not None
            if (
                not request.reingest
                and sha == row["content_sha256"]
                and row["status"] == "ready"
                and not row["pending_version"]
            ):
                return document_message(row), row["version"], True
            if request.reingest:
                version, filename, mime, size, sha = (
                    row["version"],
                    row["filename"],
                    row["mime_type"],
                    row["size_bytes"],
                    row["content_sha256"],
                )
            else:
                version = max(row["version"], row["pending_version"]) + 1
                filename = request.filename.strip() or row["filename"]
                mime = request.mime_type.strip() or row["mime_type"]
                size = request.size_bytes
            if row["status"] == "ready":
                await cur.execute(
                    f"UPDATE documents SET pending_version = %s, pending_status = 'queued', pending_error = '', "
                    f"pending_filename = %s, pending_mime_type = %s, pending_size_bytes = %s, pending_sha256 = %s, "
                    f"pending_meta = '{{}}', updated_at = now() WHERE id = %s RETURNING {_COLUMNS}",
                    (version, filename, mime, size, sha, doc_id),
                )
            else:
                await cur.execute(
                    f"UPDATE documents SET version = %s, filename = %s, mime_type = %s, size_bytes = %s, "
                    f"content_sha256 = %s, status = 'queued', error = '', warnings = '{{}}', pending_version = 0, "
                    f"pending_status = '', pending_error = '', pending_filename = '', pending_mime_type = '', "
                    f"pending_size_bytes = 0, pending_sha256 = '', pending_meta = '{{}}', updated_at = now() "
                    f"WHERE id = %s RETURNING {_COLUMNS}",
                    (version, filename, mime, size, sha, doc_id),
                )
            updated = await cur.fetchone()
            assert updated is not None
            await write_audit(
                conn,
                user,
                doc_id,
                "reingest" if request.reingest else "new_version",
                {
                    "version": row["version"],
                    "filename": row["filename"],
                    "content_sha256": row["content_sha256"],
                    "status": row["status"],
                },
                {"version": version, "filename": filename, "content_sha256": sha},
            )
        logger.info(
            "document %s: %s of version %d started by %s",
            doc_id,
            "re-ingest" if request.reingest else "ingestion",
            version,
            user.user_id,
        )
        return document_message(updated), version, False

    async def update(self, user: UserContext, request: retriever_pb2.UpdateDocumentRequest) -> common_pb2.Document:
        """Title and/or ACL, the owner only, in one transaction with its audit record. Search, GetChunks and
        CheckDocumentAccess decide access by these columns under RLS, so the change applies to the next call."""
        doc_id = parse_document_id(request.document_id)
        has_title, has_acl = request.HasField("title"), request.HasField("acl")
        if not (has_title or has_acl):
            raise InvalidArgument("nothing to update: set title and/or acl")
        title = request.title.strip()
        if has_title and not 0 < len(title) <= MAX_TITLE_LENGTH:
            raise InvalidArgument(f"title must be 1..{MAX_TITLE_LENGTH} characters (not only spaces)")
        acl = clean_acl(request.acl) if has_acl else None
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(f"SELECT {_COLUMNS} FROM documents WHERE id = %s FOR UPDATE", (doc_id,))
            row = await cur.fetchone()
            if row is None:
                await self._raise_missing_or_denied(conn, doc_id)
            assert row is not None
            before: dict[str, Any] = {}
            after: dict[str, Any] = {}
            if has_title and title != row["title"]:
                before["title"], after["title"] = row["title"], title
            if acl is not None:
                old = acl_json(row["acl_public"], row["acl_departments"], row["acl_roles"], row["acl_users"])
                if acl != old:
                    before["acl"], after["acl"] = old, acl
            if not after:
                return document_message(row)
            new_acl = after.get("acl") or acl_json(
                row["acl_public"], row["acl_departments"], row["acl_roles"], row["acl_users"]
            )
            await cur.execute(
                f"UPDATE documents SET title = %s, acl_public = %s, acl_departments = %s, acl_roles = %s, "
                f"acl_users = %s, updated_at = now() WHERE id = %s RETURNING {_COLUMNS}",
                (
                    after.get("title", row["title"]),
                    new_acl["public"],
                    new_acl["departments"],
                    new_acl["roles"],
                    new_acl["users"],
                    doc_id,
                ),
            )
            updated = await cur.fetchone()
            await write_audit(conn, user, doc_id, "update", before, after)
        assert updated is not None
        logger.info("document %s updated by %s: %s", doc_id, user.user_id, ", ".join(after))
        return document_message(updated)

    async def audit(self, user: UserContext, document_id: str, limit: int, cursor: str) -> tuple[AuditEntries, str]:
        """A document's audit entries, oldest first: its owner's and admins' (RLS); also after a delete."""
        doc_id = parse_document_id(document_id)
        limit = page_size(limit)
        after_clause = ""
        params: list[Any] = [doc_id]
        if cursor:
            at, last_id = decode_cursor(cursor, 2)
            after_clause = " AND (at, id) > (%s, %s)"
            params += [cursor_time(at), cursor_uuid(last_id)]
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT id, document_id, actor, at, action, before::text AS before, after::text AS after "
                f"FROM document_audit WHERE document_id = %s{after_clause} ORDER BY at, id LIMIT %s",
                (*params, limit + 1),
            )
            rows = await cur.fetchall()
            if not rows and "admin" not in user.roles:
                owner = await (
                    await conn.execute("SELECT owner_user FROM documents WHERE id = %s", (doc_id,))
                ).fetchone()
                if owner is None:
                    raise NotFound(f"document {document_id} not found")
                if owner[0] != user.user_id:
                    raise PermissionDenied(f"only the owner or an admin may read the audit of document {document_id}")
        next_cursor = ""
        if len(rows) > limit:
            rows = rows[:limit]
            next_cursor = encode_cursor(rows[-1]["at"].isoformat(), str(rows[-1]["id"]))
        return [audit_message(r) for r in rows], next_cursor

    async def list_chunks(
        self, user: UserContext, document_id: str, level: int, limit: int, cursor: str
    ) -> tuple[ChunkRows, str]:
        """A document's chunks by level and position, for its readers (RLS on documents and chunks); rows
        with id, level, section_path, page, text, ordinal, kind, parent_id."""
        doc_id = parse_document_id(document_id)
        limit = page_size(limit)
        after_clause, params = "", [doc_id, level, level]
        if cursor:
            last_level, last_ordinal, last_id = decode_cursor(cursor, 3)
            if not (isinstance(last_level, int) and isinstance(last_ordinal, int) and isinstance(last_id, str)):
                raise InvalidArgument("cursor is not valid: pass a next_cursor unchanged, with the same filters")
            after_clause = " AND (level, ordinal, id) > (%s, %s, %s)"
            params += [last_level, last_ordinal, last_id]
        async with self.db.transaction(user) as conn:
            if await (await conn.execute("SELECT 1 FROM documents WHERE id = %s", (doc_id,))).fetchone() is None:
                raise NotFound(f"document {document_id} not found")
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT id, level, section_path, page, text, ordinal, kind, coalesce(parent_id, '') AS parent_id "
                f"FROM chunks WHERE document_id = %s AND (%s = 0 OR level = %s){after_clause} "
                "ORDER BY level, ordinal, id LIMIT %s",
                (*params, limit + 1),
            )
            rows = await cur.fetchall()
        next_cursor = ""
        if len(rows) > limit:
            rows = rows[:limit]
            next_cursor = encode_cursor(rows[-1]["level"], rows[-1]["ordinal"], rows[-1]["id"])
        return rows, next_cursor

    async def problems(self, user: UserContext, stuck_after_seconds: float, limit: int) -> ProblemList:
        """Failed and stuck documents of every owner, longest idle first; admins only (the database function
        checks the role too)."""
        if "admin" not in user.roles:
            raise PermissionDenied("only an admin may list problem documents")
        if stuck_after_seconds <= 0:
            raise InvalidArgument("stuck_after_seconds must be positive")
        limit = page_size(limit)
        try:
            async with self.db.transaction(user) as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(
                    f"SELECT {_COLUMNS}, extract(epoch FROM now() - updated_at)::float8 AS idle "
                    "FROM rag_problem_documents(%s, %s)",
                    (stuck_after_seconds, limit),
                )
                rows = await cur.fetchall()
        except psycopg.errors.InsufficientPrivilege as exc:
            raise PermissionDenied(str(exc).splitlines()[0]) from None
        out = []
        for row in rows:
            idle = float(row["idle"])
            if row["status"] == "failed":
                problem, reason = "failed", row["error"] or "failed without a recorded reason"
            elif row["pending_status"] == "failed":
                problem = "version_failed"
                reason = (
                    f"version {row['pending_version']} failed: {row['pending_error'] or 'no recorded reason'}; "
                    f"version {row['version']} is still served"
                )
            elif row["status"] in IN_PROGRESS:
                problem = "stuck"
                reason = f"{row['status']} for {idle:.0f} s without progress (threshold {stuck_after_seconds:.0f} s)"
            else:
                problem = "version_stuck"
                reason = (
                    f"version {row['pending_version']} {row['pending_status']} for {idle:.0f} s without "
                    f"progress (threshold {stuck_after_seconds:.0f} s); version {row['version']} is still served"
                )
            out.append(
                retriever_pb2.ProblemDocument(
                    document=document_message(row), problem=problem, reason=reason, idle_seconds=round(idle, 1)
                )
            )
        return out

    @staticmethod
    async def _raise_missing_or_denied(conn: psycopg.AsyncConnection[Any], doc_id: uuid.UUID) -> None:
        visible = await (await conn.execute("SELECT 1 FROM documents WHERE id = %s", (doc_id,))).fetchone()
        if visible:
            raise PermissionDenied(f"only the owner may change document {doc_id}")
        raise NotFound(f"document {doc_id} not found")

    async def search_scope(
        self, conn: psycopg.AsyncConnection[Any], restrict: builtins.list[uuid.UUID] | None
    ) -> tuple[builtins.list[str], DocumentCounts]:
        """The ready documents a search may read (RLS, narrowed by `restrict`) and the counts that explain an
        empty scope, in one statement over the documents the user may read."""
        cur = await conn.execute(
            "SELECT array_agg(id::text) FILTER (WHERE status = 'ready' AND (%(all)s OR id = ANY(%(ids)s::uuid[]))), "
            "count(*), "
            "count(*) FILTER (WHERE status IN ('queued', 'parsing', 'embedding', 'indexing') "
            "AND (%(all)s OR id = ANY(%(ids)s::uuid[]))), "
            "count(*) FILTER (WHERE NOT %(all)s AND id = ANY(%(ids)s::uuid[])) FROM documents",
            {"all": not restrict, "ids": restrict or []},
        )
        row = await cur.fetchone()
        assert row is not None  # an aggregate always returns one row
        return list(row[0] or []), DocumentCounts(readable=row[1], ingesting=row[2], filter_matched=row[3])

    async def accessible_ids(
        self, conn: psycopg.AsyncConnection[Any], restrict: builtins.list[uuid.UUID] | None
    ) -> builtins.list[str]:
        """Ready documents the transaction's user may read (decided by RLS), optionally narrowed."""
        if restrict:
            cur = await conn.execute(
                "SELECT id::text FROM documents WHERE status = 'ready' AND id = ANY(%s)", (restrict,)
            )
        else:
            cur = await conn.execute("SELECT id::text FROM documents WHERE status = 'ready'")
        return [r[0] for r in await cur.fetchall()]
