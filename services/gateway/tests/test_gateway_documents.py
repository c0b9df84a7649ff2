"""The document API beyond upload and delete, over a fake catalogue: dedup, versions, re-ingest, PATCH, audit,
chunks, list filters and the admin problems view (the HTTP status and what reaches the retriever)."""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient
from grpc import aio

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_cli.tokens import mint
from ragmesh_common.formats import accepted_extensions
from ragmesh_gateway.app import create_app

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' settings (tests run in importlib mode)
from test_gateway_bad_input import SECRET, settings

DOC_ID = "7b0e3f5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
CONTENT = b"# Notes\n\nhello"


def rpc_error(code: grpc.StatusCode, details: str) -> aio.AioRpcError:
    return aio.AioRpcError(code, aio.Metadata(), aio.Metadata(), details=details)


def document(**fields: Any) -> common_pb2.Document:
    base = dict(
        document_id=DOC_ID,
        title="T",
        filename="notes.md",
        mime_type="text/markdown",
        owner_user="alice",
        owner_department="eng",
        acl=common_pb2.Acl(departments=["eng"]),
        status=common_pb2.DOCUMENT_STATUS_READY,
        chunk_count=1,
        size_bytes=len(CONTENT),
        version=1,
        content_sha256=hashlib.sha256(CONTENT).hexdigest(),
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
        updated_at=datetime(2025, 1, 1, tzinfo=UTC),
    )
    return common_pb2.Document(**{**base, **fields})


class Stub:
    """Records each call; answers with the fixed reply (or raises it)."""

    def __init__(self, calls: list[tuple[str, Any]], **replies: Any) -> None:
        self.calls, self.replies = calls, replies

    def __getattr__(self, name: str) -> Any:
        async def call(request: Any, **_: Any) -> Any:
            self.calls.append((name, request))
            reply = self.replies[name]
            if isinstance(reply, Exception):
                raise reply
            return reply

        return call


class FakeMesh:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.parser = Stub(
            self.calls, ListFormats=parser_pb2.ListFormatsResponse(extensions=[".md", ".txt"], parser_version=3)
        )
        self.retriever = Stub(
            self.calls,
            GetDocument=document(),
            UpdateDocumentStatus=document(),
            CreateOrGetDocument=retriever_pb2.CreateOrGetDocumentResponse(
                document=document(status=common_pb2.DOCUMENT_STATUS_QUEUED)
            ),
            BeginNewVersion=retriever_pb2.BeginNewVersionResponse(
                document=document(pending_version=2, pending_status=common_pb2.DOCUMENT_STATUS_QUEUED), version=2
            ),
            UpdateDocument=retriever_pb2.UpdateDocumentResponse(document=document(acl=common_pb2.Acl(users=["bob"]))),
            ListDocumentAudit=retriever_pb2.ListDocumentAuditResponse(
                entries=[
                    retriever_pb2.DocumentAuditEntry(
                        audit_id="a1",
                        document_id=DOC_ID,
                        actor="alice",
                        time=datetime(2025, 1, 2, tzinfo=UTC),
                        action="update",
                        before_json='{"acl": {"departments": ["eng"]}}',
                        after_json='{"acl": {"users": ["bob"]}}',
                    )
                ]
            ),
            ListChunks=retriever_pb2.ListChunksResponse(
                chunks=[
                    retriever_pb2.ListedChunk(
                        chunk_id="c1",
                        level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
                        section_path=["Notes"],
                        page=1,
                        text="hello",
                        token_count=2,
                        kind=common_pb2.CHUNK_KIND_PARAGRAPH,
                    )
                ],
                next_cursor="n1",
            ),
            ListDocuments=retriever_pb2.ListDocumentsResponse(documents=[document()], total=3, next_cursor="n2"),
            ListProblemDocuments=retriever_pb2.ListProblemDocumentsResponse(
                documents=[
                    retriever_pb2.ProblemDocument(
                        document=document(status=common_pb2.DOCUMENT_STATUS_FAILED, error="no extractable text"),
                        problem="failed",
                        reason="no extractable text",
                        idle_seconds=12.5,
                    )
                ]
            ),
            CheckDocumentAccess=retriever_pb2.CheckDocumentAccessResponse(readable_ids=[DOC_ID]),
        )
        self.graph = Stub(self.calls, IngestChunks=graph_pb2.IngestChunksResponse(entities=1))
        self.answerer = Stub(self.calls)
        self.reranker = Stub(self.calls)
        self.embedder = Stub(self.calls)

    def requests(self, name: str) -> list[Any]:
        return [request for called, request in self.calls if called == name]

    async def health(self) -> dict[str, str]:
        return {"retriever": "SERVING"}

    async def close(self) -> None:
        pass


