"""The upload's enqueue runs off the event loop: while Redis is slow to take a task, the gateway keeps serving
everyone else (here: a request answered while the publish is held), and a publish slower than
GATEWAY_ENQUEUE_TIMEOUT_SECONDS fails that upload with a 503 and a failed document, nothing else."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragmesh.common.v1 import common_pb2
from ragmesh_cli.tokens import mint
from ragmesh_gateway.app import create_app

sys.path.insert(0, str(Path(__file__).parent))  # the document tests' fakes (tests run in importlib mode)
from test_gateway_bad_input import SECRET, settings
from test_gateway_documents import CONTENT, FakeMesh

FAILURE_BOUND_SECONDS = 60.0  # only reached when the test fails: a publish that blocked the loop


class SlowCelery:
    """A broker that takes a task only once the test releases it (send_task is called in a worker thread)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.released: list[bool] = []

    def send_task(self, name: str, args: list[Any], **_: Any) -> None:
        self.entered.set()
        self.released.append(self.release.wait(FAILURE_BOUND_SECONDS))


def client_with(tmp_path: Path, mesh: FakeMesh, celery: SlowCelery, timeout: float) -> Iterator[TestClient]:
    app = create_app(settings(tmp_path).model_copy(update={"enqueue_timeout_seconds": timeout}), mesh=mesh)
    token = mint(SECRET, "alice", "eng", ["employee"])
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {token}"}) as client:
        app.state.runtime.documents.celery = celery
        yield client


def upload_in_thread(client: TestClient) -> tuple[threading.Thread, list[Any]]:
    replies: list[Any] = []
    thread = threading.Thread(
        target=lambda: replies.append(
            client.post("/api/v1/documents", files={"file": ("notes.md", CONTENT, "text/markdown")})
        )
    )
    thread.start()
    return thread, replies


@pytest.fixture
def celery() -> SlowCelery:
    return SlowCelery()


def test_the_gateway_serves_other_requests_while_a_publish_is_slow(tmp_path: Path, celery: SlowCelery) -> None:
    for client in client_with(tmp_path, FakeMesh(), celery, timeout=FAILURE_BOUND_SECONDS * 2):
        thread, replies = upload_in_thread(client)
        assert celery.entered.wait(FAILURE_BOUND_SECONDS)
        # the publish is held now; a loop it blocked could not answer this until the publish gave up
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/api/v1/documents").status_code == 200
        celery.release.set()
        thread.join(FAILURE_BOUND_SECONDS)
        assert celery.released == [True], "the other requests waited for the publish"
        assert replies[0].status_code == 202


def test_a_publish_slower_than_the_timeout_is_a_503_and_a_failed_document(tmp_path: Path, celery: SlowCelery) -> None:
    mesh = FakeMesh()
    for client in client_with(tmp_path, mesh, celery, timeout=0.05):
        try:
            reply = client.post("/api/v1/documents", files={"file": ("notes.md", CONTENT, "text/markdown")})
        finally:
            celery.release.set()  # the abandoned publish thread ends before the app does
        assert reply.status_code == 503 and reply.headers["retry-after"] == "2"  # a client may upload again
        assert reply.json()["detail"] == "ingestion queue unavailable; the document was not queued"
        [update] = mesh.requests("UpdateDocumentStatus")
        assert update.status == common_pb2.DOCUMENT_STATUS_FAILED
