"""Orchestration rules: required hops fail with the step named, optional hops degrade and say so."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from grpc import aio

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh.embedder.v1 import embedder_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.reranker.v1 import reranker_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.testing import user as local_user
from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.mesh import StepFailed
from ragmesh_gateway.models import ChatRequest, SearchRequest, Turn
from ragmesh_gateway.pipeline import NO_PERMISSION, NO_SOURCES, Orchestrator
from ragmesh_gateway.pipeline.grade import append_new

USER = local_user("alice", "eng", ("employee",))


def rpc_error(code: grpc.StatusCode, details: str = "boom") -> aio.AioRpcError:
    return aio.AioRpcError(code, aio.Metadata(), aio.Metadata(), details=details)


IBM_TEXT = "IBM has had a close relationship with Armonk, New York, where IBM is headquartered since 1964."
OFF_TEXT = "The cafeteria menu changes every Monday."


def hit(chunk_id: str, vector: float, lexical: float = 1.0, text: str = IBM_TEXT) -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(
        chunk=common_pb2.Chunk(chunk_id=chunk_id, document_id="d1", text=text, title="T"),
        score=vector,
        hybrid_score=vector,
        vector_score=vector,
        lexical_score=lexical,
    )


class Stub:
    """Answers every method with a fixed reply or raises a fixed error; records requests."""

    def __init__(self, **replies: Any) -> None:
        self.replies = replies
        self.requests: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        reply = self.replies[name]

        def call(request: Any, **kwargs: Any) -> Any:
            self.requests[name] = request
            if name == "Answer":
                return FakeStreamCall(reply)
            return self._unary(reply(request) if callable(reply) else reply)

        return call

    @staticmethod
    async def _unary(reply: Any) -> Any:
        if isinstance(reply, Exception):
            raise reply
        return reply


class FakeStreamCall:
    """A server-streaming call as grpc.aio returns it: headers (the answerer's admission key unless the reply
    is an error, which comes trailers-only), then the events or the error."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    async def initial_metadata(self) -> aio.Metadata:
        return aio.Metadata() if isinstance(self.reply, Exception) else aio.Metadata(("x-rag-admission", "started"))

    def cancel(self) -> bool:
        return False

    async def __aiter__(self) -> Any:
        if isinstance(self.reply, Exception):
            raise self.reply
        for item in self.reply:
            yield item


class FakeMesh:
    def __init__(self, **stubs: Stub) -> None:
        ok_answer = [
            answerer_pb2.AnswerEvent(token="IBM was "),
            answerer_pb2.AnswerEvent(token="founded in 1911."),
            answerer_pb2.AnswerEvent(
                final=answerer_pb2.AnswerFinal(
                    answer="IBM was founded in 1911.",
                    grounding_score=1.0,
                    grounded=True,
                    model="m",
                    citations=[answerer_pb2.Citation(source_index=1, chunk_id="c2", support=0.9)],
                )
            ),
        ]
        self.answerer = stubs.get("answerer") or Stub(
            CheckInput=answerer_pb2.CheckInputResponse(allowed=True), Answer=ok_answer
        )
        self.embedder = stubs.get("embedder") or Stub(
            Embed=lambda request: embedder_pb2.EmbedResponse(
                vectors=[embedder_pb2.Vector(values=[0.1, 0.2]) for _ in request.texts]
            )
        )
        self.retriever = stubs.get("retriever") or Stub(
            Search=retriever_pb2.SearchResponse(
                results=[hit("c1", 0.8), hit("c2", 0.6), hit("c3", 0.1, text=OFF_TEXT)],
                accessible_documents=2,
                readable_documents=2,
            )
        )
        self.reranker = stubs.get("reranker") or Stub(
            Rerank=lambda request: reranker_pb2.RerankResponse(
                scores=[0.6, 0.9, 0.02][: len(request.passages)], configured=True
            )
        )
        self.graph = stubs.get("graph") or Stub(
            GetContext=graph_pb2.GetContextResponse(
                relations=[graph_pb2.Relation(source="IBM", target="Armonk", type="RELATED", weight=2)]
            ),
            RankChunks=graph_pb2.RankChunksResponse(),
        )


RELATIONAL = "What is the relationship between IBM and Armonk?"


def turns(history: list[tuple[str, str]]) -> list[Turn]:
    return [Turn(role=role, content=content) for role, content in history]  # type: ignore[arg-type]


async def run(
    mesh: FakeMesh, question: str = RELATIONAL, history: list[tuple[str, str]] | None = None, mode: str = "auto"
) -> tuple[Any, list[dict[str, Any]]]:
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, respell_questions=True)
    request = ChatRequest(question=question, top_k=5, history=turns(history or []), mode=mode)  # type: ignore[arg-type]
    prepared = await orchestrator.prepare(USER, request)
    return prepared, [e async for e in orchestrator.run(prepared)]


async def test_full_pipeline_reranks_filters_and_attributes_sources() -> None:
    mesh = FakeMesh()
    prepared, events = await run(mesh)
    assert [r.chunk.chunk_id for r in prepared.results] == ["c2", "c1"]  # reranked; c3 graded out
    assert prepared.relevance["grade"] == "correct"
    final = events[-1]["data"]
    assert final["outcome"] == "answer" and final["degraded"] == []
    assert [s["chunk_id"] for s in final["sources"]] == ["c2", "c1"]  # reranker order
    assert final["sources"][0]["scores"]["rerank"] == pytest.approx(0.9)
    assert final["sources"][0]["scores"]["hybrid"] == pytest.approx(0.6)
    assert [s["cited"] for s in final["sources"]] == [False, True]
    assert "".join(e["data"]["text"] for e in events if e["event"] == "token") == "IBM was founded in 1911."
    # no permission list travels: the graph asks the catalogue itself; no filter means every readable document
    assert list(mesh.graph.requests["GetContext"].document_ids) == []
    assert list(mesh.answerer.requests["Answer"].graph_facts) == ["IBM — related — Armonk"]


