"""What the gateway and the ingestion worker share: the task, its queue and arguments, the Celery client
configuration, the Redis progress channel and the one spelling of a document status.

The gateway imports this module (and nothing else of this package) to enqueue an ingestion and to stream
its progress; the worker registers the task under the same name. Only light imports here: the gateway
must not load the pipeline.
"""

from __future__ import annotations

import json
import os
from typing import Any

from celery import Celery

from ragmesh.common.v1 import common_pb2
from ragmesh_common.context import UserContext

TASK_NAME = "ragmesh.ingest_document"
QUEUE = "ingest"
# An event only, never a catalogue status: a hop failed transiently and the task will run again.
RETRYING = "retrying"


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


def visibility_timeout() -> float:
    raw = os.environ.get("INGEST_VISIBILITY_TIMEOUT_SECONDS", "").strip()
    try:
        value = float(raw) if raw else 3600.0
    except ValueError:
        raise SystemExit(f"INGEST_VISIBILITY_TIMEOUT_SECONDS must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise SystemExit("INGEST_VISIBILITY_TIMEOUT_SECONDS must be > 0")
    return value


def create_celery(redis_url: str) -> Celery:
    """The Celery app of both sides: the gateway's only sends, the worker's also consumes."""
    app = Celery("ragmesh", broker=redis_url)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": visibility_timeout()},
        worker_hijack_root_logger=False,
    )
    return app


def send_ingest(
    app: Celery, document_id: str, user: UserContext, path: str, filename: str, mime_type: str, version: int = 0
) -> None:
    """Enqueues the ingestion of a stored upload, acting for `user` (the arguments of worker.ingest_document).
    `version` is the catalogue's version to ingest (BeginNewVersion's; 0 = the document's current one)."""
    user_json = json.dumps({"user_id": user.user_id, "department": user.department, "roles": list(user.roles)})
    app.send_task(TASK_NAME, args=[document_id, user_json, path, filename, mime_type, version])


def task_user(user_json: str) -> UserContext:
    """The uploader a task acts for, as send_ingest wrote it."""
    user = json.loads(user_json)
    return UserContext(
        user_id=str(user["user_id"]),
        department=str(user.get("department", "")),
        roles=tuple(str(role) for role in user.get("roles", [])),
    )
