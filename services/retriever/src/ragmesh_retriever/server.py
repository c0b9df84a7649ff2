"""RetrieverService: catalogue RPCs and permission-aware hybrid search."""
from __future__ import annotations

import logging

from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.context import require_user
from ragmesh_common.errors import InvalidArgument, grpc_errors
from ragmesh_common.server import GrpcService
from ragmesh_retriever.backends.base import RANKED, RELATIVE, SearchBackend, SearchQuery
from ragmesh_retriever.catalog import Catalog, Database, parse_document_id
from ragmesh_retriever.config import Settings

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

MAX_TOP_K = 1000
VALID_LEVELS = {common_pb2.CHUNK_LEVEL_DOCUMENT, common_pb2.CHUNK_LEVEL_SECTION, common_pb2.CHUNK_LEVEL_PARAGRAPH}


class RetrieverServicer(retriever_pb2_grpc.RetrieverServiceServicer):
    def __init__(self, catalog: Catalog, backend: SearchBackend, *, alpha: float, candidates: int) -> None:
        self.catalog = catalog
        self.backend = backend
        self.alpha = alpha
        self.candidates = candidates

    @grpc_errors
    async def CreateDocument(self, request: retriever_pb2.CreateDocumentRequest, context: aio.ServicerContext) -> common_pb2.Document:
        user = await require_user(context)
        return await self.catalog.create(user, request.title, request.filename, request.mime_type, request.acl,
                                         request.size_bytes)

    @grpc_errors
    async def GetDocument(self, request: retriever_pb2.GetDocumentRequest, context: aio.ServicerContext) -> common_pb2.Document:
        return await self.catalog.get(await require_user(context), request.document_id)

    @grpc_errors
    async def ListDocuments(self, request: retriever_pb2.ListDocumentsRequest, context: aio.ServicerContext) -> retriever_pb2.ListDocumentsResponse:
        docs, total = await self.catalog.list(await require_user(context), request.limit, request.offset)
        return retriever_pb2.ListDocumentsResponse(documents=docs, total=total)

    @grpc_errors
    async def UpdateDocumentStatus(self, request: retriever_pb2.UpdateDocumentStatusRequest, context: aio.ServicerContext) -> common_pb2.Document:
        return await self.catalog.update_status(await require_user(context), request)

    @grpc_errors
    async def DeleteDocument(self, request: retriever_pb2.DeleteDocumentRequest, context: aio.ServicerContext) -> retriever_pb2.DeleteDocumentResponse:
        user = await require_user(context)
        await self.catalog.get(user, request.document_id)  # NOT_FOUND before touching the index
        if self.backend.name != "pgvector":
            await self.backend.delete(user, request.document_id)
        await self.catalog.delete(user, request.document_id)  # chunks cascade on pgvector
        return retriever_pb2.DeleteDocumentResponse(deleted=True)

    @grpc_errors
    async def IndexChunks(self, request: retriever_pb2.IndexChunksRequest, context: aio.ServicerContext) -> retriever_pb2.IndexChunksResponse:
        user = await require_user(context)
        parse_document_id(request.document_id)
        with tracer.start_as_current_span("index") as span:
            span.set_attribute(attr.RAG_DOCUMENT_ID, request.document_id)
            span.set_attribute(attr.RAG_CHUNK_COUNT, len(request.chunks))
            span.set_attribute(attr.RAG_SEARCH_BACKEND, self.backend.name)
            if self.backend.name != "pgvector":
                doc = await self.catalog.get(user, request.document_id)
                if doc.owner_user != user.user_id:
                    from ragmesh_common.errors import PermissionDenied

                    raise PermissionDenied(f"only the owner may index document {request.document_id}")
            count = await self.backend.index(user, request.document_id, list(request.chunks))
        return retriever_pb2.IndexChunksResponse(indexed=count)

    def _query(self, request: retriever_pb2.SearchRequest) -> SearchQuery:
        if request.top_k < 0 or request.top_k > MAX_TOP_K:
            raise InvalidArgument(f"top_k must be within 0..{MAX_TOP_K}, got {request.top_k}")
        if request.has_alpha and not 0.0 <= request.alpha <= 1.0:
            raise InvalidArgument(f"alpha must be within [0, 1], got {request.alpha}")
        if not request.query.strip() and not request.query_vector:
            raise InvalidArgument("query text or query_vector is required")
        if len(request.query) > 10000:
            raise InvalidArgument("query is longer than 10000 characters")
        levels = [int(level) for level in request.levels] or [common_pb2.CHUNK_LEVEL_PARAGRAPH]
        if any(level not in VALID_LEVELS for level in levels):
            raise InvalidArgument("levels must be CHUNK_LEVEL_DOCUMENT, _SECTION or _PARAGRAPH")
        alpha = request.alpha if request.has_alpha else self.alpha
        if not request.query_vector:
            alpha = 0.0  # lexical only
        return SearchQuery(text=request.query, vector=list(request.query_vector) or None, top_k=request.top_k or 10,
                           alpha=alpha, fusion=RANKED if request.fusion == retriever_pb2.FUSION_TYPE_RANKED else RELATIVE,
                           levels=levels, candidates=max(self.candidates, request.top_k))

    @grpc_errors
    async def Search(self, request: retriever_pb2.SearchRequest, context: aio.ServicerContext) -> retriever_pb2.SearchResponse:
        user = await require_user(context)
        query = self._query(request)
        restrict = [parse_document_id(d) for d in request.document_ids]
        with tracer.start_as_current_span("hybrid search") as span:
            span.set_attribute(attr.RAG_SEARCH_BACKEND, self.backend.name)
            span.set_attribute(attr.RAG_SEARCH_TOP_K, query.top_k)
            span.set_attribute(attr.RAG_SEARCH_ALPHA, query.alpha)
            span.set_attribute(attr.RAG_SEARCH_FUSION, query.fusion)
            async with self.catalog.db.transaction(user) as conn:
                accessible = await self.catalog.accessible_ids(conn, restrict or None)
            span.set_attribute(attr.RAG_SEARCH_ACCESSIBLE_DOCS, len(accessible))
            hits = await self.backend.search(user, query, accessible)
            span.set_attribute(attr.RAG_SEARCH_RESULTS, len(hits))
        results = [
            common_pb2.ScoredChunk(chunk=h.chunk, score=h.hybrid, hybrid_score=h.hybrid,
                                   lexical_score=h.lexical or 0.0, vector_score=h.vector or 0.0)
            for h in hits
        ]
        return retriever_pb2.SearchResponse(results=results, accessible_documents=len(accessible),
                                            backend=self.backend.name, accessible_document_ids=accessible)

    @grpc_errors
    async def GetChunks(self, request: retriever_pb2.GetChunksRequest, context: aio.ServicerContext) -> retriever_pb2.GetChunksResponse:
        user = await require_user(context)
        if len(request.chunk_ids) > MAX_TOP_K:
            raise InvalidArgument(f"at most {MAX_TOP_K} chunk ids per call")
        async with self.catalog.db.transaction(user) as conn:
            accessible = await self.catalog.accessible_ids(conn, None)
        chunks = await self.backend.get_chunks(user, list(request.chunk_ids), accessible)
        return retriever_pb2.GetChunksResponse(chunks=chunks)