async def test_search_passes_fusion() -> None:
    mesh = FakeMesh()
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25)
    prepared, items = await orchestrator.search(
        USER, SearchRequest(query=RELATIONAL, top_k=5, rerank=True, routing=True, fusion="distribution_based")
    )
    assert mesh.retriever.requests["Search"].fusion == retriever_pb2.FUSION_TYPE_DISTRIBUTION_BASED
    assert prepared.accessible == 2 and {i.chunk.chunk_id for i in items} == {"c1", "c2"}


async def test_embedder_down_degrades_to_lexical_search() -> None:
    # the retriever embeds the query (embed_query); when its embedder fails it says so and searches lexically
    mesh = FakeMesh()
    mesh.retriever = Stub(
        Search=retriever_pb2.SearchResponse(
            results=[hit("c1", 0.0, lexical=3.2), hit("c2", 0.0, lexical=0.0, text=OFF_TEXT)],
            accessible_documents=1,
            vector_unavailable="embedder UNAVAILABLE; lexical search only",
        )
    )
    mesh.reranker = Stub(Rerank=reranker_pb2.RerankResponse(scores=[0.9, 0.01], configured=True))
    prepared, events = await run(mesh)
    request = mesh.retriever.requests["Search"]
    assert request.embed_query and list(request.query_vector) == []
    assert "Embed" not in mesh.embedder.requests  # the gateway no longer embeds queries itself
    assert [r.chunk.chunk_id for r in prepared.results] == ["c1"]  # graded on the lexical signals alone
    assert events[-1]["data"]["degraded"][0] == {"step": "embed", "reason": "embedder UNAVAILABLE; lexical search only"}
    assert next(s for s in prepared.stages if s["stage"] == "embed")["degraded"] is True


async def test_reranker_not_configured_keeps_retrieval_order() -> None:
    mesh = FakeMesh(
        reranker=Stub(Rerank=rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "no reranker model configured"))
    )
    _, events = await run(mesh)
    final = events[-1]["data"]
    assert [s["chunk_id"] for s in final["sources"]] == ["c1", "c2"]
    assert final["degraded"] == [{"step": "rerank", "reason": "no reranker model configured; kept retrieval order"}]
    assert final["sources"][0]["scores"]["rerank"] is None


async def test_reranker_answering_unconfigured_is_a_degradation_without_an_error_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from ragmesh_gateway.pipeline import step as module

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(module, "tracer", provider.get_tracer("test"))
    mesh = FakeMesh(
        reranker=Stub(
            Rerank=reranker_pb2.RerankResponse(
                configured=False, unconfigured_reason="no reranker model configured (set RERANKER_MODEL)"
            )
        )
    )
    _, events = await run(mesh)
    final = events[-1]["data"]
    assert final["outcome"] == "answer" and [s["chunk_id"] for s in final["sources"]] == ["c1", "c2"]
    assert final["degraded"] == [
        {"step": "rerank", "reason": "no reranker model configured (set RERANKER_MODEL); kept retrieval order"}
    ]
    spans = exporter.get_finished_spans()
    assert "rerank" in [s.name for s in spans]
    assert all(s.status.status_code != StatusCode.ERROR for s in spans)


async def test_graph_down_still_answers() -> None:
    down = rpc_error(grpc.StatusCode.UNAVAILABLE)
    mesh = FakeMesh(graph=Stub(GetContext=down, RankChunks=down))
    _, events = await run(mesh)
    assert events[-1]["data"]["outcome"] == "answer"
    assert [d["step"] for d in events[-1]["data"]["degraded"]] == ["graph"]  # the graph leg is off by default


async def test_required_hops_fail_with_the_step_named() -> None:
    mesh = FakeMesh(retriever=Stub(Search=rpc_error(grpc.StatusCode.UNAVAILABLE, "connection refused")))
    with pytest.raises(StepFailed) as err:
        await run(mesh)
    assert (err.value.step, err.value.http_status) == ("retrieve", 503)
    assert "retrieve step (retriever service) is unavailable" in err.value.message
    blocked = FakeMesh(answerer=Stub(CheckInput=answerer_pb2.CheckInputResponse(allowed=False, reason="injection")))
    with pytest.raises(StepFailed) as err:
        await run(blocked)
    assert (err.value.step, err.value.http_status) == ("guardrail", 400)


async def test_answerer_failure_mid_stream_is_an_error_event() -> None:
    mesh = FakeMesh()
    mesh.answerer = Stub(
        CheckInput=answerer_pb2.CheckInputResponse(allowed=True),
        Answer=rpc_error(grpc.StatusCode.UNAVAILABLE, "ollama down"),
    )
    _, events = await run(mesh)
    assert events[-1]["event"] == "error" and events[-1]["data"]["step"] == "answer"


