"""The app's structure: one Runtime per app (the mesh built once, in the lifespan), no module-level mutable state,
and the document lifecycle (store → enqueue, or a failed status when the queue is down) in one owner."""

from __future__ import annotations

import ast
import hashlib
import importlib
import io
import json
import os
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fastapi import HTTPException, UploadFile
from fastapi.testclient import TestClient
from starlette.datastructures import Headers

from ragmesh.common.v1 import common_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_cli.tokens import mint
from ragmesh_common.context import UserContext
from ragmesh_common.ingestion import TASK_NAME
from ragmesh_common.testing import local_signer
from ragmesh_common.tokens import PUBLIC_KEY_ENV, load_public_keys, verify_ingest_token
from ragmesh_gateway import runtime as runtime_module
from ragmesh_gateway.app import create_app
from ragmesh_gateway.config import Settings
from ragmesh_gateway.documents import DocumentLifecycle
from ragmesh_gateway.runtime import Runtime

SECRET = "test-secret-which-is-long-enough-for-hs256"
DOC_ID = "7b0e3f5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
HTTP_LAYER = (
    "app",
    "deps",
    "runtime",
    "documents",
    "mesh",
    "routers.chat",
    "routers.documents",
    "routers.admin",
    "routers.health",
)


def settings(tmp_path: Path) -> Settings:
    return Settings(
        host="127.0.0.1",
        port=0,
        parser_addr="x:1",
        embedder_addr="x:1",
        retriever_addr="x:1",
        reranker_addr="x:1",
        graph_addr="x:1",
        answerer_addr="x:1",
        redis_url="redis://127.0.0.1:1/0",
        traces_dsn=None,
        upload_dir=tmp_path / "uploads",
        jwt_secret=SECRET,
        jwt_issuer=None,
        jwt_audience=None,
        jwks_url=None,
        rate_limit_per_minute=0,
    )


def document(status: int = common_pb2.DOCUMENT_STATUS_QUEUED) -> common_pb2.Document:
    return common_pb2.Document(
        document_id=DOC_ID, title="notes", filename="notes.md", status=status, acl=common_pb2.Acl(departments=["eng"])
    )


class Stub:
    """Records each call and answers it with a fixed reply."""

    def __init__(self, calls: list[tuple[str, Any]], **replies: Any) -> None:
        self.calls, self.replies = calls, replies

    def __getattr__(self, name: str) -> Any:
        async def call(request: Any, **_: Any) -> Any:
            self.calls.append((name, request))
            return self.replies[name]

        return call


class CountingMesh:
    """Stands in for Mesh; counts how many the app builds."""

    built: ClassVar[list[CountingMesh]] = []

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closed = False
        self.parser = Stub(self.calls, ListFormats=parser_pb2.ListFormatsResponse(extensions=[".md"]))
        self.retriever = Stub(
            self.calls,
            ListDocuments=retriever_pb2.ListDocumentsResponse(documents=[document()], total=1),
            GetDocument=document(),
            UpdateDocumentStatus=document(),
            CreateOrGetDocument=retriever_pb2.CreateOrGetDocumentResponse(document=document()),
        )

    @classmethod
    def from_settings(cls, _: Settings) -> CountingMesh:
        mesh = cls()
        cls.built.append(mesh)
        return mesh

    async def health(self, timeout: float = 2.0) -> dict[str, str]:
        return {"retriever": "SERVING", "answerer": "SERVING"}

    async def close(self) -> None:
        self.closed = True


def test_the_mesh_is_built_once_per_app_and_closed_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CountingMesh, "built", [])
    monkeypatch.setattr(runtime_module, "Mesh", CountingMesh)
    token = mint(SECRET, "alice", "eng", ["employee"])
    runtimes = []
    for _ in range(2):
        app = create_app(settings(tmp_path))
        with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
            assert client.get("/readyz").status_code == 200
            for _ in range(3):
                assert client.get("/api/v1/documents").json()["total"] == 1
            assert client.get(f"/api/v1/documents/{DOC_ID}").json()["status"] == "queued"
            assert isinstance(app.state.runtime, Runtime)
            runtimes.append(app.state.runtime)
    assert len(CountingMesh.built) == 2, "one Mesh per app, however many requests"
    assert runtimes[0] is not runtimes[1] and runtimes[0].mesh is CountingMesh.built[0]
    assert all(mesh.closed for mesh in CountingMesh.built)
    assert [name for name, _ in CountingMesh.built[0].calls] == ["ListDocuments"] * 3 + ["GetDocument"]


