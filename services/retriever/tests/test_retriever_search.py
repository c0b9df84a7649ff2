"""Search through the gRPC contract: BM25 math, hybrid fusion, permissions, levels, validation."""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import statistics
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from ragmesh.common.v1 import common_pb2
from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.context import UserContext
from ragmesh_common.errors import InvalidArgument
from ragmesh_common.server import insecure_channel
from ragmesh_common.testing import user as local_user
from ragmesh_retriever.backends.pgvector_backend import uuid_array_literal
from ragmesh_retriever.config import ALPHA, Settings
from ragmesh_retriever.migrate import apply_schema
from ragmesh_retriever.server import build_service
from ragmesh_retriever.session import Database

ALICE = local_user("alice", "eng", ("employee",))
BOB = local_user("bob", "hr", ("employee",))
NOBODY = local_user("nobody", "sales", ())
DIM = 384


def unit(index: int, other: int | None = None) -> list[float]:
    """A unit vector on axis `index` (optionally blended 50/50 with axis `other`)."""
    v = [0.0] * DIM
    v[index] = 1.0
    if other is not None:
        v[index] = v[other] = math.sqrt(0.5)
    return v


@asynccontextmanager
async def retriever_on(app_dsn: str, **overrides: object) -> AsyncIterator[retriever_pb2_grpc.RetrieverServiceStub]:
    settings = {"pool_size": 4, "rls_key": os.environ["RETRIEVER_RLS_KEY"], **overrides}
    service = build_service(Settings.defaults(app_dsn, **settings))
    port = await service.start()
    try:
        async with insecure_channel(f"127.0.0.1:{port}") as channel:
            yield retriever_pb2_grpc.RetrieverServiceStub(channel)
    finally:
        await service.stop()


def owner_dsn_of(postgres, database: str) -> str:
    """The database owner's DSN for one database of the embedded server."""
    return postgres.owner_dsn.rsplit("/", 1)[0] + f"/{database}"


@pytest.fixture
def app_dsn(postgres) -> str:
    """A database of its own, so corpus statistics are exactly the test's."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    owner = owner_dsn_of(postgres, name)
    password = str(conninfo_to_dict(postgres.app_dsn)["password"])  # the suite's: a role's password is cluster-wide
    apply_schema(owner, postgres.app_role, password, DIM, rls_key=postgres.rls_key)
    return f"postgresql://{postgres.app_role}:{password}@{postgres.host}:{postgres.port}/{name}"


@pytest.fixture
async def stub(app_dsn, request) -> AsyncIterator[retriever_pb2_grpc.RetrieverServiceStub]:
    """A retriever with the default settings (or `request.param`'s overrides) on its own database."""
    async with retriever_on(app_dsn, **getattr(request, "param", {})) as stub:
        yield stub


async def create_document(
    stub: retriever_pb2_grpc.RetrieverServiceStub,
    request: retriever_pb2.CreateOrGetDocumentRequest,
    metadata: tuple[tuple[str, str], ...],
) -> common_pb2.Document:
    """A document made the way uploads make one (CreateOrGetDocument), for bytes of its own unless the request
    names a content hash."""
    if not request.content_sha256:
        request.content_sha256 = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
    return (await stub.CreateOrGetDocument(request, metadata=metadata)).document


async def add_document(
    stub: retriever_pb2_grpc.RetrieverServiceStub,
    user: UserContext,
    title: str,
    texts: list[tuple[str, list[float]]],
    level: int = common_pb2.CHUNK_LEVEL_PARAGRAPH,
    ready: bool = True,
) -> str:
    doc = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(title=title, filename=f"{title}.md"), metadata=user.metadata()
    )
    chunks = [
        common_pb2.Chunk(
            chunk_id=f"{doc.document_id}:{i}",
            document_id=doc.document_id,
            level=level,
            ordinal=i,
            text=text,
            embedding=vec,
        )
        for i, (text, vec) in enumerate(texts)
    ]
    await stub.IndexChunks(
        retriever_pb2.IndexChunksRequest(document_id=doc.document_id, chunks=chunks), metadata=user.metadata()
    )
    if ready:
        await stub.UpdateDocumentStatus(
            retriever_pb2.UpdateDocumentStatusRequest(
                document_id=doc.document_id, status=common_pb2.DOCUMENT_STATUS_READY
            ),
            metadata=user.metadata(),
        )
    return doc.document_id


# both lexical plans are exact when no term has more readable postings than the per-term bound; with no
# document listed (max 0) a search goes term first over the user's ACL scopes and their statistics
BOTH_LEXICAL_PLANS = pytest.mark.parametrize(
    "stub",
    [{"bm25_document_first_max_docs": 0}, {"bm25_document_first_max_docs": 10_000}],
    ids=["term_first_by_scope", "document_first"],
    indirect=True,
)


@BOTH_LEXICAL_PLANS
async def test_bm25_scores_match_the_formula(stub) -> None:
    await add_document(
        stub, ALICE, "", [("apple banana", unit(0)), ("apple apple cherry", unit(1)), ("cherry date", unit(2))]
    )
    reply = await stub.Search(retriever_pb2.SearchRequest(query="apples", top_k=10), metadata=ALICE.metadata())
    k1, b, n, avgdl = 0.9, 0.4, 3, 7 / 3
    idf = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))

    def bm25(tf: int, dl: int) -> float:
        return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    got = {r.chunk.text: r.lexical_score for r in reply.results}
    assert got == {"apple apple cherry": pytest.approx(bm25(2, 3)), "apple banana": pytest.approx(bm25(1, 2))}
    assert [r.chunk.text for r in reply.results] == ["apple apple cherry", "apple banana"]


