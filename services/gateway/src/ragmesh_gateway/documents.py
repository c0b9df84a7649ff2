"""A document's life as the gateway runs it: upload (checked, catalogued, stored, queued), list and read,
progress events until ready or failed, and delete. The routes in routers/documents.py only call this.

The catalogue (the retriever) holds each document's status; the ingestion worker (services/ingestion) moves it
along and publishes every step on Redis. Both name a status by `status_name` of the proto enum
(ragmesh_ingestion.tasks, the contract the gateway shares with the worker).
"""
from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC
from pathlib import Path
from typing import Any

from celery import Celery
from fastapi import HTTPException, UploadFile
from google.protobuf.json_format import MessageToDict
from grpc import aio
from pydantic import ValidationError
from redis.asyncio import Redis

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.context import UserContext
from ragmesh_gateway.config import Settings
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.models import MAX_FILENAME_CHARS, AclIn
from ragmesh_gateway.validation import check_upload_content, text_problem
from ragmesh_ingestion.tasks import TERMINAL, channel_name, event, send_ingest, status_name

logger = logging.getLogger(__name__)

FALLBACK_FORMATS = frozenset({".md", ".markdown", ".html", ".htm", ".docx", ".pptx", ".xlsx", ".csv", ".pdf", ".txt"})
GENERIC_MIME_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
EVENTS_SECONDS = 900       # an events stream ends after this even if the document is still ingesting
EVENTS_POLL_SECONDS = 5.0  # without a message for this long, the catalogue is asked (the worker may be done)