@pytest.mark.parametrize("name", HTTP_LAYER)
def test_no_module_level_mutable_state(name: str) -> None:
    """Everything an app holds lives on its Runtime: module globals are constants, functions, classes and routers."""
    module = importlib.import_module(f"ragmesh_gateway.{name}")
    tree = ast.parse(Path(module.__file__ or "").read_text())
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    stateful = (
        dict,
        list,
        set,
        bytearray,
        Runtime,
        DocumentLifecycle,
        runtime_module.Redis,
        runtime_module.Orchestrator,
        runtime_module.TraceStore,
        runtime_module.RateLimiter,
    )
    found = {key: type(getattr(module, key)).__name__ for key in assigned if isinstance(getattr(module, key), stateful)}
    assert not found, f"ragmesh_gateway.{name} holds module-level state: {found}"
    assert isinstance(getattr(module, "SSE_HEADERS", types.MappingProxyType({})), types.MappingProxyType)


# ---------- the document lifecycle ----------
class FakeCelery:
    def __init__(self, error: Exception | None = None) -> None:
        self.sent: list[tuple[str, list[Any]]] = []
        self.error = error

    def send_task(self, name: str, args: list[Any], **_: Any) -> None:
        if self.error:
            raise self.error
        self.sent.append((name, args))


def lifecycle(tmp_path: Path, celery: FakeCelery) -> tuple[DocumentLifecycle, CountingMesh]:
    mesh = CountingMesh()
    return DocumentLifecycle(settings(tmp_path), mesh, None, celery, local_signer()), mesh


def notes() -> UploadFile:
    return UploadFile(
        io.BytesIO(b"# Notes\n\nhello"),
        filename="notes.md",
        headers=Headers({"content-type": "application/octet-stream"}),
    )


ALICE = UserContext(user_id="alice", department="eng", roles=("employee",), token="t")


async def test_upload_is_catalogued_stored_and_queued_for_the_uploader(tmp_path: Path) -> None:
    celery = FakeCelery()
    documents, mesh = lifecycle(tmp_path, celery)
    reply = await documents.upload(ALICE, notes(), title="", acl="")
    assert (reply["status"], reply["events_url"]) == ("queued", f"/api/v1/documents/{DOC_ID}/events")
    [(_, created)] = [c for c in mesh.calls if c[0] == "CreateOrGetDocument"]
    # no title given: the catalogue titles it by the file name until the parser finds one (title_given stays false)
    assert (created.title, created.mime_type, created.size_bytes) == ("", "text/markdown", 14)
    assert created.content_sha256 == hashlib.sha256(b"# Notes\n\nhello").hexdigest()
    [(name, args)] = celery.sent
    stored = tmp_path / "uploads" / DOC_ID / "v1" / "notes.md"
    assert name == TASK_NAME and args[0] == DOC_ID and args[2:] == [str(stored), "notes.md", "text/markdown", 0]
    assert stored.read_bytes() == b"# Notes\n\nhello"
    # the task's one authority: a grant the worker verifies with the public key, for this user, document and file
    grant = verify_ingest_token(args[1], load_public_keys(os.environ[PUBLIC_KEY_ENV]))
    assert grant.user == UserContext(user_id="alice", department="eng", roles=("employee",))
    assert (grant.document_id, grant.version, grant.file) == (DOC_ID, 0, f"{DOC_ID}/v1/notes.md")


async def test_a_down_queue_fails_the_document_and_says_so(tmp_path: Path) -> None:
    documents, mesh = lifecycle(tmp_path, FakeCelery(ConnectionError("redis down")))
    with pytest.raises(HTTPException) as raised:
        await documents.upload(ALICE, notes(), title="", acl=json.dumps({"departments": ["eng"]}))
    assert raised.value.status_code == 503
    assert raised.value.detail == "ingestion queue unavailable; the document was not queued"
    [(_, update)] = [c for c in mesh.calls if c[0] == "UpdateDocumentStatus"]
    assert update.status == common_pb2.DOCUMENT_STATUS_FAILED and "upload again" in update.error
    assert (tmp_path / "uploads" / DOC_ID / "v1" / "notes.md").exists()  # kept, as the log says


async def test_unsupported_format_lists_the_parsers_formats(tmp_path: Path) -> None:
    documents, _ = lifecycle(tmp_path, FakeCelery())
    with pytest.raises(HTTPException) as raised:
        await documents.upload(ALICE, UploadFile(io.BytesIO(b"x"), filename="a.exe"), title="", acl="")
    assert (raised.value.status_code, raised.value.detail) == (415, "unsupported file type .exe; accepted: .md")
