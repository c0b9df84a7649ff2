"""A multi-step (agentic) chat through the HTTP API against the real mesh: a two-document bridge question (the
film names its director, the director's page names the office), answered from both documents in two steps,
each streamed as a `step` event; and a user who cannot read a third document about the same person never gets
it among the sources of any step."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, upload, wait_document

pytestmark = pytest.mark.e2e

FILM = (
    "# Dawn Harbor\n\nDawn Harbor is a 1952 drama film directed by Mara Quill. It was shot on the coast of Maine "
    "and follows a lighthouse keeper through one winter.\n"
)
DIRECTOR = (
    "# Mara Quill\n\nMara Quill was an American film director. After leaving the film industry, Mara Quill "
    "served as mayor of Port Ellis from 1970 to 1978.\n"
)
PRIVATE = (
    "# Mara Quill private file\n\nMara Quill later held the office of harbour commissioner of Port Ellis, "
    "according to the research department's private notes.\n"
)
QUESTION = "What office did the director who made Dawn Harbor hold after leaving film?"


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "ada": mesh.token("ada-agentic", "research", ["employee"]),
        "bob": mesh.token("bob-agentic", "legal", ["employee"]),
    }


@pytest.fixture(scope="module")
def documents(client: httpx.Client, tokens: dict[str, str]) -> dict[str, str]:
    shared = {"departments": ["research", "legal"]}
    ids = {}
    for name, text, acl in (
        ("film", FILM, shared),
        ("director", DIRECTOR, shared),
        ("private", PRIVATE, {"departments": ["research"]}),
    ):
        reply = upload(client, tokens["ada"], f"agentic-{name}.md", text.encode(), acl)
        assert reply.status_code == 202, reply.text
        doc = wait_document(client, tokens["ada"], reply.json()["document_id"])
        assert doc["status"] == "ready", doc
        ids[name] = str(doc["document_id"])
    return ids


def stream(client: httpx.Client, token: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    with client.stream("POST", "/api/v1/chat", headers=auth(token), json={**body, "stream": True}) as reply:
        assert reply.status_code == 200, reply.read()
        name = "message"
        for line in reply.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1].strip())))
    return events


def test_a_bridge_question_is_answered_from_both_documents_in_steps(client, tokens, documents) -> None:
    events = stream(client, tokens["bob"], {"question": QUESTION, "mode": "agentic"})
    steps = [data for name, data in events if name == "step"]
    final = next(data for name, data in events if name == "final")
    assert final["mode"] == "agentic" and final["steps"] == steps and len(steps) >= 2
    assert steps[0]["decision"] in ("found", "retried") and steps[0]["bridge"]
    assert "Mara Quill" in steps[1]["query"]  # the bridge entity of the first step's evidence
    searched = {d for s in steps for d in s.get("documents") or []}
    assert {documents["film"], documents["director"]} <= searched
    assert final["outcome"] == "answer"
    assert {documents["film"], documents["director"]} <= {s["document_id"] for s in final["sources"]}


def test_no_step_of_an_agentic_chat_cites_a_document_the_user_cannot_read(client, tokens, documents) -> None:
    # bob (legal) cannot read the private file; ada (research) can: the same question, the same steps
    for question in (QUESTION, "Which office did Mara Quill hold, and what is in the private file about Mara Quill?"):
        body = client.post("/api/v1/chat", headers=auth(tokens["bob"]), json={"question": question, "mode": "agentic"})
        assert body.status_code == 200, body.text
        reply = body.json()
        seen = {s["document_id"] for s in reply["sources"]} | {
            d for s in reply.get("steps") or [] for d in s.get("documents") or []
        }
        assert documents["private"] not in seen, reply
        assert "harbour commissioner" not in reply["answer"].lower()
    ada = client.post(
        "/api/v1/chat",
        headers=auth(tokens["ada"]),
        json={"question": "What is in the private file about Mara Quill?", "mode": "agentic"},
    ).json()
    assert documents["private"] in {d for s in ada["steps"] for d in s.get("documents") or []}  # it is there


# --- the tools: fetch_section runs as the user -----------------------------------------------------------------------

LANTERN = "# Lantern Bay\n\nLantern Bay is a 1961 drama film directed by Osric Vale, set in a fishing town.\n"
VALE = "# Osric Vale\n\nOsric Vale was born in 1920. From 1970 he was harbour master of Kestrel Point.\n"
VALE_NOTES = "# Osric Vale (notes)\n\nThe research notes record a quarrel with the Kestrel Point council in 1975.\n"
VALE_QUESTION = "What position did the director who made Lantern Bay hold?"


@pytest.fixture(scope="module")
def titled(client: httpx.Client, tokens: dict[str, str]) -> dict[str, str]:
    """Documents uploaded with their titles: the film, the director's page (both readable by ada and bob), and a
    research-only page titled like the director ("Osric Vale (notes)": the same title, its qualifier aside)."""
    ids = {}
    for name, title, text, departments in (
        ("film", "Lantern Bay", LANTERN, ["research", "legal"]),
        ("director", "Osric Vale", VALE, ["research", "legal"]),
        ("notes", "Osric Vale (notes)", VALE_NOTES, ["research"]),
    ):
        reply = client.post(
            "/api/v1/documents",
            headers=auth(tokens["ada"]),
            files={"file": (f"tools-{name}.md", text.encode())},
            data={"title": title, "acl": json.dumps({"departments": departments})},
        )
        assert reply.status_code == 202, reply.text
        doc = wait_document(client, tokens["ada"], reply.json()["document_id"])
        assert doc["status"] == "ready", doc
        ids[name] = str(doc["document_id"])
    return ids


def fetched(reply: dict[str, Any], title: str) -> set[str]:
    """The documents of the fetch_section calls that asked for `title` (a call asks for several)."""
    return {
        d
        for s in reply["steps"]
        if s["tool"] == "fetch_section" and title in s["query"].split("; ")
        for d in s["documents"]
    }


def test_fetch_section_brings_the_bridge_entitys_document_and_only_what_the_user_may_read(
    client: httpx.Client, tokens: dict[str, str], titled: dict[str, str]
) -> None:
    body = {"question": VALE_QUESTION, "mode": "agentic"}
    bob = client.post("/api/v1/chat", headers=auth(tokens["bob"]), json=body)
    assert bob.status_code == 200, bob.text
    reply = bob.json()
    assert titled["director"] in fetched(reply, "Osric Vale"), reply["steps"]  # the tool ran, as bob
    seen = {s["document_id"] for s in reply["sources"]} | {d for s in reply["steps"] for d in s.get("documents") or []}
    assert titled["director"] in {s["document_id"] for s in reply["sources"]}
    assert titled["notes"] not in seen and "quarrel" not in reply["answer"].lower()
    # ada may read the notes: the same call finds them too (what bob missed is the permission, not the title)
    ada = client.post("/api/v1/chat", headers=auth(tokens["ada"]), json=body).json()
    assert {titled["director"], titled["notes"]} <= fetched(ada, "Osric Vale"), ada["steps"]
