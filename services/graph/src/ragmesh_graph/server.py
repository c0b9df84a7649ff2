"""GraphService: IngestChunks (extract, resolve, merge), GetContext (permission-filtered neighbourhood), RankChunks
(the graph leg of retrieval: Personalized PageRank over the readable subgraph), DeleteDocument.

The caller is the verified user of the request's internal identity token. The graph decides access itself,
never from a list the caller hands it: GetContext reads only documents the catalogue (the retriever, under
RLS, asked as that user about the documents the graph finds for the question) says the user may read; IngestChunks writes only a document the user owns;
DeleteDocument removes only a document whose recorded owner is the user.
"""

from __future__ import annotations

import asyncio
import logging

from grpc import aio
from opentelemetry import trace

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.context import UserContext, require_user
from ragmesh_common.errors import InvalidArgument, PermissionDenied, grpc_errors
from ragmesh_common.server import GrpcService
from ragmesh_graph.access import AccessUnavailable, DocumentAccess
from ragmesh_graph.config import Settings
from ragmesh_graph.extract import build_document_graph, extract_document, query_keys
from ragmesh_graph.nlp import Extractor
from ragmesh_graph.ppr import chunk_scores
from ragmesh_graph.resolve import lookup_keys, resolve
from ragmesh_graph.store import EntityInfo, GraphStore, Readable

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

DEFAULT_DEPTH = 2
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
DEFAULT_RANK_TOP_K = 50
MAX_RANK_TOP_K = 1000
# lengths and counts (query, document_ids, ids): the shared request check (ragmesh_common.limits)


def _document_id(value: str) -> str:
    if not value.strip():
        raise InvalidArgument("document_id is required")
    return value


def _entity_pb(entity: EntityInfo) -> graph_pb2.Entity:
    return graph_pb2.Entity(name=entity.name, type=entity.type, mentions=entity.mentions)


def _access_failed(exc: AccessUnavailable, what: str) -> AccessUnavailable:
    """Logs and traces a failed access check; the RPC then fails closed (UNAVAILABLE, no graph data)."""
    logger.warning("%s refused, fail closed: %s", what, exc)
    span = trace.get_current_span()
    span.set_attribute(attr.RAG_DEGRADED, True)
    span.add_event("degraded", {attr.RAG_STAGE: "graph access", attr.RAG_DEGRADED_REASON: str(exc)})
    return exc


