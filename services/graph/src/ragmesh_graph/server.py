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
import time
from dataclasses import dataclass

from grpc import aio
from opentelemetry import trace

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.context import UserContext, require_user
from ragmesh_common.errors import InvalidArgument, NotFound, PermissionDenied, grpc_errors
from ragmesh_common.server import GrpcService
from ragmesh_graph.access import AccessUnavailable, DocumentAccess
from ragmesh_graph.config import CommunitySettings, Settings
from ragmesh_graph.extract import build_document_graph, extract_document, normalise, query_keys
from ragmesh_graph.nlp import Extractor
from ragmesh_graph.ppr import ScoredChunk, chunk_scores
from ragmesh_graph.recompute import CommunityRunner, Status
from ragmesh_graph.reports import (
    Report,
    Sentence,
    build_reports,
    map_report,
    plan_reports,
    relevant_communities,
    topic_keys,
)
from ragmesh_graph.resolve import lookup_keys, resolve
from ragmesh_graph.store import EntityInfo, GraphStore, Readable, Subgraph, chunk_uid
from ragmesh_graph.texts import ChunkTexts
from ragmesh_graph.views import entity_id, entity_key, entity_mentions, readable_view, search_keys

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

DEFAULT_DEPTH = 2
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
DEFAULT_RANK_TOP_K = 50
MAX_RANK_TOP_K = 1000
MAX_SEED_CHUNKS = 50
DEFAULT_ENTITY_SEARCH = 20
MAX_ENTITY_SEARCH = 100
MAX_ENTITY_CHUNKS = 50
MAX_VIEW_ENTITIES = 5000  # entities whose readable mentions a collection question reads (whole communities)
# lengths and counts (query, document_ids, ids): the shared request check (ragmesh_common.limits)


@dataclass
class Ranking:
    """The graph leg's answer for one question: the chunks (best first), the subgraph walked, and the time of
    each part in ms (the question's entities, the subgraph read over Bolt less the permission checks, the
    permission checks at the catalogue, the PageRank)."""

    chunks: list[ScoredChunk]
    subgraph: Subgraph
    chunks_walked: int
    entities_ms: float
    fetch_ms: float
    access_ms: float
    pagerank_ms: float

    def timings(self) -> dict[str, float]:
        return {
            "entities_ms": self.entities_ms,
            "fetch_ms": self.fetch_ms,
            "access_ms": self.access_ms,
            "pagerank_ms": self.pagerank_ms,
        }


def _document_id(value: str) -> str:
    if not value.strip():
        raise InvalidArgument("document_id is required")
    return value


def _entity_pb(entity: EntityInfo) -> graph_pb2.Entity:
    return graph_pb2.Entity(
        name=entity.name,
        type=entity.type,
        mentions=entity.mentions,
        id=entity_id(entity.key),
        chunk_ids=entity.chunk_ids,
    )


def _status_pb(status: Status) -> graph_pb2.CommunityStatus:
    return graph_pb2.CommunityStatus(
        state=status.state,
        computed_at=status.computed_at,
        duration_seconds=status.duration_seconds,
        entities=status.entities,
        edges=status.edges,
        communities_per_level=status.communities_per_level,
        error=status.error,
        signature=status.signature,
    )


def _require_admin(user: UserContext) -> None:
    if not user.is_admin:
        raise PermissionDenied("the community computation is for role admin")


def _access_failed(exc: AccessUnavailable, what: str) -> AccessUnavailable:
    """Logs and traces a failed access check; the RPC then fails closed (UNAVAILABLE, no graph data)."""
    logger.warning("%s refused, fail closed: %s", what, exc)
    span = trace.get_current_span()
    span.set_attribute(attr.RAG_DEGRADED, True)
    span.add_event("degraded", {attr.RAG_STAGE: "graph access", attr.RAG_DEGRADED_REASON: str(exc)})
    return exc


