"""Documents made the way uploads are: the catalogue row (retriever), the file in the upload store, and a signed
ingestion task on the queue, all as the connector's identity (`connector:<name>`), so the same parser, embedder,
ACL handling and row-level security apply. It mirrors the gateway's DocumentLifecycle (upload, new version, ACL
change, delete); services never import each other, so the worker has its own few calls.

The engine runs in a Celery pool thread; each call here runs on the worker's one event loop (worker._Loop), where
the mesh channels live, and waits for it.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from grpc import StatusCode, aio

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.identity import UserContext
from ragmesh_common.ingestion import IngestTask
from ragmesh_ingestion.clients import Clients
from ragmesh_ingestion.connectors.base import Fetched
from ragmesh_ingestion.connectors.engine import DocumentGone, SinkError

logger = logging.getLogger(__name__)
T = TypeVar("T")
Runner = Callable[[Callable[[Clients], Awaitable[Any]]], Any]


def _acl(acl: dict[str, Any]) -> common_pb2.Acl:
    message = common_pb2.Acl(
        public=bool(acl.get("public", False)),
        departments=acl.get("departments", []),
        roles=acl.get("roles", []),
        users=acl.get("users", []),
    )
    return message


def _failed(step: str, exc: aio.AioRpcError) -> SinkError:
    if exc.code() == StatusCode.NOT_FOUND:
        return DocumentGone(f"{step}: the document no longer exists")
    return SinkError(f"{step}: {exc.code().name}: {exc.details() or ''}"[:300])


class MeshSink:
    def __init__(
        self,
        run: Runner,
        user: UserContext,
        upload_dir: Path,
        enqueue: Callable[[IngestTask], None],
        mint: Callable[[UserContext, str, int, str], str],
        timeout: float = 10.0,
    ) -> None:
        self._run = run
        self.user = user
        self.upload_dir = upload_dir
        self._enqueue_task = enqueue
        self._mint = mint  # (user, document id, version, file relative to the store) -> ingestion token
        self.timeout = timeout

    def _call(self, step: str, call: Callable[[Clients], Awaitable[T]]) -> T:
        try:
            return self._run(call)  # type: ignore[no-any-return]
        except aio.AioRpcError as exc:
            raise _failed(step, exc) from None

    def _store(self, document_id: str, version: int, filename: str, content: bytes) -> Path:
        folder = self.upload_dir / document_id / f"v{version}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / filename
        path.write_bytes(content)
        return path

    def _enqueue(self, document_id: str, path: Path, item: Fetched, version: int) -> None:
        relative = path.relative_to(self.upload_dir).as_posix()
        task = IngestTask(
            document_id, self._mint(self.user, document_id, version, relative), str(path), item.filename,
            item.mime_type, version,
        )  # fmt: skip
        try:
            self._enqueue_task(task)
        except Exception as exc:  # the broker is down: the document fails (a later run makes it again)
            logger.error("could not enqueue ingestion of %s: %r", document_id, exc)
            self._call(
                "catalogue",
                lambda c: c.retriever.UpdateDocumentStatus(
                    retriever_pb2.UpdateDocumentStatusRequest(
                        document_id=document_id,
                        status=common_pb2.DOCUMENT_STATUS_FAILED,
                        version=version,
                        error="ingestion queue unavailable; the connector tries again at its next run",
                    ),
                    metadata=self.user.metadata(),
                    timeout=self.timeout,
                ),
            )
            raise SinkError("ingestion queue unavailable") from exc

    def create(self, item: Fetched, sha256: str, acl: dict[str, Any]) -> tuple[str, bool]:
        reply = self._call(
            "catalogue",
            lambda c: c.retriever.CreateOrGetDocument(
                retriever_pb2.CreateOrGetDocumentRequest(
                    title=item.title,  # none: the file name's stem until the parser finds the document's title
                    filename=item.filename,
                    mime_type=item.mime_type,
                    acl=_acl(acl),
                    size_bytes=len(item.content),
                    content_sha256=sha256,
                ),
                metadata=self.user.metadata(),
                timeout=self.timeout,
            ),
        )
        doc = reply.document
        if reply.existing:
            return doc.document_id, True
        path = self._store(doc.document_id, doc.version or 1, item.filename, item.content)
        self._enqueue(doc.document_id, path, item, 0)
        return doc.document_id, False

    def new_version(self, document_id: str, item: Fetched, sha256: str) -> None:
        reply = self._call(
            "catalogue",
            lambda c: c.retriever.BeginNewVersion(
                retriever_pb2.BeginNewVersionRequest(
                    document_id=document_id,
                    filename=item.filename,
                    mime_type=item.mime_type,
                    size_bytes=len(item.content),
                    content_sha256=sha256,
                ),
                metadata=self.user.metadata(),
                timeout=self.timeout,
            ),
        )
        if reply.unchanged:
            return
        path = self._store(document_id, reply.version, item.filename, item.content)
        self._enqueue(document_id, path, item, reply.version)
        keep = {reply.document.version, reply.version}
        for folder in (self.upload_dir / document_id).glob("v*"):  # versions that can no longer be ingested
            if folder.is_dir() and folder.name[1:].isdigit() and int(folder.name[1:]) not in keep:
                shutil.rmtree(folder, ignore_errors=True)

    def set_acl(self, document_id: str, acl: dict[str, Any]) -> None:
        request = retriever_pb2.UpdateDocumentRequest(document_id=document_id)
        request.acl.CopyFrom(_acl(acl))
        request.acl.SetInParent()  # an empty ACL is a change too (private to the connector)
        self._call(
            "catalogue",
            lambda c: c.retriever.UpdateDocument(request, metadata=self.user.metadata(), timeout=self.timeout),
        )

    def delete(self, document_id: str) -> None:
        with contextlib.suppress(DocumentGone):  # deleted already: what the run wanted
            self._call(
                "catalogue",
                lambda c: c.retriever.DeleteDocument(
                    retriever_pb2.DeleteDocumentRequest(document_id=document_id),
                    metadata=self.user.metadata(),
                    timeout=self.timeout,
                ),
            )
        try:
            self._call(
                "graph",
                lambda c: c.graph.DeleteDocument(
                    graph_pb2.DeleteDocumentRequest(document_id=document_id),
                    metadata=self.user.metadata(),
                    timeout=self.timeout,
                ),
            )
        except SinkError as exc:  # the catalogue row is gone, so no reader reaches the graph's rows any more
            logger.warning("graph cleanup of %s failed: %s", document_id, exc)
        shutil.rmtree(self.upload_dir / document_id, ignore_errors=True)