class GraphServicer(graph_pb2_grpc.GraphServiceServicer):
    def __init__(
        self, store: GraphStore, extractor: Extractor, access: DocumentAccess, settings: Settings | None = None
    ) -> None:
        self.store = store
        self.extractor = extractor
        self.access = access
        self.similarity = settings.resolution_similarity if settings else 0.9
        self.damping = settings.ppr_damping if settings else 0.5
        self.hops = settings.ppr_hops if settings else 2
        self.hub_chunks = settings.ppr_hub_chunks if settings else 200
        self.relation_weight = settings.ppr_relation_weight if settings else 1.0

    def _query_keys(self, query: str) -> list[str]:
        return query_keys(query, self.extractor.question_entities(query))

    def _reader(self, user: UserContext, narrow: set[str], what: str) -> tuple[Readable, set[str], set[str]]:
        """`may_read` for the store (asks the catalogue as `user`, within `narrow` when given), and the sets of
        documents asked and found readable (for the span)."""
        asked: set[str] = set()
        readable: set[str] = set()

        async def may_read(document_ids: set[str]) -> set[str]:
            wanted = document_ids & narrow if narrow else document_ids
            if not wanted:
                return set()
            try:
                found = (await self.access.check(user, wanted)).readable
            except AccessUnavailable as exc:
                raise _access_failed(exc, what) from exc
            asked.update(wanted)
            readable.update(found)
            return set(found)

        return may_read, asked, readable

    async def _require_owner(self, user: UserContext, document_id: str) -> None:
        try:
            access = await self.access.check(user, [document_id])
        except AccessUnavailable as exc:
            raise _access_failed(exc, f"graph write of {document_id}") from exc
        if document_id not in access.owned:
            raise PermissionDenied(f"only the owner may write the graph data of document {document_id}")

    @grpc_errors
    async def IngestChunks(
        self,
        request: graph_pb2.IngestChunksRequest,
        context: aio.ServicerContext[graph_pb2.IngestChunksRequest, graph_pb2.IngestChunksResponse],
    ) -> graph_pb2.IngestChunksResponse:
        user = await require_user(context)
        document_id = _document_id(request.document_id)
        chunks: list[tuple[str, str]] = []
        seen: set[str] = set()
        for index, chunk in enumerate(request.chunks):
            if not chunk.chunk_id.strip():
                raise InvalidArgument(f"chunks[{index}]: chunk_id is required")
            if chunk.document_id and chunk.document_id != document_id:
                raise InvalidArgument(
                    f"chunks[{index}] ({chunk.chunk_id}): document_id {chunk.document_id!r} "
                    f"differs from the request's {document_id!r}"
                )
            if chunk.chunk_id in seen:
                raise InvalidArgument(f"chunks[{index}]: chunk_id {chunk.chunk_id!r} appears twice")
            seen.add(chunk.chunk_id)
            chunks.append((chunk.chunk_id, chunk.text))
        await self._require_owner(user, document_id)
        owners = await self.store.document_owners(document_id)
        if owners - {user.user_id, ""}:
            raise PermissionDenied(f"document {document_id}'s graph data belongs to another user")
        with tracer.start_as_current_span("graph ingest") as span:
            span.set_attribute(attr.RAG_DOCUMENT_ID, document_id)
            span.set_attribute(attr.RAG_CHUNK_COUNT, len(chunks))
            extracted = await asyncio.to_thread(extract_document, self.extractor, document_id, chunks)
            keys, acronyms, firsts = lookup_keys(extracted)
            known = await self.store.known(keys, acronyms, firsts)
            resolution = resolve(extracted, known, self.similarity)
            graph = build_document_graph(extracted, resolution.canonical, resolution.aliases)
            span.set_attribute(attr.RAG_GRAPH_MERGES, len(resolution.aliases))
            span.set_attribute(attr.RAG_GRAPH_ENTITIES, len(graph.entities))
            span.set_attribute(attr.RAG_GRAPH_RELATIONS, len(graph.relations))
            await self.store.replace_document(graph, user.user_id, previous=bool(owners))
        logger.info(
            "ingested %s: %d chunks, %d entities, %d relations",
            document_id,
            len(chunks),
            len(graph.entities),
            len(graph.relations),
        )
        return graph_pb2.IngestChunksResponse(entities=len(graph.entities), relations=len(graph.relations))

    @grpc_errors
    async def GetContext(
        self,
        request: graph_pb2.GetContextRequest,
        context: aio.ServicerContext[graph_pb2.GetContextRequest, graph_pb2.GetContextResponse],
    ) -> graph_pb2.GetContextResponse:
        if not request.query.strip():
            raise InvalidArgument("query is empty")
        if request.max_depth not in (0, 1, 2):
            raise InvalidArgument(f"max_depth must be 1 or 2 (0 = {DEFAULT_DEPTH}), got {request.max_depth}")
        if request.limit < 0:
            raise InvalidArgument(f"limit must be >= 0 (0 = {DEFAULT_LIMIT}), got {request.limit}")
        user = await require_user(context)
        depth = request.max_depth or DEFAULT_DEPTH
        limit = min(request.limit or DEFAULT_LIMIT, MAX_LIMIT)
        # The caller may narrow to documents of interest (never widening access); the catalogue decides which of
        # the documents the graph finds for the question this user may read.
        narrow = {d for d in request.document_ids if d}
        may_read, asked, readable = self._reader(user, narrow, "graph context")
        with tracer.start_as_current_span("graph hop") as span:
            span.set_attribute(attr.RAG_GRAPH_DEPTH, depth)
            keys = await asyncio.to_thread(self._query_keys, request.query)
            found = await self.store.context(keys, may_read, depth, limit)
            _trace_access(span, user, asked, readable, "graph context")
            span.set_attribute(attr.RAG_GRAPH_ENTITIES, len(found.matched) + len(found.neighbours))
            span.set_attribute(attr.RAG_GRAPH_RELATIONS, len(found.relations))
        return graph_pb2.GetContextResponse(
            matched=[_entity_pb(e) for e in found.matched],
            neighbours=[_entity_pb(e) for e in found.neighbours],
            relations=[
                graph_pb2.Relation(
                    source=r.source, target=r.target, type=r.type, weight=r.weight, chunk_ids=r.chunk_ids, depth=r.depth
                )
                for r in found.relations
            ],
            chunk_ids=found.chunk_ids,
        )

    @grpc_errors
    async def RankChunks(
        self,
        request: graph_pb2.RankChunksRequest,
        context: aio.ServicerContext[graph_pb2.RankChunksRequest, graph_pb2.RankChunksResponse],
    ) -> graph_pb2.RankChunksResponse:
        if not request.query.strip():
            raise InvalidArgument("query is empty")
        if request.top_k < 0:
            raise InvalidArgument(f"top_k must be >= 0 (0 = {DEFAULT_RANK_TOP_K}), got {request.top_k}")
        user = await require_user(context)
        top_k = min(request.top_k or DEFAULT_RANK_TOP_K, MAX_RANK_TOP_K)
        narrow = {d for d in request.document_ids if d}
        may_read, asked, readable = self._reader(user, narrow, "graph leg")
        with tracer.start_as_current_span("graph rank") as span:
            keys = await asyncio.to_thread(self._query_keys, request.query)
            subgraph = await self.store.neighbourhood(keys, may_read, hops=self.hops, hub_chunks=self.hub_chunks)
            scored, _ = await asyncio.to_thread(
                chunk_scores, subgraph, damping=self.damping, relation_weight=self.relation_weight
            )
            _trace_access(span, user, asked, readable, "graph leg")
            chunks_walked = len({m.uid for m in subgraph.mentions})
            span.set_attribute(attr.RAG_GRAPH_SEEDS, len(subgraph.seeds))
            span.set_attribute(attr.RAG_GRAPH_ENTITIES, len(subgraph.entities))
            span.set_attribute(attr.RAG_GRAPH_RELATIONS, len(subgraph.relations))
            span.set_attribute(attr.RAG_CHUNK_COUNT, chunks_walked)
        seeds = [subgraph.entities[k] for k in subgraph.seeds if k in subgraph.entities]
        return graph_pb2.RankChunksResponse(
            chunks=[
                graph_pb2.ChunkScore(chunk_id=c.chunk_id, document_id=c.document_id, score=c.score)
                for c in scored[:top_k]
            ],
            seeds=[graph_pb2.Entity(name=e.name, type=e.type, mentions=e.mentions) for e in seeds],
            subgraph_entities=len(subgraph.entities),
            subgraph_chunks=chunks_walked,
        )

    @grpc_errors
    async def DeleteDocument(
        self,
        request: graph_pb2.DeleteDocumentRequest,
        context: aio.ServicerContext[graph_pb2.DeleteDocumentRequest, graph_pb2.DeleteDocumentResponse],
    ) -> graph_pb2.DeleteDocumentResponse:
        user = await require_user(context)
        document_id = _document_id(request.document_id)
        owners = await self.store.document_owners(document_id)
        if not owners:
            return graph_pb2.DeleteDocumentResponse()
        # The gateway deletes the catalogue row first, so the owner recorded at ingest decides; only data written
        # before owners were recorded ("") asks the catalogue.
        if owners != {user.user_id}:
            if owners - {user.user_id, ""}:
                raise PermissionDenied(f"only the owner may delete the graph data of document {document_id}")
            await self._require_owner(user, document_id)
        removed = await self.store.delete_document(document_id)
        logger.info("deleted %s from the graph: %d chunks", document_id, removed)
        return graph_pb2.DeleteDocumentResponse()


