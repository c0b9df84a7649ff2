"""Admin: connectors (folders and web sites synced into documents on a schedule) and their runs' reports.

Only admins. The connectors, their item states and run reports live in PostgreSQL (ragmesh_common.connectors,
CONNECTORS_DSN: the connectors role, which reaches no document); a run is a task on the ingestion queue that the
worker runs as the connector's identity. A folder connector's root must lie inside CONNECTORS_ALLOWED_ROOTS (checked
here by name, and by the worker again by real path at every run).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Literal

import psycopg
from fastapi import APIRouter, HTTPException, Query
from pydantic import Field

from ragmesh_common.connectors import (
    ConnectorExists,
    ConnectorIn,
    ConnectorStore,
    FolderConfig,
    allowed_roots,
    check_root,
    owner_of,
    send_run,
)
from ragmesh_common.ingestion import QUEUE
from ragmesh_gateway.auth import require_admin
from ragmesh_gateway.deps import RuntimeDep, User
from ragmesh_gateway.models import Reply, error_responses
from ragmesh_gateway.runtime import Runtime
from ragmesh_gateway.validation import StrictJSONRoute

logger = logging.getLogger(__name__)
router = APIRouter(route_class=StrictJSONRoute, tags=["connectors"])
PREFIX = "/api/v1/admin/connectors"


class RunReport(Reply):
    """One run of a connector: what it did, item by item counted."""

    run_id: str
    connector_id: str
    trigger: Literal["schedule", "manual", "delete"]
    status: Literal["queued", "running", "succeeded", "partial", "failed", "interrupted", "skipped"]
    queued_at: str
    started_at: str | None
    finished_at: str | None
    counts: dict[str, int] = Field(default_factory=dict)
    problems: list[dict[str, str]] = Field(default_factory=list)
    message: str = ""


class RunList(Reply):
    runs: list[RunReport]


class ConnectorOut(Reply):
    connector_id: str
    name: str
    kind: Literal["folder", "web"]
    owner: str
    config: dict[str, Any]
    acl: dict[str, Any]
    schedule_seconds: int
    state: Literal["active", "deleting"]
    created_by: str
    created_at: str
    next_run_at: str | None
    documents: int
    last_run: dict[str, Any] | None


class ConnectorList(Reply):
    connectors: list[ConnectorOut]


class ConnectorDeleted(Reply):
    connector_id: str
    deleting: bool
    run: RunReport


def _store(rt: Runtime) -> ConnectorStore:
    if rt.connectors is None:
        raise HTTPException(503, "connectors are not configured (CONNECTORS_DSN)")
    return rt.connectors


async def _db(call: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(call, *args)
    except ConnectorExists as exc:
        raise HTTPException(409, str(exc)) from exc
    except (psycopg.Error, OSError) as exc:
        logger.error("connector store failed: %s", exc)
        raise HTTPException(503, f"connector storage is unavailable ({type(exc).__name__})") from exc


def _connector(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "owner": owner_of(row["name"])}


async def _found(store: ConnectorStore, connector_id: uuid.UUID) -> dict[str, Any]:
    row = await _db(store.get, str(connector_id))
    if row is None:
        raise HTTPException(404, "no such connector")
    return row  # type: ignore[no-any-return]


async def _queue(rt: Runtime, store: ConnectorStore, connector_id: str, trigger: str) -> dict[str, Any]:
    run: dict[str, Any] = await _db(store.queue_run, connector_id, trigger)
    try:
        async with asyncio.timeout(rt.settings.enqueue_timeout_seconds):
            await asyncio.to_thread(send_run, rt.documents.celery, connector_id, run["run_id"], QUEUE)
    except Exception as exc:
        logger.error("could not queue connector run %s: %r", run["run_id"], exc)
        await _db(store.finish_run, run["run_id"], "failed", {}, [], "the ingestion queue was unavailable")
        raise HTTPException(503, "ingestion queue unavailable; the run was not queued") from exc
    return run


@router.post(
    PREFIX,
    status_code=201,
    summary="Create a connector (admin only)",
    response_model=ConnectorOut,
    responses=error_responses(401, 403, 409, 422, 503),
)
async def create_connector(user: User, rt: RuntimeDep, spec: ConnectorIn) -> Any:
    require_admin(user)
    if isinstance(spec.config, FolderConfig):
        try:
            root = check_root(spec.config.root, allowed_roots(rt.settings.connectors_allowed_roots))
        except ValueError as exc:
            raise HTTPException(422, f"config.root: {exc}") from exc
        spec = spec.model_copy(update={"config": spec.config.model_copy(update={"root": str(root)})})
    row = await _db(_store(rt).create, spec, user.user_id)
    logger.info("connector %s (%s) created by %s", spec.name, spec.kind, user.user_id)
    return _connector(row)


@router.get(
    PREFIX,
    summary="Connectors with their last run (admin only)",
    response_model=ConnectorList,
    responses=error_responses(401, 403, 422, 503),
)
async def list_connectors(user: User, rt: RuntimeDep) -> Any:
    require_admin(user)
    return {"connectors": [_connector(r) for r in await _db(_store(rt).list_all)]}


@router.get(
    PREFIX + "/{connector_id}",
    summary="One connector (admin only)",
    response_model=ConnectorOut,
    responses=error_responses(401, 403, 404, 422, 503),
)
async def get_connector(user: User, rt: RuntimeDep, connector_id: uuid.UUID) -> Any:
    require_admin(user)
    return _connector(await _found(_store(rt), connector_id))


@router.delete(
    PREFIX + "/{connector_id}",
    status_code=202,
    summary="Delete a connector and every document it made (admin only; a run does it)",
    response_model=ConnectorDeleted,
    responses=error_responses(401, 403, 404, 422, 503),
)
async def delete_connector(user: User, rt: RuntimeDep, connector_id: uuid.UUID) -> Any:
    require_admin(user)
    store = _store(rt)
    await _found(store, connector_id)
    await _db(store.mark_deleting, str(connector_id))
    run = await _queue(rt, store, str(connector_id), "delete")
    logger.info("connector %s: deletion queued by %s", connector_id, user.user_id)
    return {"connector_id": str(connector_id), "deleting": True, "run": run}


@router.post(
    PREFIX + "/{connector_id}/runs",
    status_code=202,
    summary="Run a connector now (admin only)",
    response_model=RunReport,
    responses=error_responses(401, 403, 404, 409, 422, 503),
)
async def run_connector(user: User, rt: RuntimeDep, connector_id: uuid.UUID) -> Any:
    require_admin(user)
    store = _store(rt)
    row = await _found(store, connector_id)
    if row["state"] != "active":
        raise HTTPException(409, "the connector is being deleted")
    return await _queue(rt, store, str(connector_id), "manual")


@router.get(
    PREFIX + "/{connector_id}/runs",
    summary="A connector's runs, newest first, with their reports (admin only)",
    response_model=RunList,
    responses=error_responses(401, 403, 404, 422, 503),
)
async def list_runs(user: User, rt: RuntimeDep, connector_id: uuid.UUID, limit: int = Query(20, ge=1, le=200)) -> Any:
    require_admin(user)
    store = _store(rt)
    await _found(store, connector_id)
    return {"runs": await _db(store.runs, str(connector_id), limit)}


@router.get(
    PREFIX + "/{connector_id}/runs/{run_id}",
    summary="One run's report (admin only)",
    response_model=RunReport,
    responses=error_responses(401, 403, 404, 422, 503),
)
async def get_run(user: User, rt: RuntimeDep, connector_id: uuid.UUID, run_id: uuid.UUID) -> Any:
    require_admin(user)
    run = await _db(_store(rt).get_run, str(run_id))
    if run is None or run["connector_id"] != str(connector_id):
        raise HTTPException(404, "no such run")
    return run