@pytest.mark.parametrize("document_first_max_docs", [0, 10_000], ids=["term_first", "document_first"])
@pytest.mark.parametrize("weight", [1.0, 3.0])
async def test_bm25_weights_title_and_section_path_occurrences(app_dsn, weight, document_first_max_docs) -> None:
    async with retriever_on(
        app_dsn, bm25_heading_weight=weight, bm25_document_first_max_docs=document_first_max_docs
    ) as stub:
        doc = await create_document(
            stub,
            retriever_pb2.CreateOrGetDocumentRequest(title="guide", filename="guide.md"),
            metadata=ALICE.metadata(),
        )
        fields = [
            ("Pricing", ["Overview"], "cost table"),
            ("", [], "pricing rules apply daily"),
            ("", [], "cherry date fig grape"),
        ]  # four tokens each: dl = avgdl = 4
        chunks = [
            common_pb2.Chunk(
                chunk_id=f"{doc.document_id}:{i}",
                document_id=doc.document_id,
                level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
                ordinal=i,
                title=title,
                section_path=path,
                text=text,
                embedding=unit(i),
            )
            for i, (title, path, text) in enumerate(fields)
        ]
        await stub.IndexChunks(
            retriever_pb2.IndexChunksRequest(document_id=doc.document_id, chunks=chunks), metadata=ALICE.metadata()
        )
        await stub.UpdateDocumentStatus(
            retriever_pb2.UpdateDocumentStatusRequest(
                document_id=doc.document_id, status=common_pb2.DOCUMENT_STATUS_READY
            ),
            metadata=ALICE.metadata(),
        )

        async def lexical(query: str) -> dict[str, float]:
            reply = await stub.Search(
                retriever_pb2.SearchRequest(query=query, top_k=10, alpha=0.0), metadata=ALICE.metadata()
            )
            return {r.chunk.text: r.lexical_score for r in reply.results}

        def bm25(df: int, tf: float) -> float:  # n = 3 chunks, every dl = avgdl, k1 0.9, b 0.4
            return math.log(1 + (3 - df + 0.5) / (df + 0.5)) * tf * 1.9 / (tf + 0.9)

        # "pricing" is in the first chunk's title and the second chunk's text; "overview" only in a section path
        assert await lexical("pricing") == {
            "cost table": pytest.approx(bm25(2, weight)),
            "pricing rules apply daily": pytest.approx(bm25(2, 1)),
        }
        assert await lexical("overview") == {"cost table": pytest.approx(bm25(1, weight))}


async def test_hybrid_fuses_both_legs_and_alpha_overrides(stub) -> None:
    await add_document(
        stub,
        ALICE,
        "",
        [("kubernetes cluster upgrade", unit(0)), ("gardening tips", unit(1)), ("cluster of grapes", unit(2))],
    )
    query = dict(query="cluster upgrade", query_vector=unit(1), top_k=3)
    lexical = await stub.Search(retriever_pb2.SearchRequest(**query, alpha=0.0), metadata=ALICE.metadata())
    vector = await stub.Search(retriever_pb2.SearchRequest(**query, alpha=1.0), metadata=ALICE.metadata())
    assert lexical.results[0].chunk.text == "kubernetes cluster upgrade"
    assert vector.results[0].chunk.text == "gardening tips"
    assert vector.results[0].vector_score == pytest.approx(1.0, abs=1e-5)
    hybrid = await stub.Search(retriever_pb2.SearchRequest(**query), metadata=ALICE.metadata())  # default alpha
    scores = {r.chunk.text: r.hybrid_score for r in hybrid.results}
    # lexical normalised: upgrade doc 1, grapes 0; vector normalised: gardening 1, others 0
    assert scores["kubernetes cluster upgrade"] == pytest.approx(1 - ALPHA)
    assert scores["gardening tips"] == pytest.approx(ALPHA)
    assert scores["cluster of grapes"] == pytest.approx(0.0)
    even = await stub.Search(retriever_pb2.SearchRequest(**query, alpha=0.5), metadata=ALICE.metadata())
    assert {r.chunk.text: r.hybrid_score for r in even.results} == pytest.approx(
        {"kubernetes cluster upgrade": 0.5, "gardening tips": 0.5, "cluster of grapes": 0.0}
    )
    ranked = await stub.Search(
        retriever_pb2.SearchRequest(**query, fusion=retriever_pb2.FUSION_TYPE_RANKED), metadata=ALICE.metadata()
    )
    # in both rankings: first in one, second or third in the other -> wins under reciprocal-rank fusion
    assert ranked.results[0].chunk.text == "kubernetes cluster upgrade"
    assert ranked.results[0].hybrid_score > 0.5 / 60
    dbsf = await stub.Search(
        retriever_pb2.SearchRequest(**query, alpha=0.5, fusion=retriever_pb2.FUSION_TYPE_DISTRIBUTION_BASED),
        metadata=ALICE.metadata(),
    )
    # each leg scaled by mean ± 3 sd: lexical {upgrade, grapes} -> 4/6, 2/6; vector {1, 0, 0} -> below
    sd = statistics.pstdev([1.0, 0.0, 0.0])
    vec = {v: (v - (1 / 3 - 3 * sd)) / (6 * sd) for v in (1.0, 0.0)}
    scores = {r.chunk.text: r.hybrid_score for r in dbsf.results}
    assert scores == {
        "kubernetes cluster upgrade": pytest.approx(0.5 * 4 / 6 + 0.5 * vec[0.0], abs=1e-4),
        "gardening tips": pytest.approx(0.5 * vec[1.0], abs=1e-4),
        "cluster of grapes": pytest.approx(0.5 * 2 / 6 + 0.5 * vec[0.0], abs=1e-4),
    }


