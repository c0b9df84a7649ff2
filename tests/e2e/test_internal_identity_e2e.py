"""Internal identity against the real mesh: an attacker inside the network calls the services' ports directly.

Every service refuses a call without a valid internal token (none, forged plain `x-rag-user` metadata, a token
signed with another key, an expired one, one for another audience); a valid token works; and the graph keeps
one user's document's graph data from another user even with a valid token of their own.
"""

from __future__ import annotations

import json
import time
from typing import Any

import grpc
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh.answerer.v1 import answerer_pb2, answerer_pb2_grpc
from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh.parser.v1 import parser_pb2, parser_pb2_grpc
from ragmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.context import IDENTITY_KEY, UserContext
from ragmesh_common.server import insecure_channel
from ragmesh_common.tokens import TokenSigner
from ragmesh_dev.devstack import SERVICES, Stack

pytestmark = pytest.mark.e2e

IVY = UserContext("ivy", "finance", ("employee",))
ALICE = UserContext("alice", "eng", ("employee",))
PLAN = (
    "# Launch plan\n\nNASA hired Acme Corp to build WidgetPro. NASA tested WidgetPro in Houston.\n\n"
    "Acme Corp ships WidgetPro to NASA in March.\n"
)
Metadata = tuple[tuple[str, str], ...]


@pytest.fixture(scope="module")
def signer(mesh: Stack) -> TokenSigner:
    """Signs as the gateway would: with the stack's key, which every service trusts."""
    return mesh.internal_signer("e2e-test")