class GraphServicer(graph_pb2_grpc.GraphServiceServicer):
    def __init__(
        self,
        store: GraphStore,
        extractor: Extractor,
        access: DocumentAccess,
        settings: Settings | None = None,
        runner: CommunityRunner | None = None,
        texts: ChunkTexts | None = None,
    ) -> None:
        self.store = store
        self.extractor = extractor
        self.access = access
        self.similarity = settings.resolution_similarity if settings else 0.9
        self.damping = settings.ppr_damping if settings else 0.5
        self.hops = settings.ppr_hops if settings else 2
        self.hub_chunks = settings.ppr_hub_chunks if settings else 200
        self.relation_weight = settings.ppr_relation_weight if settings else 1.0
        self.max_chunks = settings.ppr_max_chunks if settings else 2000
        self.max_relations = settings.ppr_max_relations if settings else 5000
        self.passage_weight = settings.ppr_passage_seed_weight if settings else 1.0
        self.runner = runner
        self.texts = texts

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
            extracted = await asyncio.to_thread(extract_document, self.extractor, document_id, chunks, request.title)
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
        if len(request.seed_chunks) > MAX_SEED_CHUNKS:
            raise InvalidArgument(f"at most {MAX_SEED_CHUNKS} seed_chunks, got {len(request.seed_chunks)}")
        for i, ref in enumerate(request.seed_chunks):
            if not ref.document_id.strip() or not ref.chunk_id.strip():
                raise InvalidArgument(f"seed_chunks[{i}] needs a document_id and a chunk_id")
        user = await require_user(context)
        top_k = min(request.top_k or DEFAULT_RANK_TOP_K, MAX_RANK_TOP_K)
        seed_chunks = [chunk_uid(ref.document_id, ref.chunk_id) for ref in request.seed_chunks]
        with tracer.start_as_current_span("graph rank"):
            ranking = await self.rank(user, request.query, {d for d in request.document_ids if d}, seed_chunks)
        subgraph = ranking.subgraph
        seeds = [subgraph.entities[k] for k in subgraph.named if k in subgraph.entities]
        return graph_pb2.RankChunksResponse(
            chunks=[
                graph_pb2.ChunkScore(chunk_id=c.chunk_id, document_id=c.document_id, score=c.score)
                for c in ranking.chunks[:top_k]
            ],
            seeds=[graph_pb2.Entity(name=e.name, type=e.type, mentions=e.mentions) for e in seeds],
            subgraph_entities=len(subgraph.entities),
            subgraph_chunks=ranking.chunks_walked,
        )

    async def rank(
        self, user: UserContext, query: str, narrow: set[str], seed_chunks: list[str] | None = None
    ) -> Ranking:
        """The graph leg for `query` as `user` (within `narrow` when given): the question's entities (and those of
        the readable `seed_chunks`, chunk uids best first), the readable subgraph around them (its size capped by
        GRAPH_PPR_MAX_CHUNKS / _MAX_RELATIONS), and the chunks by Personalized PageRank; each part's time, also
        set on the current span."""
        span = trace.get_current_span()
        may_read, asked, readable = self._reader(user, narrow, "graph leg")
        access_seconds = 0.0

        async def timed_read(document_ids: set[str]) -> set[str]:
            nonlocal access_seconds
            started = time.perf_counter()
            try:
                return await may_read(document_ids)
            finally:
                access_seconds += time.perf_counter() - started

        started = time.perf_counter()
        keys = await asyncio.to_thread(self._query_keys, query)
        entities_at = time.perf_counter()
        subgraph = await self.store.neighbourhood(
            keys,
            timed_read,
            hops=self.hops,
            hub_chunks=self.hub_chunks,
            max_chunks=self.max_chunks,
            max_relations=self.max_relations,
            seed_chunks=seed_chunks or (),
            passage_weight=self.passage_weight,
        )
        fetched_at = time.perf_counter()
        scored, _ = await asyncio.to_thread(
            chunk_scores, subgraph, damping=self.damping, relation_weight=self.relation_weight
        )
        ranked_at = time.perf_counter()
        _trace_access(span, user, asked, readable, "graph leg")
        ranking = Ranking(
            scored,
            subgraph,
            chunks_walked=len({m.uid for m in subgraph.mentions}),
            entities_ms=(entities_at - started) * 1000,
            fetch_ms=(fetched_at - entities_at - access_seconds) * 1000,
            access_ms=access_seconds * 1000,
            pagerank_ms=(ranked_at - fetched_at) * 1000,
        )
        span.set_attribute(attr.RAG_GRAPH_SEEDS, len(subgraph.seeds))
        span.set_attribute(attr.RAG_GRAPH_ENTITIES, len(subgraph.entities))
        span.set_attribute(attr.RAG_GRAPH_RELATIONS, len(subgraph.relations))
        span.set_attribute(attr.RAG_CHUNK_COUNT, ranking.chunks_walked)
        for name, value in ranking.timings().items():
            span.set_attribute(f"rag.graph.{name}", round(value, 2))
        if subgraph.capped:
            logger.info("graph leg for %s: %s", user.user_id, subgraph.capped)
            span.set_attribute(attr.RAG_DEGRADED, True)
            span.add_event(
                "degraded", {attr.RAG_STAGE: "graph subgraph cap", attr.RAG_DEGRADED_REASON: subgraph.capped}
            )
        return ranking

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

    @grpc_errors
    async def SearchEntities(
        self,
        request: graph_pb2.SearchEntitiesRequest,
        context: aio.ServicerContext[graph_pb2.SearchEntitiesRequest, graph_pb2.SearchEntitiesResponse],
    ) -> graph_pb2.SearchEntitiesResponse:
        text = normalise(request.query)
        if len(text) < 2:
            raise InvalidArgument("query must have at least 2 letters or digits")
        if not 0 <= request.limit <= MAX_ENTITY_SEARCH:
            raise InvalidArgument(f"limit must be 0..{MAX_ENTITY_SEARCH} (0 = {DEFAULT_ENTITY_SEARCH})")
        user = await require_user(context)
        limit = request.limit or DEFAULT_ENTITY_SEARCH
        with tracer.start_as_current_span("graph entity search") as span:
            may_read, _, readable = self._reader(user, set(), "entity search")
            found = await entity_mentions(self.store, await search_keys(self.store, text), may_read)
            span.set_attribute(attr.RAG_SEARCH_ACCESSIBLE_DOCS, len(readable))
        entities: dict[str, EntityInfo] = {}
        for m in found.mentions:
            entity = entities.setdefault(m.key, EntityInfo(m.key, m.name, m.type))
            entity.mentions += 1
            entity.chunk_ids.append(m.chunk_id)
        ranked = sorted(entities.values(), key=lambda e: (e.key != text, -e.mentions, e.key))[:limit]
        for entity in ranked:
            entity.chunk_ids = sorted(set(entity.chunk_ids))[:MAX_ENTITY_CHUNKS]
        return graph_pb2.SearchEntitiesResponse(entities=[_entity_pb(e) for e in ranked])

    @grpc_errors
    async def GetEntity(
        self,
        request: graph_pb2.GetEntityRequest,
        context: aio.ServicerContext[graph_pb2.GetEntityRequest, graph_pb2.GetEntityResponse],
    ) -> graph_pb2.GetEntityResponse:
        key = entity_key(request.id) if request.id else None
        if key is None or not key.strip():
            raise InvalidArgument("id is not an entity id")
        user = await require_user(context)
        with tracer.start_as_current_span("graph entity") as span:
            may_read, _, readable = self._reader(user, set(), "entity detail")
            found = await entity_mentions(self.store, [key], may_read)
            if not found.mentions:  # unknown and unreadable look the same
                raise NotFound("no such entity")
            around = await self.store.context([key], may_read, 1, DEFAULT_LIMIT)
            span.set_attribute(attr.RAG_SEARCH_ACCESSIBLE_DOCS, len(readable))
            span.set_attribute(attr.RAG_GRAPH_RELATIONS, len(around.relations))
        first = found.mentions[0]
        chunks = sorted({(m.document_id, m.chunk_id) for m in found.mentions})
        entity = EntityInfo(key, first.name, first.type, len(chunks), [c for _, c in chunks][:MAX_ENTITY_CHUNKS])
        refs: list[graph_pb2.CommunityRef] = []
        if self.runner is not None:
            hierarchy = self.runner.hierarchy
            for cid in hierarchy.of_entity.get(key, []):
                community = hierarchy.communities[cid]
                view, _ = await readable_view(self.store, list(community.members), may_read)
                ranked = plan_reports([(community, 0.0)], view, self.runner.settings)
                if not ranked:
                    continue
                top = sorted(ranked[0].members, key=lambda m: (-ranked[0].centrality[m], m))
                refs.append(
                    graph_pb2.CommunityRef(
                        id=cid,
                        level=community.level,
                        title=" · ".join(view.names[m] for m in top[:3]),
                        size=len(top),
                    )
                )
        return graph_pb2.GetEntityResponse(
            entity=_entity_pb(entity),
            neighbours=[_entity_pb(e) for e in around.neighbours],
            relations=[
                graph_pb2.Relation(
                    source=r.source, target=r.target, type=r.type, weight=r.weight, chunk_ids=r.chunk_ids, depth=r.depth
                )
                for r in around.relations
            ],
            mentions=[graph_pb2.ChunkRef(document_id=d, chunk_id=c) for d, c in chunks[:MAX_ENTITY_CHUNKS]],
            communities=refs,
        )

    @grpc_errors
    async def GetCommunityReports(
        self,
        request: graph_pb2.GetCommunityReportsRequest,
        context: aio.ServicerContext[graph_pb2.GetCommunityReportsRequest, graph_pb2.GetCommunityReportsResponse],
    ) -> graph_pb2.GetCommunityReportsResponse:
        if not request.query.strip():
            raise InvalidArgument("query is empty")
        if request.limit < 0:
            raise InvalidArgument("limit must be >= 0")
        user = await require_user(context)
        if self.runner is None or self.texts is None:
            return graph_pb2.GetCommunityReportsResponse()
        settings = self.runner.settings
        hierarchy = self.runner.hierarchy
        limit = min(request.limit or settings.max_reports, settings.max_reports)
        with tracer.start_as_current_span("graph community reports") as span:
            may_read, asked, readable = self._reader(user, {d for d in request.document_ids if d}, "community reports")
            keys = await asyncio.to_thread(self._query_keys, request.query)
            named = [k for k in topic_keys(keys, request.query) if k in hierarchy.of_entity]
            tops = {hierarchy.of_entity[k][0] for k in named}
            candidates: set[str] = set()
            for community in hierarchy.level(0):  # the largest first: a question naming nothing reads the largest
                if (not tops or community.id in tops) and len(candidates) < MAX_VIEW_ENTITIES:
                    candidates.update(community.members)
            view, _ = await readable_view(self.store, sorted(candidates), may_read)
            chosen = relevant_communities(hierarchy, view, keys, request.query, settings)[:limit]
            plans = plan_reports(chosen, view, settings)
            wanted = {uid: uid.split("/", 1) for plan in plans for uid in plan.chunk_uids}  # document ids hold no "/"
            texts = await self.texts.fetch(user, {u: (d, c) for u, (d, c) in wanted.items()})
            reports = build_reports(plans, texts, view.names, settings)
            span.set_attribute(attr.RAG_SEARCH_ACCESSIBLE_DOCS, len(readable))
            if len(asked) > len(readable):
                span.set_attribute(attr.RAG_GRAPH_UNREADABLE_DOCS, len(asked) - len(readable))
            span.set_attribute(attr.RAG_GRAPH_ENTITIES, sum(r.size for r in reports))
        return graph_pb2.GetCommunityReportsResponse(
            reports=[report_pb(r, request.query, settings) for r in reports],
            computed_at=self.runner.status.computed_at,
        )

    @grpc_errors
    async def GetCommunityStatus(
        self,
        request: graph_pb2.GetCommunityStatusRequest,
        context: aio.ServicerContext[graph_pb2.GetCommunityStatusRequest, graph_pb2.CommunityStatus],
    ) -> graph_pb2.CommunityStatus:
        _require_admin(await require_user(context))
        return _status_pb(self.runner.status if self.runner is not None else Status())

    @grpc_errors
    async def RecomputeCommunities(
        self,
        request: graph_pb2.RecomputeCommunitiesRequest,
        context: aio.ServicerContext[graph_pb2.RecomputeCommunitiesRequest, graph_pb2.CommunityStatus],
    ) -> graph_pb2.CommunityStatus:
        user = await require_user(context)
        _require_admin(user)
        if self.runner is None:
            return _status_pb(Status())
        logger.info("community recompute forced by %s", user.user_id)
        return _status_pb(await self.runner.recompute(reason=f"forced by {user.user_id}"))


