"""Linked documents (pipeline/link.py) with the fake mesh: the document the best passage names joins the ranking
right after it, as the asking user, never from a title several documents share, and a failed lookup degrades."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from test_gateway_agentic import FILM, OFF, QUILL, Corpus, NoFetch, answering_mesh, chunk
from test_gateway_orchestrator import USER

from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.models import ChatRequest, SearchRequest
from ragmesh_gateway.pipeline import Orchestrator
from ragmesh_gateway.pipeline.link import linked_documents, place

QUESTION = "Where was Dawn Harbor shot?"  # the fake search finds the film's document (its title shares "Dawn")


async def search(corpus: Corpus, linked: int | None, default: int = 0, user: Any = USER) -> tuple[Any, list[Any]]:
    orchestrator = Orchestrator(answering_mesh(corpus), Deadlines(), min_relevance=0.25, linked_documents=default)
    return await orchestrator.search(user, SearchRequest(query=QUESTION, linked_documents=linked))


async def test_the_document_the_top_passage_names_comes_right_after_it() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill (director)"))
    state, results = await search(corpus, 1)
    assert [r.chunk.document_id for r in results] == ["d1", "d2"]
    assert "Mara Quill" in corpus.fetches[0][0] and corpus.fetches[0][1] == USER.metadata()  # as the user
    assert results[1].score <= results[0].score
    assert next(s for s in state.stages if s["stage"] == "link")["linked"] == 1
    # off by request, and by the deployment default when the request does not say
    corpus.fetches.clear()
    _, plain = await search(corpus, 0, default=1)
    assert [r.chunk.document_id for r in plain] == ["d1"] and not corpus.fetches
    _, by_default = await search(corpus, None, default=1)
    assert [r.chunk.document_id for r in by_default] == ["d1", "d2"]


async def test_a_title_two_documents_share_links_neither() -> None:
    corpus = Corpus(
        chunk("c1", "d1", FILM, "Dawn Harbor"),
        chunk("c2", "d2", QUILL, "Mara Quill"),
        chunk("c3", "d3", "Mara Quill is a racing yacht.", "Mara Quill (yacht)"),
    )
    _, results = await search(corpus, 1)
    assert [r.chunk.document_id for r in results] == ["d1"]


async def test_a_document_the_user_cannot_read_is_never_linked() -> None:
    corpus = Corpus(
        chunk("c1", "d1", FILM, "Dawn Harbor"),
        chunk("c2", "d2", QUILL, "Mara Quill"),
        hidden={USER.metadata(): {"d2"}},
    )
    _, results = await search(corpus, 1)
    assert [r.chunk.document_id for r in results] == ["d1"]


async def test_a_failed_lookup_keeps_the_search_and_says_so() -> None:
    corpus = NoFetch(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    state, results = await search(corpus, 1)
    assert [r.chunk.document_id for r in results] == ["d1"] and corpus.fetches
    assert any(d["step"] == "link" for d in state.degraded)


async def test_a_direct_chat_gives_the_linked_document_to_the_answerer() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    orchestrator = Orchestrator(answering_mesh(corpus), Deadlines(), min_relevance=0.25)
    request = ChatRequest(question=QUESTION, mode="direct", linked_documents=1)
    prepared = await orchestrator.prepare(USER, request)  # type: ignore[arg-type]
    events = [e async for e in orchestrator.run(prepared)]
    assert [s["document_id"] for s in events[-1]["data"]["sources"]] == ["d1", "d2"]


def test_linked_documents_skip_shared_titles_and_excluded_documents() -> None:
    fetched = [
        chunk("a1", "da", "…", "Alpha"),
        chunk("b1", "db", "…", "Beta (band)"),
        chunk("b2", "db2", "…", "Beta"),  # "beta" titles two documents
        chunk("g1", "dg", "…", "Gamma"),
        chunk("e1", "de", "…", "Epsilon"),
    ]
    assert [c.chunk.document_id for c in linked_documents(fetched, {"da"}, 5)] == ["dg", "de"]
    assert [c.chunk.document_id for c in linked_documents(fetched, set(), 1)] == ["da"]


def test_place_moves_a_lower_ranked_document_up_with_its_own_chunk() -> None:
    results = [
        chunk("t1", "d1", FILM, "Dawn Harbor", 0.9),
        chunk("t2", "d3", OFF, "Menu", 0.7),
        chunk("t3", "d4", "…", "Other", 0.5),
        chunk("t4", "d2", "Mara Quill's best-known film.", "Mara Quill", 0.2),
    ]
    fetched_lead = chunk("lead", "d2", QUILL, "Mara Quill", 0.0)
    placed = place(results, [fetched_lead], 2)
    assert [r.chunk.chunk_id for r in placed] == ["t1", "t2", "t4", "t3"]  # its ranked chunk, not the lead
    assert placed[2].score == 0.7  # scored as the passage before it
    new = chunk("n1", "d9", "…", "New", 0.0)
    assert [r.chunk.chunk_id for r in place(results, [new], 1)] == ["t1", "n1", "t2", "t3", "t4"]
    assert place(results, [], 2) == results


async def test_an_agentic_chat_links_after_its_merged_steps() -> None:
    from test_gateway_agentic import BRIDGE_QUESTION

    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    orchestrator = Orchestrator(answering_mesh(corpus), Deadlines(), min_relevance=0.25, linked_documents=1)
    prepared = await orchestrator.prepare(USER, ChatRequest(question=BRIDGE_QUESTION, mode="agentic"))  # type: ignore[arg-type]
    stages = [s["stage"] for s in prepared.stages]
    assert "iterate" in stages and stages.index("link") > stages.index("iterate")
    assert {r.chunk.document_id for r in prepared.results} >= {"d1", "d2"}
