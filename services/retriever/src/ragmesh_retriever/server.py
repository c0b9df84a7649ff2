"""RetrieverService: catalogue RPCs and permission-aware hybrid search."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC

from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common import limits
from ragmesh_common.context import UserContext, require_user
from ragmesh_common.errors import FailedPrecondition, InvalidArgument, PermissionDenied, grpc_errors
from ragmesh_common.server import GrpcService
from ragmesh_common.telemetry import retrieval_attributes
from ragmesh_retriever.analysis import LanguageChoice, LanguagePolicy
from ragmesh_retriever.assembly import AssemblyOptions, Candidate, assemble, estimate_tokens, plan
from ragmesh_retriever.backends.base import Hit, Scope, SearchBackend, SearchQuery, kind_value
from ragmesh_retriever.catalog import Catalog
from ragmesh_retriever.config import Settings
from ragmesh_retriever.conversations import Conversations
from ragmesh_retriever.documents import finish_index, lock_version, parse_document_id
from ragmesh_retriever.embedding import QueryEmbedder
from ragmesh_retriever.ranking import Fusion, merge_sub_queries, merge_summary_first
from ragmesh_retriever.sections import fetch_section
from ragmesh_retriever.session import Database

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

MAX_TOP_K = limits.CANDIDATES.value
MAX_STAMP_IDS = limits.DOCUMENT_IDS.value  # documents of one cached answer checked at hit time
MAX_GRAPH_WEIGHT = 10.0
VALID_LEVELS = {common_pb2.CHUNK_LEVEL_DOCUMENT, common_pb2.CHUNK_LEVEL_SECTION, common_pb2.CHUNK_LEVEL_PARAGRAPH}


class RetrieverServicer(retriever_pb2_grpc.RetrieverServiceServicer):
    def __init__(
        self,
        catalog: Catalog,
        backend: SearchBackend,
        *,
        alpha: float,
        candidates: int,
        embedder: QueryEmbedder | None = None,
        stuck_after_seconds: float = 900.0,
        graph_weight: float = 2.0,
        languages: LanguagePolicy | None = None,
    ) -> None:
        self.catalog = catalog
        self.conversations = Conversations(catalog.db)
        self.stuck_after_seconds = stuck_after_seconds
        self.backend = backend
        self.alpha = alpha
        self.graph_weight = graph_weight
        self.candidates = candidates
        self.embedder = embedder
        self.languages = languages or LanguagePolicy()

    @grpc_errors
    async def GetDocument(
        self,
        request: retriever_pb2.GetDocumentRequest,
        context: aio.ServicerContext[retriever_pb2.GetDocumentRequest, common_pb2.Document],
    ) -> common_pb2.Document:
        return await self.catalog.get(await require_user(context), request.document_id)

    @grpc_errors
    async def ListDocuments(
        self,
        request: retriever_pb2.ListDocumentsRequest,
        context: aio.ServicerContext[retriever_pb2.ListDocumentsRequest, retriever_pb2.ListDocumentsResponse],
    ) -> retriever_pb2.ListDocumentsResponse:
        docs, total, next_cursor = await self.catalog.list(
            await require_user(context),
            request.limit,
            request.offset,
            statuses=list(request.statuses),
            owner=request.owner_user,
            mime_type=request.mime_type,
            extension=request.extension,
            updated_since=request.updated_since.ToDatetime(tzinfo=UTC) if request.HasField("updated_since") else None,
            cursor=request.cursor,
            content_sha256=list(request.content_sha256),
            parsed_before=request.parsed_before,
        )
        return retriever_pb2.ListDocumentsResponse(documents=docs, total=total, next_cursor=next_cursor)

    @grpc_errors
    async def UpdateDocumentStatus(
        self,
        request: retriever_pb2.UpdateDocumentStatusRequest,
        context: aio.ServicerContext[retriever_pb2.UpdateDocumentStatusRequest, common_pb2.Document],
    ) -> common_pb2.Document:
        return await self.catalog.update_status(await require_user(context), request)

    @grpc_errors
    async def DeleteDocument(
        self,
        request: retriever_pb2.DeleteDocumentRequest,
        context: aio.ServicerContext[retriever_pb2.DeleteDocumentRequest, retriever_pb2.DeleteDocumentResponse],
    ) -> retriever_pb2.DeleteDocumentResponse:
        user = await require_user(context)
        await self.catalog.get(user, request.document_id)  # NOT_FOUND before touching the index
        if not self.backend.shares_catalogue:
            await self.backend.delete(user, request.document_id)
        await self.catalog.delete(user, request.document_id)  # chunks in the catalogue's database cascade
        return retriever_pb2.DeleteDocumentResponse(deleted=True)

    @grpc_errors
    async def IndexChunks(
        self,
        request: retriever_pb2.IndexChunksRequest,
        context: aio.ServicerContext[retriever_pb2.IndexChunksRequest, retriever_pb2.IndexChunksResponse],
    ) -> retriever_pb2.IndexChunksResponse:
        user = await require_user(context)
        parse_document_id(request.document_id)
        with tracer.start_as_current_span("index") as span:
            span.set_attribute(attr.RAG_DOCUMENT_ID, request.document_id)
            span.set_attribute(attr.RAG_CHUNK_COUNT, len(request.chunks))
            span.set_attribute(attr.RAG_SEARCH_BACKEND, self.backend.name)
            span.set_attribute(attr.RAG_DOCUMENT_VERSION, request.version)
            if not self.backend.shares_catalogue:
                # the catalogue row stays locked while the other store is written; the version swap follows it
                async with self.catalog.db.transaction(user) as conn:
                    target = await lock_version(conn, parse_document_id(request.document_id), request.version)
                    count = await self.backend.index(user, request.document_id, list(request.chunks))
                    await finish_index(
                        conn, target, sum(1 for c in request.chunks if c.level in (0, common_pb2.CHUNK_LEVEL_PARAGRAPH))
                    )
            else:
                count = await self.backend.index(user, request.document_id, list(request.chunks), request.version)
        return retriever_pb2.IndexChunksResponse(indexed=count)

    def _query(self, request: retriever_pb2.SearchRequest) -> SearchQuery:
        if request.top_k < 0 or request.top_k > MAX_TOP_K:
            raise InvalidArgument(f"top_k must be within 0..{MAX_TOP_K}, got {request.top_k}")
        if request.HasField("alpha") and not 0.0 <= request.alpha <= 1.0:
            raise InvalidArgument(f"alpha must be within [0, 1], got {request.alpha}")
        if not request.query.strip() and not request.query_vector:
            raise InvalidArgument("query text or query_vector is required")
        # lengths and counts (query, sub_queries, document_ids): the shared request check (ragmesh_common.limits)
        for i, sub in enumerate(request.sub_queries):
            if not sub.strip():
                raise InvalidArgument(f"sub_queries[{i}] is blank")
        if request.sub_queries and request.query_vector and not request.embed_query:
            raise InvalidArgument("sub_queries need embed_query (a query_vector fits the query only)")
        fusion = Fusion.from_proto(request.fusion)
        if fusion not in self.backend.fusions:
            raise InvalidArgument(
                f"{fusion.value} fusion is not offered by the {self.backend.name} backend "
                f"(it offers {', '.join(sorted(f.value for f in self.backend.fusions))})"
            )
        levels = [int(level) for level in request.levels] or [common_pb2.CHUNK_LEVEL_PARAGRAPH]
        if any(level not in VALID_LEVELS for level in levels):
            raise InvalidArgument("levels must be CHUNK_LEVEL_DOCUMENT, _SECTION or _PARAGRAPH")
        choice = self.languages.choose(request.query, request.language)
        language = choice.languages[0]
        alpha = request.alpha if request.HasField("alpha") else self.languages.alpha(self.alpha, language)
        self._trace_languages(choice, alpha, explicit=request.HasField("alpha"))
        if request.HasField("graph_weight") and not 0.0 <= request.graph_weight <= MAX_GRAPH_WEIGHT:
            raise InvalidArgument(f"graph_weight must be within [0, {MAX_GRAPH_WEIGHT}], got {request.graph_weight}")
        graph: dict[str, float] = {}
        for i, leg in enumerate(request.graph_scores):
            if not leg.chunk_id or not math.isfinite(leg.score):
                raise InvalidArgument(f"graph_scores[{i}] needs a chunk_id and a finite score")
            graph[leg.chunk_id] = max(graph.get(leg.chunk_id, leg.score), leg.score)
        if not request.query_vector and not request.embed_query:
            alpha = 0.0  # lexical only
        return SearchQuery(
            text=request.query,
            vector=list(request.query_vector) or None,
            top_k=request.top_k or 10,
            alpha=alpha,
            fusion=fusion,
            levels=levels,
            candidates=max(self.candidates, request.top_k),
            languages=choice.languages,
            feedback_docs=max(0, min(request.feedback_docs, 50)),
            feedback_weight=request.feedback_weight or 1.0,
            graph=graph,
            graph_weight=request.graph_weight if request.HasField("graph_weight") else self.graph_weight,
        )

    def _trace_languages(self, choice: LanguageChoice, alpha: float, *, explicit: bool) -> None:
        """The languages searched on the search's span; a hint not used and a language the embedder does not
        cover (the fusion leans on BM25) are logged and traced as degraded."""
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_SEARCH_LANGUAGES, list(choice.languages))
        span.set_attribute(attr.RAG_SEARCH_LANGUAGE_CHOICE, choice.reason)
        if choice.ignored_hint:
            reason = f"language hint {choice.ignored_hint[:40]!r} has no text search configuration; ignored"
            logger.warning("search degraded: %s", reason)
            span.add_event("degraded", {attr.RAG_STAGE: "language", attr.RAG_DEGRADED_REASON: reason})
        language = choice.languages[0]
        if not explicit and not self.languages.covers(language) and alpha < self.alpha:
            reason = f"the embedder does not cover {language!r}; alpha {self.alpha} lowered to {alpha}"
            logger.info("search leans on BM25: %s", reason)
            span.add_event("degraded", {attr.RAG_STAGE: "embed", attr.RAG_DEGRADED_REASON: reason})

    @grpc_errors
    async def Search(
        self,
        request: retriever_pb2.SearchRequest,
        context: aio.ServicerContext[retriever_pb2.SearchRequest, retriever_pb2.SearchResponse],
    ) -> retriever_pb2.SearchResponse:
        user = await require_user(context)
        query = self._query(request)
        restrict = [parse_document_id(d) for d in request.document_ids]
        span = trace.get_current_span()  # the gRPC server span: the search has no child span of the same extent
        span.set_attribute(attr.RAG_SEARCH_BACKEND, self.backend.name)
        span.set_attribute(attr.RAG_SEARCH_TOP_K, query.top_k)
        span.set_attribute(attr.RAG_SEARCH_ALPHA, query.alpha)
        span.set_attribute(attr.RAG_SEARCH_FUSION, query.fusion.value)
        # the query first, then its sub-queries: each embeds while the permission lookup runs
        searches = [
            # a given query_vector is the query's own; the sub-queries are embedded here
            self._start(
                user,
                # the graph leg scores the question's chunks: the sub-queries search without it
                replace(query, text=text, vector=query.vector if i == 0 else None, graph=query.graph if i == 0 else {}),
                request.embed_query,
            )
            for i, text in enumerate([query.text, *request.sub_queries])
        ]
        try:
            async with self.catalog.db.transaction(user) as conn:
                accessible, counts = await self.catalog.search_scope(
                    conn, restrict or None, self.backend.scope_list_max
                )
            span.set_attribute(attr.RAG_SEARCH_ACCESSIBLE_DOCS, accessible.documents)
            span.set_attribute(attr.RAG_SEARCH_READABLE_DOCS, counts.readable)
            span.set_attribute(attr.RAG_SEARCH_INGESTING_DOCS, counts.ingesting)
            span.set_attribute(attr.RAG_SEARCH_FILTER_MATCHED_DOCS, counts.filter_matched)
            strategy = request.strategy or retriever_pb2.STRATEGY_DIRECT
            rankings = (
                await asyncio.gather(*[self._ranked(user, s, strategy, accessible, request.context) for s in searches])
                if accessible
                else [[]]
            )
        finally:
            for s in searches:
                if s.pending is not None and not s.pending.done():
                    s.pending.cancel()  # nothing readable, or the search failed: the vector is not needed
        reasons = list(dict.fromkeys(str(s.outcome["reason"]) for s in searches if s.outcome.get("reason")))
        for reason in reasons:
            logger.warning("search degraded: %s", reason)
            span.set_attribute(attr.RAG_DEGRADED, True)
            span.set_attribute(attr.RAG_DEGRADED_REASON, reason)
        results = (
            rankings[0]
            if len(rankings) == 1
            else merge_sub_queries(
                rankings[0],
                rankings[1:],
                key=lambda item: item.chunk.chunk_id,
                vector_score=lambda item: item.vector_score,
            )
        )
        span.set_attribute(attr.RAG_SEARCH_RESULTS, len(results))
        span.set_attributes(
            retrieval_attributes(
                query.text, [(r.chunk.chunk_id, r.chunk.document_id, r.score, r.chunk.text) for r in results]
            )
        )
        main = searches[0].outcome
        return retriever_pb2.SearchResponse(
            results=results,
            accessible_documents=accessible.documents,
            backend=self.backend.name,
            strategy=strategy,
            vector_unavailable=str(main.get("reason") or (reasons[0] if reasons else "")),
            embed_ms=float(main.get("ms", 0.0)),
            readable_documents=counts.readable,
            ingesting_documents=counts.ingesting,
            filter_matched_documents=counts.filter_matched,
        )

    def _start(self, user: UserContext, query: SearchQuery, embed_query: bool) -> _Search:
        """One (sub-)query's search, its embedding started when the retriever embeds the query itself."""
        search = _Search(query)
        if query.vector is None and embed_query and query.alpha > 0.0:
            if self.embedder is None:
                search.outcome["reason"] = "the retriever has no embedder (EMBEDDER_ADDR); lexical search only"
                search.query = replace(query, alpha=0.0)
            else:  # embeds while the permission lookup and the lexical leg run
                search.pending = asyncio.create_task(self._embed(user, query.text, search.outcome))
        return search

    async def _ranked(
        self,
        user: UserContext,
        search: _Search,
        strategy: int,
        accessible: Scope,
        context: retriever_pb2.ContextOptions,
    ) -> list[common_pb2.ScoredChunk]:
        """One (sub-)query ranked over the accessible documents: direct or summary-first, then the context
        assembly when asked for."""
        query, lexical = search.query, None
        if search.pending is not None:
            if strategy == retriever_pb2.STRATEGY_SUMMARY_FIRST:
                vector = await search.pending
            else:  # the lexical leg needs no vector: it runs while the embedder works
                lexical, vector = await asyncio.gather(self.backend.lexical(user, query, accessible), search.pending)
            query = replace(query, vector=vector, alpha=query.alpha if vector else 0.0)
        if strategy == retriever_pb2.STRATEGY_SUMMARY_FIRST:
            results = await self._summary_first(user, query, accessible)
        else:
            results = [scored(h) for h in await self.backend.search(user, query, accessible, lexical=lexical)]
        if context.enabled and results:
            with tracer.start_as_current_span("assemble context"):
                results = await self._assemble(user, results, context, query.top_k)
        return results

    async def _embed(self, user: UserContext, text: str, outcome: dict[str, str | float]) -> list[float] | None:
        """The query's vector from the embedder, or None (lexical only) with the reason in `outcome`."""
        assert self.embedder is not None
        started = time.perf_counter()
        try:
            return await self.embedder.embed(user, text)  # traced by the gRPC client span
        except aio.AioRpcError as exc:
            outcome["reason"] = f"embedder {exc.code().name}; lexical search only"
            return None
        finally:
            outcome["ms"] = round((time.perf_counter() - started) * 1000, 1)

    async def _summary_first(
        self, user: UserContext, query: SearchQuery, accessible: Scope
    ) -> list[common_pb2.ScoredChunk]:
        """Two stages: the top documents by their summaries, then chunks within them — merged by reciprocal
        rank with a direct chunk search over everything, so nothing is lost when the summaries miss."""
        with tracer.start_as_current_span("summary search"):
            summaries = await self.backend.search(
                user, replace(query, levels=[common_pb2.CHUNK_LEVEL_DOCUMENT], top_k=SUMMARY_DOCUMENTS), accessible
            )
        top_docs = list(dict.fromkeys(h.chunk.document_id for h in summaries))
        direct, within = await asyncio.gather(
            self.backend.search(user, query, accessible),
            self.backend.search(user, query, top_docs) if top_docs else _no_hits(),
        )
        results = []
        for hit, score, origin in merge_summary_first(
            direct, within, key=lambda h: h.chunk.chunk_id, top_k=query.top_k
        ):
            item = scored(hit, ORIGINS[origin])
            item.score = score
            results.append(item)
        return results

    async def _assemble(
        self,
        user: UserContext,
        results: list[common_pb2.ScoredChunk],
        context: retriever_pb2.ContextOptions,
        top_k: int,
    ) -> list[common_pb2.ScoredChunk]:
        options = AssemblyOptions.from_proto(context)
        cands = [candidate(r) for r in results]
        needs = plan(cands, options)
        docs = sorted(
            {
                *needs.documents,
                *(d for d, _ in needs.sections),
                *(c.document_id for c in cands if c.chunk_id in set(needs.thin_chunk_ids)),
            }
        )
        rows = (
            await self.backend.document_chunks(
                user, docs, [common_pb2.CHUNK_LEVEL_SECTION, common_pb2.CHUNK_LEVEL_PARAGRAPH]
            )
            if docs
            else []
        )
        pool = [candidate(common_pb2.ScoredChunk(chunk=c), score=0.0) for c in rows]
        section_totals: dict[tuple[str, tuple[str, ...]], int] = {}
        for c in pool:
            if c.level == common_pb2.CHUNK_LEVEL_PARAGRAPH:
                key = (c.document_id, c.section_key)
                section_totals[key] = section_totals.get(key, 0) + 1
        doc_chunks: dict[str, list[Candidate]] = {}
        for c in pool:
            if c.level == common_pb2.CHUNK_LEVEL_PARAGRAPH:
                doc_chunks.setdefault(c.document_id, []).append(c)
        neighbours: dict[str, list[Candidate]] = {}
        by_id = {c.chunk_id: c for c in pool}
        for chunk_id in needs.thin_chunk_ids:
            me = next(c for c in cands if c.chunk_id == chunk_id)
            siblings = sorted(
                (c for c in doc_chunks.get(me.document_id, []) if c.parent_id == me.parent_id), key=lambda c: c.ordinal
            )
            position = next((i for i, c in enumerate(siblings) if c.chunk_id == chunk_id), None)
            near = (
                []
                if position is None
                else siblings[max(position - 1, 0) : position] + siblings[position + 1 : position + 2]
            )
            parent = [by_id[me.parent_id]] if me.parent_id in by_id else []
            neighbours[chunk_id] = parent + near
        assembled = assemble(
            cands, options, section_totals=section_totals, doc_chunks=doc_chunks, neighbours=neighbours, limit=top_k
        )
        out = []
        for c in assembled:
            item = common_pb2.ScoredChunk()
            item.CopyFrom(c.payload)
            item.score = c.score
            item.origin = ORIGINS[c.origin] if c.origin != "search" or not item.origin else item.origin
            out.append(item)
        return out

    @grpc_errors
    async def CheckDocumentAccess(
        self,
        request: retriever_pb2.CheckDocumentAccessRequest,
        context: aio.ServicerContext[
            retriever_pb2.CheckDocumentAccessRequest, retriever_pb2.CheckDocumentAccessResponse
        ],
    ) -> retriever_pb2.CheckDocumentAccessResponse:
        user = await require_user(context)
        ids: set[uuid.UUID] = set()
        for value in request.document_ids:
            try:
                ids.add(uuid.UUID(value))
            except ValueError:
                continue  # not a document id: neither readable nor owned
        if not ids:
            return retriever_pb2.CheckDocumentAccessResponse()
        async with self.catalog.db.transaction(user) as conn:  # RLS: only rows the user may see come back
            cur = await conn.execute(
                "SELECT id::text, status = 'ready', owner_user = %s FROM documents WHERE id = ANY(%s)",
                (user.user_id, list(ids)),
            )
            rows = await cur.fetchall()
        trace.get_current_span().set_attribute(attr.RAG_SEARCH_ACCESSIBLE_DOCS, sum(1 for r in rows if r[1]))
        return retriever_pb2.CheckDocumentAccessResponse(
            readable_ids=sorted(r[0] for r in rows if r[1]), owned_ids=sorted(r[0] for r in rows if r[2])
        )

    @grpc_errors
    async def GetDocumentStamps(
        self,
        request: retriever_pb2.GetDocumentStampsRequest,
        context: aio.ServicerContext[retriever_pb2.GetDocumentStampsRequest, retriever_pb2.GetDocumentStampsResponse],
    ) -> retriever_pb2.GetDocumentStampsResponse:
        user = await require_user(context)
        if len(request.document_ids) > MAX_STAMP_IDS:
            raise InvalidArgument(f"at most {MAX_STAMP_IDS} document ids per call")
        ids: set[uuid.UUID] = set()
        for value in request.document_ids:
            try:
                ids.add(uuid.UUID(value))
            except ValueError:
                continue  # not a document id: not readable
        async with self.catalog.db.transaction(user) as conn:  # RLS: only rows the user may read come back
            cur = await conn.execute(
                "SELECT id::text, version, updated_at, md5(concat_ws('|', version::text, updated_at::text, "
                "owner_user, owner_department, acl_public::text, array_to_string(acl_departments, ','), "
                "array_to_string(acl_roles, ','), array_to_string(acl_users, ','))) "
                "FROM documents WHERE status = 'ready' AND id = ANY(%s) ORDER BY id",
                (list(ids),),
            )
            rows = await cur.fetchall()
            # the per-scope counts: the same number as counting the readable documents, without reading them
            count = await conn.execute("SELECT coalesce(sum(n), 0) FROM rag_scope_documents WHERE status = 'ready'")
            total = await count.fetchone()
        reply = retriever_pb2.GetDocumentStampsResponse(accessible_documents=int(total[0]) if total else 0)
        for doc_id, version, updated_at, stamp in rows:
            item = reply.documents.add(document_id=doc_id, version=version, stamp=stamp)
            item.updated_at.FromDatetime(updated_at.astimezone(UTC))
        return reply

    @grpc_errors
    async def CreateOrGetDocument(
        self,
        request: retriever_pb2.CreateOrGetDocumentRequest,
        context: aio.ServicerContext[
            retriever_pb2.CreateOrGetDocumentRequest, retriever_pb2.CreateOrGetDocumentResponse
        ],
    ) -> retriever_pb2.CreateOrGetDocumentResponse:
        user = await require_user(context)
        doc, existing = await self.catalog.create_or_get(
            user,
            request.title,
            request.filename,
            request.mime_type,
            request.acl,
            request.size_bytes,
            request.content_sha256,
        )
        trace.get_current_span().set_attribute(attr.RAG_DOCUMENT_DEDUPLICATED, existing)
        return retriever_pb2.CreateOrGetDocumentResponse(document=doc, existing=existing)

    @grpc_errors
    async def BeginNewVersion(
        self,
        request: retriever_pb2.BeginNewVersionRequest,
        context: aio.ServicerContext[retriever_pb2.BeginNewVersionRequest, retriever_pb2.BeginNewVersionResponse],
    ) -> retriever_pb2.BeginNewVersionResponse:
        doc, version, unchanged = await self.catalog.begin_new_version(await require_user(context), request)
        trace.get_current_span().set_attribute(attr.RAG_DOCUMENT_VERSION, version)
        return retriever_pb2.BeginNewVersionResponse(document=doc, version=version, unchanged=unchanged)

    @grpc_errors
    async def UpdateDocument(
        self,
        request: retriever_pb2.UpdateDocumentRequest,
        context: aio.ServicerContext[retriever_pb2.UpdateDocumentRequest, retriever_pb2.UpdateDocumentResponse],
    ) -> retriever_pb2.UpdateDocumentResponse:
        return retriever_pb2.UpdateDocumentResponse(
            document=await self.catalog.update(await require_user(context), request)
        )

    @grpc_errors
    async def ListDocumentAudit(
        self,
        request: retriever_pb2.ListDocumentAuditRequest,
        context: aio.ServicerContext[retriever_pb2.ListDocumentAuditRequest, retriever_pb2.ListDocumentAuditResponse],
    ) -> retriever_pb2.ListDocumentAuditResponse:
        entries, next_cursor = await self.catalog.audit(
            await require_user(context), request.document_id, request.limit, request.cursor
        )
        return retriever_pb2.ListDocumentAuditResponse(entries=entries, next_cursor=next_cursor)

    @grpc_errors
    async def ListChunks(
        self,
        request: retriever_pb2.ListChunksRequest,
        context: aio.ServicerContext[retriever_pb2.ListChunksRequest, retriever_pb2.ListChunksResponse],
    ) -> retriever_pb2.ListChunksResponse:
        user = await require_user(context)
        if request.level and request.level not in VALID_LEVELS:
            raise InvalidArgument("level must be CHUNK_LEVEL_DOCUMENT, _SECTION, _PARAGRAPH or unspecified (any)")
        if self.backend.name != "pgvector":
            raise FailedPrecondition("ListChunks reads the chunk table of the pgvector backend")
        rows, next_cursor = await self.catalog.list_chunks(
            user, request.document_id, int(request.level), request.limit, request.cursor
        )
        return retriever_pb2.ListChunksResponse(
            next_cursor=next_cursor,
            chunks=[
                retriever_pb2.ListedChunk(
                    chunk_id=r["id"],
                    level=r["level"],
                    section_path=r["section_path"],
                    page=r["page"],
                    text=r["text"],
                    token_count=estimate_tokens(r["text"]),
                    ordinal=r["ordinal"],
                    kind=kind_value(r["kind"]),
                    parent_id=r["parent_id"],
                )
                for r in rows
            ],
        )

    @grpc_errors
    async def FetchSection(
        self,
        request: retriever_pb2.FetchSectionRequest,
        context: aio.ServicerContext[retriever_pb2.FetchSectionRequest, retriever_pb2.FetchSectionResponse],
    ) -> retriever_pb2.FetchSectionResponse:
        user = await require_user(context)
        if self.backend.name != "pgvector":
            raise FailedPrecondition("FetchSection reads the chunk table of the pgvector backend")
        reply = await fetch_section(self.catalog.db, user, request)
        trace.get_current_span().set_attribute(attr.RAG_SEARCH_RESULTS, len(reply.results))
        return reply

    @grpc_errors
    async def ListProblemDocuments(
        self,
        request: retriever_pb2.ListProblemDocumentsRequest,
        context: aio.ServicerContext[
            retriever_pb2.ListProblemDocumentsRequest, retriever_pb2.ListProblemDocumentsResponse
        ],
    ) -> retriever_pb2.ListProblemDocumentsResponse:
        user = await require_user(context)
        problems = await self.catalog.problems(
            user, request.stuck_after_seconds or self.stuck_after_seconds, request.limit
        )
        return retriever_pb2.ListProblemDocumentsResponse(documents=problems)

    @grpc_errors
    async def CreateConversation(
        self,
        request: retriever_pb2.CreateConversationRequest,
        context: aio.ServicerContext[retriever_pb2.CreateConversationRequest, retriever_pb2.Conversation],
    ) -> retriever_pb2.Conversation:
        return await self.conversations.create(await require_user(context), request.title)

    @grpc_errors
    async def ListConversations(
        self,
        request: retriever_pb2.ListConversationsRequest,
        context: aio.ServicerContext[retriever_pb2.ListConversationsRequest, retriever_pb2.ListConversationsResponse],
    ) -> retriever_pb2.ListConversationsResponse:
        items, next_cursor = await self.conversations.page(await require_user(context), request.limit, request.cursor)
        return retriever_pb2.ListConversationsResponse(conversations=items, next_cursor=next_cursor)

    @grpc_errors
    async def GetConversation(
        self,
        request: retriever_pb2.GetConversationRequest,
        context: aio.ServicerContext[retriever_pb2.GetConversationRequest, retriever_pb2.GetConversationResponse],
    ) -> retriever_pb2.GetConversationResponse:
        return await self.conversations.get(await require_user(context), request.conversation_id)

    @grpc_errors
    async def UpdateConversation(
        self,
        request: retriever_pb2.UpdateConversationRequest,
        context: aio.ServicerContext[retriever_pb2.UpdateConversationRequest, retriever_pb2.Conversation],
    ) -> retriever_pb2.Conversation:
        return await self.conversations.rename(await require_user(context), request.conversation_id, request.title)

    @grpc_errors
    async def DeleteConversation(
        self,
        request: retriever_pb2.DeleteConversationRequest,
        context: aio.ServicerContext[retriever_pb2.DeleteConversationRequest, retriever_pb2.DeleteConversationResponse],
    ) -> retriever_pb2.DeleteConversationResponse:
        await self.conversations.delete(await require_user(context), request.conversation_id)
        return retriever_pb2.DeleteConversationResponse(deleted=True)

    @grpc_errors
    async def AppendMessage(
        self,
        request: retriever_pb2.AppendMessageRequest,
        context: aio.ServicerContext[retriever_pb2.AppendMessageRequest, retriever_pb2.AppendMessageResponse],
    ) -> retriever_pb2.AppendMessageResponse:
        return await self.conversations.append(await require_user(context), request)

    @grpc_errors
    async def SetMessageFeedback(
        self,
        request: retriever_pb2.SetMessageFeedbackRequest,
        context: aio.ServicerContext[retriever_pb2.SetMessageFeedbackRequest, retriever_pb2.MessageFeedback],
    ) -> retriever_pb2.MessageFeedback:
        return await self.conversations.feedback(await require_user(context), request)

    @grpc_errors
    async def ListFeedback(
        self,
        request: retriever_pb2.ListFeedbackRequest,
        context: aio.ServicerContext[retriever_pb2.ListFeedbackRequest, retriever_pb2.ListFeedbackResponse],
    ) -> retriever_pb2.ListFeedbackResponse:
        user = await require_user(context)
        if "admin" not in user.roles:
            raise PermissionDenied("only an admin may list feedback")
        items = await self.conversations.all_feedback(user, request.rating, request.limit)
        return retriever_pb2.ListFeedbackResponse(feedback=items)

    @grpc_errors
    async def ListRatedMessages(
        self,
        request: retriever_pb2.ListRatedMessagesRequest,
        context: aio.ServicerContext[retriever_pb2.ListRatedMessagesRequest, retriever_pb2.ListRatedMessagesResponse],
    ) -> retriever_pb2.ListRatedMessagesResponse:
        items = await self.conversations.rated(await require_user(context), request.rating, request.limit)
        return retriever_pb2.ListRatedMessagesResponse(messages=items)


