"""The Celery ingestion worker: `celery -A ragmesh_ingestion.worker worker --pool=threads --concurrency=8 -Q ingest`.

Celery's CLI needs a module-level app, so this module (only the worker imports it) builds one from
the environment. A task runs only once admitted (admission.py): its ingestion token, signed by the gateway and
verified here with the public keys (RAGMESH_INTERNAL_PUBLIC_KEY), names the user, the document, the version and
the stored file. A refused task is logged, traced (`ingest.admit`, rag.ingest.refused) and dropped: it reads
nothing and is never retried. The worker then acts for that user: each hop carries an internal identity token
it signs itself (RAGMESH_INTERNAL_SIGNING_KEY), and a retry carries a fresh ingestion token it signs for the
same grant.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from celery.signals import setup_logging as celery_setup_logging
from celery.signals import worker_init
from opentelemetry import trace
from redis.asyncio import Redis

from ragmesh_common import attributes as attr
from ragmesh_common import metrics
from ragmesh_common.ingestion import QUEUE, TASK_NAME, IngestTask, create_celery
from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry
from ragmesh_common.tokens import TokenSigner, mint_ingest_token, public_keys_from_env
from ragmesh_ingestion.admission import Admitted, TaskRefused, admit, read_in_store
from ragmesh_ingestion.clients import Clients
from ragmesh_ingestion.config import Settings
from ragmesh_ingestion.connectors.tasks import register as register_connectors
from ragmesh_ingestion.pipeline import EMBED_IN_FLIGHT, Ingestor, TransientIngestError

setup_logging("ingest-worker")


@celery_setup_logging.connect  # type: ignore[untyped-decorator]  # celery ships no type information
def keep_logging(**_: object) -> None:
    """Handled, so Celery keeps setup_logging's handler and format (RAGMESH_LOG_FORMAT) rather than its own."""


settings = Settings.from_env()
setup_telemetry("ingest-worker")  # no Redis spans: the broker polls constantly
from opentelemetry.instrumentation.celery import CeleryInstrumentor  # noqa: E402 - after setup_telemetry: it instruments the provider set there

CeleryInstrumentor().instrument()
app = create_celery(settings.broker_url)
signer = TokenSigner.from_env("ingest-worker")  # signs each hop's token for the uploader it ingests for
public_keys = public_keys_from_env("the worker verifies the ingestion token of each task with it")
logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)
MAX_RETRIES = 3
T = TypeVar("T")


@worker_init.connect  # type: ignore[untyped-decorator]  # celery ships no type information
def serve_metrics(**_: object) -> None:
    """`GET /metrics` on RAGMESH_METRICS_PORT (0 = none): the ingestion counters, and the backlog (the broker
    queue's length, read from Redis at each scrape; NaN while Redis does not answer)."""
    port = int(os.environ.get("RAGMESH_METRICS_PORT", "0") or 0)
    if not port:
        return
    import redis

    client = redis.Redis.from_url(settings.broker_url, socket_timeout=2, socket_connect_timeout=2)

    def backlog() -> float:
        try:
            return float(client.llen(QUEUE))
        except (redis.RedisError, OSError) as exc:
            logger.warning("ingestion backlog unknown: %s", exc)
            return float("nan")

    metrics.INGEST_BACKLOG.set_function(backlog)
    metrics.MetricsServer(os.environ.get("RAGMESH_METRICS_HOST", "127.0.0.1"), port)


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
        self.embed_gate: asyncio.Semaphore | None = None  # the embed calls in flight for every document at once

    def run(self, coroutine_of: Callable[[Clients, Redis, asyncio.Semaphore], Coroutine[Any, Any, T]]) -> T:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="ingest-loop", daemon=True).start()
                self.clients, self.redis = asyncio.run_coroutine_threadsafe(self._connect(), loop).result()
                self.embed_gate = asyncio.Semaphore(EMBED_IN_FLIGHT)
                self._loop = loop
        clients, redis, gate = self.clients, self.redis, self.embed_gate
        assert clients is not None and redis is not None and gate is not None
        context = contextvars.copy_context()  # the task's span (Celery instrumentation) parents the ingestion's

        async def start() -> T:
            return await asyncio.get_running_loop().create_task(coroutine_of(clients, redis, gate), context=context)

        return asyncio.run_coroutine_threadsafe(start(), self._loop).result()

    @staticmethod
    async def _connect() -> tuple[Clients, Redis]:  # channels bind to the loop that creates them
        return Clients.from_settings(settings), Redis.from_url(settings.broker_url, socket_timeout=5)


_loop = _Loop()


async def _ingest(
    clients: Clients,
    redis: Redis,
    embed_gate: asyncio.Semaphore,
    *,
    task: IngestTask,
    admitted: Admitted,
    final_attempt: bool,
) -> None:
    ingestor = Ingestor(
        clients,
        redis,
        settings.deadlines,
        graph_enabled=settings.graph_enabled,
        reader=lambda relative: read_in_store(settings.upload_dir, relative.as_posix()),
        embed_gate=embed_gate,
    )
    await ingestor.run(
        task.document_id,
        admitted.grant.user.signed_by(signer),  # the user the token names, never one the task says
        Path(admitted.relative),  # read below the upload store only
        task.filename,
        task.mime_type,
        final_attempt=final_attempt,
        version=task.version,
    )


def admit_task(args: tuple[Any, ...]) -> tuple[IngestTask, Admitted] | None:
    """The task and what it may do, or None when it is refused (logged and traced, nothing read)."""
    with tracer.start_as_current_span("ingest.admit") as span:
        document_id = args[0] if args and isinstance(args[0], str) else ""
        span.set_attribute(attr.RAG_DOCUMENT_ID, document_id[:64])
        try:
            task = IngestTask.from_args(*args)
            admitted = admit(task, public_keys, settings.upload_dir)
        except (ValueError, TaskRefused) as exc:
            reason = str(exc)
            logger.warning("refused ingestion task for document %r: %s", document_id[:64], reason)
            span.set_attribute(attr.RAG_INGEST_REFUSED, reason[:200])
            span.set_status(trace.Status(trace.StatusCode.ERROR, "ingestion task refused"))
            return None
        span.set_attribute(attr.RAG_DOCUMENT_VERSION, task.version)
        return task, admitted


@app.task(name=TASK_NAME, bind=True, max_retries=MAX_RETRIES, acks_late=True)  # type: ignore[untyped-decorator]  # celery ships no type information
def ingest_document(self: Any, *args: Any) -> None:  # self: the bound celery Task (no type information)
    """One ingestion task (IngestTask's arguments): admitted, then run for the user its token names."""
    checked = admit_task(args)
    if checked is None:
        return  # acknowledged and dropped: a refused task is never retried
    task, admitted = checked
    final_attempt = self.request.retries >= MAX_RETRIES
    try:
        _loop.run(partial(_ingest, task=task, admitted=admitted, final_attempt=final_attempt))
    except TransientIngestError as exc:
        logger.warning("document %s: %s, retry %d", task.document_id, exc, self.request.retries + 1)
        # the retry is a new task in the queue: it carries a grant of its own, the same one, signed by this worker
        token = mint_ingest_token(
            signer,
            admitted.grant.user,
            document_id=task.document_id,
            version=task.version,
            file=admitted.relative,
            ttl_seconds=settings.token_ttl_seconds,
        )
        retry = IngestTask(task.document_id, token, task.path, task.filename, task.mime_type, task.version)
        raise self.retry(args=retry.args(), exc=exc, countdown=2**self.request.retries) from exc


register_connectors(app, settings=settings, signer=signer, loop_run=_loop.run)  # connectors/tasks.py
