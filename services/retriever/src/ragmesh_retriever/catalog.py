"""The document catalogue in PostgreSQL: create, read, list, change and delete documents, their audit and
chunks, and the readable scope of a search. Every query runs in a transaction of `session.Database` as the
request's user, and row-level security decides what the user sees and may change. The documents' values and
version state machine are in `documents`, paging and the audit trail in `audit`."""

from __future__ import annotations

import builtins
import json
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.errors import InvalidArgument, NotFound, PermissionDenied
from ragmesh_common.identity import UserContext
from ragmesh_retriever.audit import (
    audit_message,
    cursor_time,
    cursor_uuid,
    decode_cursor,
    encode_cursor,
    page_size,
    write_audit,
)
from ragmesh_retriever.backends.base import Scope
from ragmesh_retriever.documents import (
    COLUMNS,
    IN_PROGRESS,
    MAX_TITLE_LENGTH,
    STATUS_NAMES,
    acl_json,
    check_sha256,
    clean_acl,
    clean_warnings,
    document_message,
    lock_version,
    parse_document_id,
    raise_missing_or_denied,
)
from ragmesh_retriever.session import Database

logger = logging.getLogger(__name__)

_EXTENSION = re.compile(r"[a-z0-9]{1,16}")  # a filename extension filter of List

# aliases for annotations inside Catalog, where `list` is a method's name
ProblemList = list[retriever_pb2.ProblemDocument]
AuditEntries = list[retriever_pb2.DocumentAuditEntry]
ChunkRows = list[dict[str, Any]]


