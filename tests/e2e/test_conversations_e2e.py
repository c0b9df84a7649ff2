"""Conversations through the HTTP API against the real mesh (README "Conversations"): a shared document
answers a conversation; only its owner reads it (another user and an admin get 404); the title comes from the
first question; feedback is stored with the trace id and the admin's list shows it without the text; after
the document's owner takes the reader off the ACL (PATCH), and again after deleting the document, the answers
are withdrawn when read (question kept, answer, sources and quotes gone) and no longer serve as history."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[3] / "shared" / "data" / "documents"
IBM_MD = DOCS / "md" / "sources" / "wiki.md"

if not DOCS.is_dir():
    pytest.skip(f"shared documents not found at {DOCS}", allow_module_level=True)


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "cora": mesh.token("conv-cora", "conv-sales", ["employee"]),
        "dan": mesh.token("conv-dan", "conv-ops", ["employee"]),
        "eve": mesh.token("conv-eve", "conv-ops", ["employee"]),
        "admin": mesh.token("conv-admin", "it", ["admin"]),
    }


def upload_shared(client: httpx.Client, token: str, path: Path, acl: str) -> str:
    with path.open("rb") as fh:
        reply = client.post(
            "/api/v1/documents", headers=auth(token), files={"file": (path.name, fh)}, data={"acl": acl}
        )
    assert reply.status_code in (200, 202), reply.text
    document_id = str(reply.json()["document_id"])
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        doc = client.get(f"/api/v1/documents/{document_id}", headers=auth(token)).json()
        if doc["status"] in ("ready", "failed"):
            assert doc["status"] == "ready", doc
            return document_id
        time.sleep(1)
    raise AssertionError(f"{document_id} not ready")


def chat(client: httpx.Client, token: str, **body: Any) -> dict[str, Any]:
    reply = client.post("/api/v1/chat", headers=auth(token), json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def conversation(client: httpx.Client, token: str, conversation_id: str) -> dict[str, Any]:
    reply = client.get(f"/api/v1/conversations/{conversation_id}", headers=auth(token))
    assert reply.status_code == 200, reply.text
    return reply.json()


def assert_withdrawn(message: dict[str, Any], question: str) -> None:
    assert message["withdrawn"] is True and message["question"] == question
    assert message["answer"] == "" and message["short_answer"] is None and message["rewritten_question"] is None
    assert message["sources"] == [] and message["evidence"] == [] and message["verification"] is None
    assert "no longer available" in message["note"]


def test_conversation_lifecycle_permissions_feedback_and_withdrawal(client, tokens) -> None:
    cora, dan = tokens["cora"], tokens["dan"]
    document = upload_shared(client, cora, IBM_MD, '{"users": ["conv-dan"]}')

    created = client.post("/api/v1/conversations", headers=auth(dan), json={})
    assert created.status_code == 201, created.text
    cid = created.json()["conversation_id"]
    first_q = "When was IBM founded?"
    first = chat(client, dan, question=first_q, conversation_id=cid)
    assert first["outcome"] == "answer" and first["answer"], first
    assert {s["document_id"] for s in first["sources"]} == {document}
    assert first["conversation_id"] == cid and first["message_id"]
    second = chat(client, dan, question="Where is it headquartered?", conversation_id=cid)
    understood = next(p for p in second["progress"] if p["stage"] == "conversation")
    assert understood["history_turns"] == 2  # the first question and its answer, from the server

    stored = conversation(client, dan, cid)
    assert stored["title"] == first_q  # from the first question
    assert [m["question"] for m in stored["messages"]] == [first_q, "Where is it headquartered?"]
    shown = stored["messages"][0]
    assert shown["answer"] == first["answer"] and shown["trace_id"] == first["trace_id"] and not shown["withdrawn"]
    assert [s["chunk_id"] for s in shown["sources"]] == [s["chunk_id"] for s in first["sources"]]
    assert shown["verification"] is not None and shown["time"]
    listed = client.get("/api/v1/conversations", headers=auth(dan)).json()["conversations"]
    assert listed[0]["conversation_id"] == cid

    # nobody else reads, renames, deletes or rates it: 404 as for an unknown id, an admin included
    for other in (tokens["eve"], tokens["admin"]):
        assert client.get(f"/api/v1/conversations/{cid}", headers=auth(other)).status_code == 404
        assert client.patch(f"/api/v1/conversations/{cid}", headers=auth(other), json={"title": "x"}).status_code == 404
        assert client.delete(f"/api/v1/conversations/{cid}", headers=auth(other)).status_code == 404
        rate = client.post(
            f"/api/v1/conversations/{cid}/messages/{first['message_id']}/feedback",
            headers=auth(other),
            json={"rating": "up"},
        )
        assert rate.status_code == 404
        assert (
            client.post("/api/v1/chat", headers=auth(other), json={"question": "q", "conversation_id": cid}).status_code
            == 404
        )
        assert cid not in {
            c["conversation_id"]
            for c in client.get("/api/v1/conversations", headers=auth(other)).json()["conversations"]
        }

    renamed = client.patch(f"/api/v1/conversations/{cid}", headers=auth(dan), json={"title": "IBM history"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "IBM history"

    rated = client.post(
        f"/api/v1/conversations/{cid}/messages/{first['message_id']}/feedback",
        headers=auth(dan),
        json={"rating": "down", "comment": "conv-e2e: wanted the month too"},
    )
    assert rated.status_code == 200, rated.text
    assert rated.json()["trace_id"] == first["trace_id"]
    admin_view = client.get("/api/v1/feedback?rating=down", headers=auth(tokens["admin"]))
    assert admin_view.status_code == 200, admin_view.text
    entry = next(f for f in admin_view.json()["feedback"] if f["message_id"] == first["message_id"])
    assert (entry["user_id"], entry["trace_id"]) == ("conv-dan", first["trace_id"])
    assert first["answer"] not in admin_view.text  # the admin sees the rating and the trace, not the answer
    assert client.get("/api/v1/feedback", headers=auth(dan)).status_code == 403
    export = client.get("/api/v1/conversations/rated?rating=down", headers=auth(dan)).json()["messages"]
    case = next(m for m in export if m["message_id"] == first["message_id"])
    assert case["question"] == first_q and case["answer"] == first["answer"] and case["sources"]

    # the owner takes Dan off the ACL: his stored answers are withdrawn when read, and are no history
    patched = client.patch(f"/api/v1/documents/{document}", headers=auth(cora), json={"acl": {}})
    assert patched.status_code == 200, patched.text
    after = conversation(client, dan, cid)
    assert_withdrawn(after["messages"][0], first_q)
    assert_withdrawn(after["messages"][1], "Where is it headquartered?")
    assert first["answer"] not in str(after)
    case = next(
        m
        for m in client.get("/api/v1/conversations/rated", headers=auth(dan)).json()["messages"]
        if m["message_id"] == first["message_id"]
    )
    assert case["withdrawn"] and case["answer"] == "" and case["sources"] == []
    third = chat(client, dan, question="And who founded it?", conversation_id=cid)
    assert next(p for p in third["progress"] if p["stage"] == "conversation")["history_turns"] == 0
    assert document not in {s["document_id"] for s in third["sources"]}

    # shared again: shown again (decided at read time); then deleted: withdrawn for good
    client.patch(f"/api/v1/documents/{document}", headers=auth(cora), json={"acl": {"users": ["conv-dan"]}})
    assert conversation(client, dan, cid)["messages"][0]["answer"] == first["answer"]
    assert client.delete(f"/api/v1/documents/{document}", headers=auth(cora)).status_code == 200
    assert_withdrawn(conversation(client, dan, cid)["messages"][0], first_q)

    assert client.delete(f"/api/v1/conversations/{cid}", headers=auth(dan)).status_code == 200
    assert client.get(f"/api/v1/conversations/{cid}", headers=auth(dan)).status_code == 404


def test_bad_conversation_input(client, tokens) -> None:
    dan = tokens["dan"]
    long_title = client.post("/api/v1/conversations", headers=auth(dan), json={"title": "t" * 201})
    assert long_title.status_code == 422 and "title" in long_title.text
    cid = client.post("/api/v1/conversations", headers=auth(dan), json={"title": "bad input"}).json()["conversation_id"]
    missing = "00000000-0000-4000-8000-000000000000"
    assert client.get(f"/api/v1/conversations/{missing}", headers=auth(dan)).status_code == 404
    rate = client.post(
        f"/api/v1/conversations/{cid}/messages/{missing}/feedback", headers=auth(dan), json={"rating": "up"}
    )
    assert rate.status_code == 404
    long_comment = client.post(
        f"/api/v1/conversations/{cid}/messages/{missing}/feedback",
        headers=auth(dan),
        json={"rating": "down", "comment": "c" * 2001},
    )
    assert long_comment.status_code == 422 and "comment" in long_comment.text
    both = client.post(
        "/api/v1/chat",
        headers=auth(dan),
        json={"question": "q", "conversation_id": cid, "history": [{"role": "user", "content": "x"}]},
    )
    assert both.status_code == 422