def make_backend(settings: Settings, db: Database) -> SearchBackend:
    if settings.backend == "weaviate":
        from ragmesh_retriever.backends.weaviate_backend import WeaviateBackend

        assert settings.weaviate_url is not None
        return WeaviateBackend(settings.weaviate_url, grpc_port=settings.weaviate_grpc_port,
                               api_key=settings.weaviate_api_key, collection=settings.weaviate_collection)
    from ragmesh_retriever.backends.pgvector_backend import PgVectorBackend

    return PgVectorBackend(db, text_search_config=settings.text_search_config, k1=settings.bm25_k1,
                           b=settings.bm25_b, ef_search=settings.ef_search)


def build_service(settings: Settings) -> GrpcService:
    db = Database(settings.database_url, pool_size=settings.pool_size,
                  statement_timeout_ms=settings.statement_timeout_ms)
    backend = make_backend(settings, db)
    servicer = RetrieverServicer(Catalog(db), backend, alpha=settings.alpha, candidates=settings.candidates)

    def add(server: aio.Server) -> list[str]:
        retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server)
        return [retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name]

    async def warmup() -> None:
        await db.open()
        await backend.start()

    async def on_stop() -> None:
        await backend.close()
        await db.close()

    return GrpcService("retriever", add, host=settings.host, port=settings.port, warmup=warmup, on_stop=on_stop)
