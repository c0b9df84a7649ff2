"""RankChunks, the graph leg: Personalized PageRank from the question's entities over the READABLE subgraph.

The bridge test: NASA's chunk names Acme Corp; only a private document says Acme Corp owns WidgetPro; a third
document (readable by both users) is about WidgetPro. A reader of the private document reaches the WidgetPro
chunk through it; a user who may not read it gets no mass there at all, and never a chunk of it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import grpc
import pytest

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh_common.context import UserContext
from ragmesh_graph.access import DocumentAccess
from ragmesh_graph.config import Settings
from ragmesh_graph.nlp import Extractor
from ragmesh_graph.ppr import chunk_scores
from ragmesh_graph.server import GraphServicer
from ragmesh_graph.store import EntityInfo, GraphStore, Subgraph, SubgraphMention, SubgraphRelation

from .conftest import ALICE, CAROL, Catalogue, ingest_request

Stub = graph_pb2_grpc.GraphServiceStub
GraphAs = Callable[[UserContext], AbstractAsyncContextManager[Stub]]


def _rank(query: str, *document_ids: str) -> graph_pb2.RankChunksRequest:
    return graph_pb2.RankChunksRequest(query=query, document_ids=list(document_ids), top_k=50)


@pytest.fixture
async def bridge(graph_as: GraphAs, documents: Catalogue) -> tuple[str, str, str]:
    tag = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:6])  # letters: the rules spot the names
    public = documents.add(f"public-{tag}", owner="alice", readers={"carol"})
    private = documents.add(f"private-{tag}", owner="carol")
    product = documents.add(f"product-{tag}", owner="alice", readers={"carol"})
    async with graph_as(ALICE) as alice:
        await alice.IngestChunks(ingest_request(public, f"Zorvan{tag} Agency hired Quell{tag} Corp."), timeout=60)
        await alice.IngestChunks(
            ingest_request(product, f"Mirabel{tag}Pro runs in Houston.", "Nothing to see here."), timeout=60
        )
    async with graph_as(CAROL) as carol:
        await carol.IngestChunks(ingest_request(private, f"Quell{tag} Corp owns Mirabel{tag}Pro."), timeout=60)
    return public, private, product


async def test_mass_flows_only_through_readable_documents(graph_as: GraphAs, bridge: tuple[str, str, str]) -> None:
    public, private, product = bridge
    tag = public.rsplit("-", 1)[1]
    question = f"Which product is made by the company Zorvan{tag} Agency hired?"
    async with graph_as(CAROL) as carol:
        reached = await carol.RankChunks(_rank(question), timeout=60)
    async with graph_as(ALICE) as alice:
        walled = await alice.RankChunks(_rank(question), timeout=60)
    carol_docs = {c.document_id for c in reached.chunks}
    assert {public, private, product} <= carol_docs  # the bridge through the private document exists
    assert [s.name for s in reached.seeds] == [f"Zorvan{tag} Agency"]
    alice_docs = {c.document_id for c in walled.chunks}
    assert private not in alice_docs
    assert product not in alice_docs  # its only path is through the private document: no mass reaches it
    assert alice_docs == {public}
    assert walled.subgraph_chunks < reached.subgraph_chunks
    assert all(c.score > 0 for c in walled.chunks)


async def test_document_filter_narrows_and_unknown_entities_give_nothing(
    graph_as: GraphAs, bridge: tuple[str, str, str]
) -> None:
    public, _, product = bridge
    tag = public.rsplit("-", 1)[1]
    async with graph_as(CAROL) as carol:
        narrowed = await carol.RankChunks(_rank(f"What did Zorvan{tag} Agency hire?", product), timeout=60)
        unknown = await carol.RankChunks(_rank("What about Nobodyknows Incorporated?"), timeout=60)
    assert not narrowed.chunks and not narrowed.seeds  # the seed's only documents are outside the filter
    assert not unknown.chunks


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (graph_pb2.RankChunksRequest(query="  "), "query is empty"),
        (graph_pb2.RankChunksRequest(query="NASA", top_k=-1), "top_k must be >= 0"),
    ],
)
async def test_bad_requests_are_invalid_argument(
    graph_stub: Stub, request_: graph_pb2.RankChunksRequest, message: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await graph_stub.RankChunks(request_, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (err.value.details() or "")


async def test_catalogue_down_fails_closed(graph_stub: Stub, documents: Catalogue, doc_id: str) -> None:
    await graph_stub.IngestChunks(ingest_request(doc_id, "Ostrava Works hired Brno Labs."), timeout=60)
    documents.down = True
    try:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await graph_stub.RankChunks(_rank("Who did Ostrava Works hire?"), timeout=30)
    finally:
        documents.down = False
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_pagerank_prefers_the_bridge_over_a_hub() -> None:
    """Two hops from the seed the bridge chunk wins over chunks that only share a hub entity."""
    mentions = [
        SubgraphMention("seed", "d/1", "1", "d"),
        SubgraphMention("bridge", "d/1", "1", "d"),
        SubgraphMention("bridge", "d/2", "2", "d"),
        SubgraphMention("answer", "d/2", "2", "d"),
        *[SubgraphMention("hub", f"d/h{i}", f"h{i}", "d") for i in range(20)],
        SubgraphMention("hub", "d/1", "1", "d"),
        SubgraphMention("unrelated", "d/9", "9", "d"),
    ]
    graph = Subgraph(mentions=mentions, seeds=["seed"], documents={"d"})
    graph.entities = {m.key: EntityInfo(m.key, m.key, "name") for m in mentions}
    graph.relations = [SubgraphRelation("answer", "bridge", "make", 1.0, "d", ("2",))]
    scored, mass = chunk_scores(graph)
    order = [c.chunk_id for c in scored]
    assert order[:2] == ["1", "2"]
    assert "9" not in order  # unreachable from the seed: no mass
    assert mass["seed"] > mass["bridge"] > 0


@pytest.fixture
async def hub(graph_as: GraphAs, documents: Catalogue) -> tuple[str, str]:
    """A document whose seed chunk names a hub city that six more chunks name; returns (document, tag)."""
    tag = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:6])
    doc = documents.add(f"hub-{tag}", owner="alice")
    texts = [f"Zorvan{tag} Agency moved to Hubcity{tag} Town."]
    texts += [f"Hubcity{tag} Town hosts Festival{tag}{chr(ord('a') + i)} Fair." for i in range(6)]
    async with graph_as(ALICE) as alice:
        await alice.IngestChunks(ingest_request(doc, *texts), timeout=60)
    return doc, tag


def _servicer(graph_store: GraphStore, graph_settings: Settings, **caps: int) -> GraphServicer:
    settings = graph_settings.model_copy(update={"ppr_hops": 1, **caps})
    access = DocumentAccess(settings.retriever_addr, timeout=settings.access_timeout_seconds)
    return GraphServicer(graph_store, Extractor("", settings.max_entities_per_chunk), access, settings)


async def test_subgraph_cap_bounds_the_walk_and_says_so(
    graph_store: GraphStore, graph_settings: Settings, hub: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    doc, tag = hub
    question = f"Where did Zorvan{tag} Agency move?"
    free = await _servicer(graph_store, graph_settings).rank(ALICE, question, set())
    assert free.chunks_walked == 7 and not free.subgraph.capped  # the seed's chunk, then the city's six others
    with caplog.at_level(logging.INFO, logger="ragmesh_graph.server"):
        capped = await _servicer(graph_store, graph_settings, ppr_max_chunks=3).rank(ALICE, question, set())
    assert capped.chunks_walked == 3
    assert "GRAPH_PPR_MAX_CHUNKS" in capped.subgraph.capped
    assert any("GRAPH_PPR_MAX_CHUNKS" in r.getMessage() for r in caplog.records)
    assert capped.chunks[0].chunk_id == f"{doc}:0"  # the seed's own chunk still ranks first
    few = await _servicer(graph_store, graph_settings, ppr_max_relations=0).rank(ALICE, question, set())
    assert not few.subgraph.relations and not few.subgraph.capped  # 0: relations are not read at all
    one = await _servicer(graph_store, graph_settings, ppr_max_relations=1).rank(ALICE, question, set())
    assert len(one.subgraph.relations) == 1 and "GRAPH_PPR_MAX_RELATIONS" in one.subgraph.capped
    assert all(v >= 0 for v in capped.timings().values())


async def test_a_hub_seed_is_not_expanded_beside_a_specific_one(
    graph_store: GraphStore, graph_settings: Settings, hub: tuple[str, str]
) -> None:
    _, tag = hub
    both = f"Did Zorvan{tag} Agency go to Hubcity{tag} Town?"
    ranking = await _servicer(graph_store, graph_settings, ppr_hub_chunks=3).rank(ALICE, both, set())
    assert set(ranking.subgraph.seeds) == {f"zorvan{tag} agency", f"hubcity{tag} town"}
    assert ranking.subgraph.hubs == 1
    assert ranking.chunks_walked == 1  # the hub city's seven chunks are not read: only the agency's one
    alone = await _servicer(graph_store, graph_settings, ppr_hub_chunks=3).rank(ALICE, f"Hubcity{tag} Town?", set())
    assert alone.chunks_walked == 7  # a hub that is the only seed is expanded (within the chunk cap)


async def test_seed_chunks_start_the_walk_only_where_readable(graph_as: GraphAs, bridge: tuple[str, str, str]) -> None:
    """A question that names nothing the graph knows: the entities of the given seed passages start the walk; a
    seed passage of a document the caller may not read adds nothing."""
    public, private, product = bridge
    seeded = graph_pb2.RankChunksRequest(
        query="Which product is it?", seed_chunks=[graph_pb2.ChunkRef(document_id=public, chunk_id=f"{public}:0")]
    )
    hidden = graph_pb2.RankChunksRequest(
        query="Which product is it?", seed_chunks=[graph_pb2.ChunkRef(document_id=private, chunk_id=f"{private}:0")]
    )
    async with graph_as(CAROL) as carol:
        reached = await carol.RankChunks(seeded, timeout=60)
    async with graph_as(ALICE) as alice:
        walled = await alice.RankChunks(hidden, timeout=60)
        alone = await alice.RankChunks(_rank("Which product is it?"), timeout=60)
    assert {public, private, product} <= {c.document_id for c in reached.chunks}
    assert reached.chunks[0].document_id == public
    assert not walled.chunks and not walled.seeds
    assert not alone.chunks


async def test_bad_seed_chunks_are_invalid_argument(graph_stub: Stub) -> None:
    bad = graph_pb2.RankChunksRequest(query="NASA", seed_chunks=[graph_pb2.ChunkRef(document_id="d", chunk_id=" ")])
    too_many = graph_pb2.RankChunksRequest(
        query="NASA", seed_chunks=[graph_pb2.ChunkRef(document_id="d", chunk_id=str(i)) for i in range(51)]
    )
    for request_, message in ((bad, "seed_chunks[0] needs"), (too_many, "at most 50 seed_chunks")):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await graph_stub.RankChunks(request_, timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in (err.value.details() or "")


async def test_a_titled_document_is_reached_through_its_topic_only_by_its_readers(
    graph_as: GraphAs, documents: Catalogue
) -> None:
    """The page about an entity often names it only in its title (HippoRAG indexes "title + text"): the title
    is the topic of its chunks, so a question about what a readable passage names reaches that page. A copy the
    asker may not read gets no mass, and one ingested without its title is reached by nothing."""
    tag = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:6])
    school = f"Velmora{tag} Institute"
    mention = documents.add(f"mention-{tag}", owner="alice", readers={"carol"})
    about = documents.add(f"about-{tag}", owner="alice", readers={"carol"})
    hidden = documents.add(f"hidden-{tag}", owner="alice")
    untitled = documents.add(f"untitled-{tag}", owner="alice", readers={"carol"})
    page = "It was founded in 1901 and trains nurses."
    async with graph_as(ALICE) as alice:
        await alice.IngestChunks(ingest_request(mention, f"Dana Kirsch{tag} studied at the {school}."), timeout=60)
        for document_id, title in ((about, f"{school} (school)"), (hidden, school), (untitled, "")):
            request = ingest_request(document_id, page)
            request.title = title
            await alice.IngestChunks(request, timeout=60)
    async with graph_as(CAROL) as carol:
        reached = await carol.RankChunks(_rank(f"When was the school Dana Kirsch{tag} studied at founded?"), timeout=60)
    found = [c.document_id for c in reached.chunks]
    assert found[:2] == [mention, about]  # the passage the question names, then the page its name leads to
    assert hidden not in found and untitled not in found