class FakeCelery:
    def __init__(self) -> None:
        self.sent: list[list[Any]] = []

    def send_task(self, name: str, args: list[Any], **_: Any) -> None:
        self.sent.append(args)


@pytest.fixture
def mesh() -> FakeMesh:
    return FakeMesh()


@pytest.fixture
def celery() -> FakeCelery:
    return FakeCelery()


def make_client(tmp_path: Path, mesh: FakeMesh, celery: FakeCelery, roles: list[str]) -> Iterator[TestClient]:
    app = create_app(settings(tmp_path), mesh=mesh)
    token = mint(SECRET, "alice", "eng", roles)
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {token}"}) as client:
        app.state.runtime.documents.celery = celery
        yield client


@pytest.fixture
def client(tmp_path: Path, mesh: FakeMesh, celery: FakeCelery) -> Iterator[TestClient]:
    yield from make_client(tmp_path, mesh, celery, ["employee"])


def upload(client: TestClient, path: str = "/api/v1/documents", method: str = "POST") -> Any:
    return client.request(method, path, files={"file": ("notes.md", CONTENT, "text/markdown")})


def test_a_new_upload_is_202_with_its_hash(
    client: TestClient, mesh: FakeMesh, celery: FakeCelery, tmp_path: Path
) -> None:
    reply = upload(client)
    assert reply.status_code == 202 and reply.json()["duplicate"] is False
    [request] = mesh.requests("CreateOrGetDocument")
    assert request.content_sha256 == hashlib.sha256(CONTENT).hexdigest()
    assert celery.sent and (tmp_path / "uploads" / DOC_ID / "v1" / "notes.md").read_bytes() == CONTENT


def test_the_same_bytes_again_are_200_duplicate_and_nothing_is_queued(
    client: TestClient, mesh: FakeMesh, celery: FakeCelery, tmp_path: Path
) -> None:
    mesh.retriever.replies["CreateOrGetDocument"] = retriever_pb2.CreateOrGetDocumentResponse(
        document=document(), existing=True
    )
    reply = upload(client)
    assert reply.status_code == 200
    body = reply.json()
    assert (body["duplicate"], body["document_id"], body["status"], body["version"]) == (True, DOC_ID, "ready", 1)
    assert not celery.sent and not (tmp_path / "uploads" / DOC_ID).exists()


def test_new_content_is_a_version_stored_apart_and_queued_with_its_number(
    client: TestClient, mesh: FakeMesh, celery: FakeCelery, tmp_path: Path
) -> None:
    reply = upload(client, f"/api/v1/documents/{DOC_ID}/content", "PUT")
    assert reply.status_code == 202
    body = reply.json()
    assert (
        body["unchanged"],
        body["ingesting_version"],
        body["pending_version"],
        body["pending_status"],
        body["status"],
    ) == (False, 2, 2, "queued", "ready")
    [request] = mesh.requests("BeginNewVersion")
    assert not request.reingest and request.content_sha256 == hashlib.sha256(CONTENT).hexdigest()
    [args] = celery.sent
    assert args[2] == str(tmp_path / "uploads" / DOC_ID / "v2" / "notes.md") and args[-1] == 2


def test_unchanged_content_is_200_and_queues_nothing(client: TestClient, mesh: FakeMesh, celery: FakeCelery) -> None:
    mesh.retriever.replies["BeginNewVersion"] = retriever_pb2.BeginNewVersionResponse(
        document=document(), version=1, unchanged=True
    )
    reply = upload(client, f"/api/v1/documents/{DOC_ID}/content", "PUT")
    assert reply.status_code == 200 and reply.json()["unchanged"] is True and "nothing" in reply.json()["note"]
    assert not celery.sent


def test_a_non_owner_new_version_is_403(client: TestClient, mesh: FakeMesh, celery: FakeCelery) -> None:
    mesh.retriever.replies["BeginNewVersion"] = rpc_error(grpc.StatusCode.PERMISSION_DENIED, "only the owner")
    assert upload(client, f"/api/v1/documents/{DOC_ID}/content", "PUT").status_code == 403
    assert not celery.sent