async def test_no_permission_and_no_sources_outcomes() -> None:
    none = FakeMesh(retriever=Stub(Search=retriever_pb2.SearchResponse(accessible_documents=0)))
    _, events = await run(none)
    assert events[-1]["data"]["outcome"] == "no_permission" and events[-1]["data"]["answer"] == NO_PERMISSION
    irrelevant = FakeMesh(
        retriever=Stub(
            Search=retriever_pb2.SearchResponse(
                results=[hit("c1", 0.05, text=OFF_TEXT)], accessible_documents=3, readable_documents=3
            )
        )
    )
    _, events = await run(irrelevant)
    assert events[-1]["data"]["outcome"] == "no_sources" and events[-1]["data"]["sources"] == []
    assert events[-1]["data"]["answer"] == NO_SOURCES
    assert "Answer" not in irrelevant.answerer.requests


async def test_router_skips_the_graph_for_a_plain_factual_question() -> None:
    mesh = FakeMesh()
    prepared, events = await run(mesh, "When was IBM founded?")
    assert prepared.route.kind == "temporal" and not prepared.route.use_graph
    assert "GetContext" not in mesh.graph.requests
    assert "graph" not in [e["data"].get("stage") for e in events if e["event"] == "progress"]


async def test_follow_up_is_rewritten_before_search_and_answer() -> None:
    mesh = FakeMesh()
    prepared, _ = await run(
        mesh, "When was it founded?", history=[("user", "Tell me about IBM"), ("assistant", "IBM is a company.")]
    )
    assert prepared.query == "When was IBM founded?"
    assert mesh.retriever.requests["Search"].query == "When was IBM founded?"
    assert mesh.answerer.requests["Answer"].question == "When was IBM founded?"
    understand = next(s for s in prepared.stages if s["stage"] == "understand")
    assert understand["rewritten"] is True


async def test_comparative_question_searches_each_entity_and_merges() -> None:
    mesh = FakeMesh()
    prepared, _ = await run(mesh, "Which company was founded first, IBM or Microsoft?", mode="direct")
    assert len(prepared.route.sub_queries) == 2
    search = mesh.retriever.requests["Search"]  # one search carries the sub-queries; the retriever merges
    assert search.embed_query and list(search.sub_queries) == list(prepared.route.sub_queries)
    assert next(s for s in prepared.stages if s["stage"] == "retrieve")["searches"] == 3


def test_corrective_results_follow_the_first_ones_without_reordering_them() -> None:
    first = [hit("a", 0.9), hit("b", 0.8)]
    merged = append_new(first, [hit("c", 0.5), hit("b", 0.95), hit("d", 0.4), hit("c", 0.7)])
    assert [m.chunk.chunk_id for m in merged] == ["a", "b", "c", "d"]
    assert merged[1].vector_score == pytest.approx(0.8)  # b stays as first found
    assert merged[2].vector_score == pytest.approx(0.7)  # the closer of c's two hits


async def test_one_search_per_question_multi_hop_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-hop question's sub-queries travel in the one Search (the retriever runs and merges them), so
    the search is its gRPC client span alone: no "retrieve" span of the same extent, multi-hop or not."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragmesh_gateway.pipeline import step as module

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(module, "tracer", provider.get_tracer("test"))
    calls: list[retriever_pb2.SearchRequest] = []

    def search(request: retriever_pb2.SearchRequest) -> retriever_pb2.SearchResponse:
        calls.append(request)
        return retriever_pb2.SearchResponse(results=[hit("c1", 0.8)], accessible_documents=1, readable_documents=1)

    prepared, _ = await run(
        FakeMesh(retriever=Stub(Search=search)), "Which company was founded first, IBM or Microsoft?", mode="direct"
    )
    assert len(calls) == 1 and len(calls[0].sub_queries) == 2
    assert next(s for s in prepared.stages if s["stage"] == "retrieve")["searches"] == 3
    prepared, _ = await run(FakeMesh(), "When was IBM founded?")
    assert next(s for s in prepared.stages if s["stage"] == "retrieve")["searches"] == 1
    names = [s.name for s in exporter.get_finished_spans()]
    assert "retrieve" not in names and "answer" in names


async def test_final_event_carries_verification_and_evidence_mapped_to_documents() -> None:
    withheld = [
        answerer_pb2.AnswerEvent(token="IBM was founded in 1924."),
        answerer_pb2.AnswerEvent(
            final=answerer_pb2.AnswerFinal(
                answer="I could not verify an answer in your documents.",
                short_answer="I could not verify",
                withheld=True,
                verified=False,
                grounded=False,
                draft="IBM was founded in 1924.",
                model="m",
                evidence=[
                    answerer_pb2.EvidenceQuote(source_index=0, chunk_id="c2", text="founded in 1911", start=4, end=19)
                ],
                sentences=[
                    answerer_pb2.SentenceVerdict(
                        text="IBM was founded in 1924.",
                        supported=False,
                        source_indexes=[0],
                        unsupported_tokens=["1924"],
                        reason="the evidence does not state '1924'",
                        verdict=answerer_pb2.VERDICT_MISSING_TOKEN,
                        short_answer=True,
                    )
                ],
            )
        ),
    ]
    mesh = FakeMesh(answerer=Stub(CheckInput=answerer_pb2.CheckInputResponse(allowed=True), Answer=withheld))
    _, events = await run(mesh, history=[("user", "Tell me about IBM"), ("assistant", "IBM is a company.")])
    final = events[-1]["data"]
    assert final["withheld"] is True and final["verified"] is False and final["grounded"] is False
    assert final["draft"] == "IBM was founded in 1924." and final["short_answer"] == "I could not verify"
    first = final["sources"][0]  # the reranker put c2 first: evidence source 1 is c2's document
    assert final["evidence"] == [
        {
            "source": 1,
            "document_id": first["document_id"],
            "title": first["title"],
            "section_path": first["section_path"],
            "page": first["page"],
            "quote": "founded in 1911",
            "start": 4,
            "end": 19,
        }
    ]
    assert final["sentences"] == [
        {
            "text": "IBM was founded in 1924.",
            "supported": False,
            "sources": [1],
            "unsupported_tokens": ["1924"],
            "reason": "the evidence does not state '1924'",
            "verdict": "missing_token",
            "short_answer": True,
        }
    ]
    checked = mesh.answerer.requests["CheckInput"]
    assert [(t.role, t.content) for t in checked.history] == [
        ("user", "Tell me about IBM"),
        ("assistant", "IBM is a company."),
    ]


