"""German archives through the HTTP API (#29.5): a short German query from a user whose browser says
Accept-Language: de finds, by BM25 alone, the German document whose lexemes English analysis misses (German
stemming: "Beschäftigten Urlaubstagen" → beschaftigt, urlaubstag; English keeps the inflected words whole), and
a clear English question stays English."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, upload, wait_document

pytestmark = pytest.mark.e2e

DEPARTMENT = f"lang-{uuid.uuid4().hex[:8]}"
GERMAN = (
    "# Urlaubsregelung\n\n"
    "Beschäftigte erhalten jährlich dreißig Urlaubstage. Die Anträge genehmigt die Personalabteilung, "
    "spätestens zwei Wochen vor dem gewünschten Beginn.\n"
).encode()


@pytest.fixture(scope="module")
def token(mesh: Stack) -> str:
    return mesh.token("greta", DEPARTMENT, ["employee"])


@pytest.fixture(scope="module")
def german(client: httpx.Client, token: str) -> str:
    reply = upload(client, token, "urlaub.md", GERMAN)
    assert reply.status_code == 202, reply.text
    doc = wait_document(client, token, reply.json()["document_id"])
    assert doc["status"] == "ready", doc
    return str(doc["document_id"])


def bm25(client: httpx.Client, token: str, query: str, accept: str | None = None, **body: Any) -> list[str]:
    headers = {**auth(token), **({"Accept-Language": accept} if accept else {})}
    reply = client.post(
        "/api/v1/search",
        headers=headers,
        json={"query": query, "alpha": 0, "rerank": False, "relevance_gate": False, **body},
    )
    assert reply.status_code == 200, reply.text
    return [r["document_id"] for r in reply.json()["results"]]


def test_a_short_german_query_with_accept_language_de_finds_the_german_document(
    client: httpx.Client, token: str, german: str
) -> None:
    assert bm25(client, token, "Beschäftigten Urlaubstagen", accept="de-DE,de;q=0.9,en;q=0.5") == [german]
    assert bm25(client, token, "Beschäftigten Urlaubstagen", language="de") == [german]


def test_a_clear_english_question_keeps_english_analysis(client: httpx.Client, token: str, german: str) -> None:
    # English analysis of English words: nothing in the German document matches, whatever the hint
    assert bm25(client, token, "Who approves the vacation requests of the employees?", accept="de") == []