@BOTH_LEXICAL_PLANS
async def test_search_never_returns_another_departments_chunks(stub) -> None:
    secret = "the quarterly salary bands for senior engineers are confidential"
    bob_doc = await add_document(stub, BOB, "hr-bands", [(secret, unit(5))])
    alice_doc = await add_document(stub, ALICE, "eng-notes", [("the build pipeline uses caching", unit(6))])
    for vector in (unit(5), unit(6)):
        as_alice = await stub.Search(
            retriever_pb2.SearchRequest(query=secret, query_vector=vector, top_k=50), metadata=ALICE.metadata()
        )
        assert {r.chunk.document_id for r in as_alice.results} == {alice_doc}
        assert as_alice.accessible_documents == 1
    as_bob = await stub.Search(
        retriever_pb2.SearchRequest(query=secret, query_vector=unit(5), top_k=50), metadata=BOB.metadata()
    )
    assert as_bob.results[0].chunk.document_id == bob_doc and alice_doc not in {
        r.chunk.document_id for r in as_bob.results
    }
    # asking for bob's document explicitly does not widen alice's access
    narrowed = await stub.Search(
        retriever_pb2.SearchRequest(query=secret, document_ids=[bob_doc]), metadata=ALICE.metadata()
    )
    assert (len(narrowed.results), narrowed.accessible_documents) == (0, 0)
    nobody = await stub.Search(retriever_pb2.SearchRequest(query=secret), metadata=NOBODY.metadata())
    assert (len(nobody.results), nobody.accessible_documents) == (0, 0)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetDocument(retriever_pb2.GetDocumentRequest(document_id=bob_doc), metadata=ALICE.metadata())
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.DeleteDocument(retriever_pb2.DeleteDocumentRequest(document_id=bob_doc), metadata=ALICE.metadata())
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_documents_not_ready_are_not_searched_and_acl_can_widen(stub) -> None:
    pending = await add_document(stub, ALICE, "pending", [("zebra migration patterns", unit(7))], ready=False)
    reply = await stub.Search(retriever_pb2.SearchRequest(query="zebra migration"), metadata=ALICE.metadata())
    assert pending not in {r.chunk.document_id for r in reply.results}
    doc = await create_document(
        stub,
        retriever_pb2.CreateOrGetDocumentRequest(
            title="open", filename="open.md", acl=common_pb2.Acl(departments=["eng", "hr"])
        ),
        metadata=ALICE.metadata(),
    )
    assert list(doc.acl.departments) == ["eng", "hr"] and doc.owner_user == "alice"
    default = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(title="d", filename="d.md"), metadata=BOB.metadata()
    )
    assert list(default.acl.departments) == ["hr"]
    seen = await stub.GetDocument(
        retriever_pb2.GetDocumentRequest(document_id=doc.document_id), metadata=BOB.metadata()
    )
    assert seen.title == "open"
    with pytest.raises(grpc.aio.AioRpcError) as err:  # bob may read it but not change it
        await stub.UpdateDocumentStatus(
            retriever_pb2.UpdateDocumentStatusRequest(
                document_id=doc.document_id, status=common_pb2.DOCUMENT_STATUS_READY
            ),
            metadata=BOB.metadata(),
        )
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_search_counts_readable_ingesting_and_filter_matched_documents(stub) -> None:
    """The counts that tell no access from a filter that matched nothing from documents still ingesting."""
    nothing = await stub.Search(retriever_pb2.SearchRequest(query="zebra"), metadata=NOBODY.metadata())
    assert (nothing.readable_documents, nothing.ingesting_documents, nothing.accessible_documents) == (0, 0, 0)
    pending = await add_document(stub, ALICE, "pending", [("zebra migration patterns", unit(7))], ready=False)
    reply = await stub.Search(retriever_pb2.SearchRequest(query="zebra"), metadata=ALICE.metadata())
    assert (reply.readable_documents, reply.ingesting_documents, reply.accessible_documents) == (1, 1, 0)
    ready = await add_document(stub, ALICE, "ready", [("zebra stripes", unit(8))])
    bob_doc = await add_document(stub, BOB, "bob", [("zebra payroll", unit(9))])
    reply = await stub.Search(retriever_pb2.SearchRequest(query="zebra"), metadata=ALICE.metadata())
    assert (reply.readable_documents, reply.ingesting_documents, reply.accessible_documents) == (2, 1, 1)
    assert reply.filter_matched_documents == 0  # no filter
    # a filter naming only bob's document matches nothing alice may read; naming hers counts within it
    other = await stub.Search(
        retriever_pb2.SearchRequest(query="zebra", document_ids=[bob_doc]), metadata=ALICE.metadata()
    )
    assert (other.readable_documents, other.filter_matched_documents, other.accessible_documents) == (2, 0, 0)
    mine = await stub.Search(
        retriever_pb2.SearchRequest(query="zebra", document_ids=[ready, bob_doc]), metadata=ALICE.metadata()
    )
    assert (mine.filter_matched_documents, mine.ingesting_documents, mine.accessible_documents) == (1, 0, 1)
    waiting = await stub.Search(
        retriever_pb2.SearchRequest(query="zebra", document_ids=[pending]), metadata=ALICE.metadata()
    )
    assert (waiting.filter_matched_documents, waiting.ingesting_documents, waiting.accessible_documents) == (1, 1, 0)


@BOTH_LEXICAL_PLANS
async def test_level_filter(stub) -> None:
    doc = await add_document(
        stub, ALICE, "levels", [("volcano eruption summary", unit(8))], level=common_pb2.CHUNK_LEVEL_DOCUMENT
    )
    paragraphs = await stub.Search(retriever_pb2.SearchRequest(query="volcano eruption"), metadata=ALICE.metadata())
    assert doc not in {r.chunk.document_id for r in paragraphs.results}
    summaries = await stub.Search(
        retriever_pb2.SearchRequest(query="volcano eruption", levels=[common_pb2.CHUNK_LEVEL_DOCUMENT]),
        metadata=ALICE.metadata(),
    )
    assert summaries.results[0].chunk.document_id == doc