async def test_a_question_read_with_the_documents_spelling_is_said_in_the_notes_not_as_a_warning() -> None:
    read = [
        answerer_pb2.AnswerEvent(
            final=answerer_pb2.AnswerFinal(
                answer="IBM was founded in 1911. [2]",
                grounding_score=1.0,
                grounded=True,
                verified=True,
                short_answer="1911",
                model="m",
                citations=[answerer_pb2.Citation(source_index=1, chunk_id="c2", support=0.9)],
                respelled=[answerer_pb2.Respelled(written="fonded", read="founded")],
            )
        )
    ]
    mesh = FakeMesh(answerer=Stub(CheckInput=answerer_pb2.CheckInputResponse(allowed=True), Answer=read))
    _, events = await run(mesh, "When was IBM fonded?")
    final = events[-1]["data"]
    assert final["verified"] is True and final["warnings"] == []
    assert 'Your question was read with your documents\' spelling: "fonded" as "founded".' in final["notes"]


async def test_a_slip_in_the_question_is_searched_again_as_the_candidates_spell_it() -> None:
    """ "Where is IBM headquartred?": the first search's candidates write "headquartered"; the question is searched
    again so read, answered so read, and the notes say so. Only the candidates' words, which the user may read."""
    searched: list[str] = []

    def search(request: retriever_pb2.SearchRequest) -> retriever_pb2.SearchResponse:
        searched.append(request.query)
        return retriever_pb2.SearchResponse(
            results=[hit("c1", 0.8), hit("c2", 0.6)], accessible_documents=2, readable_documents=2
        )

    mesh = FakeMesh(retriever=Stub(Search=search))
    _, events = await run(mesh, "Where is IBM headquartred?")
    assert searched == ["Where is IBM headquartred?", "Where is IBM headquartered?"]
    assert mesh.answerer.requests["Answer"].question == "Where is IBM headquartered?"
    final = events[-1]["data"]
    assert (
        'Your question was read with your documents\' spelling: "headquartred" as "headquartered".' in (final["notes"])
    )
    # written as the candidates write it: one search
    searched.clear()
    await run(FakeMesh(retriever=Stub(Search=search)), "Where is IBM headquartered?")
    assert searched == ["Where is IBM headquartered?"]


async def test_a_client_leaving_mid_answer_cancels_the_answer_call_at_once() -> None:
    cancelled: list[bool] = []

    class Call(FakeStreamCall):
        def cancel(self) -> bool:
            cancelled.append(True)
            return True

    mesh = FakeMesh()
    answer = mesh.answerer.replies["Answer"]
    mesh.answerer = Stub(CheckInput=answerer_pb2.CheckInputResponse(allowed=True), Answer=None)
    mesh.answerer.__dict__["Answer"] = lambda request, **kwargs: Call(answer)
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25)
    state = await orchestrator.prepare(USER, ChatRequest(question=RELATIONAL))
    events = orchestrator.run(state)
    async for item in events:
        if item["event"] == "token":
            break
    assert cancelled == []
    await events.aclose()  # what the HTTP layer does when the client goes away
    assert cancelled == [True]


async def test_verified_sentences_are_relayed_with_their_time_and_the_answer_span() -> None:
    """#26.6: the answerer's verified sentences go out as `sentence` events (sources numbered from 1), the time to
    the first one is reported, and the final event carries the extractive short answer with its offsets."""
    answer = [
        answerer_pb2.AnswerEvent(
            sentence=answerer_pb2.VerifiedSentence(index=0, text="IBM was founded in 1911. [2]", source_indexes=[1])
        ),
        answerer_pb2.AnswerEvent(
            final=answerer_pb2.AnswerFinal(
                answer="IBM was founded in 1911. [2]",
                short_answer="1911",
                verified=True,
                grounded=True,
                overruled=True,
                model="m",
                answer_span=answerer_pb2.AnswerSpan(
                    source_index=1,
                    chunk_id="c1",
                    text="1911",
                    start=19,
                    end=23,
                    quote="IBM was founded in 1911.",
                    quote_start=0,
                    quote_end=24,
                ),
            )
        ),
    ]
    mesh = FakeMesh(answerer=Stub(CheckInput=answerer_pb2.CheckInputResponse(allowed=True), Answer=answer))
    _, events = await run(mesh, "When was IBM founded?")
    assert mesh.answerer.requests["Answer"].stream_draft is False  # no raw draft unless the client asks
    sentences = [e["data"] for e in events if e["event"] == "sentence"]
    assert sentences == [{"index": 0, "text": "IBM was founded in 1911. [2]", "sources": [2], "extractive": False}]
    assert not [e for e in events if e["event"] == "token"]
    done = next(
        e["data"]
        for e in events
        if e["event"] == "progress" and e["data"].get("status") == "done" and e["data"].get("stage") == "answer"
    )
    assert done["first_sentence_ms"] is not None and done["first_token_ms"] is None
    final = events[-1]["data"]
    assert final["overruled"] is True
    assert final["answer_span"] == {
        "source": 2,
        "chunk_id": "c1",
        "text": "1911",
        "start": 19,
        "end": 23,
        "quote": "IBM was founded in 1911.",
        "quote_start": 0,
        "quote_end": 24,
    }