def document_json(doc: common_pb2.Document) -> dict[str, Any]:
    data = MessageToDict(doc, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    data["status"] = status_name(doc.status)
    data["size_bytes"] = doc.size_bytes  # int64 would otherwise be a JSON string
    for name in ("created_at", "updated_at"):  # ISO 8601 as datetime.isoformat() writes it, "" when unset
        stamp = getattr(doc, name)
        data[name] = stamp.ToDatetime(tzinfo=UTC).isoformat() if doc.HasField(name) else ""
    return data


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
    failed = StepFailed.from_rpc(step, exc)
    return HTTPException(failed.http_status, failed.message)


class DocumentLifecycle:
    """The one owner of create → store → enqueue → status and events → delete. Errors are HTTPExceptions with
    the message the client sees."""

    def __init__(self, settings: Settings, mesh: Mesh, redis: Redis, celery: Celery) -> None:
        self.settings = settings
        self.mesh = mesh
        self.redis = redis
        self.celery = celery
        self._formats: frozenset[str] | None = None  # the parser's, asked once it answers

    async def accepted_formats(self, user: UserContext) -> frozenset[str]:
        if self._formats is None:
            try:
                reply = await self.mesh.parser.ListFormats(parser_pb2.ListFormatsRequest(),
                                                           metadata=user.metadata(), timeout=5)
            except aio.AioRpcError:
                logger.warning("parser unreachable for ListFormats; using the built-in list")
                return FALLBACK_FORMATS
            self._formats = frozenset(e if e.startswith(".") else f".{e}" for e in reply.extensions)
        return self._formats

    async def upload(self, user: UserContext, file: UploadFile, *, title: str, acl: str) -> dict[str, Any]:
        """Checks the upload, creates the catalogue row (`queued`), stores the file and queues its ingestion."""
        settings = self.settings
        raw_name = file.filename or ""
        problem = text_problem(raw_name) or (f"is longer than {MAX_FILENAME_CHARS} characters"
                                             if len(raw_name) > MAX_FILENAME_CHARS else None)
        if problem:
            raise HTTPException(400, f"file name {problem}")
        filename = safe_filename(raw_name)
        if Path(filename).suffix.lower() not in await self.accepted_formats(user):
            raise HTTPException(415, f"unsupported file type {Path(filename).suffix or '(none)'}; accepted: "
                                     f"{', '.join(sorted(await self.accepted_formats(user)))}")
        try:
            acl_in = AclIn.model_validate_json(acl) if acl.strip() else AclIn()
        except ValidationError as exc:
            first = exc.errors(include_input=False)[0]
            where = ".".join(str(part) for part in first["loc"])
            raise HTTPException(400, f"acl must be JSON like {{\"departments\": [\"eng\"]}}: "
                                     f"{where + ': ' if where else ''}{first['msg']}") from exc
        content = await file.read(settings.max_upload_bytes + 1)
        if not content:
            raise HTTPException(400, f"{filename} is empty")
        if len(content) > settings.max_upload_bytes:
            raise HTTPException(413, f"{filename} is larger than {settings.max_upload_bytes} bytes")
        mime_type = upload_mime_type(filename, file.content_type)
        check_upload_content(filename, content, mime_type)
        try:
            doc = await self.mesh.retriever.CreateDocument(retriever_pb2.CreateDocumentRequest(
                title=title or Path(filename).stem, filename=filename, mime_type=mime_type,
                acl=common_pb2.Acl(**acl_in.model_dump()), size_bytes=len(content)),
                metadata=user.metadata(), timeout=settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        path = await self._store(doc.document_id, filename, content)
        await self._enqueue(user, doc.document_id, path, filename, mime_type)
        return {**document_json(doc), "events_url": f"/api/v1/documents/{doc.document_id}/events"}

    async def _store(self, document_id: str, filename: str, content: bytes) -> Path:
        folder = self.settings.upload_dir / document_id
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / filename
        await asyncio.to_thread(path.write_bytes, content)
        return path

    async def _enqueue(self, user: UserContext, document_id: str, path: Path, filename: str, mime_type: str) -> None:
        try:
            send_ingest(self.celery, document_id, user, str(path), filename, mime_type)
        except Exception as exc:  # noqa: BLE001 - the broker is down: say so, keep the file
            logger.error("could not enqueue ingestion of %s: %s", document_id, exc)
            try:
                await self.mesh.retriever.UpdateDocumentStatus(retriever_pb2.UpdateDocumentStatusRequest(
                    document_id=document_id, status=common_pb2.DOCUMENT_STATUS_FAILED,
                    error="ingestion queue unavailable; upload again later"), metadata=user.metadata(), timeout=5)
            except aio.AioRpcError as status_exc:
                logger.error("could not mark %s failed: %s", document_id, status_exc.code().name)
            raise HTTPException(503, "ingestion queue unavailable; the document was not queued") from exc

    async def list_readable(self, user: UserContext, *, limit: int, offset: int) -> dict[str, Any]:
        try:
            reply = await self.mesh.retriever.ListDocuments(
                retriever_pb2.ListDocumentsRequest(limit=limit, offset=offset), metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        return {"documents": [document_json(d) for d in reply.documents], "total": reply.total}

    async def get(self, user: UserContext, document_id: uuid.UUID) -> common_pb2.Document:
        """The document, if `user` may read it (404 otherwise)."""
        try:
            return await self.mesh.retriever.GetDocument(
                retriever_pb2.GetDocumentRequest(document_id=str(document_id)), metadata=user.metadata(),
                timeout=self.settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc

    async def events(self, user: UserContext, document_id: uuid.UUID) -> AsyncIterator[dict[str, str]]:
        """The document's `status` events, the current status first, until a terminal one. Checks access before
        it returns, so that a document the user may not read is a 404 rather than an empty stream."""
        doc = await self.get(user, document_id)
        return self._follow(user, document_id, doc)

    async def _follow(self, user: UserContext, document_id: uuid.UUID,
                      doc: common_pb2.Document) -> AsyncIterator[dict[str, str]]:
        current = status_name(doc.status)
        yield {"event": "status", "data": json.dumps(event(doc.document_id, current, error=doc.error))}
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
                    status = status_name(latest.status)
                    if status in TERMINAL:
                        yield {"event": "status", "data": json.dumps(event(str(document_id), status,
                                                                           error=latest.error))}
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
            await self.mesh.retriever.DeleteDocument(retriever_pb2.DeleteDocumentRequest(document_id=str(document_id)),
                                                     metadata=user.metadata(), timeout=self.settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        warnings = []
        try:
            await self.mesh.graph.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=str(document_id)),
                                                 metadata=user.metadata(), timeout=self.settings.deadlines.graph)
        except aio.AioRpcError as exc:
            logger.warning("graph cleanup of %s failed: %s", document_id, exc.code().name)
            warnings.append(f"graph cleanup pending: {exc.code().name}")
        shutil.rmtree(self.settings.upload_dir / str(document_id), ignore_errors=True)
        return {"document_id": str(document_id), "deleted": True, "warnings": warnings}