SUMMARY_DOCUMENTS = 5


@dataclass
class _Search:
    """A (sub-)query of one Search call: its embedding while pending, and how the embedding went."""

    query: SearchQuery
    pending: asyncio.Task[list[float] | None] | None = None
    outcome: dict[str, str | float] = field(default_factory=dict)  # "reason" (no vector: why), "ms"


# Context assembly names origins ("search", "sibling", ...); the contract carries the enum.
ORIGINS = {name.removeprefix("CHUNK_ORIGIN_").lower(): value for name, value in common_pb2.ChunkOrigin.items() if value}
ORIGIN_NAMES = {value: name for name, value in ORIGINS.items()}


async def _no_hits() -> list[Hit]:
    return []


def scored(
    hit: Hit, origin: common_pb2.ChunkOrigin.ValueType = common_pb2.CHUNK_ORIGIN_SEARCH
) -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(
        chunk=hit.chunk,
        score=hit.hybrid,
        hybrid_score=hit.hybrid,
        lexical_score=hit.lexical or 0.0,
        vector_score=hit.vector or 0.0,
        origin=origin,
    )


def candidate(item: common_pb2.ScoredChunk, score: float | None = None) -> Candidate:
    chunk = item.chunk
    return Candidate(
        chunk_id=chunk.chunk_id,
        document_id=chunk.document_id,
        section_key=tuple(chunk.section_path),
        ordinal=chunk.ordinal,
        parent_id=chunk.parent_id,
        level=chunk.level,
        text=chunk.text,
        score=item.score if score is None else score,
        tokens=estimate_tokens(chunk.text),
        origin=ORIGIN_NAMES.get(item.origin, "search"),
        payload=item,
    )


