"""Liveness, readiness and the index of links."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ragmesh_gateway.deps import RuntimeDep
from ragmesh_gateway.models import Health, Readiness
from ragmesh_gateway.validation import StrictJSONRoute

# /readyz: without these no chat can be answered; the others only degrade it
REQUIRED_FOR_CHAT = ("retriever", "answerer")

router = APIRouter(route_class=StrictJSONRoute)


@router.get("/healthz", tags=["health"], summary="Liveness", response_model=Health)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    tags=["health"],
    summary="Readiness: can this gateway answer chat",
    description="503 naming the missing parts when a part chat needs (retriever, answerer) is not "
    "SERVING; 200 otherwise, with the optional parts that are down (embedder, reranker, "
    "graph, parser, Redis) listed in `degraded`.",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Not ready"}},
)
async def readyz(rt: RuntimeDep) -> JSONResponse:
    services = await rt.mesh.health(timeout=1.0)
    try:
        await asyncio.wait_for(rt.redis.ping(), timeout=1.0)
        services["redis"] = "SERVING"
    except Exception as exc:  # noqa: BLE001 - Redis is optional for chat
        services["redis"] = f"UNREACHABLE ({type(exc).__name__})"
    missing = [name for name in REQUIRED_FOR_CHAT if services.get(name) != "SERVING"]
    degraded = [name for name, status in services.items() if name not in REQUIRED_FOR_CHAT and status != "SERVING"]
    body: dict[str, Any] = {"ready": not missing, "services": services, "degraded": degraded}
    if missing:
        body["reason"] = "chat needs " + ", ".join(f"{name} ({services.get(name)})" for name in missing)
        return JSONResponse(body, status_code=503)
    return JSONResponse(body)


@router.get("/", include_in_schema=False)
async def root(request: Request) -> dict[str, str]:
    base = str(request.base_url).rstrip("/")
    return {"name": "ragmesh", "docs": f"{base}/docs", "openapi": f"{base}/openapi.json", "admin": f"{base}/admin"}