async def test_delete_removes_document_and_chunks(stub) -> None:
    doc = await add_document(stub, ALICE, "temp", [("ephemeral tardigrade notes", unit(9))])
    await stub.DeleteDocument(retriever_pb2.DeleteDocumentRequest(document_id=doc), metadata=ALICE.metadata())
    reply = await stub.Search(retriever_pb2.SearchRequest(query="tardigrade"), metadata=ALICE.metadata())
    assert reply.results == []
    listed = await stub.ListDocuments(retriever_pb2.ListDocumentsRequest(), metadata=ALICE.metadata())
    assert doc not in {d.document_id for d in listed.documents}


@pytest.mark.parametrize(
    "request_kwargs, message",
    [
        (dict(query=""), "query text or query_vector"),
        (dict(query="x", top_k=5000), "top_k"),
        (dict(query="x", alpha=2.0), "alpha"),
        (dict(query="x", document_ids=["not-a-uuid"]), "UUID"),
        (dict(query="x", levels=[7]), "levels"),
        (dict(query="x", sub_queries=["  "]), "sub_queries[0]"),
        (dict(query="x", sub_queries=["y"] * 17), "sub_queries has 17 items; the limit is 16"),
        (dict(query="q" * 4001), "query has 4001 characters; the limit is 4000"),
        (dict(query="x", query_vector=[0.1], sub_queries=["y"]), "sub_queries need embed_query"),
    ],
)
async def test_bad_search_requests_are_invalid_argument(stub, request_kwargs, message) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(retriever_pb2.SearchRequest(**request_kwargs), metadata=ALICE.metadata())
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()


async def test_sub_queries_are_searched_and_merged_after_the_main_ranking(stub) -> None:
    from ragmesh_retriever.ranking import merge_sub_queries

    await add_document(
        stub,
        ALICE,
        "companies",
        [
            ("IBM and Microsoft both make software", unit(1)),
            ("IBM was founded in 1911 in Endicott", unit(2)),
            ("Microsoft was founded in 1975 in Albuquerque", unit(3)),
            ("Microsoft Windows shipped in 1985", unit(4)),
            ("the cafeteria menu changes on Mondays", unit(5)),
        ],
    )
    texts = ["which was founded first, IBM or Microsoft", "IBM founded", "Microsoft founded"]
    alone = [
        list((await stub.Search(retriever_pb2.SearchRequest(query=text, top_k=2), metadata=ALICE.metadata())).results)
        for text in texts
    ]
    together = await stub.Search(
        retriever_pb2.SearchRequest(query=texts[0], top_k=2, sub_queries=texts[1:]), metadata=ALICE.metadata()
    )
    expected = merge_sub_queries(
        alone[0], alone[1:], key=lambda i: i.chunk.chunk_id, vector_score=lambda i: i.vector_score
    )
    assert [r.chunk.chunk_id for r in together.results] == [r.chunk.chunk_id for r in expected]
    assert len(together.results) > len(alone[0])  # the sub-queries added what the question alone missed
    assert together.results[: len(alone[0])] == alone[0]  # the question's own ranking comes first, untouched
    assert together.accessible_documents == 1


