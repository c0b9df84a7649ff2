"""The visible graph through the HTTP API and the CLI against the real mesh: entity search and detail, `graph` in
search and chat replies, community status for admins, a collection-level question answered from community
reports, and an ACL change that removes a document's entities, facts and report sentences for the very next
request. Nothing of a document a user cannot read shows anywhere in what they get.

Users: gina (owner, department graph-e2e), ravi (same department), omar (another department), an admin. Gina's
"Velmora" document is shared with the department; her "Quendrith" document with nobody."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, settled, upload, wait_document

pytestmark = pytest.mark.e2e

# the strict OpenAPI check shared with the gateway's contract tests (tests run in importlib mode)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "services" / "gateway" / "tests"))

DEPARTMENT = "graph-e2e"
SHARED = (
    b"# Velmora Institute\n\n"
    b"The Velmora Institute in Brackenford studies the Tavish River. Elena Marsh directs the Velmora Institute.\n\n"
    b"Elena Marsh mapped the Tavish River with the Brackenford Rowing Club. "
    b"The Brackenford Rowing Club funds the Velmora Institute every spring.\n"
)
PRIVATE = (
    b"# Quendrith Labs\n\n"
    b"Quendrith Labs hired Oskar Villanueva in Lisbon. Oskar Villanueva tested the Quendrith Labs prototype "
    b"with the Velmora Institute.\n"
)
SETTLE = 600.0  # the graph ingests a document while its chunks embed; poll up to this long


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "gina": mesh.token("gina", DEPARTMENT, ["employee"]),
        "ravi": mesh.token("ravi", DEPARTMENT, ["employee"]),
        "omar": mesh.token("omar", "graph-e2e-out", ["employee"]),
        "admin": mesh.token("graph-admin", "it", ["admin"]),
    }


@pytest.fixture(scope="module")
def documents(client: httpx.Client, tokens: dict[str, str]) -> Iterator[dict[str, str]]:
    ids: dict[str, str] = {}
    for name, content, acl in (
        ("shared", SHARED, {"departments": [DEPARTMENT]}),
        ("private", PRIVATE, {"users": ["gina"]}),  # an empty ACL would default to her department
    ):
        reply = upload(client, tokens["gina"], f"{name}.md", content, acl=acl)
        assert reply.status_code == 202, reply.text
        ids[name] = reply.json()["document_id"]
    for document_id in ids.values():
        assert wait_document(client, tokens["gina"], document_id, settled)["status"] == "ready"
    yield ids
    for document_id in ids.values():
        client.delete(f"/api/v1/documents/{document_id}", headers=auth(tokens["gina"]))


def entities(client: httpx.Client, token: str, q: str) -> list[dict[str, Any]]:
    reply = client.get("/api/v1/graph/entities", params={"q": q}, headers=auth(token))
    assert reply.status_code == 200, reply.text
    return list(reply.json()["entities"])


def entity_named(client: httpx.Client, token: str, q: str) -> dict[str, Any]:
    """The first entity matching `q` as `token` sees it, once the graph has ingested it."""
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline:
        found = entities(client, token, q)
        if found:
            return found[0]
        time.sleep(1.0)
    raise AssertionError(f"no entity matching {q!r} after {SETTLE:.0f}s")


def cli(mesh: Stack, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGMESH_URL": mesh.gateway_url, "RAGMESH_TOKEN": token, "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-m", "ragmesh_cli", *args], capture_output=True, text=True, env=env, check=False, timeout=300
    )


def test_entities_facts_and_communities_show_only_readable_documents(
    client: httpx.Client, mesh: Stack, tokens: dict[str, str], documents: dict[str, str]
) -> None:
    from openapi_contract import problems, response_schema

    spec = client.get("/openapi.json").json()

    def conforms(path: str, method: str, body: Any) -> None:
        assert problems(spec, response_schema(spec, path, method), body) == [], body

    velmora = entity_named(client, tokens["gina"], "velmora")
    quendrith = entity_named(client, tokens["gina"], "quendrith")
    assert entity_named(client, tokens["ravi"], "velmora")["id"] == velmora["id"]
    assert entities(client, tokens["ravi"], "quendrith") == []  # only in gina's private document
    assert entities(client, tokens["omar"], "velmora") == []

    # detail: gina sees both documents' mentions; ravi only the shared one; the private entity is a 404 for him,
    # exactly like an id that names nothing
    mine = client.get(f"/api/v1/graph/entities/{velmora['id']}", headers=auth(tokens["gina"])).json()
    assert {m["document_id"] for m in mine["mentions"]} == {documents["shared"], documents["private"]}
    detail = client.get(f"/api/v1/graph/entities/{velmora['id']}", headers=auth(tokens["ravi"]))
    assert detail.status_code == 200, detail.text
    assert {m["document_id"] for m in detail.json()["mentions"]} == {documents["shared"]}
    conforms("/api/v1/graph/entities/{entity_id}", "get", detail.json())
    conforms("/api/v1/graph/entities", "get", {"entities": [velmora]})
    assert "quendrith" not in detail.text.lower() and "villanueva" not in detail.text.lower()
    assert client.get(f"/api/v1/graph/entities/{quendrith['id']}", headers=auth(tokens["ravi"])).status_code == 404
    assert client.get("/api/v1/graph/entities/bm8tc3VjaA", headers=auth(tokens["ravi"])).status_code == 404
    assert client.get("/api/v1/graph/entities/not*an*id", headers=auth(tokens["ravi"])).status_code == 422
    assert client.get("/api/v1/graph/entities", params={"q": "x"}, headers=auth(tokens["ravi"])).status_code == 422

    # search with `graph`: the question's entities with their source chunks
    reply = client.post(
        "/api/v1/search",
        headers=auth(tokens["ravi"]),
        json={"query": "Who directs the Velmora Institute?", "graph": True, "relevance_gate": False},
    )
    assert reply.status_code == 200, reply.text
    graph = reply.json()["graph"]
    named = [e for e in graph["entities"] if "velmora" in e["name"].lower()]
    assert named and all(c.startswith(documents["shared"]) for e in named for c in e["chunk_ids"])
    assert "quendrith" not in reply.text.lower()
    assert any(s["stage"] == "graph" for s in reply.json()["progress"])
    conforms("/api/v1/search", "post", reply.json())

    # communities: admins only; a recompute makes both documents' entities members
    assert client.get("/api/v1/admin/graph/communities", headers=auth(tokens["ravi"])).status_code == 403
    status = client.post("/api/v1/admin/graph/communities/recompute", headers=auth(tokens["admin"]))
    assert status.status_code == 200, status.text
    assert status.json()["state"] == "ready" and status.json()["communities_per_level"][0] >= 1
    assert client.get("/api/v1/admin/graph/communities", headers=auth(tokens["admin"])).json()["state"] == "ready"
    conforms("/api/v1/admin/graph/communities", "get", status.json())

    question = "What are the main themes in my documents about the Velmora Institute?"
    for user, hidden in (("gina", None), ("ravi", "quendrith")):
        chat = client.post(
            "/api/v1/chat", headers=auth(tokens[user]), json={"question": question, "relevance_gate": False}
        )
        assert chat.status_code == 200, chat.text
        body = chat.json()
        assert body["graph"] and body["graph"]["communities"], body.get("graph")
        assert any(p["stage"] == "communities" and p.get("reports") for p in body["progress"])
        # a summary of the readable sentences about the topic, each cited and verified (not "could not verify")
        assert body["verified"] and not body["withheld"], body["answer"]
        assert "velmora" in body["answer"].lower() and body["citations"], body["answer"]
        conforms("/api/v1/chat", "post", body)
        cited = {s["document_id"] for s in body["sources"]}
        if hidden is None:
            assert documents["shared"] in cited or documents["private"] in cited, cited
        else:
            assert documents["private"] not in cited
            assert hidden not in json.dumps(body).lower() and "villanueva" not in json.dumps(body).lower()

    # the CLI shows the same entity
    shown = cli(mesh, tokens["ravi"], "graph", "Velmora")
    assert shown.returncode == 0, shown.stderr
    assert "velmora" in shown.stdout.lower() and "quendrith" not in shown.stdout.lower()
    assert cli(mesh, tokens["omar"], "graph", "Velmora").returncode == 1

    # an ACL change holds for the very next request: the department loses the shared document, omar gains it
    patched = client.patch(
        f"/api/v1/documents/{documents['shared']}", headers=auth(tokens["gina"]), json={"acl": {"users": ["omar"]}}
    )
    assert patched.status_code == 200, patched.text
    assert entities(client, tokens["ravi"], "velmora") == []
    assert client.get(f"/api/v1/graph/entities/{velmora['id']}", headers=auth(tokens["ravi"])).status_code == 404
    assert entity_named(client, tokens["omar"], "velmora")["id"] == velmora["id"]
    after = client.post(
        "/api/v1/chat", headers=auth(tokens["ravi"]), json={"question": question, "relevance_gate": False}
    )
    assert after.status_code == 200, after.text
    text = json.dumps(after.json()).lower()
    assert "tavish" not in text and "elena marsh" not in text and "quendrith" not in text


def test_a_title_is_its_documents_topic_for_readers_only_and_follows_a_retitle(
    client: httpx.Client, tokens: dict[str, str]
) -> None:
    """A document's title that reads as a name is its topic entity, mentioned by every chunk even where the text
    never names it (services/graph/README.md, "Topics"): seen by the document's readers only, a PATCH of the
    title moves the topic before the reply returns, and revoking access or deleting the document removes it."""
    text = b"It opened in 1903 on the harbour front and keeps the old coastal charts of the province.\n"
    reply = upload(client, tokens["gina"], "Orvanne_Gallery.txt", text, acl={"departments": [DEPARTMENT]})
    assert reply.status_code == 202, reply.text
    document_id = reply.json()["document_id"]
    try:
        assert wait_document(client, tokens["gina"], document_id, settled)["status"] == "ready"
        topic = entity_named(client, tokens["ravi"], "orvanne")
        assert topic["name"] == "Orvanne Gallery"
        assert topic["chunk_ids"] and all(c.startswith(document_id) for c in topic["chunk_ids"])
        assert entities(client, tokens["omar"], "orvanne") == []  # not a reader: not even the name

        patched = client.patch(
            f"/api/v1/documents/{document_id}", headers=auth(tokens["gina"]), json={"title": "Brisk Harbour Museum"}
        )
        assert patched.status_code == 200, patched.text
        assert entities(client, tokens["ravi"], "orvanne") == []
        renamed = entities(client, tokens["ravi"], "brisk harbour")
        assert [e["name"] for e in renamed] == ["Brisk Harbour Museum"]
        assert set(renamed[0]["chunk_ids"]) == set(topic["chunk_ids"])

        # the topic follows access like any mention: revoked, then deleted, it is gone at the next read
        private = client.patch(
            f"/api/v1/documents/{document_id}", headers=auth(tokens["gina"]), json={"acl": {"users": ["gina"]}}
        )
        assert private.status_code == 200, private.text
        assert entities(client, tokens["ravi"], "brisk harbour") == []
        assert entities(client, tokens["gina"], "brisk harbour")
        assert client.delete(f"/api/v1/documents/{document_id}", headers=auth(tokens["gina"])).status_code == 200
        assert entities(client, tokens["gina"], "brisk harbour") == []
    finally:
        client.delete(f"/api/v1/documents/{document_id}", headers=auth(tokens["gina"]))
