"""Hostile input through the live gateway cannot stall or exhaust the mesh (#30): the generated corpus
(ragmesh_dev.hostile) is uploaded and chatted with as an attacker would, and every reply is a 4xx with a reason,
or a document that ends `failed` with one, while an ordinary request sent meanwhile is answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from ragmesh_dev import hostile
from ragmesh_dev.devstack import Stack

pytestmark = pytest.mark.e2e
DEPARTMENT = "hostile-e2e"


@pytest.fixture(scope="module")
def client(mesh: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as c:
        yield c


@pytest.fixture(scope="module")
def token(mesh: Stack) -> str:
    return mesh.token("mallory", DEPARTMENT, ["employee"])


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_zip_bombs_are_refused_at_upload(client: httpx.Client, token: str) -> None:
    for case in hostile.zip_files():
        reply = client.post("/api/v1/documents", headers=auth(token), files={"file": (case.filename, case.content)})
        assert reply.status_code == 415, (case.description, reply.status_code, reply.text)
        assert case.filename in reply.json()["detail"]


def test_a_file_that_defeats_the_converter_fails_with_a_reason_and_others_still_ingest(
    client: httpx.Client, token: str
) -> None:
    case = hostile.many_pages_pdf()
    reply = client.post("/api/v1/documents", headers=auth(token), files={"file": (case.filename, case.content)})
    assert reply.status_code == 202, reply.text
    hostile_id = reply.json()["document_id"]
    ordinary = client.post(
        "/api/v1/documents",
        headers=auth(token),
        files={"file": ("ordinary.md", b"# Ordinary\n\nThe ordinary document is ingested while the PDF is parsed.\n")},
    )
    assert ordinary.status_code == 202, ordinary.text
    ordinary_id = ordinary.json()["document_id"]
    docs: dict[str, Any] = {}
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and len(docs) < 2:
        for document_id in (hostile_id, ordinary_id):
            doc = client.get(f"/api/v1/documents/{document_id}", headers=auth(token)).json()
            if doc["status"] in ("ready", "failed"):
                docs[document_id] = doc
        time.sleep(1)
    try:
        assert docs[ordinary_id]["status"] == "ready", docs
        # parsed within the limits, or refused for good with its reason (a limit hit names its PARSER_ setting; the
        # converter may also give up on the file first): never stuck, never a transient failure retried
        if docs[hostile_id]["status"] == "failed":
            error = docs[hostile_id]["error"]
            assert "PARSER_" in error or error.startswith("parse failed: "), docs[hostile_id]
            assert "unreachable" not in error and "UNAVAILABLE" not in error, docs[hostile_id]
    finally:
        for document_id in (hostile_id, ordinary_id):
            client.delete(f"/api/v1/documents/{document_id}", headers=auth(token))


def test_a_newline_heavy_history_does_not_hold_up_an_ordinary_chat(client: httpx.Client, token: str) -> None:
    attack = {"question": "And for part-time staff?", "history": hostile.newline_history()}
    replies: list[httpx.Response] = []
    attackers = [
        threading.Thread(target=lambda: replies.append(client.post("/api/v1/chat", headers=auth(token), json=attack)))
        for _ in range(3)
    ]
    for thread in attackers:
        thread.start()
    ordinary = client.post("/api/v1/chat", headers=auth(token), json={"question": "When was IBM founded?"})
    for thread in attackers:
        thread.join(300)
    assert ordinary.status_code == 200, ordinary.text
    assert len(replies) == 3 and all(r.status_code in (200, 400) for r in replies), [r.text for r in replies]


def test_a_signed_token_with_a_list_department_is_a_401(client: httpx.Client, mesh: Stack) -> None:
    forged = jwt.encode(
        {"sub": "mallory", "department": ["eng", "hr"], "exp": int(time.time()) + 600}, mesh.jwt_secret, "HS256"
    )
    reply = client.get("/api/v1/documents", headers=auth(forged))
    assert reply.status_code == 401 and "department must be a string" in reply.text, reply.text
