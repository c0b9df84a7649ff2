"""The document catalogue in PostgreSQL. Every query runs in a transaction as the request's user:
`rag.user_id`, `rag.department` and `rag.roles` are set with set_config(..., true) and the
row-level-security policies of `documents` and `chunks` decide what the user sees and may change.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ragmesh.common.v1 import common_pb2
from ragmesh_common.context import UserContext
from ragmesh_common.errors import InvalidArgument, NotFound, PermissionDenied

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

_COLUMNS = ("id, title, filename, mime_type, owner_user, owner_department, acl_public, acl_departments, "
            "acl_roles, acl_users, status, error, chunk_count, page_count, size_bytes, summary, created_at, updated_at")


def parse_document_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument(f"document_id must be a UUID, got {value!r}") from None


def document_message(row: dict[str, Any]) -> common_pb2.Document:
    return common_pb2.Document(
        document_id=str(row["id"]), title=row["title"], filename=row["filename"], mime_type=row["mime_type"],
        owner_user=row["owner_user"], owner_department=row["owner_department"],
        acl=common_pb2.Acl(public=row["acl_public"], departments=row["acl_departments"], roles=row["acl_roles"],
                           users=row["acl_users"]),
        status=STATUS_VALUES.get(row["status"], common_pb2.DOCUMENT_STATUS_UNSPECIFIED), error=row["error"],
        chunk_count=row["chunk_count"], page_count=row["page_count"], size_bytes=row["size_bytes"],
        summary=row["summary"], created_at=row["created_at"], updated_at=row["updated_at"],
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
        self._pool = AsyncConnectionPool(dsn, min_size=1, max_size=pool_size, open=False, timeout=5,
                                         check=check_connection, reconnect_timeout=2,
                                         kwargs={"connect_timeout": 3, "application_name": "ragmesh-retriever",
                                                 "options": "-c plan_cache_mode=force_custom_plan"})
        self._timeout = statement_timeout_ms

    async def open(self) -> None:
        await self._pool.open(wait=True, timeout=30)
        async with self._pool.connection() as conn:
            row = await (await conn.execute(
                "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")).fetchone()
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
    async def transaction(self, user: UserContext,
                          settings: dict[str, str] | None = None) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A transaction as `user` (RLS reads the rag.* settings), with more transaction-local `settings`
        set in the same round trip.

        The settings statement runs on a plain `psycopg.AsyncCursor`, which the OpenTelemetry psycopg
        instrumentation (it wraps the connection's cursor factory) does not trace: like BEGIN and COMMIT it is
        part of opening the transaction, and a traced statement costs ~0.15 ms plus a stored span. Every
        statement run on `conn` is traced."""
        extra = settings or {}
        async with self._pool.connection() as conn:
            async with conn.transaction():
                async with psycopg.AsyncCursor(conn) as setup:
                    await setup.execute(
                        "SELECT set_config('rag.user_id', %s, true), set_config('rag.department', %s, true), "
                        "set_config('rag.roles', %s, true), set_config('statement_timeout', %s, true)"
                        + ", set_config(%s, %s, true)" * len(extra),
                        (user.user_id, user.department, ",".join(user.roles), str(self._timeout),
                         *(x for item in extra.items() for x in item)),
                    )
                yield conn