def test_reingest_queues_the_stored_file_of_the_visible_version(
    client: TestClient, mesh: FakeMesh, celery: FakeCelery, tmp_path: Path
) -> None:
    stored = tmp_path / "uploads" / DOC_ID / "v1" / "notes.md"
    stored.parent.mkdir(parents=True)
    stored.write_bytes(CONTENT)
    mesh.retriever.replies["BeginNewVersion"] = retriever_pb2.BeginNewVersionResponse(
        document=document(pending_version=1, pending_status=common_pb2.DOCUMENT_STATUS_QUEUED), version=1
    )
    reply = client.post(f"/api/v1/documents/{DOC_ID}/reingest")
    assert reply.status_code == 202 and reply.json()["ingesting_version"] == 1
    assert mesh.requests("BeginNewVersion")[0].reingest
    assert celery.sent[0][2] == str(stored) and celery.sent[0][-1] == 1


def test_reingest_without_the_stored_file_is_409_for_the_owner_403_for_others(
    client: TestClient, mesh: FakeMesh
) -> None:
    mesh.retriever.replies["CheckDocumentAccess"] = retriever_pb2.CheckDocumentAccessResponse(owned_ids=[DOC_ID])
    assert client.post(f"/api/v1/documents/{DOC_ID}/reingest").status_code == 409
    mesh.retriever.replies["CheckDocumentAccess"] = retriever_pb2.CheckDocumentAccessResponse(readable_ids=[DOC_ID])
    assert client.post(f"/api/v1/documents/{DOC_ID}/reingest").status_code == 403
    assert not mesh.requests("BeginNewVersion")


def test_patch_sends_only_what_is_given(client: TestClient, mesh: FakeMesh) -> None:
    reply = client.patch(f"/api/v1/documents/{DOC_ID}", json={"acl": {"users": ["bob"]}})
    assert reply.status_code == 200 and reply.json()["acl"]["users"] == ["bob"]
    [request] = mesh.requests("UpdateDocument")
    assert request.HasField("acl") and not request.HasField("title") and list(request.acl.users) == ["bob"]
    client.patch(f"/api/v1/documents/{DOC_ID}", json={"acl": {}})  # private to the owner: still a change
    assert mesh.requests("UpdateDocument")[1].HasField("acl")
    client.patch(f"/api/v1/documents/{DOC_ID}", json={"title": "New"})
    assert mesh.requests("UpdateDocument")[2].title == "New" and not mesh.requests("UpdateDocument")[2].HasField("acl")


def test_a_new_title_rewrites_the_documents_graph_and_an_acl_change_does_not(
    client: TestClient, mesh: FakeMesh
) -> None:
    mesh.retriever.replies["UpdateDocument"] = retriever_pb2.UpdateDocumentResponse(document=document(title="New"))
    mesh.retriever.replies["ListChunks"] = retriever_pb2.ListChunksResponse(
        chunks=[retriever_pb2.ListedChunk(chunk_id="c1", level=common_pb2.CHUNK_LEVEL_PARAGRAPH, text="hello")]
    )
    assert client.patch(f"/api/v1/documents/{DOC_ID}", json={"acl": {"users": ["bob"]}}).status_code == 200
    assert not mesh.requests("IngestChunks")
    assert client.patch(f"/api/v1/documents/{DOC_ID}", json={"title": "New"}).status_code == 200
    [listed] = mesh.requests("ListChunks")
    assert listed.level == common_pb2.CHUNK_LEVEL_PARAGRAPH
    [written] = mesh.requests("IngestChunks")
    assert (written.document_id, written.title) == (DOC_ID, "New")
    assert [(c.chunk_id, c.text) for c in written.chunks] == [("c1", "hello")]


def test_a_graph_that_cannot_take_the_new_title_leaves_the_title_changed(
    client: TestClient, mesh: FakeMesh, caplog: pytest.LogCaptureFixture
) -> None:
    mesh.graph.replies["IngestChunks"] = rpc_error(grpc.StatusCode.UNAVAILABLE, "down")
    with caplog.at_level(logging.WARNING):
        reply = client.patch(f"/api/v1/documents/{DOC_ID}", json={"title": "New"})
    assert reply.status_code == 200
    assert "not retitled: UNAVAILABLE" in caplog.text
    # a cursor that does not move ends the read (the fake's ListChunks always answers "n1")
    assert len(mesh.requests("ListChunks")) == 2


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"title": None},
        {"acl": {"department": ["eng"]}},
        {"owner": "bob"},
        {"title": ""},
        {"acl": {"users": ["bad name!"]}},
        {"acl": []},
    ],
)
def test_bad_patches_are_422_and_reach_nothing(client: TestClient, mesh: FakeMesh, body: dict[str, Any]) -> None:
    assert client.patch(f"/api/v1/documents/{DOC_ID}", json=body).status_code == 422
    assert not mesh.requests("UpdateDocument")


