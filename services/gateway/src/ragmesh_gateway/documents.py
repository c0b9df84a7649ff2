"""A document's life as the gateway runs it: upload (checked, catalogued, stored, queued), list and read,
progress events until ready or failed, and delete. The routes in routers/documents.py only call this.

The catalogue (the retriever) holds each document's status; the ingestion worker (services/ingestion) moves it
along and publishes every step on Redis. Both name a status by `status_name` of the proto enum
(ragmesh_common.ingestion, the contract the gateway shares with the worker). An ingestion task carries a token
the gateway signs for the uploader, the document, its version and the stored file (the worker trusts nothing
else in it), and is published off the event loop under GATEWAY_ENQUEUE_TIMEOUT_SECONDS.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import mimetypes
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from celery import Celery
from fastapi import HTTPException, UploadFile
from google.protobuf.json_format import MessageToDict
from grpc import aio
from opentelemetry import trace
from pydantic import ValidationError
from redis.asyncio import Redis

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.errors import redact_addresses
from ragmesh_common.identity import UserContext
from ragmesh_common.ingestion import TERMINAL, IngestTask, channel_name, event, send_ingest, status_name
from ragmesh_common.tokens import TokenSigner, mint_ingest_token
from ragmesh_gateway.cache import SemanticCache
from ragmesh_gateway.config import Settings
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.models import MAX_FILENAME_CHARS, AclIn, DocumentPatch
from ragmesh_gateway.validation import check_upload_content, text_problem

logger = logging.getLogger(__name__)

FALLBACK_FORMATS = frozenset({".md", ".markdown", ".html", ".htm", ".docx", ".pptx", ".xlsx", ".csv", ".pdf", ".txt"})
GENERIC_MIME_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
EVENTS_SECONDS = 900  # an events stream ends after this even if the document is still ingesting
EVENTS_POLL_SECONDS = 5.0  # without a message for this long, the catalogue is asked (the worker may be done)

TRANSIENT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)
TRANSIENT_RETRY_AFTER_S = 2  # Retry-After of a 503 for a hop that is down, slow or overloaded
RETITLE_PAGES = 20  # ListChunks pages of 1,000 paragraphs read to write a retitled document's graph again


def document_json(doc: common_pb2.Document) -> dict[str, Any]:
    data = MessageToDict(doc, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    data["status"] = status_name(doc.status)
    data["size_bytes"] = doc.size_bytes  # int64 would otherwise be a JSON string
    for name in ("created_at", "updated_at"):  # ISO 8601 as datetime.isoformat() writes it, "" when unset
        stamp = getattr(doc, name)
        data[name] = stamp.ToDatetime(tzinfo=UTC).isoformat() if doc.HasField(name) else ""
    data["pending_status"] = status_name(doc.pending_status) if doc.pending_version else ""
    for name in ("error", "pending_error"):  # the worker writes none; rows written before it stopped may have
        if name in data:
            data[name] = redact_addresses(data[name])
    return data


def effective_status(doc: common_pb2.Document) -> tuple[str, str]:
    """The status and error an events stream follows: the pending version's while one is ingesting (the visible
    version stays `ready` meanwhile), else the document's."""
    if doc.pending_version:
        return status_name(doc.pending_status), redact_addresses(doc.pending_error)
    return status_name(doc.status), redact_addresses(doc.error)


def enum_name(value: int, enum: Any, prefix: str) -> str:
    """A proto enum value's API spelling: CHUNK_LEVEL_PARAGRAPH → "paragraph"."""
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower()
    except ValueError:
        return str(value)