def _trace_access(span: trace.Span, user: UserContext, asked: set[str], readable: set[str], what: str) -> None:
    span.set_attribute(attr.RAG_SEARCH_ACCESSIBLE_DOCS, len(readable))
    if len(asked) > len(readable):
        span.set_attribute(attr.RAG_GRAPH_UNREADABLE_DOCS, len(asked) - len(readable))
        logger.info(
            "%s for %s: %d of %d documents found are not readable",
            what,
            user.user_id,
            len(asked) - len(readable),
            len(asked),
        )


def build_service(
    settings: Settings,
    store: GraphStore | None = None,
    extractor: Extractor | None = None,
    access: DocumentAccess | None = None,
) -> GrpcService:
    """The graph gRPC service; SERVING once the database answers and the schema is in place."""
    store = store or GraphStore.connect(
        settings.neo4j_uri,
        settings.neo4j_user,
        settings.neo4j_password,
        settings.neo4j_database,
        settings.query_timeout_seconds,
    )
    access = access or DocumentAccess(settings.retriever_addr, timeout=settings.access_timeout_seconds)
    extractor = extractor or Extractor(settings.spacy_model, settings.max_entities_per_chunk)
    logger.info("graph extractor: %s", extractor.name)
    servicer = GraphServicer(store, extractor, access, settings)

    async def on_stop() -> None:
        await access.close()
        await store.close()

    def add(server: aio.Server) -> list[str]:
        graph_pb2_grpc.add_GraphServiceServicer_to_server(servicer, server)
        return [graph_pb2.DESCRIPTOR.services_by_name["GraphService"].full_name]

    return GrpcService("graph", add, host=settings.host, port=settings.port, warmup=store.warmup, on_stop=on_stop)
