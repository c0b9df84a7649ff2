"""The visible graph: entity search and detail for users (readable-only), the community computation for admins.

Every read goes to the graph service as the caller, which asks the catalogue which documents that caller may
read: an entity known only from unreadable documents is a 404, the same as an unknown one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi import Path as FastAPIPath
from grpc import aio

from ragmesh.graph.v1 import graph_pb2
from ragmesh_gateway.auth import require_admin
from ragmesh_gateway.deps import RuntimeDep, User
from ragmesh_gateway.mesh import StepFailed
from ragmesh_gateway.models import CommunityStatusOut, EntityDetail, EntityList, error_responses
from ragmesh_gateway.validation import StrictJSONRoute, Text

router = APIRouter(route_class=StrictJSONRoute)

ENTITY_ID_PATTERN = "^[A-Za-z0-9_-]{1,700}$"
RECOMPUTE_TIMEOUT = 300.0  # GRAPH_COMMUNITY_RECOMPUTE_TIMEOUT_SECONDS' default: the service bounds it itself


def _failed(exc: aio.AioRpcError) -> HTTPException:
    failed = StepFailed.from_rpc("graph", exc)
    return HTTPException(failed.http_status, failed.message)


def entity_json(e: graph_pb2.Entity) -> dict[str, Any]:
    return {"id": e.id, "name": e.name, "type": e.type, "mentions": e.mentions, "chunk_ids": list(e.chunk_ids)}


def fact_json(r: graph_pb2.Relation) -> dict[str, Any]:
    return {
        "source": r.source,
        "relation": r.type.lower().replace("_", " "),
        "target": r.target,
        "chunk_ids": list(r.chunk_ids),
    }


@router.get(
    "/api/v1/graph/entities",
    tags=["graph"],
    summary="Entities whose name contains q, from documents you can read",
    response_model=EntityList,
    responses=error_responses(400, 401, 422, 503),
)
async def search_entities(
    user: User,
    rt: RuntimeDep,
    q: Annotated[Text, Query(min_length=2, max_length=200)],
    limit: int = Query(20, ge=1, le=100),
) -> Any:
    try:
        reply = await rt.mesh.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query=q, limit=limit),
            metadata=user.metadata(),
            timeout=rt.settings.deadlines.graph,
        )
    except aio.AioRpcError as exc:
        raise _failed(exc) from exc
    return {"entities": [entity_json(e) for e in reply.entities]}


@router.get(
    "/api/v1/graph/entities/{entity_id}",
    tags=["graph"],
    summary="One entity: neighbours, facts, communities and mentions, from documents you can read",
    response_model=EntityDetail,
    responses=error_responses(400, 401, 404, 422, 503),
)
async def get_entity(
    user: User, rt: RuntimeDep, entity_id: Annotated[str, FastAPIPath(pattern=ENTITY_ID_PATTERN)]
) -> Any:
    try:
        reply = await rt.mesh.graph.GetEntity(
            graph_pb2.GetEntityRequest(id=entity_id),
            metadata=user.metadata(),
            timeout=rt.settings.deadlines.communities,
        )
    except aio.AioRpcError as exc:
        raise _failed(exc) from exc
    return {
        "entity": entity_json(reply.entity),
        "neighbours": [entity_json(e) for e in reply.neighbours],
        "facts": [fact_json(r) for r in reply.relations],
        "mentions": [{"document_id": m.document_id, "chunk_id": m.chunk_id} for m in reply.mentions],
        "communities": [{"id": c.id, "level": c.level, "title": c.title, "size": c.size} for c in reply.communities],
    }


def status_json(status: graph_pb2.CommunityStatus) -> dict[str, Any]:
    return {
        "state": status.state,
        "computed_at": status.computed_at or None,
        "duration_seconds": status.duration_seconds,
        "entities": status.entities,
        "edges": status.edges,
        "communities_per_level": list(status.communities_per_level),
        "error": status.error or None,
        "signature": status.signature,
    }


@router.get(
    "/api/v1/admin/graph/communities",
    tags=["admin"],
    summary="The community computation's state (admin only)",
    response_model=CommunityStatusOut,
    responses=error_responses(401, 403, 422, 503),
)
async def community_status(user: User, rt: RuntimeDep) -> Any:
    require_admin(user)
    try:
        status = await rt.mesh.graph.GetCommunityStatus(
            graph_pb2.GetCommunityStatusRequest(), metadata=user.metadata(), timeout=rt.settings.deadlines.graph
        )
    except aio.AioRpcError as exc:
        raise _failed(exc) from exc
    return status_json(status)


@router.post(
    "/api/v1/admin/graph/communities/recompute",
    tags=["admin"],
    summary="Recompute the communities now (admin only); returns the new state",
    response_model=CommunityStatusOut,
    responses=error_responses(401, 403, 422, 503),
)
async def recompute_communities(user: User, rt: RuntimeDep) -> Any:
    require_admin(user)
    try:
        status = await rt.mesh.graph.RecomputeCommunities(
            graph_pb2.RecomputeCommunitiesRequest(), metadata=user.metadata(), timeout=RECOMPUTE_TIMEOUT
        )
    except aio.AioRpcError as exc:
        raise _failed(exc) from exc
    return status_json(status)
