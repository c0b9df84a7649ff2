"""The search's language hint: the request's `language`, else the first language of Accept-Language, goes to the
retriever with every search of a chat or a search (the retriever analyses a short or unclear query with it); a
malformed `language` is a 422, and the OpenAPI document describes the field."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' fakes (tests run in importlib mode)
from test_gateway_bad_input import SECRET, FakeMesh, Stub, settings

from ragmesh_cli.tokens import mint
from ragmesh_gateway.app import create_app
from ragmesh_gateway.pipeline.understand import language_hint

BEARER = {"Authorization": f"Bearer {mint(SECRET, 'alice', 'eng', ['employee'])}"}


class Recording(Stub):
    """The fake retriever, keeping every SearchRequest it was sent."""

    def __init__(self, stub: Stub) -> None:
        super().__init__(**stub.replies)
        self.searches: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        call = super().__getattr__(name)
        if name != "Search":
            return call

        def record(request: Any, **kwargs: Any) -> Any:
            self.searches.append(request)
            return call(request, **kwargs)

        return record


@pytest.fixture
def mesh() -> FakeMesh:
    mesh = FakeMesh()
    mesh.retriever = Recording(mesh.retriever)
    return mesh


@pytest.fixture
def client(tmp_path: Path, mesh: FakeMesh) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path), mesh=mesh), raise_server_exceptions=False) as client:
        yield client


def searched_language(client: TestClient, mesh: FakeMesh, path: str, body: dict[str, Any], accept: str | None) -> str:
    headers = {**BEARER, **({"Accept-Language": accept} if accept else {})}
    reply = client.post(path, json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    languages = {request.language for request in mesh.retriever.searches}
    assert len(languages) == 1, languages  # every search of the request (corrective ones too) has the same hint
    mesh.retriever.searches.clear()
    return languages.pop()


@pytest.mark.parametrize(
    ("body", "accept", "expected"),
    [
        ({}, "de-CH, en;q=0.5", "de"),
        ({}, "en;q=0.3, fr-FR", "fr"),  # by q-value
        ({}, "*", ""),
        ({}, None, ""),  # none: the retriever detects
        ({"language": "fr"}, "de", "fr"),  # the request's field wins
        ({"language": "de-AT"}, None, "de"),
        ({}, "es", "es"),  # any language: the retriever ignores one it has no analysis for (logged, traced)
    ],
)
def test_search_and_chat_pass_the_users_language_to_the_retriever(
    client: TestClient, mesh: FakeMesh, body: dict[str, Any], accept: str | None, expected: str
) -> None:
    search = {"query": "Urlaubstage", "relevance_gate": False, **body}
    assert searched_language(client, mesh, "/api/v1/search", search, accept) == expected
    chat = {"question": "Urlaubstage?", **body}
    assert searched_language(client, mesh, "/api/v1/chat", chat, accept) == expected


@pytest.mark.parametrize("bad", ["deutsch!", "d", "de_DE", "de-", "x" * 40])
def test_a_malformed_language_is_refused(client: TestClient, bad: str) -> None:
    for path, body in (("/api/v1/search", {"query": "Urlaub"}), ("/api/v1/chat", {"question": "Urlaub"})):
        reply = client.post(path, json={**body, "language": bad}, headers=BEARER)
        assert reply.status_code == 422, reply.text
        assert "language" in reply.text


def test_the_openapi_document_describes_the_language_field(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model in ("SearchRequest", "ChatRequest"):
        field = schemas[model]["properties"]["language"]
        assert "Accept-Language" in field["description"]


def test_language_hint_prefers_the_field_then_the_header() -> None:
    assert language_hint("de-CH", "fr") == "de"
    assert language_hint(None, "fr;q=0, de;q=0.2") == "de"
    assert language_hint(None, "") == ""
