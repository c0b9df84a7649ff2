"""Relevance grading (correct / ambiguous → one corrective retrieval / incorrect → no sources) and the chat
outcomes the retriever's document counts decide (no_permission, no_match_in_filter, ingesting)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import grpc

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_gateway import grading
from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.grading import GradedQuery, Thresholds
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline import INGESTING, NO_MATCH_IN_FILTER, NO_PERMISSION, Orchestrator

sys.path.insert(0, str(Path(__file__).parent))  # the orchestrator tests' fakes (tests run in importlib mode)
from test_gateway_orchestrator import USER, FakeMesh, Stub, rpc_error, turns

SELECTRIC = "The IBM Selectric typewriter was introduced in 1961 and used a golf-ball type element."
LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor."
CAPITAL = "Capital expenditure for the new data centre was approved by the board."


def chunk(
    chunk_id: str, text: str, vector: float = 0.0, hybrid: float = 0.5, lexical: float = 1.0, title: str = "Doc"
) -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(
        chunk=common_pb2.Chunk(chunk_id=chunk_id, document_id="d1", text=text, title=title),
        score=hybrid,
        hybrid_score=hybrid,
        vector_score=vector,
        lexical_score=lexical,
    )


def search_reply(*results: common_pb2.ScoredChunk, **counts: int) -> retriever_pb2.SearchResponse:
    return retriever_pb2.SearchResponse(
        results=list(results), **{"accessible_documents": 2, "readable_documents": 2, **counts}
    )


def grade(question: str, items: list[common_pb2.ScoredChunk], have_vector: bool = True) -> grading.Grade:
    return grading.grade(items, [GradedQuery.of(question)], have_vector=have_vector, thresholds=Thresholds())


# ---------- the grade of a candidate set ----------


def test_a_strong_lexical_match_counts_on_its_own() -> None:
    # the reported case: the best hit has a low cosine and a high fused score; lorem ipsum has the higher cosine
    result = grade(
        "What is the Selectric?",
        [chunk("sel", SELECTRIC, vector=0.16, hybrid=0.8), chunk("lorem", LOREM, vector=0.30, hybrid=0.4)],
    )
    assert result.grade == grading.CORRECT
    assert [k.chunk.chunk_id for k in result.kept] == ["sel"]


def test_an_unnamed_entity_makes_the_set_at_best_ambiguous() -> None:
    result = grade("What is the capital of Mongolia?", [chunk("cap", CAPITAL, vector=0.40, hybrid=1.0)])
    assert result.grade == grading.AMBIGUOUS and result.kept == []
    assert any("Mongolia" in r for r in result.reasons)


def test_an_acronym_that_spells_a_stop_word_is_a_name_the_chunk_must_write() -> None:
    """Stop 59, a held-out question on a shared DOCX: "To which organization is the PAS submission made?" found
    nothing — "pas" is a French stop word, so no chunk "named PAS" and its only other terms graded weak."""
    pas = "This document identifies the edits needed for a PAS submission to ISO via ISO/IEC JTC/1."
    result = grade("To which organization is the PAS submission made?", [chunk("pas", pas, vector=0.3, hybrid=0.9)])
    assert result.grade == grading.CORRECT and [k.chunk.chunk_id for k in result.kept] == ["pas"]
    assert grading.weighted_terms(GradedQuery.of("PAS"))  # a one-word search for it has a term
    # the words in lower case are still stop words, and a question written all in capitals is no acronym list
    assert "pas" not in grading.weighted_terms(GradedQuery.of("ce n'est pas la submission"))
    assert "who" not in grading.weighted_terms(GradedQuery.of("WHO FOUNDED IBM?"))


def test_nothing_with_a_signal_is_incorrect() -> None:
    result = grade(
        "What is the recommended tire pressure for a mountain bike?", [chunk("lorem", LOREM, vector=0.05, hybrid=1.0)]
    )
    assert result.grade == grading.INCORRECT and result.kept == []


def test_lexical_only_grading_without_a_query_vector() -> None:
    result = grade("When was the Selectric introduced?", [chunk("sel", SELECTRIC)], have_vector=False)
    assert result.grade == grading.CORRECT
    assert "lexical signals only (no query vector)" in result.reasons


def test_the_reranker_is_strong_alone_and_vetoes_a_lone_cosine() -> None:
    vouched = chunk("a", "A paraphrase that shares no words.", vector=0.2)
    vouched.reranked, vouched.rerank_score = True, 0.8
    vetoed = chunk("b", "Some unrelated text.", vector=0.5)
    vetoed.reranked, vetoed.rerank_score = True, 0.01
    result = grade("How do I reset my password?", [vouched, vetoed])
    assert [k.chunk.chunk_id for k in result.kept] == ["a"]


def test_a_bridge_passage_is_graded_against_its_own_sub_query() -> None:
    bridge = chunk("b", "Armonk is a hamlet in Westchester County, New York, founded in 1730.", vector=0.2)
    question = GradedQuery.of("When was the town where IBM is headquartered founded?")
    alone = grading.grade([bridge], [question], have_vector=True, thresholds=Thresholds())
    with_sub = grading.grade(
        [bridge],
        [question, GradedQuery.of("Armonk founded year", ["Armonk"])],
        have_vector=True,
        thresholds=Thresholds(),
    )
    assert alone.grade != grading.CORRECT and with_sub.grade == grading.CORRECT


def test_a_hyphenated_name_counts_with_its_lower_case_part() -> None:
    """Found asking a PDF handbook: "What is the Rol-top made of?" found nothing (the chunk's "top" of "Rol-top"
    is in lower case, so the entity was not written as a name there)."""
    said = chunk(
        "z", "The Rol-top nut is cadmium-plated steel, and the bellows type is aluminum.", vector=0.2, hybrid=1.0
    )
    assert grade("What is the Rol-top made of?", [said]).grade == grading.CORRECT
    lower = chunk("w", "Spin the rol-top lid to open the top of the jar.", vector=0.2, hybrid=1.0)
    assert grade("What is the Rol-top made of?", [lower]).grade != grading.CORRECT


def test_an_entity_counts_only_where_the_chunk_writes_it_as_a_name() -> None:
    lower = chunk("x", "Since its inception the studio directed every movie in house.", vector=0.2, hybrid=1.0)
    assert grade("Who directed the movie Inception?", [lower]).grade != grading.CORRECT
    named = chunk("y", "Inception is a 2010 movie directed by Christopher Nolan.", vector=0.2, hybrid=1.0)
    assert grade("Who directed the movie Inception?", [named]).grade == grading.CORRECT


def test_keyword_query_keeps_entities_and_content_words() -> None:
    assert grading.keyword_query(GradedQuery.of("What is the capital of Mongolia?")) == "Mongolia capital"


# ---------- the grade in a chat ----------


async def chat(mesh: FakeMesh, question: str, **options: Any) -> tuple[Any, dict[str, Any]]:
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25)
    if "history" in options:
        options["history"] = turns(options["history"])
    prepared = await orchestrator.prepare(USER, ChatRequest(question=question, rerank=False, **options))
    events = [e async for e in orchestrator.run(prepared)]
    return prepared, events[-1]["data"]


async def test_correct_answers_from_the_kept_chunks_without_a_corrective_search() -> None:
    searches: list[retriever_pb2.SearchRequest] = []
    mesh = FakeMesh(
        retriever=Stub(
            Search=lambda r: (
                searches.append(r)
                or search_reply(
                    chunk("sel", SELECTRIC, vector=0.16, hybrid=0.8), chunk("lorem", LOREM, vector=0.3, hybrid=0.4)
                )
            )
        )
    )
    _, final = await chat(mesh, "What is the Selectric?")
    assert final["outcome"] == "answer" and [s["chunk_id"] for s in final["sources"]] == ["sel"]
    assert final["relevance"]["grade"] == "correct" and "corrective" not in final["relevance"]
    assert len(searches) == 1


async def test_ambiguous_gets_one_corrective_retrieval_and_answers_when_it_finds_support() -> None:
    searches: list[retriever_pb2.SearchRequest] = []

    def search(request: retriever_pb2.SearchRequest) -> retriever_pb2.SearchResponse:
        searches.append(request)
        if len(searches) == 1:
            return search_reply(chunk("near", "The typewriter division grew quickly.", vector=0.3, hybrid=1.0))
        return search_reply(chunk("sel", SELECTRIC, vector=0.2, hybrid=0.9))

    mesh = FakeMesh(retriever=Stub(Search=search))
    prepared, final = await chat(mesh, "When was the Selectric typewriter introduced?", routing=False)
    assert len(searches) == 2
    corrective = searches[1]
    assert (
        corrective.query == "Selectric typewriter introduced"
        and corrective.HasField("alpha")
        and corrective.alpha == 0.3
    )
    assert len(corrective.levels) == 3 and corrective.top_k == 60
    assert final["outcome"] == "answer" and [s["chunk_id"] for s in final["sources"]] == ["sel"]
    assert final["relevance"]["grade"] == "correct"
    assert final["relevance"]["corrective"]["first_grade"] == "ambiguous"
    assert next(s for s in prepared.stages if s["stage"] == "grade")["grade"] == "correct"


async def test_still_ambiguous_after_the_corrective_retrieval_is_not_answered() -> None:
    mesh = FakeMesh(retriever=Stub(Search=search_reply(chunk("cap", CAPITAL, vector=0.4, hybrid=1.0))))
    _, final = await chat(mesh, "What is the capital of Mongolia?")
    assert final["outcome"] == "no_sources" and final["sources"] == []
    assert final["relevance"]["grade"] == "ambiguous" and final["relevance"]["corrective"]
    assert "Answer" not in mesh.answerer.requests


async def test_incorrect_is_no_sources_without_a_corrective_search() -> None:
    searches: list[retriever_pb2.SearchRequest] = []
    mesh = FakeMesh(retriever=Stub(Search=lambda r: searches.append(r) or search_reply(chunk("x", LOREM, 0.05))))
    _, final = await chat(mesh, "What is the recommended tire pressure for a mountain bike?")
    assert final["outcome"] == "no_sources" and final["relevance"]["grade"] == "incorrect" and len(searches) == 1


async def test_alpha_zero_chat_is_graded_lexically_and_answers() -> None:
    mesh = FakeMesh(retriever=Stub(Search=search_reply(chunk("sel", SELECTRIC, vector=0.0, lexical=4.0))))
    _, final = await chat(mesh, "When was the Selectric introduced?", alpha=0.0)
    assert mesh.retriever.requests["Search"].HasField("alpha") and mesh.retriever.requests["Search"].alpha == 0.0
    assert final["outcome"] == "answer" and final["sources"]


async def test_relevance_gate_off_keeps_every_candidate_but_reports_the_grade() -> None:
    mesh = FakeMesh(retriever=Stub(Search=search_reply(chunk("x", LOREM, 0.05))))
    _, final = await chat(mesh, "What is the recommended tire pressure?", relevance_gate=False)
    assert final["outcome"] == "answer" and final["relevance"]["gate"] == "off"


# ---------- outcomes from the document counts ----------


async def test_no_permission_only_when_nothing_is_readable() -> None:
    mesh = FakeMesh(retriever=Stub(Search=retriever_pb2.SearchResponse()))
    _, final = await chat(mesh, "When was IBM founded?")
    assert final["outcome"] == "no_permission" and final["answer"] == NO_PERMISSION


async def test_a_filter_that_matches_nothing_readable_says_so() -> None:
    mesh = FakeMesh(retriever=Stub(Search=retriever_pb2.SearchResponse(readable_documents=47)))
    _, final = await chat(mesh, "When was IBM founded?", document_ids=["00000000-0000-0000-0000-000000000001"])
    assert final["outcome"] == "no_match_in_filter" and final["answer"] == NO_MATCH_IN_FILTER


async def test_documents_still_ingesting() -> None:
    mesh = FakeMesh(retriever=Stub(Search=retriever_pb2.SearchResponse(readable_documents=2, ingesting_documents=2)))
    _, final = await chat(mesh, "When was IBM founded?")
    assert final["outcome"] == "ingesting" and final["answer"] == INGESTING and final["ingesting_documents"] == 2
    some = FakeMesh(
        retriever=Stub(Search=search_reply(chunk("sel", SELECTRIC, 0.6), readable_documents=3, ingesting_documents=1))
    )
    _, final = await chat(some, "When was the Selectric introduced?")
    assert final["outcome"] == "answer" and "still being processed" in final["notes"][0]


# ---------- the follow-up rewrite in a chat ----------

HISTORY = [("user", "Tell me about IBM"), ("assistant", "IBM is a technology company.")]


async def test_rules_rewrite_is_shown_and_the_model_is_not_asked() -> None:
    mesh = FakeMesh()
    mesh.answerer.replies["Rewrite"] = answerer_pb2.RewriteResponse(question="never")
    _, final = await chat(mesh, "And when was it founded?", history=HISTORY)
    assert final["rewritten_question"] == "When was IBM founded?" and "Rewrite" not in mesh.answerer.requests


async def test_the_model_rewrites_what_the_rules_cannot() -> None:
    mesh = FakeMesh()
    mesh.answerer.replies["Rewrite"] = answerer_pb2.RewriteResponse(question="When did IBM move to Armonk?")
    prepared, final = await chat(mesh, "And when did it move there?", history=HISTORY)
    assert mesh.answerer.requests["Rewrite"].question == "And when did it move there?"
    assert prepared.query == final["rewritten_question"] == "When did IBM move to Armonk?"


async def test_a_failed_model_rewrite_keeps_the_rule_result_and_degrades() -> None:
    mesh = FakeMesh()
    mesh.answerer.replies["Rewrite"] = rpc_error(grpc.StatusCode.UNAVAILABLE, "ollama down")
    prepared, final = await chat(mesh, "And when did it move there?", history=HISTORY)
    assert prepared.query == "When did IBM move there?"
    assert final["degraded"][0]["step"] == "rewrite" and "UNAVAILABLE" in final["degraded"][0]["reason"]