def make_backend(settings: Settings, db: Database) -> SearchBackend:
    if settings.backend == "weaviate":
        from ragmesh_retriever.backends.weaviate_backend import WeaviateBackend

        assert settings.weaviate_url is not None
        return WeaviateBackend(
            settings.weaviate_url,
            grpc_port=settings.weaviate_grpc_port,
            api_key=settings.weaviate_api_key,
            collection=settings.weaviate_collection,
            k1=settings.bm25_k1,
            b=settings.bm25_b,
            heading_weight=settings.bm25_heading_weight,
        )
    from ragmesh_retriever.backends.pgvector_backend import PgVectorBackend

    return PgVectorBackend(
        db,
        text_search_config=settings.text_search_config,
        k1=settings.bm25_k1,
        b=settings.bm25_b,
        heading_weight=settings.bm25_heading_weight,
        ef_search=settings.ef_search,
        postings_per_term=settings.bm25_postings_per_term,
        min_postings_per_term=settings.bm25_min_postings_per_term,
        document_first_max_docs=settings.bm25_document_first_max_docs,
        vector_exact_max_chunks=settings.vector_exact_max_chunks,
    )


def build_service(settings: Settings) -> GrpcService:
    db = Database(
        settings.database_url,
        rls_key=settings.rls_key,
        pool_size=settings.pool_size,
        statement_timeout_ms=settings.statement_timeout_ms,
    )
    backend = make_backend(settings, db)
    embedder = (
        QueryEmbedder(settings.embedder_addr, settings.embed_timeout_ms / 1000) if settings.embedder_addr else None
    )
    servicer = RetrieverServicer(
        Catalog(db),
        backend,
        alpha=settings.alpha,
        graph_weight=settings.graph_weight,
        candidates=settings.candidates,
        embedder=embedder,
        stuck_after_seconds=settings.stuck_after_seconds,
        languages=LanguagePolicy.of(settings),
    )

    def add(server: aio.Server) -> list[str]:
        retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server)
        return [retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name]

    watch: list[asyncio.Task[None]] = []

    async def warmup() -> None:
        await db.open()
        await backend.start()
        watch.append(asyncio.create_task(watch_database(db, service)))

    async def on_stop() -> None:
        for task in watch:
            task.cancel()
        if embedder is not None:
            await embedder.close()
        await backend.close()
        await db.close()

    service = GrpcService("retriever", add, host=settings.host, port=settings.port, warmup=warmup, on_stop=on_stop)
    return service


DB_HEALTH_INTERVAL = 1.0


async def watch_database(db: Database, service: GrpcService, interval: float = DB_HEALTH_INTERVAL) -> None:
    """Health follows the database: NOT_SERVING while PostgreSQL does not answer (every search would fail, and
    the gateway's readiness and Kubernetes read this status), SERVING again once it does."""
    from grpc_health.v1 import health_pb2

    serving = True
    await asyncio.sleep(interval)
    while True:
        problem = await db.ping(timeout=max(interval, 1.0))
        if (problem is None) != serving:
            serving = problem is None
            status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
            if serving:
                logger.info("database reachable again: SERVING")
            else:
                logger.warning("database unreachable (%s): NOT_SERVING", problem)
            await service.health.set("", status)
            await service.health.set(retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name, status)
        await asyncio.sleep(interval)
