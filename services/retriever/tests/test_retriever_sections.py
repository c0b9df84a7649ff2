"""FetchSection (the gateway agent's fetch-section tool): a document's section by title or id, for its readers only.

Uses test_retriever_search's fixtures (a retriever on a database of its own)."""

from __future__ import annotations

import grpc
import pytest

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.context import UserContext

from .test_retriever_search import ALICE, BOB, app_dsn, create_document, stub, unit  # noqa: F401 - fixtures

Stub = retriever_pb2_grpc.RetrieverServiceStub


async def sectioned(
    stub: Stub, user: UserContext, title: str, sections: list[tuple[str, str]], acl: common_pb2.Acl | None = None
) -> str:
    """A ready document of (heading, paragraph) chunks in order, each under [title, heading]."""
    doc = await create_document(
        stub,
        retriever_pb2.CreateOrGetDocumentRequest(title=title, filename=f"{title}.md", acl=acl),
        metadata=user.metadata(),
    )
    chunks = [
        common_pb2.Chunk(
            chunk_id=f"{doc.document_id}:{i}",
            document_id=doc.document_id,
            level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
            ordinal=i,
            section_path=[title, heading],
            title=title,
            text=text,
            embedding=unit(i),
        )
        for i, (heading, text) in enumerate(sections)
    ]
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(document_id=doc.document_id, chunks=chunks), metadata=user.metadata()
    )
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(document_id=doc.document_id, status=common_pb2.DOCUMENT_STATUS_READY),
        metadata=user.metadata(),
    )
    return doc.document_id


async def fetch(stub: Stub, user: UserContext, **fields: object) -> retriever_pb2.FetchSectionResponse:
    return await stub.FetchSection(retriever_pb2.FetchSectionRequest(**fields), metadata=user.metadata(), timeout=10)  # type: ignore[arg-type]


async def test_a_section_by_document_title_and_heading_in_document_order(stub: Stub) -> None:
    shared = common_pb2.Acl(departments=["eng", "hr"])
    doc = await sectioned(
        stub,
        ALICE,
        "Mara Quill (director)",
        [("Early life", "Born in Maine."), ("Career", "Directed Dawn Harbor."), ("Career", "Mayor of Port Ellis.")],
        shared,
    )
    await sectioned(stub, ALICE, "Unrelated", [("Career", "Something else.")], shared)
    # the title without its qualifier, any case; a heading of the path
    reply = await fetch(stub, BOB, titles=["mara-quill"], section="career")
    assert [r.chunk.text for r in reply.results] == ["Directed Dawn Harbor.", "Mayor of Port Ellis."]
    assert reply.documents == 1 and {r.chunk.document_id for r in reply.results} == {doc}
    # no section: the document's beginning, bounded by limit
    reply = await fetch(stub, BOB, titles=["Mara Quill (director)"], limit=1)
    assert [r.chunk.text for r in reply.results] == ["Born in Maine."]
    # by id
    reply = await fetch(stub, BOB, document_id=doc, section="Early life")
    assert [r.chunk.text for r in reply.results] == ["Born in Maine."]
    # a filter that leaves the document out narrows to nothing
    other = await sectioned(stub, ALICE, "Other", [("A", "a")], shared)
    assert not (await fetch(stub, BOB, titles=["Mara Quill"], document_ids=[other])).results
    # a title no document has
    assert not (await fetch(stub, BOB, titles=["Nobody Here"])).results
    # several titles: the documents in the order of the titles they match, bounded by max_documents
    reply = await fetch(stub, BOB, titles=["Nobody Here", "unrelated", "MARA QUILL"], limit=1)
    assert [r.chunk.title for r in reply.results] == ["Unrelated", "Mara Quill (director)"]
    reply = await fetch(stub, BOB, titles=["unrelated", "Mara Quill"], limit=1, max_documents=1)
    assert [r.chunk.title for r in reply.results] == ["Unrelated"]


async def test_a_document_the_caller_cannot_read_is_never_fetched(stub: Stub) -> None:
    private = await sectioned(stub, ALICE, "Salary Bands", [("Grades", "Grade 7 earns 91k.")])  # eng only
    assert [r.chunk.text for r in (await fetch(stub, ALICE, titles=["Salary Bands"])).results] == ["Grade 7 earns 91k."]
    for request in (
        {"titles": ["Salary Bands"]},
        {"document_id": private},
        {"titles": ["salary bands"], "section": "Grades"},
    ):
        reply = await fetch(stub, BOB, **request)
        assert not reply.results and reply.documents == 0, request


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"titles": ["a"], "document_id": "0c4c6f7e-7a3b-4c3e-9d55-6c3c1a2b3c4d"},
        {"document_id": "nope"},
        {"titles": ["x" * 501]},
        {"titles": ["a"], "limit": -1},
        {"titles": ["t"] * 51},
    ],
    ids=["neither", "both", "bad id", "long title", "negative limit", "too many titles"],
)
async def test_bad_requests_are_invalid_argument(stub: Stub, fields: dict[str, object]) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await fetch(stub, ALICE, **fields)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_title_lookup_uses_the_title_index(app_dsn: str) -> None:
    """A title lookup under RLS is an index scan (the stored title_key column), at any corpus size."""
    import psycopg

    from ragmesh_retriever.sections import TITLE_KEY

    with psycopg.connect(app_dsn, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            f"EXPLAIN SELECT id FROM documents WHERE title_key = {TITLE_KEY.format('%s')}",
            ("Ballina, New South Wales",),
        ).fetchall()
    assert "documents_by_title_key_idx" in " ".join(row[0] for row in plan)