async def test_calls_without_user_are_unauthenticated(stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ListDocuments(retriever_pb2.ListDocumentsRequest())
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_wrong_dimension_is_invalid_argument(stub) -> None:
    doc = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(title="d", filename="d.md"), metadata=ALICE.metadata()
    )
    bad = common_pb2.Chunk(chunk_id=f"{doc.document_id}:0", text="x", embedding=[0.1, 0.2])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.IndexChunks(
            retriever_pb2.IndexChunksRequest(document_id=doc.document_id, chunks=[bad]), metadata=ALICE.metadata()
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def _structured(
    stub: retriever_pb2_grpc.RetrieverServiceStub,
    user: UserContext,
    title: str,
    rows: list[tuple[int, str, str, list[str], str]],
) -> str:
    """rows: (level, local id, parent local id, section path, text) -> document id."""
    doc = await create_document(
        stub, retriever_pb2.CreateOrGetDocumentRequest(title=title, filename=f"{title}.md"), metadata=user.metadata()
    )
    did = doc.document_id
    chunks = [
        common_pb2.Chunk(
            chunk_id=f"{did}:{lid}",
            document_id=did,
            level=level,
            ordinal=i,
            parent_id=f"{did}:{parent}" if parent else "",
            section_path=path,
            text=text,
            title=title,
            embedding=unit(30 + i),
        )
        for i, (level, lid, parent, path, text) in enumerate(rows)
    ]
    await stub.IndexChunks(retriever_pb2.IndexChunksRequest(document_id=did, chunks=chunks), metadata=user.metadata())
    await stub.UpdateDocumentStatus(
        retriever_pb2.UpdateDocumentStatusRequest(document_id=did, status=common_pb2.DOCUMENT_STATUS_READY),
        metadata=user.metadata(),
    )
    return did


async def test_summary_first_promotes_chunks_of_the_best_summarised_documents(stub) -> None:
    c = await _structured(stub, ALICE, "c", [(3, "1", "", [], "volcano eruption volcano eruption history")])
    a = await _structured(
        stub,
        ALICE,
        "a",
        [(1, "0", "", [], "volcano eruption report"), (3, "1", "0", [], "volcano eruption lava notes")],
    )
    query = dict(query="volcano eruption", top_k=5, alpha=0.0)
    direct = await stub.Search(retriever_pb2.SearchRequest(**query), metadata=ALICE.metadata())
    assert [r.chunk.chunk_id for r in direct.results] == [f"{c}:1", f"{a}:1"]
    first = await stub.Search(
        retriever_pb2.SearchRequest(**query, strategy=retriever_pb2.STRATEGY_SUMMARY_FIRST), metadata=ALICE.metadata()
    )
    assert first.strategy == retriever_pb2.STRATEGY_SUMMARY_FIRST
    assert [r.chunk.chunk_id for r in first.results] == [f"{a}:1", f"{c}:1"]  # found twice beats found once
    assert first.results[0].score == pytest.approx(1 / 60 + 1 / 61)


async def test_context_assembly_expands_thin_chunks_and_documents(stub) -> None:
    d = await _structured(
        stub,
        ALICE,
        "d",
        [
            (2, "0", "", ["Intro"], "Intro"),
            (3, "1", "0", ["Intro"], "alpha beta gamma"),
            (3, "2", "0", ["Intro"], "delta kappa"),
            (3, "3", "0", ["Intro"], "omega psi"),
            (3, "4", "0", ["Intro"], "epsilon zeta"),
        ],
    )
    base = dict(query="kappa", top_k=10, alpha=0.0)
    plain = await stub.Search(retriever_pb2.SearchRequest(**base), metadata=ALICE.metadata())
    assert [r.chunk.chunk_id for r in plain.results] == [f"{d}:2"]
    thin = await stub.Search(
        retriever_pb2.SearchRequest(**base, context=retriever_pb2.ContextOptions(enabled=True, sibling_expansion=True)),
        metadata=ALICE.metadata(),
    )
    got = {r.chunk.chunk_id: r.origin for r in thin.results}
    assert thin.results[0].chunk.chunk_id == f"{d}:2"  # the hit stays first
    assert got == {
        f"{d}:2": common_pb2.CHUNK_ORIGIN_SEARCH,
        f"{d}:0": common_pb2.CHUNK_ORIGIN_PARENT,
        f"{d}:1": common_pb2.CHUNK_ORIGIN_SIBLING,
        f"{d}:3": common_pb2.CHUNK_ORIGIN_SIBLING,
    }
    expanded = await stub.Search(
        retriever_pb2.SearchRequest(
            **base,
            context=retriever_pb2.ContextOptions(
                enabled=True, document_expansion_threshold=0.5, max_chunks_per_document=3
            ),
        ),
        metadata=ALICE.metadata(),
    )
    origins = [r.origin for r in expanded.results]
    assert (
        origins[0] == common_pb2.CHUNK_ORIGIN_SEARCH and origins.count(common_pb2.CHUNK_ORIGIN_DOCUMENT_EXPANSION) == 2
    )
    budget = await stub.Search(
        retriever_pb2.SearchRequest(
            **base, context=retriever_pb2.ContextOptions(enabled=True, sibling_expansion=True, token_budget=1)
        ),
        metadata=ALICE.metadata(),
    )
    assert [r.chunk.chunk_id for r in budget.results] == [f"{d}:2"]  # the budget never drops the top hit


async def test_cjk_and_german_text_is_searchable(stub) -> None:
    zh = await add_document(stub, ALICE, "zh", [("信息检索是从大量文档中找到相关信息的过程。", unit(50))])
    de = await add_document(stub, ALICE, "de", [("Die alten Häuser der Stadt wurden im Jahr 1900 gebaut.", unit(51))])
    reply = await stub.Search(retriever_pb2.SearchRequest(query="信息检索", alpha=0.0), metadata=ALICE.metadata())
    assert [r.chunk.document_id for r in reply.results] == [zh]
    reply = await stub.Search(
        retriever_pb2.SearchRequest(query="Wann wurde das Haus gebaut?", alpha=0.0), metadata=ALICE.metadata()
    )
    assert reply.results and reply.results[0].chunk.document_id == de


async def test_vector_feedback_pulls_in_neighbours_of_the_top_hits(stub) -> None:
    # the query vector (axis 60) only knows the first chunk; its neighbour (axes 60+61) is close to the
    # first chunk but not to the query; feedback moves the query toward the first chunk and past the decoy
    doc = await add_document(
        stub,
        ALICE,
        "fb",
        [("seed passage", unit(60)), ("neighbour passage", unit(61, 60)), ("decoy passage", unit(62))],
    )
    vector = [0.0] * DIM
    vector[60], vector[62] = 0.8, 0.6  # cosines: seed 0.8, decoy 0.6, neighbour 0.57
    query = dict(query="zzz-no-lexical-match", query_vector=vector, top_k=3, alpha=1.0)
    plain = await stub.Search(retriever_pb2.SearchRequest(**query), metadata=ALICE.metadata())
    assert [r.chunk.text for r in plain.results][:2] == ["seed passage", "decoy passage"]
    fed = await stub.Search(
        retriever_pb2.SearchRequest(**query, feedback_docs=1, feedback_weight=2.0), metadata=ALICE.metadata()
    )
    assert [r.chunk.text for r in fed.results][:2] == ["seed passage", "neighbour passage"]
    # reported similarities stay those of the user's query
    assert {r.chunk.text: round(r.vector_score, 3) for r in fed.results} == {
        r.chunk.text: round(r.vector_score, 3) for r in plain.results
    }
    assert doc


async def test_term_first_plan_reads_each_terms_strongest_postings_first(app_dsn) -> None:
    texts = ["kiwi filler filler filler", "kiwi kiwi filler filler", "kiwi kiwi kiwi filler", "kiwi kiwi kiwi kiwi"]
    async with retriever_on(app_dsn) as exact:
        await add_document(exact, ALICE, "fruit", [(t, unit(i)) for i, t in enumerate(texts)])
        request = retriever_pb2.SearchRequest(query="kiwi", top_k=10, alpha=0.0)
        full = {r.chunk.text: r.lexical_score for r in (await exact.Search(request, metadata=ALICE.metadata())).results}
    assert sorted(full, key=full.__getitem__, reverse=True) == texts[::-1]
    async with retriever_on(app_dsn, bm25_postings_per_term=2, bm25_document_first_max_docs=0) as bounded:
        got = {
            r.chunk.text: r.lexical_score for r in (await bounded.Search(request, metadata=ALICE.metadata())).results
        }
    # the two highest-impact postings of "kiwi", scored exactly as without the bound
    assert got == {t: pytest.approx(full[t]) for t in texts[2:]}
    async with retriever_on(app_dsn, bm25_postings_per_term=2, bm25_document_first_max_docs=10) as few_docs:
        got = {
            r.chunk.text: r.lexical_score for r in (await few_docs.Search(request, metadata=ALICE.metadata())).results
        }
    assert got == pytest.approx(full)  # a reader of few documents gets every posting of theirs


async def test_term_first_plan_reads_fewer_postings_of_a_less_weighted_term(app_dsn) -> None:
    # "kiwi" in one chunk (a high idf), "filler" in all eight (an idf near 0)
    texts = ["kiwi filler"] + [" ".join(["filler"] * (i + 1) + ["pad"] * (7 - i)) for i in range(7)]
    request = retriever_pb2.SearchRequest(query="kiwi filler", top_k=10, alpha=0.0)
    async with retriever_on(app_dsn) as exact:
        await add_document(exact, ALICE, "fruit", [(t, unit(i)) for i, t in enumerate(texts)])
        full = {r.chunk.text: r.lexical_score for r in (await exact.Search(request, metadata=ALICE.metadata())).results}
    assert len(full) == 8
    flat_settings = dict(bm25_postings_per_term=4, bm25_min_postings_per_term=4, bm25_document_first_max_docs=0)
    async with retriever_on(app_dsn, **flat_settings) as flat:
        every = {r.chunk.text: r.lexical_score for r in (await flat.Search(request, metadata=ALICE.metadata())).results}
    weighted_settings = dict(bm25_postings_per_term=4, bm25_min_postings_per_term=1, bm25_document_first_max_docs=0)
    async with retriever_on(app_dsn, **weighted_settings) as weighted:
        got = {
            r.chunk.text: r.lexical_score for r in (await weighted.Search(request, metadata=ALICE.metadata())).results
        }
    # every term reads 4 postings: "kiwi" its one, "filler" its strongest 4 (the kiwi chunk may be among them)
    assert 4 <= len(every) <= 5
    # weighted: "kiwi" reads up to 4 (it has one); "filler", ~3 % of its weight, reads the floor of 1
    assert "kiwi filler" in got and len(got) <= 2 and set(got) <= set(every)
    # what is read is scored exactly as without a bound; the kiwi chunk may miss its filler posting only
    for text, score in got.items():
        assert score == pytest.approx(full[text]) or (text == "kiwi filler" and score < full[text])


async def test_lexical_leg_of_a_reader_of_few_documents_is_theirs_only(app_dsn) -> None:
    async with retriever_on(app_dsn, bm25_postings_per_term=1, bm25_document_first_max_docs=1) as stub:
        await add_document(stub, BOB, "hr", [("salary salary salary review", unit(0))])
        mine = await add_document(stub, ALICE, "eng", [("salary review of the build farm", unit(1))])
        for user, expected in ((ALICE, {mine}), (NOBODY, set())):
            reply = await stub.Search(
                retriever_pb2.SearchRequest(query="salary", top_k=10, alpha=0.0), metadata=user.metadata()
            )
            assert {r.chunk.document_id for r in reply.results} == expected


class FixedEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """An embedder that answers every query with axis 1 (after a short think)."""

    async def Embed(self, request, context):
        await asyncio.sleep(0.02)
        return embedder_pb2.EmbedResponse(vectors=[embedder_pb2.Vector(values=unit(1)) for _ in request.texts])


async def test_the_retriever_embeds_a_query_sent_without_a_vector(app_dsn) -> None:
    server = grpc.aio.server()
    embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(FixedEmbedder(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    texts = [("kubernetes cluster upgrade", unit(0)), ("gardening tips", unit(1))]
    try:
        async with retriever_on(app_dsn, embedder_addr=f"127.0.0.1:{port}") as stub:
            await add_document(stub, ALICE, "ops", texts)
            request = dict(query="cluster upgrade", top_k=5, alpha=0.7)  # the vector leg leads
            given = await stub.Search(
                retriever_pb2.SearchRequest(**request, query_vector=unit(1)), metadata=ALICE.metadata()
            )
            embedded = await stub.Search(
                retriever_pb2.SearchRequest(**request, embed_query=True), metadata=ALICE.metadata()
            )
            plain = await stub.Search(retriever_pb2.SearchRequest(**request), metadata=ALICE.metadata())
    finally:
        await server.stop(None)
    key = [(r.chunk.text, round(r.hybrid_score, 6), round(r.vector_score, 6)) for r in given.results]
    assert [(r.chunk.text, round(r.hybrid_score, 6), round(r.vector_score, 6)) for r in embedded.results] == key
    assert embedded.results[0].vector_score == pytest.approx(1.0, abs=1e-5)  # "gardening tips", axis 1
    assert embedded.vector_unavailable == "" and embedded.embed_ms >= 20
    assert [r.chunk.text for r in plain.results] == ["kubernetes cluster upgrade"]  # neither vector nor embed_query


async def test_a_given_query_vector_is_used_and_only_the_sub_queries_are_embedded(app_dsn) -> None:
    """The gateway's semantic cache embeds the question once and sends its vector; the sub-queries of a multi-hop
    question are still embedded here."""
    embedded: list[str] = []

    class Counting(FixedEmbedder):
        async def Embed(self, request, context):
            embedded.extend(request.texts)
            return await super().Embed(request, context)

    server = grpc.aio.server()
    embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(Counting(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    texts = [("kubernetes cluster upgrade", unit(0)), ("gardening tips", unit(1))]
    try:
        async with retriever_on(app_dsn, embedder_addr=f"127.0.0.1:{port}") as stub:
            await add_document(stub, ALICE, "ops", texts)
            reply = await stub.Search(
                retriever_pb2.SearchRequest(
                    query="upgrade", query_vector=unit(0), embed_query=True, sub_queries=["tips"], top_k=5, alpha=0.7
                ),
                metadata=ALICE.metadata(),
            )
    finally:
        await server.stop(None)
    assert embedded == ["tips"]  # the question's vector was given: only the sub-query was embedded
    assert reply.results[0].chunk.text == "kubernetes cluster upgrade"
    assert reply.results[0].vector_score == pytest.approx(1.0, abs=1e-5)  # the given vector, axis 0
    assert "gardening tips" in [r.chunk.text for r in reply.results]  # the sub-query's (axis 1) find


async def test_without_a_reachable_embedder_the_search_is_lexical_and_says_why(app_dsn, refused_port: int) -> None:
    dead = refused_port
    async with retriever_on(app_dsn) as stub:
        await add_document(stub, ALICE, "ops", [("kubernetes cluster upgrade", unit(0)), ("gardening", unit(1))])
    for overrides, reason in (
        ({"embedder_addr": f"127.0.0.1:{dead}", "embed_timeout_ms": 2000}, "UNAVAILABLE"),
        ({}, "no embedder"),
    ):
        async with retriever_on(app_dsn, **overrides) as stub:
            reply = await stub.Search(
                retriever_pb2.SearchRequest(query="cluster upgrade", top_k=5, embed_query=True),
                metadata=ALICE.metadata(),
            )
        assert reason in reply.vector_unavailable
        assert [r.chunk.text for r in reply.results] == ["kubernetes cluster upgrade"]
        assert reply.results[0].hybrid_score == pytest.approx(1.0)  # lexical only: alpha 0


def test_accessible_ids_travel_as_one_uuid_array_literal() -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    assert uuid_array_literal(ids) == "{" + ",".join(ids) + "}"
    assert uuid_array_literal([]) == "{}"
    for bad in (["x'); DROP TABLE chunks; --"], [ids[0] + "}"], ["a,b,"], [""], [ids[0].replace("-", "")]):
        with pytest.raises(InvalidArgument):
            uuid_array_literal(bad)


async def test_transaction_settings_are_set_with_the_user_context(app_dsn) -> None:
    db = Database(app_dsn, rls_key=os.environ["RETRIEVER_RLS_KEY"], pool_size=1, statement_timeout_ms=1234)
    await db.open()
    try:
        async with db.transaction(ALICE, {"hnsw.ef_search": "77", "hnsw.iterative_scan": "relaxed_order"}) as conn:
            row = await (
                await conn.execute(
                    "SELECT rag_user(), current_setting('statement_timeout'), "
                    "current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
                )
            ).fetchone()
        assert row == (ALICE.user_id, "1234ms", "77", "relaxed_order")
        async with db.transaction(ALICE) as conn:  # transaction-local: gone with the transaction
            row = await (await conn.execute("SELECT current_setting('hnsw.ef_search', true)")).fetchone()
        assert row is not None and row[0] != "77"
    finally:
        await db.close()


async def test_the_schema_upgrades_an_index_written_before_heading_weights(app_dsn, postgres) -> None:
    async with retriever_on(app_dsn) as stub:
        await add_document(stub, ALICE, "old", [("pricing rules apply daily", unit(0))])
    owner = owner_dsn_of(postgres, app_dsn.rsplit("/", 1)[1])
    with psycopg.connect(owner, autocommit=True) as conn:  # back to the postings of the previous schema
        conn.execute("DROP INDEX postings_term_scope_idx")
        conn.execute("DROP INDEX postings_document_term_idx")
        # and before search scopes: no scope on documents, postings and statistics, no per-scope tables
        conn.execute("DROP TABLE rag_scopes, lex_scope_stats, lex_scope_terms, rag_scope_documents CASCADE")
        for table in ("documents", "postings", "lex_doc_stats"):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN scope_id CASCADE")
        conn.execute(
            "CREATE INDEX postings_term_impact_idx ON postings (term, level, impact DESC) "
            "INCLUDE (chunk_id, document_id, tf, doc_len)"
        )
        conn.execute("ALTER TABLE postings DROP COLUMN tf_head")
        conn.execute(
            "CREATE INDEX postings_impact_idx ON postings (term, level, impact DESC) "
            "INCLUDE (chunk_id, document_id, tf, doc_len)"
        )
        conn.execute(
            "CREATE INDEX postings_document_idx ON postings (document_id, term, level) INCLUDE (chunk_id, tf, doc_len)"
        )
    password = str(conninfo_to_dict(postgres.app_dsn)["password"])
    apply_schema(owner, postgres.app_role, password, DIM, rls_key=postgres.rls_key)
    apply_schema(owner, postgres.app_role, password, DIM, rls_key=postgres.rls_key)  # and again: every start applies it
    with psycopg.connect(owner) as conn:
        names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'postings'")}
        assert {"postings_term_scope_idx", "postings_document_term_idx"} <= names
        assert not {"postings_impact_idx", "postings_document_idx", "postings_term_impact_idx"} & names
        assert conn.execute("SELECT count(*), sum(tf_head) FROM postings").fetchone() == (4, 0)
    async with retriever_on(app_dsn) as stub:  # old postings count no heading occurrences; search still works
        reply = await stub.Search(
            retriever_pb2.SearchRequest(query="pricing", top_k=5, alpha=0.0), metadata=ALICE.metadata()
        )
        assert [r.chunk.text for r in reply.results] == ["pricing rules apply daily"]
        doc = await create_document(
            stub, retriever_pb2.CreateOrGetDocumentRequest(title="new", filename="new.md"), metadata=ALICE.metadata()
        )
        chunk = common_pb2.Chunk(
            chunk_id=f"{doc.document_id}:0",
            document_id=doc.document_id,
            title="Notes",
            level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
            text="a note",
            embedding=unit(1),
        )
        await stub.IndexChunks(
            retriever_pb2.IndexChunksRequest(document_id=doc.document_id, chunks=[chunk]), metadata=ALICE.metadata()
        )
    with psycopg.connect(owner) as conn:  # the upgraded trigger writes tf_head
        assert conn.execute("SELECT term, tf, tf_head FROM postings WHERE tf_head > 0").fetchall() == [("note", 2, 1)]


@BOTH_LEXICAL_PLANS
async def test_bm25_statistics_say_nothing_about_documents_the_user_cannot_read(stub) -> None:
    """A marker word only in bob's documents scores for alice exactly like a word in no document at all; a word
    alice planted in her own document scores the same whether or not bob's documents hold it too; alice's
    scores come from her documents' statistics alone (N, average length, document frequency)."""
    await add_document(
        stub,
        ALICE,
        "harbour",
        [
            ("harbour crane maintenance schedule", unit(0)),
            ("harbour safety rules", unit(1)),
            ("zqxplanted probe", unit(2)),
        ],
    )
    # bob's: the markers, and the common word in longer chunks (corpus-wide statistics would all move)
    await add_document(
        stub,
        BOB,
        "hr-harbour",
        [
            ("harbour zqxmarker payroll audit notes for every single quarter", unit(3)),
            ("zqxmarker zqxmarker harbour", unit(4)),
            ("harbour harbour zqxplanted zqxplanted", unit(5)),
        ],
    )

    async def lexical(user: UserContext, query: str) -> dict[str, float]:
        reply = await stub.Search(
            retriever_pb2.SearchRequest(query=query, top_k=10, alpha=0.0), metadata=user.metadata()
        )
        return {r.chunk.text: r.lexical_score for r in reply.results}

    with_marker = await lexical(ALICE, "harbour zqxmarker")
    with_nothing = await lexical(ALICE, "harbour qqnowhereword")
    assert with_marker == with_nothing  # exactly: not a bit of the score depends on bob's documents
    assert await lexical(ALICE, "zqxmarker") == {}
    assert len(await lexical(BOB, "zqxmarker")) == 2  # the marker is there, for whoever may read it

    def bm25(n: int, df: int, dl: int) -> float:  # alice's three chunks: lengths 4, 3 and 2
        return math.log(1 + (n - df + 0.5) / (df + 0.5)) * 1.9 / (1 + 0.9 * (1 - 0.4 + 0.4 * dl / 3))

    assert with_marker == {
        "harbour crane maintenance schedule": pytest.approx(bm25(3, 2, 4), rel=1e-12),
        "harbour safety rules": pytest.approx(bm25(3, 2, 3), rel=1e-12),
    }
    assert await lexical(ALICE, "zqxplanted") == {"zqxplanted probe": pytest.approx(bm25(3, 1, 2), rel=1e-12)}


@pytest.mark.parametrize("bad", ["\x00", "a\x00b"])
async def test_nul_characters_in_any_string_are_invalid_arguments(stub, bad) -> None:
    doc = await add_document(stub, ALICE, "ok", [("plain text", unit(0))])
    calls = [
        stub.Search(retriever_pb2.SearchRequest(query=f"plain {bad}"), metadata=ALICE.metadata()),
        stub.Search(retriever_pb2.SearchRequest(query="plain", language=bad), metadata=ALICE.metadata()),
        create_document(
            stub, retriever_pb2.CreateOrGetDocumentRequest(title=bad, filename="x.md"), metadata=ALICE.metadata()
        ),
        create_document(
            stub,
            retriever_pb2.CreateOrGetDocumentRequest(
                title="t", filename="x.md", acl=common_pb2.Acl(departments=["eng", bad])
            ),
            metadata=ALICE.metadata(),
        ),
        stub.UpdateDocumentStatus(
            retriever_pb2.UpdateDocumentStatusRequest(
                document_id=doc, status=common_pb2.DOCUMENT_STATUS_FAILED, error=bad
            ),
            metadata=ALICE.metadata(),
        ),
        stub.IndexChunks(
            retriever_pb2.IndexChunksRequest(
                document_id=doc,
                chunks=[
                    common_pb2.Chunk(chunk_id=f"{doc}:0", document_id=doc, text="fine", section_path=["Intro", bad])
                ],
            ),
            metadata=ALICE.metadata(),
        ),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "NUL character" in (err.value.details() or "")
    reply = await stub.Search(retriever_pb2.SearchRequest(query="plain"), metadata=ALICE.metadata())
    assert [r.chunk.text for r in reply.results] == ["plain text"]  # nothing was changed


async def test_graph_leg_adds_readable_chunks_only(stub) -> None:
    """The gateway hands the graph's scores in as a third leg: a chunk only the graph found enters the ranking,
    and a graph score for a chunk the caller may not read changes nothing and is never shown."""
    alice_doc = await add_document(
        stub,
        ALICE,
        "bridge",
        [("the reactor design review notes", unit(7)), ("the turbine maker is based in Ostrava", unit(8))],
    )
    bob_doc = await add_document(stub, BOB, "hr-private", [("the turbine maker pays its staff well", unit(9))])
    base = retriever_pb2.SearchRequest(query="reactor design review", query_vector=unit(7), alpha=0.0, top_k=10)
    plain = await stub.Search(base, metadata=ALICE.metadata())
    assert [r.chunk.chunk_id for r in plain.results] == [f"{alice_doc}:0"]
    with_graph = retriever_pb2.SearchRequest()
    with_graph.CopyFrom(base)
    with_graph.graph_scores.extend(
        [
            retriever_pb2.LegScore(chunk_id=f"{alice_doc}:1", score=0.5),
            retriever_pb2.LegScore(chunk_id=f"{bob_doc}:0", score=0.9),
            retriever_pb2.LegScore(chunk_id="no-such-chunk", score=0.1),
        ]
    )
    with_graph.graph_weight = 1.0
    found = await stub.Search(with_graph, metadata=ALICE.metadata())
    assert [r.chunk.chunk_id for r in found.results] == [f"{alice_doc}:0", f"{alice_doc}:1"]
    bad = retriever_pb2.SearchRequest()
    bad.CopyFrom(with_graph)
    bad.graph_weight = -1
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(bad, metadata=ALICE.metadata())
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
