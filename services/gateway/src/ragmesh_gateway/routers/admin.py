"""Admin: the traces API and the trace dashboard (role `admin`)."""

from __future__ import annotations

import logging
from importlib.resources import files
from typing import Annotated, Any, Literal

import psycopg
from fastapi import APIRouter, HTTPException, Query
from fastapi import Path as FastAPIPath
from fastapi.responses import HTMLResponse
from redis.exceptions import RedisError

from ragmesh_gateway.auth import require_admin
from ragmesh_gateway.deps import ConversationsDep, RuntimeDep, User
from ragmesh_gateway.models import (
    MAX_CONVERSATION_PAGE,
    CacheStats,
    FeedbackList,
    TraceDetail,
    TraceList,
    error_responses,
)
from ragmesh_gateway.runtime import Runtime
from ragmesh_gateway.traces import TraceStore
from ragmesh_gateway.validation import StrictJSONRoute, Text

logger = logging.getLogger(__name__)

TRACE_ID_PATTERN = "^[0-9a-f]{32}$"

router = APIRouter(route_class=StrictJSONRoute)


def trace_store(rt: Runtime) -> TraceStore:
    """The store, asked for after the admin check (a non-admin gets 403 whether or not one is configured)."""
    if rt.traces is None:
        raise HTTPException(503, "trace storage is not configured (GATEWAY_TRACES_DSN)")
    return rt.traces


def trace_storage_error(exc: Exception) -> HTTPException:
    logger.error("trace storage query failed: %s", exc)
    return HTTPException(503, f"trace storage is unavailable ({type(exc).__name__})")


@router.get(
    "/api/v1/traces",
    tags=["admin"],
    summary="Recent request traces (admin only)",
    response_model=TraceList,
    responses=error_responses(401, 403, 422, 503),
)
async def list_traces(
    user: User,
    rt: RuntimeDep,
    limit: int = Query(50, ge=1, le=500),
    hours: int = Query(24, ge=1, le=24 * 30),
    name: Annotated[Text | None, Query(max_length=100)] = None,
) -> Any:
    require_admin(user)
    try:
        return {"traces": await trace_store(rt).list(user, limit=limit, hours=hours, name=name)}
    except (psycopg.Error, OSError) as exc:
        raise trace_storage_error(exc) from exc


@router.get(
    "/api/v1/traces/{trace_id}",
    tags=["admin"],
    summary="All spans of one trace (admin only)",
    response_model=TraceDetail,
    responses=error_responses(401, 403, 404, 422, 503),
)
async def get_trace(
    trace_id: Annotated[str, FastAPIPath(pattern=TRACE_ID_PATTERN, description="32 lower-case hex characters")],
    user: User,
    rt: RuntimeDep,
) -> Any:
    require_admin(user)
    try:
        spans = await trace_store(rt).spans(user, trace_id)
    except (psycopg.Error, OSError) as exc:
        raise trace_storage_error(exc) from exc
    if not spans:
        raise HTTPException(404, f"trace {trace_id} not found")
    return {"trace_id": trace_id, "spans": spans}


@router.get(
    "/api/v1/feedback",
    tags=["admin"],
    summary="Every user's feedback with its trace id, newest first (admin only; no question or answer text)",
    response_model=FeedbackList,
    responses=error_responses(400, 401, 403, 422, 503),
)
async def list_feedback(
    user: User,
    conversations: ConversationsDep,
    rating: Literal["up", "down"] | None = None,
    limit: int = Query(100, ge=1, le=MAX_CONVERSATION_PAGE),
) -> Any:
    require_admin(user)
    return await conversations.all_feedback(user, rating or "", limit)


@router.get("/admin", include_in_schema=False, response_class=HTMLResponse)
async def dashboard() -> str:
    return files("ragmesh_gateway").joinpath("static/admin.html").read_text()


@router.get(
    "/api/v1/admin/cache",
    tags=["admin"],
    summary="The semantic cache's hit rate and counters (admin only)",
    response_model=CacheStats,
    responses=error_responses(401, 403, 422, 503),
)
async def cache_stats(user: User, rt: RuntimeDep) -> Any:
    require_admin(user)
    if rt.cache is None:
        return CacheStats(
            enabled=False, hits=0, misses=0, refused=0, stores=0, invalidated=0, errors=0, entries=0, hit_rate=None
        )
    try:
        return CacheStats(enabled=True, **await rt.cache.stats())
    except (RedisError, OSError) as exc:
        logger.error("semantic cache statistics unavailable: %s", exc)
        raise HTTPException(503, f"the cache's Redis is unavailable ({type(exc).__name__})") from exc