def _ranked() -> graph_pb2.RankChunksResponse:
    return graph_pb2.RankChunksResponse(
        chunks=[graph_pb2.ChunkScore(chunk_id="c9", document_id="d9", score=0.4)],
        seeds=[graph_pb2.Entity(name="IBM", type="ORG", mentions=3)],
    )


async def test_graph_leg_scores_travel_to_the_search_under_the_user() -> None:
    mesh = FakeMesh()
    mesh.graph = Stub(RankChunks=_ranked(), GetContext=graph_pb2.GetContextResponse())
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, graph_leg="off")
    await orchestrator.search(USER, SearchRequest(query=RELATIONAL, graph_leg=True, graph_weight=2.0))
    rank = mesh.graph.requests["RankChunks"]
    assert rank.query == RELATIONAL and list(rank.document_ids) == []
    search = mesh.retriever.requests["Search"]
    assert [(s.chunk_id, s.score) for s in search.graph_scores] == [("c9", pytest.approx(0.4))]
    assert search.graph_weight == 2.0


@pytest.mark.parametrize(
    ("default", "asked", "routing", "used"),
    [
        ("off", None, True, False),
        ("on", None, False, True),
        ("auto", None, False, False),  # no route: nothing says the question is multi-hop
        ("auto", None, True, True),  # the router reads a relational question
        ("on", False, True, False),  # the request's switch wins
    ],
)
async def test_graph_leg_default_and_switch(default: str, asked: bool | None, routing: bool, used: bool) -> None:
    mesh = FakeMesh()
    mesh.graph = Stub(RankChunks=_ranked(), GetContext=graph_pb2.GetContextResponse())
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, graph_leg=default)
    await orchestrator.search(USER, SearchRequest(query=RELATIONAL, graph_leg=asked, routing=routing))
    assert ("RankChunks" in mesh.graph.requests) is used
    assert bool(mesh.retriever.requests["Search"].graph_scores) is used


async def test_graph_leg_down_degrades_to_two_legs() -> None:
    mesh = FakeMesh()
    mesh.graph = Stub(RankChunks=rpc_error(grpc.StatusCode.UNAVAILABLE), GetContext=graph_pb2.GetContextResponse())
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, graph_leg="on")
    prepared, items = await orchestrator.search(USER, SearchRequest(query=RELATIONAL, top_k=5))
    assert not mesh.retriever.requests["Search"].graph_scores
    assert {"step": "graph", "reason": "graph leg UNAVAILABLE; searched without it"} in prepared.degraded
    assert items  # the search still answered


@pytest.mark.parametrize(("default", "asked", "seeds"), [(0, 2, 2), (3, None, 3), (3, 0, 0)])
async def test_graph_leg_seeded_by_the_top_passages_of_a_first_search(
    default: int, asked: int | None, seeds: int
) -> None:
    searches: list[int] = []  # graph scores each Search brought

    def search(request: retriever_pb2.SearchRequest) -> retriever_pb2.SearchResponse:
        searches.append(len(request.graph_scores))
        return retriever_pb2.SearchResponse(
            results=[hit("c1", 0.8), hit("c2", 0.6), hit("c3", 0.1, text=OFF_TEXT)], accessible_documents=2
        )

    mesh = FakeMesh(retriever=Stub(Search=search))
    mesh.graph = Stub(RankChunks=_ranked(), GetContext=graph_pb2.GetContextResponse())
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, graph_leg="on", graph_seed_passages=default)
    await orchestrator.search(USER, SearchRequest(query=RELATIONAL, graph_seed_passages=asked))
    rank = mesh.graph.requests["RankChunks"]
    assert [(c.document_id, c.chunk_id) for c in rank.seed_chunks] == [("d1", f"c{i}") for i in range(1, seeds + 1)]
    assert searches == ([0, 1] if seeds else [1])  # the first search without the graph, then with its scores


def in_document(chunk_id: str, document_id: str, score: float) -> common_pb2.ScoredChunk:
    scored = hit(chunk_id, score)
    scored.chunk.document_id = document_id
    return scored


