"""Chat (JSON or Server-Sent Events) and search."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from types import MappingProxyType
from typing import Any

import anyio
from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse
from opentelemetry import trace
from sse_starlette.sse import EventSourceResponse

from ragmesh_common import attributes as attr
from ragmesh_common.context import UserContext
from ragmesh_gateway.deps import MetricsDep, OrchestratorDep, RateLimiterDep, User
from ragmesh_gateway.mesh import StepFailed
from ragmesh_gateway.metrics import GatewayMetrics
from ragmesh_gateway.models import (
    CHAT_EVENTS,
    CHAT_EVENTS_DESCRIPTION,
    ChatRequest,
    ChatResponse,
    SearchRequest,
    SearchResponse,
    error_responses,
)
from ragmesh_gateway.pipeline import Orchestrator
from ragmesh_gateway.pipeline.events import source_payload
from ragmesh_gateway.shutdown import SHUTDOWN_GRACE_SECONDS, until_shutdown
from ragmesh_gateway.validation import StrictJSONRoute

tracer = trace.get_tracer(__name__)

SSE_HEADERS = MappingProxyType({"X-Accel-Buffering": "no", "Cache-Control": "no-cache"})

router = APIRouter(route_class=StrictJSONRoute)  # JSON bodies without NaN/Infinity or lone surrogates


def error_response(data: dict[str, Any]) -> JSONResponse:
    """A chat's error event as an HTTP error; a busy answerer's carries Retry-After."""
    headers = {"Retry-After": str(data["retry_after"])} if data.get("retry_after") else None
    return JSONResponse({"detail": data}, status_code=data["status"], headers=headers)


@router.post(
    "/api/v1/chat",
    tags=["chat"],
    summary="Ask a question over the documents you may read",
    response_model=None,
    responses={
        200: {
            "model": ChatResponse,
            "description": CHAT_EVENTS_DESCRIPTION,
            "content": {"text/event-stream": {"schema": CHAT_EVENTS}},
        },
        # 404: a conversation_id that is unknown or another user's (never 403: it does not confirm it exists)
        **error_responses(400, 401, 404, 413, 422, 429, 503),
    },
)
async def chat(
    body: ChatRequest, user: User, orchestrator: OrchestratorDep, limiter: RateLimiterDep, metrics: MetricsDep
) -> Any:
    await limiter.check(user)
    try:
        events = await start_chat(orchestrator, user, body, metrics)
    except StepFailed as exc:
        raise HTTPException(exc.http_status, {k: v for k, v in exc.payload().items() if k != "status"}) from exc
    if body.stream:
        return await stream_response(events)
    return await json_response(events)


async def start_chat(
    orchestrator: Orchestrator, user: UserContext, body: ChatRequest, metrics: GatewayMetrics
) -> AsyncGenerator[dict[str, Any], None]:
    """Runs the chat's steps before the response under its `chat` span (raises StepFailed: 4xx/503) and returns
    its events (progress, tokens, one final or error); the span ends with them, and `metrics` sees each step's
    time and the failure, if any. Shared by the OpenAI-compatible API (routers/openai.py)."""
    span = tracer.start_span("chat", attributes={attr.RAG_USER: user.user_id, attr.RAG_DEPARTMENT: user.department})
    try:
        with trace.use_span(span, end_on_exit=False):
            state = await orchestrator.prepare(user, body)
    except StepFailed as exc:
        span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
        span.end()
        metrics.failed("chat", exc.payload())
        raise
    except BaseException:
        span.end()
        raise

    async def events() -> AsyncGenerator[dict[str, Any], None]:
        try:
            with trace.use_span(span, end_on_exit=False):
                async with contextlib.aclosing(orchestrator.run(state)) as steps:
                    async for item in steps:
                        metrics.event(item)
                        yield item
        finally:
            span.end()

    return events()


async def until_admitted(stream: AsyncGenerator[dict[str, Any], None]) -> list[dict[str, Any]]:
    """The events up to the answerer's admission (its `answer` `started` progress) or the first other event
    (a token, the final, an error), read before a streamed response's status line goes out. `stream` is closed
    when reading fails or is cancelled."""
    head: list[dict[str, Any]] = []
    try:
        async for item in stream:
            head.append(item)
            if item["event"] not in ("progress", "step") or (item["data"].get("stage"), item["data"].get("status")) == (
                "answer",
                "started",
            ):
                break
    except BaseException:
        await stream.aclose()  # the handler failed or was cancelled before the response began
        raise
    return head


async def stream_response(events: AsyncGenerator[dict[str, Any], None]) -> Any:
    """The chat's events as Server-Sent Events. It reads up to the answerer's admission before the status line
    goes out: a busy answerer (queue full, wait over budget) is then a real 503 with Retry-After, not an error
    event in a 200."""
    shutdown = anyio.Event()  # set by sse-starlette when the server stops (SIGTERM)
    stream = until_shutdown(events, shutdown)
    head = await until_admitted(stream)
    if head and head[-1]["event"] == "error":
        await stream.aclose()
        return error_response(head[-1]["data"])

    async def sse() -> AsyncIterator[dict[str, str]]:
        try:
            for item in head:
                yield {"event": item["event"], "data": json.dumps(item["data"])}
            async for item in stream:
                yield {"event": item["event"], "data": json.dumps(item["data"])}
        finally:
            await stream.aclose()  # a client that left cancels the answer at once (its slot frees)

    return EventSourceResponse(
        sse(), headers=SSE_HEADERS, ping=15, shutdown_event=shutdown, shutdown_grace_period=SHUTDOWN_GRACE_SECONDS
    )


async def json_response(events: AsyncGenerator[dict[str, Any], None]) -> JSONResponse:
    """The chat's final event as one JSON reply, with the progress events as `progress`."""
    progress: list[dict[str, Any]] = []
    async for item in events:
        if item["event"] == "progress":
            progress.append(item["data"])
        elif item["event"] == "error":
            return error_response(item["data"])
        elif item["event"] == "final":
            return JSONResponse({**item["data"], "progress": progress})  # JSON-native, as the SSE events
    raise HTTPException(503, "the chat ended without an answer")


@router.post(
    "/api/v1/search",
    tags=["chat"],
    summary="Permission-aware hybrid search without an answer",
    response_model=SearchResponse,
    responses=error_responses(400, 401, 413, 422, 429, 503),
)
async def search(
    body: SearchRequest, user: User, orchestrator: OrchestratorDep, limiter: RateLimiterDep, metrics: MetricsDep
) -> Any:
    await limiter.check(user)
    # the HTTP server span is the search's span (a child span of the same extent would cost ~60 µs)
    trace.get_current_span().set_attribute(attr.RAG_USER, user.user_id)
    try:
        state, items = await orchestrator.search(user, body)
    except StepFailed as exc:
        metrics.failed("search", exc.payload())
        raise HTTPException(exc.http_status, {k: v for k, v in exc.payload().items() if k != "status"}) from exc
    metrics.stages("search", state.stages)
    # Built of str/int/float/bool/None/list/dict only, so it goes straight to json.dumps: FastAPI's
    # jsonable_encoder walk of a returned dict cost ~0.9 ms per 10-result reply (~2% of a search).
    return JSONResponse(
        {
            "results": [source_payload(i, item, snippet=False) for i, item in enumerate(items)],
            "accessible_documents": state.accessible,
            "degraded": state.degraded,
            "progress": state.stages,
            "graph": state.graph,
        }
    )