@pytest.fixture(scope="module")
def ivy_document(mesh: Stack, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A finance-only document of ivy's, uploaded and ingested through the gateway and the worker."""
    path = tmp_path_factory.mktemp("identity") / "launch-plan.md"
    path.write_text(PLAN)
    headers = {"Authorization": f"Bearer {mesh.token('ivy', 'finance', ['employee'])}"}
    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as client:
        with path.open("rb") as handle:
            reply = client.post(
                "/api/v1/documents", headers=headers, files={"file": (path.name, handle, "text/markdown")}
            )
        assert reply.status_code == 202, reply.text
        document_id = reply.json()["document_id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            doc = client.get(f"/api/v1/documents/{document_id}", headers=headers).json()
            if doc["status"] in ("ready", "failed"):
                break
            time.sleep(1)
    assert doc["status"] == "ready", doc
    return document_id


def refused(signer: TokenSigner) -> dict[str, Metadata]:
    now = int(time.time())
    return {
        "no identity": (),
        "forged plain metadata": (("x-rag-user", "ivy"), ("x-rag-department", "finance"), ("x-rag-roles", "employee")),
        "wrong key": ((IDENTITY_KEY, TokenSigner(Ed25519PrivateKey.generate(), actor="attacker").mint(IVY)),),
        "expired": ((IDENTITY_KEY, signer.mint(IVY, iat=now - 300, exp=now - 60)),),
        "other audience": ((IDENTITY_KEY, signer.mint(IVY, aud="ragmesh-public")),),
    }


async def _call(mesh: Stack, service: str, document_id: str, metadata: Metadata) -> Any:
    """One cheap RPC of `service`, as the caller named by `metadata`."""
    async with insecure_channel(mesh.addr(service)) as channel:
        calls = {
            "parser": lambda: parser_pb2_grpc.ParserServiceStub(channel).ListFormats(
                parser_pb2.ListFormatsRequest(), metadata=metadata, timeout=30
            ),
            "embedder": lambda: embedder_pb2_grpc.EmbedderServiceStub(channel).Embed(
                embedder_pb2.EmbedRequest(texts=["launch plan"], is_query=True), metadata=metadata, timeout=30
            ),
            "retriever": lambda: retriever_pb2_grpc.RetrieverServiceStub(channel).Search(
                retriever_pb2.SearchRequest(query="WidgetPro Houston", top_k=5), metadata=metadata, timeout=30
            ),
            "reranker": lambda: reranker_pb2_grpc.RerankerServiceStub(channel).Rerank(
                reranker_pb2.RerankRequest(query="launch plan", passages=["the launch plan"]),
                metadata=metadata,
                timeout=30,
            ),
            "graph": lambda: graph_pb2_grpc.GraphServiceStub(channel).GetContext(
                graph_pb2.GetContextRequest(query="NASA", document_ids=[document_id]), metadata=metadata, timeout=30
            ),
            "answerer": lambda: answerer_pb2_grpc.AnswererServiceStub(channel).CheckInput(
                answerer_pb2.CheckInputRequest(question="What is the launch plan?"), metadata=metadata, timeout=30
            ),
        }
        return await calls[service]()


async def test_every_service_refuses_calls_without_a_valid_identity(
    mesh: Stack, signer: TokenSigner, ivy_document: str
) -> None:
    cases = refused(signer)
    refusals: dict[str, int] = {}
    for service in SERVICES:
        for case, metadata in cases.items():
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _call(mesh, service, ivy_document, metadata)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, (service, case, caught.value.details())
            refusals[service] = refusals.get(service, 0) + 1
        # health stays open (probes), and the same call with a valid token is answered
        async with insecure_channel(mesh.addr(service)) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert health.status == health_pb2.HealthCheckResponse.SERVING, service
        await _call(mesh, service, ivy_document, ((IDENTITY_KEY, signer.token(IVY)),))
    assert refusals == {service: len(cases) for service in SERVICES}  # 6 services x 5 forgeries = 30 refused


async def test_only_a_valid_token_reads_ivys_documents(mesh: Stack, signer: TokenSigner, ivy_document: str) -> None:
    as_ivy = await _call(mesh, "retriever", ivy_document, ((IDENTITY_KEY, signer.token(IVY)),))
    assert {r.chunk.document_id for r in as_ivy.results} == {ivy_document}
    as_alice = await _call(mesh, "retriever", ivy_document, ((IDENTITY_KEY, signer.token(ALICE)),))
    assert ivy_document not in {r.chunk.document_id for r in as_alice.results}


async def test_graph_keeps_ivys_document_from_alice(mesh: Stack, signer: TokenSigner, ivy_document: str) -> None:
    ivy, alice = ((IDENTITY_KEY, signer.token(IVY)),), ((IDENTITY_KEY, signer.token(ALICE)),)
    async with insecure_channel(mesh.addr("graph")) as channel:
        graph = graph_pb2_grpc.GraphServiceStub(channel)
        request = graph_pb2.GetContextRequest(query="What did NASA test in Houston?", document_ids=[ivy_document])
        mine = await graph.GetContext(request, metadata=ivy, timeout=30)
        assert {e.name for e in mine.matched} == {"NASA", "Houston"}  # the worker indexed it as ivy
        assert "WidgetPro" in {e.name for e in mine.neighbours}
        # alice names ivy's document: the catalogue says she may not read it, so nothing comes back
        theirs = await graph.GetContext(request, metadata=alice, timeout=30)
        assert not theirs.matched and not theirs.relations and not theirs.chunk_ids
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await graph.IngestChunks(
                graph_pb2.IngestChunksRequest(
                    document_id=ivy_document,
                    chunks=[graph_pb2.GraphChunk(chunk_id=f"{ivy_document}:evil", text="Mallory Corp owns NASA.")],
                ),
                metadata=alice,
                timeout=30,
            )
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await graph.DeleteDocument(
                graph_pb2.DeleteDocumentRequest(document_id=ivy_document), metadata=alice, timeout=30
            )
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        after = await graph.GetContext(request, metadata=ivy, timeout=30)
        assert [e.name for e in after.matched] == [e.name for e in mine.matched]
        assert "Mallory Corp" not in {e.name for e in after.neighbours}


def test_the_gateway_still_signs_every_hop(mesh: Stack, ivy_document: str) -> None:
    """Through the HTTP API the chat works, the graph hop included (not degraded): the gateway's tokens verify."""
    headers = {"Authorization": f"Bearer {mesh.token('ivy', 'finance', ['employee'])}"}
    events: list[tuple[str, Any]] = []
    with (
        httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as client,
        client.stream(
            "POST",
            "/api/v1/chat",
            headers=headers,
            # a relational question: the router sends it through the graph hop
            json={"question": "What is the relationship between NASA and Acme Corp?", "stream": True},
        ) as reply,
    ):
        assert reply.status_code == 200, reply.read().decode()
        name = "message"
        for line in reply.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1].strip())))
    graph = [
        data
        for name, data in events
        if name == "progress" and data.get("stage") == "graph" and data.get("status") == "done"
    ]
    assert graph and graph[-1]["degraded"] is False and graph[-1]["facts"] > 0, events
    final = [data for name, data in events if name not in ("progress", "token")][-1]
    assert ivy_document in json.dumps(final), final
