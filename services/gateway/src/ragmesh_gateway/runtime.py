"""What one gateway app runs on: the mesh clients, the orchestrator, Redis, the Celery client, the document
lifecycle and the trace store, built once in the app's lifespan and closed when it ends (`app.state.runtime`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import HTTPException
from redis.asyncio import Redis

from ragmesh_common.connectors import ConnectorStore
from ragmesh_common.context import UserContext
from ragmesh_common.ingestion import create_celery
from ragmesh_common.tokens import TokenSigner
from ragmesh_gateway.cache import SemanticCache, retriever_stamps
from ragmesh_gateway.config import Settings
from ragmesh_gateway.conversations import ConversationClient
from ragmesh_gateway.documents import DocumentLifecycle
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.pipeline import Orchestrator
from ragmesh_gateway.pipeline.compose import AgentBounds
from ragmesh_gateway.traces import Retention, TraceStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RateLimiter:
    """At most `per_minute` chat or search requests per user and clock minute, counted in Redis (0: no limit)."""

    redis: Redis
    per_minute: int

    async def check(self, user: UserContext) -> None:
        if self.per_minute <= 0:
            return
        key = f"ragmesh:rate:{user.user_id}:{int(time.time() // 60)}"
        try:
            count = await self.redis.incr(key)
            if count == 1:
                await self.redis.expire(key, 90)
        except Exception:  # a down Redis must not stop chat
            logger.warning("rate limiter unavailable; request allowed", exc_info=True)
            return
        if count > self.per_minute:
            raise HTTPException(
                429, f"rate limit: at most {self.per_minute} requests per minute", headers={"Retry-After": "60"}
            )


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    mesh: Mesh
    orchestrator: Orchestrator
    redis: Redis
    rate_limiter: RateLimiter
    documents: DocumentLifecycle
    traces: TraceStore | None  # None without GATEWAY_TRACES_DSN
    conversations: ConversationClient
    cache: SemanticCache | None = None  # None with GATEWAY_CACHE_ENABLED=false
    connectors: ConnectorStore | None = None  # None without CONNECTORS_DSN


@asynccontextmanager
async def open_runtime(
    settings: Settings, mesh: Mesh | None = None, signer: TokenSigner | None = None
) -> AsyncIterator[Runtime]:
    """Builds the runtime (the mesh once: `mesh`, for tests, or the configured one), keeps the trace table
    bounded while it is open, and closes everything after. `signer` signs the ingestion tasks' grants."""
    mesh = mesh or Mesh.from_settings(settings)
    redis = Redis.from_url(settings.broker_url, socket_timeout=5, socket_connect_timeout=5)
    cache = (
        SemanticCache(
            redis,
            retriever_stamps(mesh, settings.deadlines.retrieve),
            threshold=settings.cache_similarity,
            ttl_seconds=settings.cache_ttl_seconds,
            max_entries=settings.cache_max_entries,
            bucket_entries=settings.cache_bucket_entries,
        )
        if settings.cache_enabled
        else None
    )
    orchestrator = Orchestrator(
        mesh,
        settings.deadlines,
        min_relevance=settings.min_relevance,
        candidates=settings.candidates,
        graph_enabled=settings.graph_enabled,
        graph_leg=settings.graph_leg,
        graph_seed_passages=settings.graph_seed_passages,
        graph_placement=settings.graph_placement,
        graph_placed=settings.graph_placed,
        linked_documents=settings.linked_documents,
        respell_questions=settings.respell_questions,
        link_passages=settings.link_passages,
        define_depth=settings.define_depth,
        table_chunks=settings.table_chunks,
        relevance=settings.relevance,
        corrective_alpha=settings.corrective_alpha,
        corrective_candidates=settings.corrective_candidates,
        cache=cache,
        agent=AgentBounds(
            settings.agent_max_steps,
            settings.agent_max_seconds,
            settings.agent_max_llm_tokens,
            settings.planner_spacy_model,
        ),
    )
    celery = create_celery(settings.broker_url, settings.enqueue_timeout_seconds)
    documents = DocumentLifecycle(settings, mesh, redis, celery, signer)
    documents.cache = cache
    traces = (
        TraceStore(settings.traces_dsn, settings.traces_rls_key or "", retention_dsn=settings.traces_retention_dsn)
        if settings.traces_dsn
        else None
    )
    retention = Retention.from_env()
    background: list[asyncio.Task[None]] = []
    if traces:
        await traces.open()
        if retention.enabled and settings.traces_retention_dsn:
            background.append(asyncio.create_task(traces.keep_bounded(retention)))
    settings.upload_dir.mkdir(parents=True, exist_ok=True)
    connectors = ConnectorStore(settings.connectors_dsn) if settings.connectors_dsn else None
    try:
        yield Runtime(
            settings=settings,
            mesh=mesh,
            orchestrator=orchestrator,
            redis=redis,
            rate_limiter=RateLimiter(redis, settings.rate_limit_per_minute),
            documents=documents,
            traces=traces,
            conversations=ConversationClient(mesh, settings.deadlines.retrieve),
            cache=cache,
            connectors=connectors,
        )
    finally:
        for task in background:
            task.cancel()
        if connectors is not None:
            await asyncio.to_thread(connectors.close)
        if traces:
            await traces.close()
        await redis.aclose()
        await mesh.close()