@pytest.mark.parametrize(
    ("code", "status"), [(grpc.StatusCode.PERMISSION_DENIED, 403), (grpc.StatusCode.NOT_FOUND, 404)]
)
def test_patch_by_a_non_owner(client: TestClient, mesh: FakeMesh, code: grpc.StatusCode, status: int) -> None:
    mesh.retriever.replies["UpdateDocument"] = rpc_error(code, "no")
    assert client.patch(f"/api/v1/documents/{DOC_ID}", json={"title": "x"}).status_code == status


def test_audit_entries_have_their_changes_as_objects(client: TestClient) -> None:
    [entry] = client.get(f"/api/v1/documents/{DOC_ID}/audit").json()["entries"]
    assert (entry["actor"], entry["action"], entry["after"]) == ("alice", "update", {"acl": {"users": ["bob"]}})
    assert entry["time"].startswith("2025-01-02")


def test_chunks_name_level_and_kind_in_lower_case(client: TestClient, mesh: FakeMesh) -> None:
    body = client.get(f"/api/v1/documents/{DOC_ID}/chunks?level=paragraph&limit=5&cursor=c").json()
    assert body["next_cursor"] == "n1"
    assert (
        body["chunks"][0].items()
        >= {
            "chunk_id": "c1",
            "level": "paragraph",
            "kind": "paragraph",
            "page": 1,
            "section_path": ["Notes"],
            "token_count": 2,
            "text": "hello",
        }.items()
    )
    [request] = mesh.requests("ListChunks")
    assert (request.level, request.limit, request.cursor) == (common_pb2.CHUNK_LEVEL_PARAGRAPH, 5, "c")
    assert client.get(f"/api/v1/documents/{DOC_ID}/chunks?level=page").status_code == 422


def test_list_filters_reach_the_catalogue(client: TestClient, mesh: FakeMesh) -> None:
    reply = client.get(
        "/api/v1/documents?status=ready&status=failed&owner=bob&format=.PDF"
        "&updated_since=2025-01-01T00:00:00%2B02:00&cursor=abc&limit=2"
    )
    assert reply.status_code == 200 and reply.json()["next_cursor"] == "n2"
    [request] = mesh.requests("ListDocuments")
    assert list(request.statuses) == [common_pb2.DOCUMENT_STATUS_READY, common_pb2.DOCUMENT_STATUS_FAILED]
    assert (request.owner_user, request.extension, request.mime_type, request.cursor) == ("bob", "pdf", "", "abc")
    assert request.updated_since.ToDatetime(tzinfo=UTC) == datetime(2024, 12, 31, 22, tzinfo=UTC)
    client.get("/api/v1/documents?format=text/")
    assert mesh.requests("ListDocuments")[1].mime_type == "text/"


def test_lookup_asks_the_catalogue_for_the_hashes_as_the_caller(client: TestClient, mesh: FakeMesh) -> None:
    """POST /documents/lookup: the hashes (lower-cased) go to the catalogue's List under the caller's identity
    (row-level security there decides what matches); `mine` narrows it to the caller's own."""
    sha = hashlib.sha256(CONTENT).hexdigest()
    reply = client.post("/api/v1/documents/lookup", json={"content_sha256": [sha.upper()]})
    assert reply.status_code == 200 and [d["document_id"] for d in reply.json()["documents"]] == [DOC_ID]
    client.post("/api/v1/documents/lookup", json={"content_sha256": [sha, "0" * 64], "mine": True})
    first, second = mesh.requests("ListDocuments")
    assert (list(first.content_sha256), first.owner_user, first.limit) == ([sha], "", 1000)
    assert (list(second.content_sha256), second.owner_user) == ([sha, "0" * 64], "alice")


@pytest.mark.parametrize(
    ("lookup", "status"),
    [
        ({"content_sha256": []}, 422),
        ({"content_sha256": ["abc"]}, 422),
        ({"content_sha256": ["g" * 64]}, 422),
        ({"content_sha256": ["a" * 64] * 1001}, 413),  # over this app's body limit (the e2e test meets the 1,000)
        ({"content_sha256": ["a" * 64], "owner": "bob"}, 422),
        ({"hashes": ["a" * 64]}, 422),
    ],
)
def test_bad_lookups_are_refused(client: TestClient, mesh: FakeMesh, lookup: dict[str, Any], status: int) -> None:
    assert client.post("/api/v1/documents/lookup", json=lookup).status_code == status
    assert not mesh.requests("ListDocuments")


