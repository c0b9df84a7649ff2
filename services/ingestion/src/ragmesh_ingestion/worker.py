"""The Celery ingestion worker: `celery -A ragmesh_ingestion.worker worker --pool=solo -Q ingest`.

Celery's CLI needs a module-level app, so this module (only the worker imports it) builds one from
the environment. The worker acts for the uploader: each hop carries an internal identity token signed for
the user who uploaded the document (RAGMESH_INTERNAL_SIGNING_KEY).
"""
from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from celery.signals import worker_init

from redis.asyncio import Redis

from ragmesh_common.context import UserContext
from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry
from ragmesh_common.tokens import install_from_env
from ragmesh_ingestion.clients import Clients
from ragmesh_ingestion.config import Settings
from ragmesh_ingestion.pipeline import Ingestor, TransientIngestError
from ragmesh_ingestion.tasks import TASK_NAME, create_celery, task_user

setup_logging("ingest-worker")
settings = Settings.from_env()
install_from_env("ingest-worker")  # signs each hop's token for the uploader it ingests for
setup_telemetry("ingest-worker")  # no Redis spans: the broker polls constantly
from opentelemetry.instrumentation.celery import CeleryInstrumentor  # noqa: E402

CeleryInstrumentor().instrument()
app = create_celery(settings.redis_url)
logger = logging.getLogger(__name__)
MAX_RETRIES = 3


@worker_init.connect
def restore_unacked(**_: object) -> None:
    """Puts the tasks a killed worker had taken (acknowledged late, so still in Redis's unacked set) back in
    the queue before this worker consumes, so that they run now rather than after the broker's visibility
    timeout (an hour). Only where this is the sole ingest worker (INGEST_RESTORE_UNACKED_ON_START=true, as the
    local stack sets it): with several, it would hand out the tasks the others are running."""
    if os.environ.get("INGEST_RESTORE_UNACKED_ON_START", "").strip().lower() not in ("1", "true", "yes"):
        return
    with app.connection_for_write() as connection:
        qos = connection.default_channel.qos
        with connection.default_channel.conn_or_acquire() as client:
            tags = [t.decode() if isinstance(t, bytes) else t for t in client.hkeys(qos.unacked_key)]
        for tag in tags:
            qos.restore_by_tag(tag, leftmost=True)
    if tags:
        logger.warning("restored %d unacknowledged ingestion task(s) left by a stopped worker", len(tags))


async def _ingest(document_id: str, user: UserContext, path: str, filename: str, mime_type: str,
                  final_attempt: bool, version: int = 0) -> None:
    # per task: each task runs in its own event loop (asyncio.run), and a gRPC aio channel is bound to one
    clients = Clients.from_settings(settings)
    redis = Redis.from_url(settings.redis_url, socket_timeout=5)
    try:
        await Ingestor(clients, redis, settings.deadlines, graph_enabled=settings.graph_enabled).run(
            document_id, user, Path(path), filename, mime_type, final_attempt=final_attempt, version=version)
    finally:
        await redis.aclose()
        await clients.close()


@app.task(name=TASK_NAME, bind=True, max_retries=MAX_RETRIES, acks_late=True)
def ingest_document(self, document_id: str, user_json: str, path: str, filename: str, mime_type: str,  # type: ignore[no-untyped-def]
                    version: int = 0) -> None:
    final_attempt = self.request.retries >= MAX_RETRIES
    try:
        asyncio.run(_ingest(document_id, task_user(user_json), path, filename, mime_type, final_attempt, version))
    except TransientIngestError as exc:
        logger.warning("document %s: %s, retry %d", document_id, exc, self.request.retries + 1)
        raise self.retry(exc=exc, countdown=2 ** self.request.retries)