@pytest.mark.parametrize(
    ("placed", "order"),
    [(1, ["a1", "b1", "e1", "c1", "d1"]), (2, ["a1", "b1", "e1", "d1", "c1"])],
)
async def test_graph_placement_after_keeps_the_search_order_and_places_the_legs_documents_after_the_top(
    placed: int, order: list[str]
) -> None:
    searches: list[int] = []

    def search(request: retriever_pb2.SearchRequest) -> retriever_pb2.SearchResponse:
        searches.append(len(request.graph_scores))
        ranked = [in_document(f"{d}1", d, s) for d, s in (("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6))]
        return retriever_pb2.SearchResponse(results=ranked, accessible_documents=5)

    fetched = retriever_pb2.FetchSectionResponse(results=[in_document("e1", "e", 0.0)], documents=1)
    mesh = FakeMesh(retriever=Stub(Search=search, FetchSection=fetched))
    # the walk's best: a chunk of a top document (already there), one the search did not find (e), then d; an
    # unreached chunk (mass 0) is never placed
    ranked = [("a2", "a", 0.5), ("e1", "e", 0.3), ("d1", "d", 0.2), ("c1", "c", 0.0)]
    mesh.graph = Stub(
        RankChunks=graph_pb2.RankChunksResponse(
            chunks=[graph_pb2.ChunkScore(chunk_id=c, document_id=d, score=s) for c, d, s in ranked]
        ),
        GetContext=graph_pb2.GetContextResponse(),
    )
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.0, graph_leg="on", graph_placement="after")
    _, items = await orchestrator.search(
        USER, SearchRequest(query=RELATIONAL, top_k=5, graph_placed=placed, relevance_gate=False)
    )
    assert [i.chunk.chunk_id for i in items] == order
    assert searches == [0]  # one two-leg search: its order stands, no third leg in the fusion
    assert mesh.retriever.requests["FetchSection"].document_id == "e"  # as the user, like any read


async def test_graph_placement_fetch_failure_keeps_the_search_order() -> None:
    results = [in_document(f"{d}1", d, s) for d, s in (("a", 0.9), ("b", 0.8), ("c", 0.7))]
    mesh = FakeMesh(
        retriever=Stub(
            Search=retriever_pb2.SearchResponse(results=results, accessible_documents=4),
            FetchSection=rpc_error(grpc.StatusCode.UNAVAILABLE),
        )
    )
    mesh.graph = Stub(
        RankChunks=graph_pb2.RankChunksResponse(chunks=[graph_pb2.ChunkScore(chunk_id="e1", document_id="e", score=1)]),
        GetContext=graph_pb2.GetContextResponse(),
    )
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.0, graph_leg="on", graph_placement="after")
    prepared, items = await orchestrator.search(USER, SearchRequest(query=RELATIONAL, top_k=5, relevance_gate=False))
    assert [i.chunk.chunk_id for i in items] == ["a1", "b1", "c1"]
    assert {"step": "graph", "reason": "graph placement UNAVAILABLE; the search's order kept"} in prepared.degraded


async def test_a_source_restating_another_level_of_its_document_gives_way_to_the_next() -> None:
    """Found asking the shared PPTX: a one-slide section's paragraph, section and document chunks (one text under
    its title) were three of five sources. The section and document chunks go; the next candidate moves up."""
    paragraph = hit("c1", 0.8)
    section = hit("c2", 0.7, text=f"T\n{IBM_TEXT}")
    section.chunk.level = common_pb2.CHUNK_LEVEL_SECTION
    whole = hit("c3", 0.6, text=f"T\n{IBM_TEXT}")
    whole.chunk.level = common_pb2.CHUNK_LEVEL_DOCUMENT
    other = hit("c4", 0.5)
    other.chunk.document_id = "d2"  # the same text in another document: a source of its own
    mesh = FakeMesh(
        retriever=Stub(
            Search=retriever_pb2.SearchResponse(
                results=[paragraph, section, whole, other], accessible_documents=2, readable_documents=2
            )
        ),
        reranker=Stub(Rerank=reranker_pb2.RerankResponse(configured=False)),
    )
    prepared, events = await run(mesh)
    assert [r.chunk.chunk_id for r in prepared.results] == ["c1", "c4"]
    assert [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources] == ["c1", "c4"]
    assert {"stage": "distinct", "dropped": 2} in [
        {k: v for k, v in e["data"].items() if k in ("stage", "dropped")} for e in events if e["event"] == "progress"
    ]


async def test_a_question_asking_what_a_term_is_gets_a_source_that_says_it() -> None:
    """Found asking the shared TableFormer paper "What is TableFormer?": its five best passages named TableFormer
    and none said what it is; "We propose TableFormer, a transformer based model …" ranked eleventh. It now takes
    the last of the answer's places; a question of another kind keeps the search's order."""
    texts = [f"TableFormer result {n}: TableFormer scores {90 + n} TEDS on dataset {n}." for n in range(6)]
    texts.append("We propose TableFormer, a transformer based model that predicts table structure.")
    results = []
    for n, text in enumerate(texts):
        item = hit(f"c{n}", 0.9 - n * 0.05, text=text)
        item.chunk.document_id = f"d{n}"  # distinct documents: none restates another
        results.append(item)
    mesh = FakeMesh(
        retriever=Stub(Search=retriever_pb2.SearchResponse(results=results, accessible_documents=7)),
        reranker=Stub(Rerank=reranker_pb2.RerankResponse(configured=False)),
    )
    prepared, events = await run(mesh, "What is TableFormer?")
    sent = [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources]
    assert sent == ["c0", "c1", "c2", "c3", "c6"]  # the defining passage in the last place
    assert [r.chunk.chunk_id for r in prepared.results][5] == "c4"  # the one it displaced right behind it
    record = next(e["data"] for e in events if e["event"] == "progress" and e["data"].get("stage") == "define")
    assert record["term"] == "TableFormer" and record["promoted_from"] == 7
    _, _ = await run(mesh, "How well does TableFormer score?")
    assert [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources] == ["c0", "c1", "c2", "c3", "c4"]


async def test_a_definition_no_candidate_gives_is_looked_for_deeper_in_the_same_search() -> None:
    """Found asking the shared OTSL paper "What does OTSL stand for?": every passage names OTSL, and the one that
    spells it out ("our Optimised Table Structure Language (OTSL)") ranked 33rd, past the 30 candidates. The same
    search, deeper, finds it; it takes the last of the answer's places. A failed deeper search degrades."""
    first = []
    for n in range(6):
        item = hit(f"c{n}", 0.9 - n * 0.05, text=f"OTSL result {n}: OTSL scores {90 + n} TEDS on dataset {n}.")
        item.chunk.document_id = f"d{n}"
        first.append(item)
    spelled = hit("c9", 0.2, text="To mitigate this, we propose here our Optimised Table Structure Language (OTSL).")
    spelled.chunk.document_id = "d9"

    def search(request: retriever_pb2.SearchRequest) -> retriever_pb2.SearchResponse:
        found = [*first, spelled] if request.top_k >= 100 else first
        return retriever_pb2.SearchResponse(results=found, accessible_documents=7, readable_documents=7)

    mesh = FakeMesh(retriever=Stub(Search=search), reranker=Stub(Rerank=reranker_pb2.RerankResponse(configured=False)))
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, define_depth=100)
    chosen = ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000009"]
    request = ChatRequest(question="What does OTSL stand for?", top_k=5, document_ids=chosen)  # type: ignore[arg-type]
    prepared = await orchestrator.prepare(USER, request)
    events = [e async for e in orchestrator.run(prepared)]
    assert [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources] == ["c0", "c1", "c2", "c3", "c9"]
    deeper = mesh.retriever.requests["Search"]  # the user's own search: same question and filter, deeper
    assert deeper.top_k == 100 and deeper.query == "What does OTSL stand for?"
    assert list(deeper.document_ids) == chosen
    record = next(e["data"] for e in events if e["event"] == "progress" and e["data"].get("stage") == "define")
    assert record["term"] == "OTSL" and record["promoted_from"] == 7 and record["deeper"] == 7
    # off, or the deeper search failing: the sources as they were
    for depth, fails in ((0, False), (100, True)):
        calls = {"n": 0}

        def flaky(request: retriever_pb2.SearchRequest, fails: bool = fails, calls: dict[str, int] = calls) -> Any:
            calls["n"] += 1
            if fails and request.top_k >= 100:
                return rpc_error(grpc.StatusCode.UNAVAILABLE)
            return search(request)

        mesh = FakeMesh(
            retriever=Stub(Search=flaky), reranker=Stub(Rerank=reranker_pb2.RerankResponse(configured=False))
        )
        orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, define_depth=depth)
        prepared = await orchestrator.prepare(USER, ChatRequest(question="What does OTSL stand for?", top_k=5))
        events = [e async for e in orchestrator.run(prepared)]
        assert [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources] == ["c0", "c1", "c2", "c3", "c4"]
        assert calls["n"] == (1 if depth == 0 else 2)
        final = events[-1]["data"]
        assert final["outcome"] == "answer" and (any(d["step"] == "define" for d in final["degraded"]) is fails)


