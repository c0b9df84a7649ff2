"""Chat in a stored conversation (the conversation step and the record-turn hook) and the conversation API's
bad input, with a fake mesh: the stored, non-withdrawn turns are the history; the turn is appended with every
document it drew on; a foreign conversation is 404; storing failures degrade without losing the answer."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input and orchestrator tests' fakes (importlib mode)
from test_gateway_bad_input import FakeMesh as HttpMesh
from test_gateway_bad_input import make_client
from test_gateway_orchestrator import USER, FakeMesh, Stub, hit, rpc_error

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.mesh import StepFailed
from ragmesh_gateway.models import MAX_CONVERSATION_TITLE_CHARS, MAX_FEEDBACK_COMMENT_CHARS, ChatRequest
from ragmesh_gateway.pipeline import NO_PERMISSION, Orchestrator

CONV = str(uuid.uuid4())
MID = str(uuid.uuid4())


def stored(
    question: str,
    answer: str,
    sources: list[str],
    withdrawn: bool = False,
    rewritten: str = "",
    withheld: bool = False,
    short: str = "",
) -> Any:
    return retriever_pb2.ConversationMessage(
        message_id=str(uuid.uuid4()),
        conversation_id=CONV,
        question=question,
        rewritten_question=rewritten,
        answer="" if withdrawn else answer,
        short_answer=short,
        outcome="answer",
        source_document_ids=[] if withdrawn else sources,
        withdrawn=withdrawn,
        details_json=json.dumps({"withheld": True}) if withheld else "{}",
    )


def conversation_mesh(messages: list[Any], append: Any = None, search: Any = None) -> FakeMesh:
    mesh = FakeMesh()
    mesh.retriever = Stub(
        Search=search
        or retriever_pb2.SearchResponse(
            results=[hit("c1", 0.8), hit("c2", 0.6)], accessible_documents=2, readable_documents=2
        ),
        GetConversation=retriever_pb2.GetConversationResponse(
            conversation=retriever_pb2.Conversation(conversation_id=CONV), messages=messages
        ),
        AppendMessage=append or retriever_pb2.AppendMessageResponse(message_id=MID),
    )
    return mesh


async def chat(mesh: FakeMesh, question: str) -> tuple[Any, list[dict[str, Any]]]:
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25)
    prepared = await orchestrator.prepare(USER, ChatRequest(question=question, conversation_id=uuid.UUID(CONV)))
    return prepared, [e async for e in orchestrator.run(prepared)]


async def test_stored_history_is_used_withdrawn_turns_left_out_and_the_turn_recorded() -> None:
    mesh = conversation_mesh(
        [
            stored("Who makes the secret widget?", "Acme makes it.", ["d-secret"], withdrawn=True),
            stored("What is the relationship between IBM and Armonk?", "IBM is headquartered in Armonk.", ["d0"]),
        ]
    )
    prepared, events = await chat(mesh, "When was it founded?")
    history = [(t.role, t.content) for t in mesh.answerer.requests["Answer"].history]
    assert history == [
        ("user", "What is the relationship between IBM and Armonk?"),
        ("assistant", "IBM is headquartered in Armonk."),
    ]  # the withdrawn turn is not history, neither its question nor its (hidden) answer
    assert "Acme" not in json.dumps([s for s in prepared.stages])
    assert next(s for s in prepared.stages if s["stage"] == "conversation")["history_turns"] == 2
    final = events[-1]["data"]
    assert (final["conversation_id"], final["message_id"]) == (CONV, MID)
    appended = mesh.retriever.requests["AppendMessage"]
    assert appended.conversation_id == CONV and appended.question == "When was it founded?"
    assert appended.answer == "IBM was founded in 1911." and appended.trace_id == final["trace_id"]
    # every source given to the model, and the documents of the history turns it was rewritten from
    assert set(appended.source_document_ids) == {"d1", "d0"}
    details = json.loads(appended.details_json)
    assert [s["chunk_id"] for s in details["sources"]] == [s["chunk_id"] for s in final["sources"]]


async def test_a_declined_turn_is_recorded_without_sources() -> None:
    mesh = conversation_mesh([], search=retriever_pb2.SearchResponse(results=[], accessible_documents=0))
    _, events = await chat(mesh, "What is our travel policy?")
    final = events[-1]["data"]
    assert final["outcome"] == "no_permission" and final["message_id"] == MID
    appended = mesh.retriever.requests["AppendMessage"]
    assert appended.outcome == "no_permission" and appended.answer == NO_PERMISSION
    assert list(appended.source_document_ids) == []


async def test_an_unknown_or_foreign_conversation_is_404_before_anything_runs() -> None:
    mesh = conversation_mesh([])
    mesh.retriever.replies["GetConversation"] = rpc_error(grpc.StatusCode.NOT_FOUND, f"conversation {CONV} not found")
    with pytest.raises(StepFailed) as failed:
        await chat(mesh, "When was it founded?")
    assert (failed.value.http_status, failed.value.step) == (404, "conversation")
    assert "Search" not in mesh.retriever.requests and "AppendMessage" not in mesh.retriever.requests


async def test_a_failed_store_degrades_and_keeps_the_answer() -> None:
    mesh = conversation_mesh([], append=rpc_error(grpc.StatusCode.UNAVAILABLE, "down"))
    _, events = await chat(mesh, RELATIONAL_Q)
    final = events[-1]["data"]
    assert final["answer"] == "IBM was founded in 1911." and final["message_id"] is None
    assert {"step": "conversation", "reason": "conversation UNAVAILABLE; the turn was not stored"} in final["degraded"]


RELATIONAL_Q = "What is the relationship between IBM and Armonk?"


class ConversationHttpMesh(HttpMesh):
    def __init__(self) -> None:
        super().__init__()
        self.retriever.replies.update(
            GetConversation=rpc_error(grpc.StatusCode.NOT_FOUND, "conversation not found"),
            CreateConversation=retriever_pb2.Conversation(conversation_id=CONV, title="t"),
            SetMessageFeedback=rpc_error(grpc.StatusCode.NOT_FOUND, "message not found"),
            ListFeedback=retriever_pb2.ListFeedbackResponse(),
        )


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    yield from make_client(tmp_path, ConversationHttpMesh())  # type: ignore[arg-type]


def test_bad_conversation_input_is_4xx_with_a_message(client: TestClient) -> None:
    both = client.post(
        "/api/v1/chat",
        json={"question": "q", "conversation_id": CONV, "history": [{"role": "user", "content": "x"}]},
    )
    assert both.status_code == 422 and "not both" in both.text
    long_title = client.post("/api/v1/conversations", json={"title": "t" * (MAX_CONVERSATION_TITLE_CHARS + 1)})
    assert long_title.status_code == 422 and "title" in long_title.text
    assert client.post("/api/v1/conversations", json={}).status_code == 201
    long_comment = client.post(
        f"/api/v1/conversations/{CONV}/messages/{MID}/feedback",
        json={"rating": "down", "comment": "c" * (MAX_FEEDBACK_COMMENT_CHARS + 1)},
    )
    assert long_comment.status_code == 422 and "comment" in long_comment.text
    bad_rating = client.post(f"/api/v1/conversations/{CONV}/messages/{MID}/feedback", json={"rating": "meh"})
    assert bad_rating.status_code == 422
    assert client.get("/api/v1/conversations/not-a-uuid").status_code == 422
    foreign = client.get(f"/api/v1/conversations/{CONV}")
    assert foreign.status_code == 404 and "not found" in foreign.text
    chat_foreign = client.post("/api/v1/chat", json={"question": "q", "conversation_id": CONV})
    assert chat_foreign.status_code == 404
    feedback_foreign = client.post(f"/api/v1/conversations/{CONV}/messages/{MID}/feedback", json={"rating": "up"})
    assert feedback_foreign.status_code == 404
    assert client.get("/api/v1/feedback").status_code == 403  # admins only


async def test_history_gives_questions_as_rewritten_and_leaves_withheld_answers_out() -> None:
    """A rewritten follow-up is history as rewritten (what a later pronoun refers to); a withheld answer's text
    ("I could not verify …" and unverified quotes) is no turn of the history, its question is."""
    mesh = conversation_mesh(
        [
            stored("What is the Boots nut?", "The Boots nut is a self-locking nut.", ["d0"]),
            stored("What is it made of?", "Steel.", ["d0"], rewritten="What is the Boots nut made of?"),
            stored("Who sells it?", "I could not verify an answer in your documents.", ["d2"], withheld=True),
        ]
    )
    await chat(mesh, "When was it invented?")
    history = [(t.role, t.content) for t in mesh.answerer.requests["Answer"].history]
    assert history == [
        ("user", "What is the Boots nut?"),
        ("assistant", "The Boots nut is a self-locking nut."),
        ("user", "What is the Boots nut made of?"),
        ("assistant", "Steel."),
        ("user", "Who sells it?"),
    ]


async def test_history_answers_open_with_their_short_answer_so_he_is_the_answer() -> None:
    """Stop 59, asking the IBM page: "Who patented the Electric Tabulating Machine?" → "Herman Hollerith" from a
    sentence that names Julius E. Pitrap first; "When did he patent it?" was read "When did Julius E. Pitrap patent
    Julius E. Pitrap?" and answered 1885, verified. The stored answer now opens with its short answer, and "he" and
    "it" stand for different things."""
    sentence = (
        "Julius E. Pitrap patented the computing scale in 1885; Herman Hollerith patented the Electric Tabulating "
        "Machine (1889)."
    )
    mesh = conversation_mesh(
        [stored("Who patented the Electric Tabulating Machine?", sentence, ["d0"], short="Herman Hollerith")]
    )
    await chat(mesh, "When did he patent it?")
    history = [(t.role, t.content) for t in mesh.answerer.requests["Answer"].history]
    assert history[1] == ("assistant", f"Herman Hollerith.\n\n{sentence}")
    assert mesh.answerer.requests["Answer"].question == (
        "When did Herman Hollerith patent Electric Tabulating Machine?"
    )