def report_pb(report: Report, question: str, settings: CommunitySettings) -> graph_pb2.CommunityReport:
    """A report as the reply carries it: its summary (by centrality) and its map step's answer to `question`."""
    return graph_pb2.CommunityReport(
        community=graph_pb2.CommunityRef(
            id=report.community_id, level=report.level, title=report.title, size=report.size
        ),
        key_entities=[graph_pb2.Entity(name=name, id=entity_id(key)) for key, name, _ in report.entities],
        summary=[_sentence_pb(s) for s in report.sentences[: settings.report_sentences]],
        answer=[_sentence_pb(s) for s in map_report(question, report, settings.report_sentences)],
        relevance=report.relevance,
    )


def _sentence_pb(sentence: Sentence) -> graph_pb2.ReportSentence:
    return graph_pb2.ReportSentence(
        text=sentence.text, document_id=sentence.document_id, chunk_id=sentence.chunk_id, score=sentence.score
    )


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
    runner = CommunityRunner(store, settings.communities)
    texts = ChunkTexts(settings.retriever_addr, timeout=settings.access_timeout_seconds)
    servicer = GraphServicer(store, extractor, access, settings, runner, texts)

    async def warmup() -> None:
        await store.warmup()
        runner.start()  # the first computation runs in the background; reports are empty until it is ready

    async def on_stop() -> None:
        await runner.stop()
        await texts.close()
        await access.close()
        await store.close()

    def add(server: aio.Server) -> list[str]:
        graph_pb2_grpc.add_GraphServiceServicer_to_server(servicer, server)
        return [graph_pb2.DESCRIPTOR.services_by_name["GraphService"].full_name]

    return GrpcService("graph", add, host=settings.host, port=settings.port, warmup=warmup, on_stop=on_stop)
