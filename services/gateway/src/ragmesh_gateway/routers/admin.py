"""Admin: the traces API and the trace dashboard (role `admin`)."""

from __future__ import annotations

import logging
from datetime import datetime
from importlib.resources import files
from types import MappingProxyType
from typing import Annotated, Any, Literal

import psycopg
from fastapi import APIRouter, HTTPException, Query
from fastapi import Path as FastAPIPath
from fastapi.responses import HTMLResponse
from redis.exceptions import RedisError

from ragmesh_common.ingestion import QUEUE as INGEST_QUEUE
from ragmesh_gateway.auth import require_admin
from ragmesh_gateway.cache import STATS as CACHE_STATS
from ragmesh_gateway.deps import ConversationsDep, RuntimeDep, User
from ragmesh_gateway.models import (
    MAX_CONVERSATION_PAGE,
    CacheCleared,
    CacheStats,
    FeedbackList,
    IngestionBacklog,
    TraceDetail,
    TraceList,
    TraceStats,
    error_responses,
)
from ragmesh_gateway.runtime import Runtime
from ragmesh_gateway.traces import TraceFilter, TraceStore
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


def _window(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and since > until:
        raise HTTPException(422, "since must not be after until")


@router.get(
    "/api/v1/traces",
    tags=["admin"],
    summary="Recent request traces, filtered and paged (admin only)",
    response_model=TraceList,
    responses=error_responses(401, 403, 422, 503),
)
async def list_traces(
    user: User,
    rt: RuntimeDep,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=100_000),
    hours: int = Query(24, ge=1, le=24 * 30, description="the window when `since` is not given"),
    since: datetime | None = Query(None, description="ISO 8601; with a time zone"),
    until: datetime | None = Query(None, description="ISO 8601; default now"),
    name: Annotated[Text | None, Query(max_length=100, description="a span name contains this")] = None,
    user_id: Annotated[Text | None, Query(alias="user", max_length=200, description="the user who asked")] = None,
    errors: bool = Query(False, description="only traces with a failed span"),
    min_ms: float | None = Query(None, ge=0, le=10**8, description="only traces at least this long"),
    step: Annotated[Text | None, Query(max_length=100, description="only traces with a span of this name")] = None,
    q: Annotated[Text | None, Query(max_length=200, description="free text in span names and attributes")] = None,
) -> Any:
    require_admin(user)
    _window(since, until)
    window = TraceFilter(
        hours=hours, since=since, until=until, name=name, user=user_id, errors=errors, min_ms=min_ms, step=step, text=q
    )
    try:
        rows = await trace_store(rt).list(user, limit=limit + 1, filters=window, offset=offset)
    except (psycopg.Error, OSError) as exc:
        raise trace_storage_error(exc) from exc
    return {"traces": rows[:limit], "next_offset": offset + limit if len(rows) > limit else None}


@router.get(
    "/api/v1/traces/stats",
    tags=["admin"],
    summary="Per span name over a window: count, error rate and p50/p95/p99 latency (admin only)",
    response_model=TraceStats,
    responses=error_responses(401, 403, 422, 503),
)
async def trace_stats(
    user: User,
    rt: RuntimeDep,
    hours: int = Query(24, ge=1, le=24 * 30),
    since: datetime | None = Query(None),
    until: datetime | None = Query(None),
    limit: int = Query(40, ge=1, le=200),
) -> Any:
    require_admin(user)
    _window(since, until)
    window = TraceFilter(hours=hours, since=since, until=until)
    params = window.params()
    try:
        steps = await trace_store(rt).stats(user, window, limit=limit)
    except (psycopg.Error, OSError) as exc:
        raise trace_storage_error(exc) from exc
    return {"since": params["since"].isoformat(), "until": params["until"].isoformat(), "steps": steps}


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


# the page's own script and style only (inline, no CDN), never framed by another site, no referrer leaves it
DASHBOARD_HEADERS = MappingProxyType(
    {
        "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
)


@router.get("/admin", include_in_schema=False, response_class=HTMLResponse)
async def dashboard() -> HTMLResponse:
    """The operator's dashboard (static/admin.html): sign-in, traces, latency, feedback, document problems."""
    page = files("ragmesh_gateway").joinpath("static/admin.html").read_text()
    return HTMLResponse(page, headers=dict(DASHBOARD_HEADERS))


@router.get(
    "/api/v1/admin/ingestion",
    tags=["admin"],
    summary="The ingestion backlog: tasks waiting for a worker (admin only)",
    response_model=IngestionBacklog,
    responses=error_responses(401, 403, 422, 503),
)
async def ingestion_backlog(user: User, rt: RuntimeDep) -> Any:
    require_admin(user)
    try:
        queued = await rt.redis.llen(INGEST_QUEUE)
    except (RedisError, OSError) as exc:
        logger.error("ingestion backlog unavailable: %s", exc)
        raise HTTPException(503, f"the broker's Redis is unavailable ({type(exc).__name__})") from exc
    return IngestionBacklog(queued_tasks=int(queued))


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
        return CacheStats.model_validate(
            {"enabled": False, "hit_rate": None, **dict.fromkeys((*CACHE_STATS, "entries"), 0)}
        )
    try:
        return CacheStats(enabled=True, **await rt.cache.stats())
    except (RedisError, OSError) as exc:
        logger.error("semantic cache statistics unavailable: %s", exc)
        raise HTTPException(503, f"the cache's Redis is unavailable ({type(exc).__name__})") from exc


@router.delete(
    "/api/v1/admin/cache",
    tags=["admin"],
    summary="Drop every cached answer (admin only): after a model or answer-path upgrade",
    response_model=CacheCleared,
    responses=error_responses(401, 403, 409, 422, 503),
)
async def cache_clear(user: User, rt: RuntimeDep) -> Any:
    require_admin(user)
    if rt.cache is None:
        raise HTTPException(409, "the semantic cache is off (GATEWAY_CACHE_ENABLED): nothing to clear")
    try:
        cleared = await rt.cache.clear()
    except (RedisError, OSError) as exc:
        logger.error("semantic cache not cleared: %s", exc)
        raise HTTPException(503, f"the cache's Redis is unavailable ({type(exc).__name__})") from exc
    logger.warning("semantic cache cleared by admin %s: %d entries", user.user_id, cleared)
    return CacheCleared(cleared=cleared)
