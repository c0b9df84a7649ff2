"""The Celery ingestion worker: `celery -A ragmesh_ingestion.worker worker --pool=threads --concurrency=8 -Q ingest`.

Celery's CLI needs a module-level app, so this module (only the worker imports it) builds one from
the environment. The worker acts for the uploader: each hop carries an internal identity token signed for
the user who uploaded the document (RAGMESH_INTERNAL_SIGNING_KEY).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from celery.signals import worker_init
from redis.asyncio import Redis

from ragmesh_common.context import UserContext
from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry
from ragmesh_common.tokens import TokenSigner
from ragmesh_ingestion.clients import Clients
from ragmesh_ingestion.config import Settings
from ragmesh_ingestion.pipeline import Ingestor, TransientIngestError
from ragmesh_ingestion.tasks import TASK_NAME, create_celery, task_user

setup_logging("ingest-worker")
settings = Settings.from_env()
signer = TokenSigner.from_env("ingest-worker")  # signs each hop's token for the uploader it ingests for
setup_telemetry("ingest-worker")  # no Redis spans: the broker polls constantly
from opentelemetry.instrumentation.celery import CeleryInstrumentor  # noqa: E402 - after setup_telemetry: it instruments the provider set there

CeleryInstrumentor().instrument()
app = create_celery(settings.redis_url)
logger = logging.getLogger(__name__)
MAX_RETRIES = 3


@worker_init.connect  # type: ignore[untyped-decorator]  # celery ships no type information
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


class _Loop:
    """One event loop in a thread of its own, with the mesh channels and the Redis client bound to it, shared
    by every task of this process and kept across tasks: gRPC's asyncio API serves one event loop per process,
    and a fresh loop, five channels and a Redis connection per document cost a short document more than its
    own work. A pool thread (INGEST_CONCURRENCY of them) hands its document to this loop and waits for it, so
    several documents ingest at once and the embedder batches their chunks together."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.clients: Clients | None = None
        self.redis: Redis | None = None

    def run(self, coroutine_of: Callable[[Clients, Redis], Coroutine[Any, Any, None]]) -> None:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="ingest-loop", daemon=True).start()
                self.clients, self.redis = asyncio.run_coroutine_threadsafe(self._connect(), loop).result()
                self._loop = loop
        clients, redis = self.clients, self.redis
        assert clients is not None and redis is not None
        context = contextvars.copy_context()  # the task's span (Celery instrumentation) parents the ingestion's

        async def start() -> None:
            await asyncio.get_running_loop().create_task(coroutine_of(clients, redis), context=context)

        asyncio.run_coroutine_threadsafe(start(), self._loop).result()

    @staticmethod
    async def _connect() -> tuple[Clients, Redis]:  # channels bind to the loop that creates them
        return Clients.from_settings(settings), Redis.from_url(settings.redis_url, socket_timeout=5)


_loop = _Loop()


async def _ingest(
    clients: Clients,
    redis: Redis,
    document_id: str,
    user: UserContext,
    path: str,
    filename: str,
    mime_type: str,
    final_attempt: bool,
    version: int = 0,
) -> None:
    await Ingestor(clients, redis, settings.deadlines, graph_enabled=settings.graph_enabled).run(
        document_id, user, Path(path), filename, mime_type, final_attempt=final_attempt, version=version
    )


@app.task(name=TASK_NAME, bind=True, max_retries=MAX_RETRIES, acks_late=True)  # type: ignore[untyped-decorator]  # celery ships no type information
def ingest_document(
    self: Any,  # the bound celery Task (celery ships no type information)
    document_id: str,
    user_json: str,
    path: str,
    filename: str,
    mime_type: str,
    version: int = 0,
) -> None:
    final_attempt = self.request.retries >= MAX_RETRIES
    try:
        user = task_user(user_json).signed_by(signer)
        _loop.run(
            lambda clients, redis: _ingest(
                clients, redis, document_id, user, path, filename, mime_type, final_attempt, version
            )
        )
    except TransientIngestError as exc:
        logger.warning("document %s: %s, retry %d", document_id, exc, self.request.retries + 1)
        raise self.retry(exc=exc, countdown=2**self.request.retries) from exc