def audit_fields(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


def safe_filename(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    cleaned = re.sub(r"[^A-Za-z0-9._ -]", "_", base).strip(" .")
    return cleaned[:200] or "upload"


def upload_mime_type(filename: str, declared: str | None) -> str:
    """The client's content type; when it sent none or a generic one (curl and many browsers send
    application/octet-stream for .md or .csv), the type the file name's extension stands for."""
    if (declared or "").split(";", 1)[0].strip().lower() not in GENERIC_MIME_TYPES:
        return declared or ""
    return mimetypes.guess_type(filename, strict=False)[0] or declared or ""


def rpc_http_error(exc: aio.AioRpcError, step: str) -> HTTPException:
    """The hop's failure as the client sees it; a hop that is down, slow or overloaded (503) carries Retry-After,
    so that a client (`ragmesh ingest`) waits and tries again rather than failing the file."""
    failed = StepFailed.from_rpc(step, exc)
    transient = failed.http_status == 503 and exc.code() in TRANSIENT_CODES
    headers = {"Retry-After": str(failed.retry_after or TRANSIENT_RETRY_AFTER_S)} if transient else None
    return HTTPException(failed.http_status, failed.message, headers=headers)


class DocumentLifecycle:
    """The one owner of create → store → enqueue → status and events → delete. Errors are HTTPExceptions with
    the message the client sees."""

    def __init__(
        self, settings: Settings, mesh: Mesh, redis: Redis, celery: Celery, signer: TokenSigner | None = None
    ) -> None:
        self.settings = settings
        self.mesh = mesh
        self.redis = redis
        self.celery = celery
        self.signer = signer  # signs the tasks' ingestion tokens (the app's signer)
        self._formats: frozenset[str] | None = None  # the parser's, asked once it answers
        self.cache: SemanticCache | None = None  # the chat's semantic cache, told of every document change

    async def _invalidate(self, document_id: str) -> None:
        """Drops the cached answers that used the document. A failure is logged only: a stale entry is refused
        at hit time anyway, since the document's stamp changed."""
        if self.cache is None:
            return
        try:
            await self.cache.invalidate(document_id)
        except Exception:
            logger.warning(
                "semantic cache: entries of %s not dropped (refused at hit time)", document_id, exc_info=True
            )

    async def _list_formats(self, user: UserContext, unreachable: str) -> parser_pb2.ListFormatsResponse | None:
        """The parser's ListFormats reply, or None (logged with what `unreachable` says follows) when it fails."""
        try:
            return await self.mesh.parser.ListFormats(
                parser_pb2.ListFormatsRequest(), metadata=user.metadata(), timeout=self.settings.deadlines.parse_info
            )
        except aio.AioRpcError as exc:
            logger.warning("parser unreachable for ListFormats (%s); %s", exc.code().name, unreachable)
            return None

    async def accepted_formats(self, user: UserContext) -> frozenset[str]:
        if self._formats is None:
            reply = await self._list_formats(user, "using the built-in list")
            if reply is None:
                return FALLBACK_FORMATS
            self._formats = frozenset(e if e.startswith(".") else f".{e}" for e in reply.extensions)
        return self._formats

    async def parser_version(self, user: UserContext) -> int:
        """The parser's current reading (`ParseResponse.parser_version`), asked each time (a rolling upgrade
        changes it); 0 when the parser does not answer."""
        reply = await self._list_formats(user, "its reading is unknown")
        return int(reply.parser_version) if reply is not None else 0

    async def _read_upload(self, user: UserContext, file: UploadFile) -> tuple[str, bytes, str]:
        """The upload's safe file name, bytes and content type, checked (name, extension, size, content)."""
        settings = self.settings
        raw_name = file.filename or ""
        problem = text_problem(raw_name) or (
            f"is longer than {MAX_FILENAME_CHARS} characters" if len(raw_name) > MAX_FILENAME_CHARS else None
        )
        if problem:
            raise HTTPException(400, f"file name {problem}")
        filename = safe_filename(raw_name)
        if Path(filename).suffix.lower() not in await self.accepted_formats(user):
            raise HTTPException(
                415,
                f"unsupported file type {Path(filename).suffix or '(none)'}; accepted: "
                f"{', '.join(sorted(await self.accepted_formats(user)))}",
            )
        content = await file.read(settings.max_upload_bytes + 1)
        if not content:
            raise HTTPException(400, f"{filename} is empty")
        if len(content) > settings.max_upload_bytes:
            raise HTTPException(413, f"{filename} is larger than {settings.max_upload_bytes} bytes")
        mime_type = upload_mime_type(filename, file.content_type)
        # off the event loop: reading a ZIP's directory and its relationships is CPU work over the whole upload
        await asyncio.to_thread(check_upload_content, filename, content, mime_type)
        return filename, content, mime_type

    async def upload(self, user: UserContext, file: UploadFile, *, title: str, acl: str) -> dict[str, Any]:
        """Checks the upload, creates the catalogue row (`queued`), stores the file and queues its ingestion. The
        owner's identical bytes (same SHA-256) are not stored again: their document comes back, `duplicate`."""
        try:
            acl_in = AclIn.model_validate_json(acl) if acl.strip() else AclIn()
        except ValidationError as exc:
            first = exc.errors(include_input=False)[0]
            where = ".".join(str(part) for part in first["loc"])
            raise HTTPException(
                400, f'acl must be JSON like {{"departments": ["eng"]}}: {where + ": " if where else ""}{first["msg"]}'
            ) from exc
        filename, content, mime_type = await self._read_upload(user, file)
        try:
            reply = await self.mesh.retriever.CreateOrGetDocument(
                retriever_pb2.CreateOrGetDocumentRequest(
                    title=title,  # none given: the catalogue titles it by the file name until the parser finds one
                    filename=filename,
                    mime_type=mime_type,
                    acl=common_pb2.Acl(**acl_in.model_dump()),
                    size_bytes=len(content),
                    content_sha256=hashlib.sha256(content).hexdigest(),
                ),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve,
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        doc = reply.document
        events_url = f"/api/v1/documents/{doc.document_id}/events"
        if reply.existing:
            logger.info("upload of %s by %s: same bytes as document %s", filename, user.user_id, doc.document_id)
            return {**document_json(doc), "events_url": events_url, "duplicate": True}
        path = await self._store(doc.document_id, doc.version or 1, filename, content)
        await self._enqueue(user, doc.document_id, path, filename, mime_type)
        return {**document_json(doc), "events_url": events_url, "duplicate": False}

    async def new_version(self, user: UserContext, document_id: uuid.UUID, file: UploadFile) -> dict[str, Any]:
        """New bytes for a document (the owner only): stored beside the visible version's file and ingested as the
        next version, which replaces the visible one's chunks in one transaction when it is indexed. Bytes equal
        to the visible version's start nothing (`unchanged`)."""
        filename, content, mime_type = await self._read_upload(user, file)
        try:
            reply = await self.mesh.retriever.BeginNewVersion(
                retriever_pb2.BeginNewVersionRequest(
                    document_id=str(document_id),
                    filename=filename,
                    mime_type=mime_type,
                    size_bytes=len(content),
                    content_sha256=hashlib.sha256(content).hexdigest(),
                ),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve,
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        doc = reply.document
        events_url = f"/api/v1/documents/{doc.document_id}/events"
        await self._invalidate(doc.document_id)
        if reply.unchanged:
            return {
                **document_json(doc),
                "events_url": events_url,
                "unchanged": True,
                "ingesting_version": 0,
                "note": f"the content is that of version {doc.version}; nothing to ingest",
            }
        path = await self._store(doc.document_id, reply.version, filename, content)
        await self._enqueue(user, doc.document_id, path, filename, mime_type, reply.version)
        self._drop_old_versions(doc.document_id, keep={doc.version, reply.version})
        return {
            **document_json(doc),
            "events_url": events_url,
            "unchanged": False,
            "ingesting_version": reply.version,
            "note": f"version {reply.version} queued",
        }

    async def reingest(self, user: UserContext, document_id: uuid.UUID) -> dict[str, Any]:
        """Ingests the visible version's stored file again (the owner only); it stays searchable meanwhile."""
        doc = await self.get(user, document_id)
        path = self._stored_path(doc.document_id, doc.version, doc.filename)
        if path is None:
            try:  # a reader who is not the owner is 403 before they learn the file is gone
                access = await self.mesh.retriever.CheckDocumentAccess(
                    retriever_pb2.CheckDocumentAccessRequest(document_ids=[doc.document_id]),
                    metadata=user.metadata(),
                    timeout=self.settings.deadlines.retrieve,
                )
            except aio.AioRpcError as exc:
                raise rpc_http_error(exc, "catalogue") from exc
            if doc.document_id not in access.owned_ids:
                raise HTTPException(403, "only the owner may re-ingest a document")
            raise HTTPException(
                409,
                f"the stored file of version {doc.version} is gone; upload the content again "
                f"with PUT /api/v1/documents/{doc.document_id}/content",
            )
        try:
            reply = await self.mesh.retriever.BeginNewVersion(
                retriever_pb2.BeginNewVersionRequest(document_id=str(document_id), reingest=True),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve,
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        new = reply.document
        await self._invalidate(new.document_id)
        await self._enqueue(user, new.document_id, path, doc.filename, doc.mime_type, reply.version)
        return {
            **document_json(new),
            "events_url": f"/api/v1/documents/{new.document_id}/events",
            "unchanged": False,
            "ingesting_version": reply.version,
            "note": f"re-ingest of version {reply.version} queued",
        }

    async def _store(self, document_id: str, version: int, filename: str, content: bytes) -> Path:
        folder = self.settings.upload_dir / document_id / f"v{version}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / filename
        await asyncio.to_thread(path.write_bytes, content)
        return path

    def _stored_path(self, document_id: str, version: int, filename: str) -> Path | None:
        """The stored file of a version: per version, or (uploads from before versions) beside them."""
        folder = self.settings.upload_dir / document_id
        for path in (folder / f"v{version}" / filename, folder / filename):
            if path.is_file():
                return path
        return None

    def _drop_old_versions(self, document_id: str, keep: set[int]) -> None:
        """Removes the stored files of versions that can no longer be ingested (neither visible nor pending)."""
        for folder in (self.settings.upload_dir / document_id).glob("v*"):
            if folder.is_dir() and folder.name[1:].isdigit() and int(folder.name[1:]) not in keep:
                shutil.rmtree(folder, ignore_errors=True)

    async def _enqueue(
        self, user: UserContext, document_id: str, path: Path, filename: str, mime_type: str, version: int = 0
    ) -> None:
        task = IngestTask(
            document_id, self._ingest_token(user, document_id, version, path), str(path), filename, mime_type, version
        )
        try:
            # off the event loop, which serves every chat stream: a slow Redis holds up this upload only
            async with asyncio.timeout(self.settings.enqueue_timeout_seconds):
                await asyncio.to_thread(send_ingest, self.celery, task)
        except Exception as exc:  # the broker is down or too slow: say so, keep the file
            logger.error("could not enqueue ingestion of %s: %s", document_id, repr(exc))
            try:
                await self.mesh.retriever.UpdateDocumentStatus(
                    retriever_pb2.UpdateDocumentStatusRequest(
                        document_id=document_id,
                        status=common_pb2.DOCUMENT_STATUS_FAILED,
                        version=version,
                        error="ingestion queue unavailable; upload again later",
                    ),
                    metadata=user.metadata(),
                    timeout=5,
                )
            except aio.AioRpcError as status_exc:
                logger.error("could not mark %s failed: %s", document_id, status_exc.code().name)
            raise HTTPException(
                503,
                "ingestion queue unavailable; the document was not queued",
                headers={"Retry-After": str(TRANSIENT_RETRY_AFTER_S)},
            ) from exc

    def _ingest_token(self, user: UserContext, document_id: str, version: int, path: Path) -> str:
        """The task's grant: `user` may ingest `path` (its place in the upload store) as `version` of the document."""
        signer = self.signer
        if signer is None:
            raise RuntimeError(
                "the gateway signs ingestion tasks with RAGMESH_INTERNAL_SIGNING_KEY (create_app's signer)"
            )
        return mint_ingest_token(
            signer,
            user,
            document_id=document_id,
            version=version,
            file=path.relative_to(self.settings.upload_dir).as_posix(),
            ttl_seconds=self.settings.ingest_token_ttl_seconds,
        )

    async def list_readable(
        self,
        user: UserContext,
        *,
        limit: int,
        offset: int,
        statuses: list[str] | None = None,
        owner: str = "",
        fmt: str = "",
        updated_since: datetime | None = None,
        cursor: str = "",
        content_sha256: list[str] | None = None,
        parsed_before: int = 0,
    ) -> dict[str, Any]:
        """The documents `user` may read, newest change first, filtered (by visible-version content hash too, and
        with `parsed_before` to those a lower parser reading parsed); paged by offset or by cursor."""
        request = retriever_pb2.ListDocumentsRequest(
            limit=limit,
            offset=offset,
            owner_user=owner,
            cursor=cursor,
            content_sha256=content_sha256 or [],
            parsed_before=parsed_before,
        )
        for name in statuses or []:
            request.statuses.append(common_pb2.DocumentStatus.Value(f"DOCUMENT_STATUS_{name.upper()}"))
        fmt = fmt.strip()
        if "/" in fmt:
            request.mime_type = fmt.lower()
        elif fmt:
            request.extension = fmt.lstrip(".").lower()
        if updated_since is not None:
            if updated_since.tzinfo is None:
                raise HTTPException(422, "updated_since needs a time zone, e.g. 2025-01-31T12:00:00Z")
            try:
                request.updated_since.FromDatetime(updated_since.astimezone(UTC))
            except (OverflowError, ValueError) as exc:
                raise HTTPException(422, f"updated_since is out of range: {exc}") from exc
        try:
            reply = await self.mesh.retriever.ListDocuments(
                request, metadata=user.metadata(), timeout=self.settings.deadlines.retrieve
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        return {
            "documents": [document_json(d) for d in reply.documents],
            "total": reply.total,
            "next_cursor": reply.next_cursor,
        }

    async def update(self, user: UserContext, document_id: uuid.UUID, patch: DocumentPatch) -> dict[str, Any]:
        """Title and/or ACL (the owner only; audited by the catalogue). Every search, chat and graph read decides
        access by the catalogue's ACL columns under RLS, and the semantic cache checks each source's stamp at hit
        time (its entries of the document are dropped here too), so the change applies to the next request."""
        request = retriever_pb2.UpdateDocumentRequest(document_id=str(document_id))
        if patch.title is not None:
            request.title = patch.title
        if patch.acl is not None:
            request.acl.CopyFrom(common_pb2.Acl(**patch.acl.model_dump()))
            request.acl.SetInParent()  # an empty ACL is a change too (private to the owner)
        try:
            reply = await self.mesh.retriever.UpdateDocument(
                request, metadata=user.metadata(), timeout=self.settings.deadlines.retrieve
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        await self._invalidate(reply.document.document_id)
        if patch.title is not None and self.settings.graph_enabled:
            await self._retitle_graph(user, reply.document.document_id, reply.document.title)
        logger.info(
            "document %s updated by %s: %s",
            document_id,
            user.user_id,
            ", ".join(name for name in ("title", "acl") if getattr(patch, name) is not None),
        )
        return document_json(reply.document)

    async def _retitle_graph(self, user: UserContext, document_id: str, title: str) -> None:
        """The graph's topic of the document (its title, services/graph/README.md) follows a new title: the
        document's paragraphs are written to the graph again with it (IngestChunks replaces the document's
        part). The title change stands if this fails: logged and traced, and the graph keeps the old topic until
        the document is ingested again."""
        chunks: list[graph_pb2.GraphChunk] = []
        cursor = ""
        span = trace.get_current_span()
        try:
            for _ in range(RETITLE_PAGES):
                page = await self.mesh.retriever.ListChunks(
                    retriever_pb2.ListChunksRequest(
                        document_id=document_id, level=common_pb2.CHUNK_LEVEL_PARAGRAPH, limit=1000, cursor=cursor
                    ),
                    metadata=user.metadata(),
                    timeout=self.settings.deadlines.retrieve,
                )
                chunks += [
                    graph_pb2.GraphChunk(chunk_id=c.chunk_id, document_id=document_id, text=c.text) for c in page.chunks
                ]
                if not page.next_cursor or page.next_cursor == cursor:
                    break
                cursor = page.next_cursor
            if chunks:  # nothing indexed yet: the ingestion writes the graph with the title it finds then
                await self.mesh.graph.IngestChunks(
                    graph_pb2.IngestChunksRequest(document_id=document_id, title=title, chunks=chunks),
                    metadata=user.metadata(),
                    timeout=self.settings.deadlines.index,
                )
        except aio.AioRpcError as exc:
            logger.warning("graph topic of %s not retitled: %s", document_id, exc.code().name)
            span.add_event("degraded", {attr.RAG_STAGE: "graph retitle", attr.RAG_DEGRADED_REASON: exc.code().name})

    async def audit(self, user: UserContext, document_id: uuid.UUID, *, limit: int, cursor: str) -> dict[str, Any]:
        try:
            reply = await self.mesh.retriever.ListDocumentAudit(
                retriever_pb2.ListDocumentAuditRequest(document_id=str(document_id), limit=limit, cursor=cursor),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve,
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        return {
            "entries": [
                {
                    "audit_id": e.audit_id,
                    "document_id": e.document_id,
                    "actor": e.actor,
                    "time": e.time.ToDatetime(tzinfo=UTC).isoformat() if e.HasField("time") else "",
                    "action": e.action,
                    "before": audit_fields(e.before_json),
                    "after": audit_fields(e.after_json),
                }
                for e in reply.entries
            ],
            "next_cursor": reply.next_cursor,
        }

    async def chunks(
        self, user: UserContext, document_id: uuid.UUID, *, level: str, limit: int, cursor: str
    ) -> dict[str, Any]:
        request = retriever_pb2.ListChunksRequest(document_id=str(document_id), limit=limit, cursor=cursor)
        if level:
            request.level = common_pb2.ChunkLevel.Value(f"CHUNK_LEVEL_{level.upper()}")
        try:
            reply = await self.mesh.retriever.ListChunks(
                request, metadata=user.metadata(), timeout=self.settings.deadlines.retrieve
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        return {
            "chunks": [
                {
                    "chunk_id": c.chunk_id,
                    "level": enum_name(c.level, common_pb2.ChunkLevel, "CHUNK_LEVEL_"),
                    "section_path": list(c.section_path),
                    "page": c.page,
                    "text": c.text,
                    "token_count": c.token_count,
                    "kind": enum_name(c.kind, common_pb2.ChunkKind, "CHUNK_KIND_"),
                    "ordinal": c.ordinal,
                    "parent_id": c.parent_id,
                }
                for c in reply.chunks
            ],
            "next_cursor": reply.next_cursor,
        }

    async def problems(self, user: UserContext, *, limit: int, stuck_after_seconds: float) -> dict[str, Any]:
        """Failed and stuck documents of every owner (the caller is an admin; the catalogue checks it too)."""
        try:
            reply = await self.mesh.retriever.ListProblemDocuments(
                retriever_pb2.ListProblemDocumentsRequest(limit=limit, stuck_after_seconds=stuck_after_seconds),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve,
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        return {
            "documents": [
                {
                    "document": document_json(p.document),
                    "problem": p.problem,
                    "reason": p.reason,
                    "idle_seconds": p.idle_seconds,
                }
                for p in reply.documents
            ]
        }

    async def get(self, user: UserContext, document_id: uuid.UUID) -> common_pb2.Document:
        """The document, if `user` may read it (404 otherwise)."""
        try:
            return await self.mesh.retriever.GetDocument(
                retriever_pb2.GetDocumentRequest(document_id=str(document_id)),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve,
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc

    async def events(self, user: UserContext, document_id: uuid.UUID) -> AsyncIterator[dict[str, str]]:
        """The document's `status` events, the current status first, until a terminal one. Checks access before
        it returns, so that a document the user may not read is a 404 rather than an empty stream."""
        doc = await self.get(user, document_id)
        return self._follow(user, document_id, doc)

    async def _follow(
        self, user: UserContext, document_id: uuid.UUID, doc: common_pb2.Document
    ) -> AsyncIterator[dict[str, str]]:
        current, error = effective_status(doc)
        yield {"event": "status", "data": json.dumps(event(doc.document_id, current, error=error))}
        if current in TERMINAL:
            return
        pubsub = self.redis.pubsub()
        await pubsub.subscribe(channel_name(str(document_id)))
        try:
            deadline = time.monotonic() + EVENTS_SECONDS
            while time.monotonic() < deadline:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=EVENTS_POLL_SECONDS)
                if message is None:
                    latest = await self.get(user, document_id)  # the worker may have finished already
                    status, error = effective_status(latest)
                    if status in TERMINAL:
                        yield {"event": "status", "data": json.dumps(event(str(document_id), status, error=error))}
                        return
                    continue
                data = message["data"].decode() if isinstance(message["data"], bytes) else message["data"]
                yield {"event": "status", "data": data}
                if json.loads(data).get("status") in TERMINAL:
                    return
        finally:
            await pubsub.unsubscribe()
            await pubsub.aclose()

    async def delete(self, user: UserContext, document_id: uuid.UUID) -> dict[str, Any]:
        """Deletes the catalogue row and chunks (owner only), then the graph's data and the stored file; a
        graph that cannot be reached leaves a warning, not an error."""
        try:
            await self.mesh.retriever.DeleteDocument(
                retriever_pb2.DeleteDocumentRequest(document_id=str(document_id)),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve,
            )
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        await self._invalidate(str(document_id))
        warnings = []
        try:
            await self.mesh.graph.DeleteDocument(
                graph_pb2.DeleteDocumentRequest(document_id=str(document_id)),
                metadata=user.metadata(),
                timeout=self.settings.deadlines.graph,
            )
        except aio.AioRpcError as exc:
            logger.warning("graph cleanup of %s failed: %s", document_id, exc.code().name)
            warnings.append(f"graph cleanup pending: {exc.code().name}")
        shutil.rmtree(self.settings.upload_dir / str(document_id), ignore_errors=True)
        return {"document_id": str(document_id), "deleted": True, "warnings": warnings}
