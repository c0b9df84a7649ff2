"""The contract says what the API returns: a chat's JSON reply and every event of a streamed chat validate
against the app's own /openapi.json, strictly (a field the models leave out fails); and the guardrail runs
once per request. The app over a fake mesh; the end-to-end twin is tests/e2e/test_api_contract_e2e.py."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.retriever.v1 import retriever_pb2

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' fakes (tests run in importlib mode)
from openapi_contract import CHAT, event_schema, problems, response_schema, stream_problems
from test_gateway_bad_input import FakeMesh, Stub, make_client

QUESTION = {"question": "When was IBM founded?", "history": [{"role": "user", "content": "Tell me about IBM"}]}
VERIFIED = answerer_pb2.AnswerFinal(
    answer="IBM was founded in 1911. [1]",
    short_answer="IBM was founded in 1911.",
    verified=True,
    grounded=True,
    grounding_score=1.0,
    model="m",
    citations=[answerer_pb2.Citation(source_index=0, chunk_id="c1", support=0.9)],
    evidence=[answerer_pb2.EvidenceQuote(source_index=0, chunk_id="c1", text="founded in 1911", start=8, end=23)],
    sentences=[
        answerer_pb2.SentenceVerdict(
            text="IBM was founded in 1911.",
            supported=True,
            source_indexes=[0],
            verdict=answerer_pb2.VERDICT_SUPPORTED,
            short_answer=True,
        )
    ],
)
WITHHELD = answerer_pb2.AnswerFinal(
    answer="I could not verify an answer in your documents.",
    short_answer="I could not verify an answer in your documents.",
    withheld=True,
    draft="IBM was founded in 1924.",
    warnings=["withheld: the evidence does not state '1924'"],
    sentences=[
        answerer_pb2.SentenceVerdict(
            text="IBM was founded in 1924.",
            source_indexes=[0],
            unsupported_tokens=["1924"],
            reason="the evidence does not state '1924'",
            verdict=answerer_pb2.VERDICT_MISSING_TOKEN,
            short_answer=True,
        )
    ],
)


class Counting:
    """The fake answerer, counting the calls of each method."""

    def __init__(self, inner: Stub) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        self.calls[name] = self.calls.get(name, 0) + 1
        return getattr(self.inner, name)


def mesh_answering(final: answerer_pb2.AnswerFinal) -> FakeMesh:
    mesh = FakeMesh()
    mesh.answerer = Counting(
        Stub(
            CheckInput=answerer_pb2.CheckInputResponse(allowed=True),
            Answer=[answerer_pb2.AnswerEvent(token=final.draft or final.answer), answerer_pb2.AnswerEvent(final=final)],
        )
    )
    return mesh


@pytest.fixture
def verified(tmp_path: Path) -> Iterator[tuple[TestClient, FakeMesh]]:
    mesh = mesh_answering(VERIFIED)
    for client in make_client(tmp_path, mesh):
        yield client, mesh


def sse(client: TestClient, body: dict[str, Any]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    with client.stream("POST", "/api/v1/chat", json={**body, "stream": True}) as reply:
        assert reply.status_code == 200, reply.read()
        name = "message"
        for line in reply.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1].strip())))
    return events


def test_a_verified_answer_and_its_stream_match_the_spec(verified: tuple[TestClient, FakeMesh]) -> None:
    client, _ = verified
    spec = client.get("/openapi.json").json()
    reply = client.post("/api/v1/chat", json=QUESTION)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["verified"] is True and body["evidence"][0]["quote"] == "founded in 1911"
    assert problems(spec, response_schema(spec, *CHAT), body) == []
    events = sse(client, QUESTION)
    assert {name for name, _ in events} == {"progress", "token", "final"}
    assert stream_problems(spec, events) == []


def test_a_withheld_answer_and_a_refused_outcome_match_the_spec(tmp_path: Path) -> None:
    mesh = mesh_answering(WITHHELD)
    for client in make_client(tmp_path, mesh):
        spec = client.get("/openapi.json").json()
        body = client.post("/api/v1/chat", json=QUESTION).json()
        assert body["withheld"] is True and body["draft"] == "IBM was founded in 1924."
        assert problems(spec, response_schema(spec, *CHAT), body) == []
        mesh.retriever.replies["Search"] = retriever_pb2.SearchResponse()  # nothing readable: no_permission
        body = client.post("/api/v1/chat", json=QUESTION).json()
        assert body["outcome"] == "no_permission"
        assert problems(spec, response_schema(spec, *CHAT), body) == []
        assert stream_problems(spec, sse(client, QUESTION)) == []


def test_an_error_event_matches_the_spec(verified: tuple[TestClient, FakeMesh]) -> None:
    client, _ = verified
    spec = client.get("/openapi.json").json()
    error = {"step": "answer", "message": "the answer step is unavailable", "status": 503, "trace_id": "0" * 32}
    assert problems(spec, event_schema(spec, "error"), {**error, "retry_after": 7}) == []
    assert problems(spec, event_schema(spec, "error"), {**error, "retry": 7}) != []  # an undeclared field


def test_the_check_fails_for_every_field_the_models_leave_out(verified: tuple[TestClient, FakeMesh]) -> None:
    client, _ = verified
    spec = client.get("/openapi.json").json()
    body = client.post("/api/v1/chat", json=QUESTION).json()
    fields = ["short_answer", "verified", "withheld", "draft", "evidence", "sentences", "relevance"]
    fields += ["rewritten_question", "notes", "outcome", "degraded", "progress"]
    for name in fields:
        assert name in body
        models = copy.deepcopy(spec)
        for model in ("FinalEvent", "ChatResponse"):
            models["components"]["schemas"][model]["properties"].pop(name, None)
        assert problems(models, response_schema(models, *CHAT), body), f"{name} missing from the model passed"
    outcome = spec["components"]["schemas"]["Outcome"]["enum"]
    assert set(outcome) == {"answer", "no_permission", "no_sources", "no_match_in_filter", "ingesting"}


def test_the_guardrail_runs_once_per_chat(verified: tuple[TestClient, FakeMesh]) -> None:
    client, mesh = verified
    assert client.post("/api/v1/chat", json=QUESTION).status_code == 200
    assert mesh.answerer.calls == {"CheckInput": 1, "Answer": 1}
    sse(client, QUESTION)
    assert mesh.answerer.calls == {"CheckInput": 2, "Answer": 2}
    assert client.post("/api/v1/search", json={"query": "When was IBM founded?"}).status_code == 200
    assert mesh.answerer.calls["CheckInput"] == 2  # search reads no model: no guardrail
