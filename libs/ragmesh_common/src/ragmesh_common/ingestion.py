"""The ingestion task contract the gateway and the ingestion worker share: the task's name, queue and arguments,
the Celery client configuration, the Redis connection URL, the progress channel and the one spelling of a
document status.

The gateway enqueues with `send_ingest`; the worker (services/ingestion) registers the task under TASK_NAME and
reads its arguments with `IngestTask.from_args`. Neither trusts what travels through Redis: the task's only
authority is its signed ingestion token (ragmesh_common.tokens.mint_ingest_token), minted by the gateway for one
user, one document, one version and one stored file. Celery is imported only where an app is built, so that a
process which only reads statuses does not load it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ragmesh.common.v1 import common_pb2
from ragmesh_common.config import ConfigError

if TYPE_CHECKING:
    from celery import Celery

TASK_NAME = "ragmesh.ingest_document"
QUEUE = "ingest"
# An event only, never a catalogue status: a hop failed transiently and the task will run again.
RETRYING = "retrying"
# How long an ingestion token is valid: it must outlast the task's wait in the queue (a backlog of uploads), not
# the ingestion itself: the worker checks it when the task starts, then acts with its own per-hop tokens.
TOKEN_TTL_ENV = "INGEST_TOKEN_TTL_SECONDS"
DEFAULT_TOKEN_TTL_SECONDS = 3600
# The longest the gateway waits for Redis to take a task (off its event loop): beyond it the upload is 503.
DEFAULT_ENQUEUE_TIMEOUT_SECONDS = 5.0


def status_name(status: int) -> str:
    """The name of a DocumentStatus in the API, the progress events and the catalogue: DOCUMENT_STATUS_READY →
    "ready". The proto enum is the one list of statuses; this is its one spelling outside protobuf."""
    return common_pb2.DocumentStatus.Name(status).removeprefix("DOCUMENT_STATUS_").lower()  # type: ignore[arg-type]


# An events stream ends at these.
TERMINAL = frozenset({status_name(common_pb2.DOCUMENT_STATUS_READY), status_name(common_pb2.DOCUMENT_STATUS_FAILED)})


def channel_name(document_id: str) -> str:
    """The Redis pub/sub channel of one document's progress events (`<channel>:last` keeps the latest)."""
    return f"ragmesh:ingest:{document_id}"


def event(document_id: str, status: str, **extra: Any) -> dict[str, Any]:
    """A progress event as published on the channel and streamed to the uploader (`status` is a status_name
    or RETRYING)."""
    return {"document_id": document_id, "status": status, **extra}


@dataclass(frozen=True)
class IngestTask:
    """The arguments of one ingestion task, in the order they travel (`args`). `path` is the stored upload as
    the gateway wrote it; `token` is the signed grant that says who may ingest which file into which document.
    The worker believes none of the other fields until it has checked them against the token."""

    document_id: str
    token: str
    path: str
    filename: str
    mime_type: str
    version: int = 0  # the catalogue version to ingest (BeginNewVersion's; 0 = the document's current one)

    def args(self) -> list[Any]:
        return [self.document_id, self.token, self.path, self.filename, self.mime_type, self.version]

    @classmethod
    def from_args(cls, *args: Any) -> IngestTask:
        """The task from its arguments as Celery hands them over; ValueError when they are not the contract's."""
        if len(args) != 6:
            raise ValueError(f"an ingestion task has 6 arguments, got {len(args)}")
        document_id, token, path, filename, mime_type, version = args
        if not all(isinstance(v, str) for v in (document_id, token, path, filename, mime_type)):
            raise ValueError("document id, token, path, file name and type must be strings")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError("version must be a non-negative integer")
        return cls(document_id, token, path, filename, mime_type, version)


def redis_url(url: str, password: str = "", ca_file: str = "") -> str:
    """The URL the Redis clients and the Celery broker connect with: REDIS_URL with REDIS_PASSWORD (from a
    Secret, so never written into REDIS_URL itself) and, for `rediss://`, certificate verification against
    REDIS_TLS_CA_FILE (else the system's CAs). Both redis-py and kombu read these query parameters."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigError(f"REDIS_URL must start with redis:// or rediss://, got {parts.scheme or 'no'} scheme")
    netloc = parts.netloc
    if password and parts.password is None:
        user = quote(parts.username or "", safe="")
        netloc = f"{user}:{quote(password, safe='')}@{netloc.rpartition('@')[2]}"
    query = dict(parse_qsl(parts.query))
    if ca_file and parts.scheme != "rediss":
        raise ConfigError("REDIS_TLS_CA_FILE is set but REDIS_URL is not rediss:// (TLS)")
    if parts.scheme == "rediss":
        query.setdefault("ssl_cert_reqs", "required")
        if ca_file:
            query.setdefault("ssl_ca_certs", ca_file)
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), parts.fragment))


def visibility_timeout() -> float:
    raw = os.environ.get("INGEST_VISIBILITY_TIMEOUT_SECONDS", "").strip()
    try:
        value = float(raw) if raw else 3600.0
    except ValueError:
        raise SystemExit(f"INGEST_VISIBILITY_TIMEOUT_SECONDS must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise SystemExit("INGEST_VISIBILITY_TIMEOUT_SECONDS must be > 0")
    return value


def create_celery(broker_url: str, socket_timeout: float = DEFAULT_ENQUEUE_TIMEOUT_SECONDS) -> Celery:
    """The Celery app of both sides: the gateway's only sends, the worker's also consumes. `broker_url` is
    `redis_url(...)`'s; every broker socket operation gives up after `socket_timeout` seconds."""
    from celery import Celery

    app = Celery("ragmesh", broker=broker_url)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=socket_timeout,
        broker_transport_options={
            "visibility_timeout": visibility_timeout(),
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_timeout,
        },
        worker_hijack_root_logger=False,
    )
    return app


def send_ingest(app: Celery, task: IngestTask) -> None:
    """Publishes one ingestion task (blocking: the gateway runs it off its event loop, under a timeout). One
    publish retry (a pooled connection Redis closed meanwhile), so that with the broker's socket timeouts the
    call ends soon after the gateway's own timeout."""
    app.send_task(
        TASK_NAME,
        args=task.args(),
        queue=QUEUE,
        retry=True,
        retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2},
    )