@dataclass(frozen=True)
class DocumentCounts:
    """Why a search scope may be empty: readable documents (any status), those still ingesting (within the
    filter, if any), and the readable documents a `document_ids` filter named (0 without a filter)."""

    readable: int
    ingesting: int
    filter_matched: int


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
                f"SELECT {COLUMNS} FROM documents WHERE owner_user = %(owner)s AND ("
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
            f"acl_departments, acl_roles, acl_users, size_bytes, content_sha256, title_given) "
            f"VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING {COLUMNS}",
            (
                title.strip() or PurePath(filename).stem or filename,
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
                bool(title.strip()),
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
            await cur.execute(f"SELECT {COLUMNS} FROM documents WHERE id = %s", (doc_id,))
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
        content_sha256: list[str] | None = None,
        parsed_before: int = 0,
    ) -> tuple[list[common_pb2.Document], int, str]:
        """The documents the user may read, newest change first (updated_at, id), filtered; the matching total
        and the cursor of the next page ("" on the last). `content_sha256`: only those whose visible version has
        one of these hashes (RLS applies as to every read: another user's hashes are never matched).
        `parsed_before`: only those whose visible version a lower parser reading parsed (stale ones)."""
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
        if content_sha256:  # at most limits.CONTENT_HASHES (the validation interceptor)
            where.append("content_sha256 = ANY(%s)")
            params.append(sorted({check_sha256(sha, required=True) for sha in content_sha256}))
        if parsed_before < 0:
            raise InvalidArgument("parsed_before must not be negative")
        if parsed_before:
            where.append("parser_version < %s")
            params.append(parsed_before)
        page_where, page_params = list(where), list(params)
        if cursor:
            at, last_id = decode_cursor(cursor, 2)
            page_where.append("(updated_at, id) < (%s, %s)")
            page_params += [cursor_time(at), cursor_uuid(last_id)]
        filters = " AND ".join(where) or "true"
        async with self.db.transaction(user) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                f"SELECT {COLUMNS} FROM documents WHERE {' AND '.join(page_where) or 'true'} "
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
                if request.parser_version:
                    meta["parser_version"] = request.parser_version
                await cur.execute(
                    f"UPDATE documents SET pending_status = %s, pending_error = %s, "
                    f"pending_meta = pending_meta || %s::jsonb, updated_at = now() WHERE id = %s RETURNING {COLUMNS}",
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
                if request.title:  # the parser's title: it replaces the file-name stem, not a title a person chose
                    sets.append("title = CASE WHEN title_given THEN title ELSE %s END")
                    params.append(request.title)
                if request.summary:
                    sets.append("summary = %s")
                    params.append(request.summary)
                if warnings:
                    sets.append("warnings = %s")
                    params.append(warnings)
                if request.parser_version:
                    sets.append("parser_version = %s")
                    params.append(request.parser_version)
                await cur.execute(
                    f"UPDATE documents SET {', '.join(sets)} WHERE id = %s RETURNING {COLUMNS}", (*params, doc_id)
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
                await raise_missing_or_denied(conn, doc_id)
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
            await cur.execute(f"SELECT {COLUMNS} FROM documents WHERE id = %s FOR UPDATE", (doc_id,))
            row = await cur.fetchone()
            if row is None:
                await raise_missing_or_denied(conn, doc_id)
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
                    f"pending_meta = '{{}}', updated_at = now() WHERE id = %s RETURNING {COLUMNS}",
                    (version, filename, mime, size, sha, doc_id),
                )
            else:
                await cur.execute(
                    f"UPDATE documents SET version = %s, filename = %s, mime_type = %s, size_bytes = %s, "
                    f"content_sha256 = %s, status = 'queued', error = '', warnings = '{{}}', pending_version = 0, "
                    f"pending_status = '', pending_error = '', pending_filename = '', pending_mime_type = '', "
                    f"pending_size_bytes = 0, pending_sha256 = '', pending_meta = '{{}}', updated_at = now() "
                    f"WHERE id = %s RETURNING {COLUMNS}",
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
            await cur.execute(f"SELECT {COLUMNS} FROM documents WHERE id = %s FOR UPDATE", (doc_id,))
            row = await cur.fetchone()
            if row is None:
                await raise_missing_or_denied(conn, doc_id)
            assert row is not None
            before: dict[str, Any] = {}
            after: dict[str, Any] = {}
            if has_title and (title != row["title"] or not row["title_given"]):  # a title chosen now is kept
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
                f"UPDATE documents SET title = %s, title_given = title_given OR %s, acl_public = %s, "
                f"acl_departments = %s, acl_roles = %s, acl_users = %s, updated_at = now() WHERE id = %s "
                f"RETURNING {COLUMNS}",
                (
                    after.get("title", row["title"]),
                    "title" in after,
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
                    f"SELECT {COLUMNS}, extract(epoch FROM now() - updated_at)::float8 AS idle "
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

    async def search_scope(
        self,
        conn: psycopg.AsyncConnection[Any],
        restrict: builtins.list[uuid.UUID] | None,
        list_max: int | None = None,
    ) -> tuple[Scope, DocumentCounts]:
        """The ready documents a search may read (RLS, narrowed by `restrict`) and the counts that explain an
        empty scope, in one statement. The counts come from the per-scope document counts, so they cost the
        same for a user who reads ten documents or a million; the ids are listed only when narrowed, or when
        there are at most `list_max` (None: always) — a larger scope is searched by ACL scope instead."""
        if restrict:
            cur = await conn.execute(
                "SELECT (SELECT coalesce(sum(n), 0) FROM rag_scope_documents), "
                "array_agg(id::text) FILTER (WHERE status = 'ready'), "
                "count(*) FILTER (WHERE status IN ('queued', 'parsing', 'embedding', 'indexing')), count(*) "
                "FROM documents WHERE id = ANY(%s::uuid[])",
                (restrict,),
            )
            row = await cur.fetchone()
            assert row is not None  # an aggregate always returns one row
            ids = list(row[1] or [])
            return Scope(len(ids), ids), DocumentCounts(readable=int(row[0]), ingesting=row[2], filter_matched=row[3])
        cur = await conn.execute(
            "WITH c AS (SELECT coalesce(sum(n), 0) AS readable, coalesce(sum(n) FILTER (WHERE status = 'ready'), 0) "
            "AS ready, coalesce(sum(n) FILTER (WHERE status IN ('queued', 'parsing', 'embedding', 'indexing')), 0) "
            "AS ingesting FROM rag_scope_documents) "
            "SELECT c.readable, c.ready, c.ingesting, CASE WHEN %(max)s::bigint IS NULL OR c.ready <= %(max)s::bigint "
            "THEN (SELECT coalesce(array_agg(d.id::text), '{}') FROM documents d WHERE d.status = 'ready' "
            "AND d.scope_id IN (SELECT s.id FROM rag_scopes s)) END FROM c",
            {"max": list_max},
        )
        row = await cur.fetchone()
        assert row is not None
        scope = Scope(int(row[1]), None) if row[3] is None else Scope(len(row[3]), list(row[3]))
        return scope, DocumentCounts(readable=int(row[0]), ingesting=int(row[2]), filter_matched=0)

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