def test_an_unavailable_catalogue_is_503_with_retry_after_and_a_refusal_is_not(
    client: TestClient, mesh: FakeMesh, celery: FakeCelery
) -> None:
    """A client may wait and upload again after a hop that is down or slow, never after its own mistake."""
    mesh.retriever.replies["CreateOrGetDocument"] = rpc_error(grpc.StatusCode.UNAVAILABLE, "ipv4:10.0.0.1:50053")
    busy = upload(client)
    assert busy.status_code == 503 and busy.headers["retry-after"] == "2" and "10.0.0.1" not in busy.text
    mesh.retriever.replies["CreateOrGetDocument"] = rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "slow")
    assert upload(client).headers.get("retry-after") == "2"
    mesh.retriever.replies["CreateOrGetDocument"] = rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "bad acl")
    refused = upload(client)
    assert refused.status_code == 400 and "retry-after" not in refused.headers
    assert not celery.sent


@pytest.mark.parametrize(
    "query",
    [
        "updated_since=2025-01-01T00:00:00",
        "updated_since=yesterday",
        "status=done",
        "updated_since=0001-01-01T00:00:00%2B10:00",
    ],
)
def test_bad_list_filters_are_422(client: TestClient, mesh: FakeMesh, query: str) -> None:
    assert client.get(f"/api/v1/documents?{query}").status_code == 422
    assert not mesh.requests("ListDocuments")


def test_the_problems_view_is_for_admins(
    tmp_path: Path, client: TestClient, mesh: FakeMesh, celery: FakeCelery
) -> None:
    assert client.get("/api/v1/admin/documents/problems").status_code == 403
    assert not mesh.requests("ListProblemDocuments")
    for admin in make_client(tmp_path, mesh, celery, ["admin"]):
        [problem] = admin.get("/api/v1/admin/documents/problems?stuck_after_seconds=60").json()["documents"]
        assert (problem["problem"], problem["reason"], problem["idle_seconds"]) == (
            "failed",
            "no extractable text",
            12.5,
        )
        assert problem["document"]["status"] == "failed"
        assert mesh.requests("ListProblemDocuments")[0].stuck_after_seconds == 60


def test_formats_are_the_shared_list(client: TestClient, mesh: FakeMesh) -> None:
    body = client.get("/api/v1/formats").json()
    assert body["extensions"] == sorted(accepted_extensions()) and body["parser_version"] == 3  # the parser's
    mesh.parser.replies["ListFormats"] = rpc_error(grpc.StatusCode.UNAVAILABLE, "down")
    assert client.get("/api/v1/formats").json()["parser_version"] == 0  # unknown, said as 0


def test_stale_lists_what_an_older_parser_read_and_mine_the_callers_own(client: TestClient, mesh: FakeMesh) -> None:
    """`stale`: documents whose reading is below the parser's current one (asked each time: a rolling upgrade
    changes it); `mine`: the caller's own. A parser that does not say its reading makes `stale` a 503, not an
    empty list (which would say nothing is stale)."""
    assert client.get("/api/v1/documents?stale=true&mine=true").status_code == 200
    [request] = mesh.requests("ListDocuments")
    assert (request.parsed_before, request.owner_user) == (3, "alice")
    assert client.get("/api/v1/documents").json()["documents"][0]["parser_version"] == 0
    assert mesh.requests("ListDocuments")[1].parsed_before == 0  # no filter unless asked
    mesh.parser.replies["ListFormats"] = rpc_error(grpc.StatusCode.UNAVAILABLE, "down")
    refused = client.get("/api/v1/documents?stale=true")
    assert refused.status_code == 503 and "stale is unknown" in refused.json()["detail"]
    assert len(mesh.requests("ListDocuments")) == 2


def test_events_follow_a_pending_version(client: TestClient, mesh: FakeMesh) -> None:
    mesh.retriever.replies["GetDocument"] = document(
        pending_version=2, pending_status=common_pb2.DOCUMENT_STATUS_FAILED, pending_error="parse failed: bad"
    )
    with client.stream("GET", f"/api/v1/documents/{DOC_ID}/events") as reply:
        text = "".join(reply.iter_text())
    assert '"failed"' in text and "parse failed: bad" in text


def test_a_stored_error_is_shown_without_internal_addresses(client: TestClient, mesh: FakeMesh) -> None:
    mesh.retriever.replies["GetDocument"] = document(
        status=common_pb2.DOCUMENT_STATUS_FAILED,
        error="embed failed: failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:50053: refused",
    )
    body = client.get(f"/api/v1/documents/{DOC_ID}").json()
    assert body["error"] == "embed failed: failed to connect to all addresses; last error: UNKNOWN: <address> refused"
