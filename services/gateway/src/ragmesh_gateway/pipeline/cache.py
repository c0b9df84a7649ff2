"""cache, cache pin and cache store: the chat's semantic cache (ragmesh_gateway.cache; README, "Semantic cache").

cache (after understand): embeds the standalone question once (the retrieve step searches with this vector
instead of embedding it again), looks for a close cached question among those asked with the same options, and
serves its answer when the asker may read every one of its sources now and none changed. Optional: a down
embedder or Redis degrades to the full pipeline.

cache pin (after graph, before answer) takes the stamps of the sources given to the model; cache store (after
the answerer's verification, before the final event) caches the answer under them. Only a verified answer
(outcome `answer`, not withheld) is stored, and only one that rests on the sources alone: not one written with a
conversation's history (the user's own text) or with graph facts (which name no document).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from grpc import aio
from opentelemetry import trace
from redis.exceptions import RedisError

from ragmesh.embedder.v1 import embedder_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.text.numbers import numbers
from ragmesh_common.text.questions import Question
from ragmesh_gateway.cache import SemanticCache, option_key
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline.events import Event, answer_event
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step, elapsed_ms

logger = logging.getLogger(__name__)

# Request fields that do not change the answer: the question itself (compared by embedding), the transport,
# the history (the standalone question already resolved it), the switch, and a conversation to append to.
NOT_OPTIONS = frozenset({"question", "stream", "history", "cache", "conversation_id"})


def request_options(request: ChatRequest) -> dict[str, Any]:
    """Every option of the chat that changes its answer (filters, document ids, levels, mode, model, ...): a
    field added to ChatRequest is part of the key unless named in NOT_OPTIONS."""
    return request.model_dump(mode="json", exclude=set(NOT_OPTIONS))


def asks(question: str) -> dict[str, Any]:
    """What an embedding cannot tell apart in two close questions, so part of the bucket: the kind of answer the
    question asks for ("When was IBM founded?" and "Where was IBM founded?" embed at a cosine above 0.95) and the
    numbers it names (a question about 2019 never borrows the answer about 2020)."""
    return {
        "asks": Question.parse(question).answer_type.value,
        "numbers": sorted({round(n.value, 6) for n in numbers(question)}),
    }


def cache_wanted(state: RequestState, cache: SemanticCache | None) -> bool:
    return cache is not None and isinstance(state.request, ChatRequest) and state.request.cache


class CacheLookup(Step):
    name = "cache"
    span = "cache lookup"
    required = False

    def __init__(self, mesh: Mesh, cache: SemanticCache | None, embed_timeout: float) -> None:
        self.mesh = mesh
        self.cache = cache
        self.timeout = embed_timeout

    def applies(self, state: RequestState) -> bool:
        return state.answering and cache_wanted(state, self.cache)

    async def run(self, state: RequestState) -> dict[str, Any]:
        assert self.cache is not None and isinstance(state.request, ChatRequest)
        started = time.perf_counter()
        reply = await self.mesh.embedder.Embed(
            embedder_pb2.EmbedRequest(texts=[state.query], is_query=True),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        if not reply.vectors or not reply.vectors[0].values:
            state.degrade(self.name, "the embedder returned no vector")
            return {"hit": False}
        state.query_vector = list(reply.vectors[0].values)
        state.embed_ms = elapsed_ms(started)
        options = request_options(state.request)
        if state.language:  # Accept-Language changes how a short question is searched
            options["language"] = state.language
        options.update(asks(state.query))
        state.cache_bucket = option_key(options)
        span = trace.get_current_span()
        try:
            found = await self.cache.lookup(state.user, state.cache_bucket, state.query_vector)
        except (RedisError, OSError) as exc:
            state.degrade(self.name, f"redis {type(exc).__name__}")
            await self.cache.count("errors")
            return {"hit": False}
        except aio.AioRpcError as exc:  # the hit-time access check could not be made: never serve then
            state.degrade(self.name, f"access check {exc.code().name}")
            await self.cache.count("errors")
            return {"hit": False}
        span.set_attribute(attr.RAG_CACHE_CANDIDATES, found.candidates)
        span.set_attribute(attr.RAG_CACHE_SIMILARITY, round(found.best, 4))
        span.set_attribute(attr.RAG_CACHE_REFUSED, found.refused)
        span.set_attribute(attr.RAG_CACHE_HIT, found.hit is not None)
        for reason, refused in sorted(found.reasons.items()):
            await self.cache.count("refused", refused, reason)
        if found.hit is None:
            await self.cache.count("misses")
            return {"hit": False, "similarity": round(found.best, 4), "candidates": found.candidates}
        await self.cache.count("hits")
        span.set_attribute(attr.RAG_CACHE_TRACE_ID, found.hit.trace_id)
        state.cached = found.hit
        state.accessible = found.hit.accessible_documents
        return {"hit": True, "similarity": round(found.hit.similarity, 4), "candidates": found.candidates}

    def degraded_reason(self, exc: aio.AioRpcError) -> str:
        return f"embed {exc.code().name}; no cache lookup"


def storable(state: RequestState) -> bool:
    """A verified answer that rests on its sources alone (module docstring)."""
    return (
        state.answering
        and state.cache_bucket is not None
        and state.query_vector is not None
        and not state.history
        and not state.facts
    )


class CachePin(Step):
    """No progress event: a step of the cache, not of the answer."""

    name = "cache"
    span = "cache pin"
    required = False

    def __init__(self, cache: SemanticCache | None) -> None:
        self.cache = cache

    def applies(self, state: RequestState) -> bool:
        return storable(state) and cache_wanted(state, self.cache) and bool(state.results)

    async def run(self, state: RequestState) -> dict[str, Any]:
        assert self.cache is not None and isinstance(state.request, ChatRequest)
        sources = state.answer_sources()
        try:
            state.cache_stamps = await self.cache.pin(state.user, [item.chunk.document_id for item in sources])
        except (RedisError, OSError) as exc:
            state.degrade(self.name, f"redis {type(exc).__name__}; not cached")
        return {}

    def degraded_reason(self, exc: aio.AioRpcError) -> str:
        return f"access check {exc.code().name}; not cached"

    async def stream(self, state: RequestState) -> AsyncGenerator[Event, None]:
        await self.execute(state)
        return
        yield  # an async generator without events


class CacheStore(Step):
    name = "cache"
    span = "cache store"
    required = False

    def __init__(self, cache: SemanticCache | None) -> None:
        self.cache = cache

    def applies(self, state: RequestState) -> bool:
        final = state.final
        return (
            storable(state)
            and state.cache_stamps is not None
            and final is not None
            and final.verified
            and not final.withheld
        )

    async def run(self, state: RequestState) -> dict[str, Any]:
        assert self.cache is not None and isinstance(state.request, ChatRequest)
        assert state.final is not None and state.cache_bucket and state.query_vector and state.cache_stamps
        payload = answer_event(state, state.final, state.answer_sources())["data"]
        try:
            entry = await self.cache.store(
                state.cache_bucket,
                state.query_vector,
                question=state.query,
                payload=payload,
                trace_id=state.trace_id,
                stamps=state.cache_stamps,
            )
        except (RedisError, OSError) as exc:
            state.degrade(self.name, f"redis {type(exc).__name__}; not cached")
            return {}
        trace.get_current_span().set_attribute(attr.RAG_CACHE_STORED, True)
        logger.debug("semantic cache: stored %s", entry)
        return {}

    async def stream(self, state: RequestState) -> AsyncGenerator[Event, None]:
        await self.execute(state)
        return
        yield  # an async generator without events
