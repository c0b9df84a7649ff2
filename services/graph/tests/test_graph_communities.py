"""Communities, reports and the entity API against a real ArcadeDB: nothing of an unreadable document shows.

The fuzz test writes documents on a few themes with random owners and readers; every document also names an
entity of its own (its "secret", a made-up name found nowhere else). After an admin recompute, every user asks
collection-level questions, searches and opens entities; whatever comes back must be from documents that user
can read, and no other document's secret may appear anywhere in the reply. Then the readers change and the
same holds for the very next request.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import grpc
import pytest

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh_common.context import UserContext
from ragmesh_common.testing import user as local_user

from .conftest import Catalogue, ingest_request

Stub = graph_pb2_grpc.GraphServiceStub
OpenAs = Callable[[UserContext], AbstractAsyncContextManager[Stub]]

USERS = {name: local_user(name, "dept", ("employee",)) for name in ("alice", "carol", "dave", "erin")}
ADMIN = local_user("root-admin", "ops", ("admin",))


def word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=7)).capitalize()


def chunk_texts(rng: random.Random, theme: list[str], secret: str) -> list[str]:
    chunks = []
    for _ in range(3):
        a, b, c = rng.sample(theme, 3)
        chunks.append(
            f"The council of {a} signed a treaty with {b} near {c}. "
            f"Later {a} and {secret} opened a market in {b}. "
            f"Traders from {c} praised {secret} and {a}."
        )
    return chunks


async def ingest(open_as: OpenAs, documents: Catalogue, document_id: str, owner: str, texts: list[str]) -> None:
    request = ingest_request(document_id, *texts)
    documents.texts[document_id] = [(c.chunk_id, c.text) for c in request.chunks]
    async with open_as(USERS[owner]) as stub:
        await stub.IngestChunks(request, timeout=60)


def reply_text(message: object) -> str:
    return str(message)


@pytest.mark.parametrize("seed", [7, 23])
async def test_reports_and_entities_show_only_readable_documents(
    graph_as: OpenAs, documents: Catalogue, seed: int
) -> None:
    rng = random.Random(seed)
    themes = [[f"{word(rng)} {word(rng)}" for _ in range(5)] for _ in range(3)]
    secrets: dict[str, str] = {}
    for i in range(9):
        document_id = f"comm-{uuid.uuid4().hex[:10]}"
        owner = rng.choice(["alice", "carol", "dave"])
        readers = {u for u in ("alice", "carol", "dave") if u != owner and rng.random() < 0.3}
        documents.add(document_id, owner=owner, readers=readers)
        secrets[document_id] = f"{word(rng)}{word(rng).lower()}"
        await ingest(graph_as, documents, document_id, owner, chunk_texts(rng, themes[i % 3], secrets[document_id]))

    async with graph_as(ADMIN) as admin:
        status = await admin.RecomputeCommunities(graph_pb2.RecomputeCommunitiesRequest(), timeout=300)
    assert status.state == "ready", status.error
    assert status.communities_per_level and status.communities_per_level[0] >= 1

    async def check(name: str) -> int:
        readable = {d for d in secrets if name in {documents.documents[d][0], *documents.documents[d][1]}}
        hidden = [secrets[d].lower() for d in secrets if d not in readable]
        shown = 0
        found_secrets = 0
        async with graph_as(USERS[name]) as stub:
            questions = ["What are the main themes in my documents?"] + [
                f"Summarise what we know about {theme[0]}" for theme in themes
            ]
            for question in questions:
                reply = await stub.GetCommunityReports(graph_pb2.GetCommunityReportsRequest(query=question), timeout=60)
                text = reply_text(reply).lower()
                assert not [s for s in hidden if s in text], (name, question)
                for report in reply.reports:
                    for sentence in [*report.summary, *report.answer]:
                        if sentence.document_id in secrets:  # other tests' documents share the database
                            assert sentence.document_id in readable, (name, sentence)
                        shown += 1
            for document_id, secret in secrets.items():
                found = await stub.SearchEntities(graph_pb2.SearchEntitiesRequest(query=secret), timeout=30)
                # the model reads made-up names its own way ("Later Xyz and Secret"): match by containment
                hits = [e for e in found.entities if secret.lower() in e.name.lower()]
                if document_id not in readable:
                    assert not hits, (name, secret, hits)
                found_secrets += bool(hits)
                for entity in hits:
                    detail = await stub.GetEntity(graph_pb2.GetEntityRequest(id=entity.id), timeout=30)
                    assert {m.document_id for m in detail.mentions} <= readable
                    assert not [s for s in hidden if s in reply_text(detail).lower()], (name, secret)
        if readable:
            assert found_secrets, f"{name} found none of the secrets of the {len(readable)} documents they read"
        return shown

    totals = {name: await check(name) for name in USERS}
    assert totals["erin"] == 0  # reads nothing
    assert sum(totals.values()) > 0

    # an ACL change holds for the very next request: carol loses every document she only reads
    for document_id, (owner, readers, ready) in list(documents.documents.items()):
        if document_id in secrets and "carol" in readers:
            documents.documents[document_id] = (owner, readers - {"carol"}, ready)
    await check("carol")


async def test_unknown_or_unreadable_entity_is_not_found(graph_as: OpenAs, documents: Catalogue) -> None:
    document_id = documents.add(f"comm-{uuid.uuid4().hex[:10]}", owner="alice")
    secret = "Zqx" + uuid.uuid4().hex[:8]
    await ingest(graph_as, documents, document_id, "alice", [f"The board met {secret} in Lisbon Harbour."])
    async with graph_as(USERS["alice"]) as alice:
        found = await alice.SearchEntities(graph_pb2.SearchEntitiesRequest(query=secret), timeout=30)
        (entity,) = [e for e in found.entities if e.name == secret]
        detail = await alice.GetEntity(graph_pb2.GetEntityRequest(id=entity.id), timeout=30)
        assert {m.document_id for m in detail.mentions} == {document_id}
    async with graph_as(USERS["carol"]) as carol:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await carol.GetEntity(graph_pb2.GetEntityRequest(id=entity.id), timeout=30)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await carol.GetEntity(graph_pb2.GetEntityRequest(id="bm8tc3VjaC1lbnRpdHk"), timeout=30)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as status:
            await carol.GetCommunityStatus(graph_pb2.GetCommunityStatusRequest(), timeout=30)
        assert status.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as short:
            await carol.SearchEntities(graph_pb2.SearchEntitiesRequest(query="!"), timeout=30)
        assert short.value.code() == grpc.StatusCode.INVALID_ARGUMENT
