"""The whole mesh started once for the end-to-end tests (separate processes, real ports, embedded engines), and the
helpers the e2e files share: the shared documents, the Authorization header, an HTTP client on the mesh, upload
and waiting for a document to settle. Import the helpers with `from .conftest import auth, ...`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
from ragmesh_dev.ports import free_port

DOCS = Path(__file__).resolve().parents[3] / "shared" / "data" / "documents"
SETTLE_SECONDS = 900.0  # an upload is ingested within this on a loaded machine (a first parse loads models)


def running(stack: Stack) -> Iterator[Stack]:
    """For a fixture: starts `stack` (on failure, each process's log tail is printed), yields it, then stops it."""
    try:
        stack.start(timeout=420)
    except Exception:
        for log in sorted(stack.logs.glob("*.log")):
            print(f"==== {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        raise
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data = tmp_path_factory.mktemp("mesh")
    # Separate processes: each service binds the port it is given, so the ports are picked here (see ports.py).
    ports = {name: free_port() for name in DEFAULT_PORTS}
    stack = Stack(data, ports=ports, extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "1000", "LOG_LEVEL": "INFO"})
    yield from running(stack)


@pytest.fixture(scope="module")
def client(mesh: Stack) -> Iterator[httpx.Client]:
    """The gateway's HTTP API (a test module that starts its own stack overrides this fixture)."""
    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as c:
        yield c


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def upload(
    client: httpx.Client, token: str, name: str, content: bytes, acl: dict[str, Any] | None = None, title: str = ""
) -> httpx.Response:
    data = {"acl": json.dumps(acl)} if acl is not None else {}
    if title:
        data["title"] = title
    return client.post("/api/v1/documents", headers=auth(token), files={"file": (name, content)}, data=data)


def settled(doc: dict[str, Any]) -> bool:
    """Ready or failed, with no new version being ingested."""
    return doc["status"] in ("ready", "failed") and not doc.get("pending_version")


def wait_document(
    client: httpx.Client,
    token: str,
    document_id: str,
    done: Callable[[dict[str, Any]], bool] = settled,
    timeout: float = SETTLE_SECONDS,
) -> dict[str, Any]:
    """The document as GET returns it once `done` holds; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        doc = client.get(f"/api/v1/documents/{document_id}", headers=auth(token)).json()
        if done(doc):
            return doc
        time.sleep(0.5)
    raise AssertionError(f"document {document_id} did not get there in {timeout:.0f}s: {doc}")


def upload_ready(client: httpx.Client, token: str, path: Path) -> str:
    """Uploads a file and waits until it is ready; its document id."""
    return uploaded_ready(client, token, path.name, path.read_bytes())


def uploaded_ready(
    client: httpx.Client, token: str, name: str, content: bytes, acl: dict[str, Any] | None = None, title: str = ""
) -> str:
    """Uploads `content` as `name` (with `acl` and `title` when given) and waits until it is ready; its id."""
    reply = upload(client, token, name, content, acl, title)
    assert reply.status_code == 202, reply.text
    doc = wait_document(client, token, reply.json()["document_id"])
    assert doc["status"] == "ready", doc
    return str(doc["document_id"])
