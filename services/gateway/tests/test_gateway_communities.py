"""Collection-level questions: the router recognises them by phrasing alone, and the communities step's reduce
draws on every relevant community, one source per chunk, each community naming the sources it gave."""

from __future__ import annotations

import pytest

from ragmesh.graph.v1 import graph_pb2
from ragmesh_gateway.pipeline.communities import MAX_SENTENCES, reduce_reports
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