async def test_a_question_for_a_tables_largest_row_gets_the_whole_table() -> None:
    """Found asking the shared workbook "Which product had the highest revenue?": the search gave two chunks of the
    sheet, each with its own largest row, and the answer said the documents disagree. The rest of that table (same
    document, section and header) now follows the sources; a question of another kind, or the step off, does not
    fetch; a failed fetch degrades."""
    header = "| Product | Revenue |\n| - | - |\n"

    def table(n: int, score: float, document: str = "d1", head: str = header) -> common_pb2.ScoredChunk:
        item = hit(f"{document}:{n}", score, text=f"{head}| Widget {n} | {1000 * n} |")
        item.chunk.document_id = document
        item.chunk.kind = common_pb2.CHUNK_KIND_TABLE
        item.chunk.section_path.append("SalesData")
        return item

    found = [table(2, 0.9), table(5, 0.85), table(1, 0.84, document="d7")]  # d7: a copy of the sheet
    others = [hit(f"p{n}", 0.8 - n * 0.05, text=f"Revenue of widgets grew in quarter {n}.") for n in range(4)]
    for n, item in enumerate(others):
        item.chunk.document_id = f"p{n}"
    section = [table(n, 0.0) for n in range(1, 8)] + [table(9, 0.0, head="| Product | Units |\n| - | - |\n")]

    def mesh_with(fetch: Any) -> FakeMesh:
        return FakeMesh(
            retriever=Stub(
                Search=retriever_pb2.SearchResponse(results=[*found, *others], accessible_documents=5),
                FetchSection=fetch,
            ),
            reranker=Stub(Rerank=reranker_pb2.RerankResponse(configured=False)),
        )

    fetched: list[retriever_pb2.FetchSectionRequest] = []

    def fetch(request: retriever_pb2.FetchSectionRequest) -> retriever_pb2.FetchSectionResponse:
        fetched.append(request)
        copy = [table(n, 0.0, document="d7") for n in range(1, 3)]
        return retriever_pb2.FetchSectionResponse(results=copy if request.document_id == "d7" else section)

    mesh = mesh_with(fetch)
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, table_chunks=50)
    chosen = ["00000000-0000-4000-8000-000000000001"]
    request = ChatRequest(question="Which product had the highest revenue?", top_k=5, document_ids=chosen)  # type: ignore[arg-type]
    prepared = await orchestrator.prepare(USER, request)
    events = [e async for e in orchestrator.run(prepared)]
    sent = [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources]
    # the five sources, then each document's table's other chunks in document order (not another table)
    added = ["d1:1", "d1:3", "d1:4", "d1:6", "d1:7", "d7:2"]
    assert sent == ["d1:2", "d1:5", "d7:1", "p0", "p1", *added]
    # as the user, within the request's documents, one document each
    assert [(f.document_id, f.section, list(f.document_ids)) for f in fetched] == [
        ("d1", "SalesData", chosen),
        ("d7", "SalesData", chosen),
    ]
    record = next(e["data"] for e in events if e["event"] == "progress" and e["data"].get("stage") == "table")
    assert record["table_chunks"] == 9 and record["added"] == 6 and record["complete"] is True
    final = events[-1]["data"]
    assert [s["chunk_id"] for s in final["sources"]][5:] == added
    # one document's fetch failing: none of the tables is added (not one read whole beside one read in part)

    def half(request: retriever_pb2.FetchSectionRequest) -> Any:
        return rpc_error(grpc.StatusCode.UNAVAILABLE) if request.document_id == "d7" else fetch(request)

    mesh = mesh_with(half)
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, table_chunks=50)
    prepared = await orchestrator.prepare(USER, ChatRequest(question="Which product had the highest revenue?", top_k=5))
    events = [e async for e in orchestrator.run(prepared)]
    assert [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources] == ["d1:2", "d1:5", "d7:1", "p0", "p1"]
    assert any(d["step"] == "table" for d in events[-1]["data"]["degraded"])
    mesh = mesh_with(fetch)
    # a table with more chunks than are read: the answer says its row is of those read only
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, table_chunks=8)
    prepared = await orchestrator.prepare(USER, ChatRequest(question="Which product had the lowest revenue?", top_k=5))
    events = [e async for e in orchestrator.run(prepared)]
    assert any("more than the 8 parts read" in note for note in events[-1]["data"]["notes"])
    # not a superlative, the step off, or the fetch failing: the five sources as they were
    for question, chunks, fetch in (
        ("What was the revenue of Widget 2?", 50, retriever_pb2.FetchSectionResponse(results=section)),
        ("Which product had the highest revenue?", 0, retriever_pb2.FetchSectionResponse(results=section)),
        ("Which product had the highest revenue?", 50, rpc_error(grpc.StatusCode.UNAVAILABLE)),
    ):
        mesh = mesh_with(fetch)
        orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, table_chunks=chunks)
        prepared = await orchestrator.prepare(USER, ChatRequest(question=question, top_k=5))
        events = [e async for e in orchestrator.run(prepared)]
        sent = [s.chunk.chunk_id for s in mesh.answerer.requests["Answer"].sources]
        assert len(sent) <= 5 and not {"d1:1", "d1:3", "d1:4", "d7:2"} & set(sent)  # no chunk of a table added
        final = events[-1]["data"]
        assert final["outcome"] == "answer"
        assert any(d["step"] == "table" for d in final["degraded"]) is isinstance(fetch, aio.AioRpcError)
        assert ("FetchSection" in mesh.retriever.requests) is (chunks > 0 and "highest" in question)


