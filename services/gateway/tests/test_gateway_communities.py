"""Collection-level questions: the router recognises them by phrasing alone, and the communities step's reduce
draws on every relevant community, one source per chunk, each community naming the sources it gave."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import grpc
import pytest
from grpc import aio

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh_common.testing import user
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest, Outcome
from ragmesh_gateway.pipeline.answer import answer_request
from ragmesh_gateway.pipeline.communities import MAX_SENTENCES, Communities, reduce_reports
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.query.router import is_collection_question, route


@pytest.mark.parametrize(
    "question",
    [
        "What are the main themes in my documents about the Rhine?",
        "Summarise what we know about Acme Corp.",
        "What do my documents say about pricing?",
        "Give an overview of the documents about onboarding",
        "What are the key topics across all documents?",
        "summarize everything we have on the merger",
        "What are the recurring issues in our files?",
    ],
)
def test_collection_questions_are_recognised(question: str) -> None:
    assert is_collection_question(question)
    assert route(question).collection and "collection" in route(question).reasons


@pytest.mark.parametrize(
    "question",
    [
        "Who directs the Velmora Institute?",
        "When was the Rhine bridge built?",
        "Which NFL team won Super Bowl 50?",
        "What is the relationship between Acme Corp and NASA?",
        "How do I reset my password?",
        "",
    ],
)
def test_single_fact_questions_are_not(question: str) -> None:
    assert not is_collection_question(question)
    assert not route(question).collection


def report(cid: str, title: str, *sentences: tuple[str, str, str]) -> graph_pb2.CommunityReport:
    return graph_pb2.CommunityReport(
        community=graph_pb2.CommunityRef(id=cid, level=1, title=title, size=3),
        key_entities=[graph_pb2.Entity(name=n) for n in title.split(" · ")],
        answer=[graph_pb2.ReportSentence(text=t, document_id=d, chunk_id=c) for t, d, c in sentences],
        relevance=2.0,
    )


def test_reduce_takes_reports_round_robin_one_source_per_chunk() -> None:
    first = report(
        "1.0", "Rhine · Basel", ("The Rhine flows past Basel.", "d1", "d1:0"), ("Basel has ports.", "d1", "d1:0")
    )
    second = report("1.1", "Lake Constance", ("Lake Constance feeds the Rhine.", "d2", "d2:3"))
    third = report(
        "1.2", "Cologne", ("Cologne lies on the Rhine.", "d3", "d3:1"), ("It has a cathedral.", "d4", "d4:0")
    )
    sources, records, kept = reduce_reports([first, second, third], max_sources=10)
    assert [(s.chunk.document_id, s.chunk.chunk_id) for s in sources] == [
        ("d1", "d1:0"),
        ("d2", "d2:3"),
        ("d3", "d3:1"),
        ("d4", "d4:0"),
    ]
    assert sources[0].chunk.text == "The Rhine flows past Basel. Basel has ports."  # one source, both sentences
    assert sources[0].chunk.title == "Rhine · Basel"
    assert [r["sources"] for r in records] == [[1], [2], [3, 4]]
    assert kept == 5 and len({s.chunk.document_id for s in sources}) == 4


def test_reduce_respects_the_source_and_sentence_bounds() -> None:
    many = [
        report(f"0.{i}", f"Topic {i}", *[(f"Sentence {i}.{j}.", f"d{i}", f"d{i}:{j}") for j in range(6)])
        for i in range(5)
    ]
    sources, _, kept = reduce_reports(many, max_sources=3)
    assert len(sources) == 3 and kept <= MAX_SENTENCES
    assert {s.chunk.document_id for s in sources} == {"d0", "d1", "d2"}  # the most relevant reports first
    assert reduce_reports([], max_sources=5) == ([], [], 0)


class FakeGraph:
    def __init__(self, reply: graph_pb2.GetCommunityReportsResponse | Exception) -> None:
        self.reply = reply
        self.requests: list[graph_pb2.GetCommunityReportsRequest] = []

    async def GetCommunityReports(self, request: graph_pb2.GetCommunityReportsRequest, **_: Any) -> Any:
        self.requests.append(request)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def chat_state(question: str, **fields: Any) -> RequestState:
    state = RequestState.for_chat(user("ann", "eng"), ChatRequest(question=question, **fields), candidates=10)
    state.route = route(question)
    state.results = [common_pb2.ScoredChunk(chunk=common_pb2.Chunk(chunk_id="r:0", document_id="r"))]
    return state


def step(graph: FakeGraph) -> Communities:
    return Communities(cast(Mesh, SimpleNamespace(graph=graph)), timeout=5.0)


async def test_a_collection_question_is_answered_from_the_reports() -> None:
    graph = FakeGraph(
        graph_pb2.GetCommunityReportsResponse(
            reports=[
                report("1.0", "Rhine · Basel", ("The Rhine flows past Basel.", "d1", "d1:0")),
                report("1.1", "Cologne", ("Cologne lies on the Rhine.", "d2", "d2:0")),
            ]
        )
    )
    state = chat_state("Summarise what we know about the Rhine")
    state.outcome = Outcome.NO_SOURCES  # no single passage was relevant enough
    record = await step(graph).execute(state)
    assert record is not None and (record["reports"], record["sentences"], record["degraded"]) == (2, 2, False)
    assert state.outcome == Outcome.ANSWER
    assert [s.chunk.chunk_id for s in state.results] == ["d1:0", "d2:0"]  # the reports' chunks, not retrieval's
    assert state.graph is not None and [c["title"] for c in state.graph["communities"]] == ["Rhine · Basel", "Cologne"]
    assert state.facts and state.facts[0].startswith("theme — Rhine · Basel")
    assert graph.requests[0].query == "Summarise what we know about the Rhine"


async def test_it_runs_only_for_collection_questions_with_the_graph_on() -> None:
    graph = FakeGraph(graph_pb2.GetCommunityReportsResponse())
    assert await step(graph).execute(chat_state("Who directs the Velmora Institute?")) is None
    assert await step(graph).execute(chat_state("Summarise what we know about X", graph=False)) is None
    empty = chat_state("Summarise what we know about X")
    record = await step(graph).execute(empty)
    assert record is not None and record["reports"] == 0
    assert [s.chunk.chunk_id for s in empty.results] == ["r:0"] and empty.graph is None  # retrieval's stay


async def test_a_down_graph_degrades_to_the_retrieved_sources() -> None:
    down = aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, aio.Metadata(), aio.Metadata(), details="down")
    state = chat_state("What are the main themes in my documents?")
    record = await step(FakeGraph(down)).execute(state)
    assert record is not None and record["degraded"] is True
    assert state.degraded == [
        {"step": "communities", "reason": "graph UNAVAILABLE; answered from retrieval without community reports"}
    ]
    assert [s.chunk.chunk_id for s in state.results] == ["r:0"]


@pytest.mark.parametrize(
    ("question", "summary"),
    [
        ("Summarise what we know about the Rhine", True),  # a collection question
        ("What are the main themes in my documents?", True),
        ("Give me an overview of IBM", True),  # an overview, searched summaries first
        ("Summarize the travel policy", True),
        ("When was IBM founded?", False),
        ("How many employees does IBM have?", False),  # aggregative, but one number answers it
        ("List all the products of IBM", False),
    ],
)
def test_the_answerer_is_asked_for_a_summary_only_for_collection_and_overview_questions(
    question: str, summary: bool
) -> None:
    assert answer_request(chat_state(question)).summary is summary


def passage(chunk_id: str, text: str, title: str = "") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(
        chunk=common_pb2.Chunk(chunk_id=chunk_id, document_id=chunk_id.split(":")[0], text=text, title=title)
    )


OFF_TOPIC = graph_pb2.GetCommunityReportsResponse(
    reports=[
        report("1.0", "Scottish Parliament · Holyrood", ("The Scotland Act created the Parliament.", "s1", "s1:0")),
        report("1.1", "Pharmacy · Hygieia", ("Pharmacists dispense drugs.", "p2", "p2:0")),
        report("1.2", "Black Death · Europe", ("The plague killed millions.", "b1", "b1:0")),
    ]
)


async def test_report_sources_off_the_topic_give_their_places_to_search_passages_on_it() -> None:
    state = chat_state("Summarise what we know about pharmacy")
    state.results = [
        passage("p1:0", "A pharmacy dispenses medication."),
        passage("x1:0", "The Rhine flows past Basel."),  # found by the search, but not about pharmacy
        passage("p3:0", "Pharmacy organizations use the Bowl of Hygieia."),
    ]
    record = await step(FakeGraph(OFF_TOPIC)).execute(state)
    assert record is not None and record["searched"] == 2
    # the report on pharmacy first (its title names it), then the search's pharmacy passages; no Parliament, plague
    assert [s.chunk.chunk_id for s in state.results] == ["p2:0", "p1:0", "p3:0"]
    assert state.graph is not None
    assert [(c["title"], c["sources"]) for c in state.graph["communities"]] == [("Pharmacy · Hygieia", [1])]
    assert state.facts == ["theme — Pharmacy · Hygieia — Pharmacy, Hygieia"]


async def test_reports_stay_when_nothing_names_the_topic_or_the_question_names_none() -> None:
    for question in ("Summarise what we know about the steam engine", "What are the main themes in my documents?"):
        state = chat_state(question)
        state.results = [passage("x1:0", "The Rhine flows past Basel.")]
        record = await step(FakeGraph(OFF_TOPIC)).execute(state)
        assert record is not None and record["searched"] == 0, question
        assert [s.chunk.chunk_id for s in state.results] == ["s1:0", "p2:0", "b1:0"], question
    # a report about the topic keeps its place; those about something else leave even with nothing to fill them
    state = chat_state("Summarise what we know about the Scotland Act")
    state.results = [passage("p1:0", "A pharmacy dispenses medication.")]
    record = await step(FakeGraph(OFF_TOPIC)).execute(state)
    assert record is not None and record["searched"] == 0
    assert [s.chunk.chunk_id for s in state.results] == ["s1:0"]