class Catalog:
    """Documents and their ACLs."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, user: UserContext, title: str, filename: str, mime_type: str,
                     acl: common_pb2.Acl, size_bytes: int) -> common_pb2.Document:
        if not filename.strip():
            raise InvalidArgument("filename is required")
        departments = list(acl.departments)
        if not (acl.public or departments or acl.roles or acl.users) and user.department:
            departments = [user.department]  # default ACL: the uploader's department
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                f"INSERT INTO documents (title, filename, mime_type, owner_user, owner_department, acl_public, "
                f"acl_departments, acl_roles, acl_users, size_bytes) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                f"RETURNING {_COLUMNS}",
                (title.strip() or filename, filename, mime_type, user.user_id, user.department, acl.public,
                 departments, list(acl.roles), list(acl.users), size_bytes),
            )
            row = await cur.fetchone()
        assert row is not None
        logger.info("document %s created by %s", row["id"], user.user_id)
        return document_message(row)

    async def get(self, user: UserContext, document_id: str) -> common_pb2.Document:
        doc_id = parse_document_id(document_id)
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(f"SELECT {_COLUMNS} FROM documents WHERE id = %s", (doc_id,))
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"document {document_id} not found")
        return document_message(row)

    async def list(self, user: UserContext, limit: int, offset: int) -> tuple[list[common_pb2.Document], int]:
        if limit < 0 or offset < 0:
            raise InvalidArgument("limit and offset must not be negative")
        limit = min(limit or 100, 1000)
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(f"SELECT {_COLUMNS}, count(*) OVER () AS total FROM documents "
                              "ORDER BY created_at DESC, id LIMIT %s OFFSET %s", (limit, offset))
            rows = await cur.fetchall()
            if not rows:
                total_row = await (await conn.execute("SELECT count(*) FROM documents")).fetchone()
                return [], int(total_row[0]) if total_row else 0
        return [document_message(r) for r in rows], int(rows[0]["total"])

    async def update_status(self, user: UserContext, request: Any) -> common_pb2.Document:
        doc_id = parse_document_id(request.document_id)
        status = STATUS_NAMES.get(request.status)
        if status is None:
            raise InvalidArgument("status must be one of queued, parsing, embedding, indexing, ready, failed")
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
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(f"UPDATE documents SET {', '.join(sets)} WHERE id = %s RETURNING {_COLUMNS}",
                              (*params, doc_id))
            row = await cur.fetchone()
            if row is None:
                await self._raise_missing_or_denied(conn, doc_id)
        assert row is not None
        return document_message(row)

    async def delete(self, user: UserContext, document_id: str) -> None:
        doc_id = parse_document_id(document_id)
        async with self.db.transaction(user) as conn:
            cur = await conn.execute("DELETE FROM documents WHERE id = %s RETURNING id", (doc_id,))
            if await cur.fetchone() is None:
                await self._raise_missing_or_denied(conn, doc_id)
        logger.info("document %s deleted by %s", document_id, user.user_id)

    @staticmethod
    async def _raise_missing_or_denied(conn: psycopg.AsyncConnection[Any], doc_id: uuid.UUID) -> None:
        visible = await (await conn.execute("SELECT 1 FROM documents WHERE id = %s", (doc_id,))).fetchone()
        if visible:
            raise PermissionDenied(f"only the owner may change document {doc_id}")
        raise NotFound(f"document {doc_id} not found")

    async def search_scope(self, conn: psycopg.AsyncConnection[Any],
                           restrict: list[uuid.UUID] | None) -> tuple[list[str], DocumentCounts]:
        """The ready documents a search may read (RLS, narrowed by `restrict`) and the counts that explain an
        empty scope, in one statement over the documents the user may read."""
        cur = await conn.execute(
            "SELECT array_agg(id::text) FILTER (WHERE status = 'ready' AND (%(all)s OR id = ANY(%(ids)s::uuid[]))), "
            "count(*), "
            "count(*) FILTER (WHERE status IN ('queued', 'parsing', 'embedding', 'indexing') "
            "AND (%(all)s OR id = ANY(%(ids)s::uuid[]))), "
            "count(*) FILTER (WHERE NOT %(all)s AND id = ANY(%(ids)s::uuid[])) FROM documents",
            {"all": not restrict, "ids": restrict or []})
        row = await cur.fetchone()
        assert row is not None  # an aggregate always returns one row
        return list(row[0] or []), DocumentCounts(readable=row[1], ingesting=row[2], filter_matched=row[3])

    async def accessible_ids(self, conn: psycopg.AsyncConnection[Any], restrict: list[uuid.UUID] | None) -> list[str]:
        """Ready documents the transaction's user may read (decided by RLS), optionally narrowed."""
        if restrict:
            cur = await conn.execute("SELECT id::text FROM documents WHERE status = 'ready' AND id = ANY(%s)",
                                     (restrict,))
        else:
            cur = await conn.execute("SELECT id::text FROM documents WHERE status = 'ready'")
        return [r[0] for r in await cur.fetchall()]