async def test_a_how_many_question_over_a_table_gets_the_whole_table() -> None:
    """ "How many customers are from Chile?": the answerer counts the rows of the whole table that hold the value,
    so the table step fetches it as for a superlative; a table longer than is read is said to the answerer
    (`partial_tables`: a lower bound) and in the notes. A how-many question whose sources hold no table, or the step
    off, does not fetch."""
    header = "| Index | Name | Country |\n| - | - | - |\n"

    def table(n: int, score: float) -> common_pb2.ScoredChunk:
        item = hit(f"c1:{n}", score, text=f"{header}| {n} | Customer {n} | Chile |")
        item.chunk.document_id = "c1"
        item.chunk.kind = common_pb2.CHUNK_KIND_TABLE
        item.chunk.section_path.append("customers")
        return item

    found = [table(2, 0.9), table(5, 0.85)]
    others = [hit(f"p{n}", 0.8 - n * 0.05, text=f"Customers in Chile grew in quarter {n}.") for n in range(4)]
    for n, item in enumerate(others):
        item.chunk.document_id = f"p{n}"
    section = retriever_pb2.FetchSectionResponse(results=[table(n, 0.0) for n in range(1, 8)])

    async def ask(question: str, chunks: int, results: list[common_pb2.ScoredChunk]) -> tuple[FakeMesh, Any]:
        mesh = FakeMesh(
            retriever=Stub(
                Search=retriever_pb2.SearchResponse(results=results, accessible_documents=5), FetchSection=section
            ),
            reranker=Stub(Rerank=reranker_pb2.RerankResponse(configured=False)),
        )
        orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, table_chunks=chunks)
        prepared = await orchestrator.prepare(USER, ChatRequest(question=question, top_k=5))
        return mesh, [e async for e in orchestrator.run(prepared)]

    mesh, events = await ask("How many customers are from Chile?", 50, [*found, *others])
    sent = mesh.answerer.requests["Answer"]
    assert [s.chunk.chunk_id for s in sent.sources] == [
        "c1:2", "c1:5", "p0", "p1", "p2", "c1:1", "c1:3", "c1:4", "c1:6", "c1:7"
    ]  # fmt: skip
    assert sent.partial_tables is False
    record = next(e["data"] for e in events if e["event"] == "progress" and e["data"].get("stage") == "table")
    assert record["complete"] is True and record["added"] == 5
    # more chunks than are read: the answerer counts a lower bound, the notes say so
    mesh, events = await ask("How many customers are from Chile?", 7, [*found, *others])
    assert mesh.answerer.requests["Answer"].partial_tables is True
    assert any("at least that many" in note for note in events[-1]["data"]["notes"])
    # no table among the sources, or the step off: nothing fetched
    for results, chunks in (([*others], 50), ([*found, *others], 0)):
        mesh, events = await ask("How many customers are from Chile?", chunks, results)
        assert "FetchSection" not in mesh.retriever.requests and events[-1]["data"]["outcome"] == "answer"
        assert mesh.answerer.requests["Answer"].partial_tables is False
