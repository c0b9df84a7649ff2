"""The connector tasks of the ingestion worker: the beat tick (queues the runs that are due) and one run.

Settings (the worker's environment): CONNECTORS_DSN, the connectors role (without it the tasks log and do
nothing), CONNECTORS_ALLOWED_ROOTS, the base directories a folder connector may read (none: no folder connector
runs). A run holds its connector's advisory lock for its whole length, so two workers never run one connector at
once; a run whose connector is being deleted deletes every document it made, then the connector.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

import psycopg
from opentelemetry import trace

from ragmesh_common import metrics
from ragmesh_common.connectors import (
    DSN_ENV,
    RUN_TASK,
    TICK_TASK,
    AclSpec,
    ConnectorStore,
    FolderConfig,
    WebConfig,
    allowed_roots,
    owner_of,
    send_run,
)
from ragmesh_common.identity import UserContext
from ragmesh_common.ingestion import QUEUE, send_ingest
from ragmesh_common.tokens import TokenSigner, mint_ingest_token
from ragmesh_ingestion.clients import Clients
from ragmesh_ingestion.config import Settings
from ragmesh_ingestion.connectors.base import Source
from ragmesh_ingestion.connectors.engine import SyncEngine
from ragmesh_ingestion.connectors.folder import FolderSource
from ragmesh_ingestion.connectors.sink import MeshSink
from ragmesh_ingestion.connectors.web import WebSource

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)
STORE_RETRIES = 10  # a run whose store was unreachable is tried again this often, STORE_RETRY_SECONDS apart
STORE_RETRY_SECONDS = 30
LoopRun = Callable[[Callable[[Clients, Any, Any], Coroutine[Any, Any, Any]]], Any]  # clients, redis, embed gate


def build_source(connector: dict[str, Any]) -> Source:
    acl = AclSpec.model_validate(connector["acl"]).normal()
    if connector["kind"] == "folder":
        return FolderSource(FolderConfig.model_validate(connector["config"]), acl, allowed_roots())
    return WebSource(WebConfig.model_validate(connector["config"]), acl)


def connector_user(name: str, signer: TokenSigner) -> UserContext:
    """The identity that owns the connector's documents (no department: its documents' ACL is what it says)."""
    return UserContext(owner_of(name), roles=("connector",)).signed_by(signer)


def count_run(connector: dict[str, Any], status: str, counts: dict[str, int], seconds: float) -> None:
    """The run in the worker's metrics (`ragmesh_common.metrics`: by connector id and kind)."""
    connector_id, kind = str(connector["connector_id"]), str(connector["kind"])
    metrics.CONNECTOR_RUNS.labels(connector_id, kind, status).inc()
    for outcome, n in counts.items():
        if n:
            metrics.CONNECTOR_ITEMS.labels(connector_id, kind, outcome).inc(n)
    metrics.CONNECTOR_RUN_SECONDS.labels(kind).observe(seconds)


def run_connector(store: ConnectorStore, connector_id: str, run_id: str, make_sink: Callable[[str], Any]) -> None:
    """One run of one connector (`make_sink(name)` gives the sink that acts as its identity)."""
    connector, run = store.get(connector_id), store.get_run(run_id)
    if connector is None or run is None or run["status"] not in ("queued", "running"):
        logger.info("connector run %s of %s: nothing to do (gone or finished)", run_id, connector_id)
        return
    with store.run_lock(connector_id) as locked:
        if not locked:
            if run["status"] == "queued":
                store.finish_run(run_id, "skipped", {}, [], "another run of this connector was in progress")
                metrics.CONNECTOR_RUNS.labels(str(connector["connector_id"]), str(connector["kind"]), "skipped").inc()
            return
        stale = store.interrupt_stale(connector_id, run_id)
        if stale:
            logger.warning("connector %s: %d earlier run(s) had stopped midway; resuming", connector["name"], stale)
        store.start_run(run_id)
        deleting = connector["state"] == "deleting"
        engine = SyncEngine(store, make_sink(connector["name"]), connector_id, run_id)
        started = time.perf_counter()
        with tracer.start_as_current_span("connector run") as span:
            try:
                report = engine.run(None if deleting else build_source(connector))
            except Exception as exc:
                logger.exception("connector %s: run %s failed", connector["name"], run_id)
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
                counts = engine.report.counts_json()
                store.finish_run(run_id, "failed", counts, engine.report.problems, f"{type(exc).__name__}: {exc}")
                count_run(connector, "failed", counts, time.perf_counter() - started)
                return
            if report.status != "succeeded":  # failed (the source) or partial (items): logged, and the span says so
                logger.warning("connector %s: run %s %s: %s", connector["name"], run_id, report.status, report.message)
                span.set_status(trace.Status(trace.StatusCode.ERROR, f"connector run {report.status}"))
        counts = report.counts_json()
        store.finish_run(run_id, report.status, counts, report.problems, report.message)
        count_run(connector, report.status, counts, time.perf_counter() - started)
        logger.info("connector %s: run %s %s %s", connector["name"], run_id, report.status, counts)
        if deleting and report.status == "succeeded":
            store.delete(connector_id)


def register(app: Any, *, settings: Settings, signer: TokenSigner, loop_run: LoopRun) -> None:
    """Adds the connector tasks to the worker's Celery app."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    store = ConnectorStore(dsn) if dsn else None

    def call(step: Callable[[Clients], Awaitable[Any]]) -> Any:
        async def on_loop(clients: Clients, _redis: Any, _embed_gate: Any) -> Any:
            return await step(clients)

        return loop_run(on_loop)

    def mint(user: UserContext, document_id: str, version: int, relative: str) -> str:
        return mint_ingest_token(
            signer, user, document_id=document_id, version=version, file=relative,
            ttl_seconds=settings.token_ttl_seconds,
        )  # fmt: skip

    def make_sink(name: str) -> MeshSink:
        return MeshSink(
            call, connector_user(name, signer), settings.upload_dir, partial(send_ingest, app), mint,
            timeout=settings.deadlines.embed,
        )  # fmt: skip

    @app.task(name=TICK_TASK, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]  # celery ships no type information
    def connectors_tick() -> None:
        """Queues a run for each scheduled connector that is due (sent by Celery beat)."""
        if store is None:
            logger.warning("connectors tick ignored: %s is not set on the worker", DSN_ENV)
            return
        try:
            for connector_id in store.claim_due():
                run = store.queue_run(connector_id, "schedule")
                send_run(app, connector_id, run["run_id"], QUEUE)
        except (psycopg.Error, OSError) as exc:  # the next tick claims what this one could not
            logger.warning("connectors tick: the connector store is unavailable: %s", exc)

    @app.task(name=RUN_TASK, bind=True, acks_late=True, ignore_result=True, max_retries=STORE_RETRIES, shared=False)  # type: ignore[untyped-decorator]
    def connector_run(self: Any, connector_id: str, run_id: str) -> None:  # self: the bound celery Task
        """One connector run (queued by the tick or the admin API)."""
        if store is None:
            logger.error("connector run %s ignored: %s is not set on the worker", run_id, DSN_ENV)
            return
        try:
            uuid.UUID(str(connector_id)), uuid.UUID(str(run_id))
        except ValueError:
            logger.warning("connector run refused: the connector and run ids must be UUIDs")
            return
        try:
            run_connector(store, connector_id, run_id, make_sink)
        except (psycopg.Error, OSError) as exc:  # the store went away: the same run again later, after what it did
            logger.error("connector run %s stopped: the connector store is unavailable: %s", run_id, exc)
            raise self.retry(countdown=STORE_RETRY_SECONDS, exc=exc) from exc
