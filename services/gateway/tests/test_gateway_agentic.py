"""Multi-step (agentic) answers with the fake mesh: the planner's rules and its model fallback, the bridge
entity carried into the next search, the per-step decision, the bounds, and the step events (and their
contract through the HTTP API)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import grpc

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline import Orchestrator
from ragmesh_gateway.pipeline.agentic import BRIDGE, Iterate, bridge_entities, plan_by_rules, wants_agentic
from ragmesh_gateway.pipeline.compose import AgentBounds
from ragmesh_gateway.query import route

sys.path.insert(0, str(Path(__file__).parent))
from test_gateway_orchestrator import USER, FakeMesh, Stub, rpc_error

FILM = "Dawn Harbor is a 1952 film directed by Mara Quill, shot on the coast of Maine."
QUILL = "Mara Quill was a director who later served as mayor of Port Ellis from 1970 to 1978."
OFF = "The cafeteria menu changes every Monday."
BRIDGE_QUESTION = "What office did the director who made Dawn Harbor hold later?"


def chunk(chunk_id: str, document_id: str, text: str, title: str, vector: float = 0.8) -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(
        chunk=common_pb2.Chunk(chunk_id=chunk_id, document_id=document_id, text=text, title=title),
        score=vector,
        hybrid_score=vector,
        vector_score=vector,
        lexical_score=1.0,
    )


class Corpus:
    """A retriever answering each query from the chunks whose title shares a capitalised word with it;
    records every search with the identity it carried."""

    def __init__(self, *chunks: common_pb2.ScoredChunk) -> None:
        self.chunks = chunks
        self.searches: list[tuple[str, Any]] = []

    def Search(self, request: retriever_pb2.SearchRequest, **kwargs: Any) -> Any:  # noqa: N802 (gRPC name)
        self.searches.append((request.query, kwargs.get("metadata")))
        words = {w.strip("?,.").lower() for w in request.query.split() if w[:1].isupper()}
        found = [c for c in self.chunks if words & {w.lower() for w in c.chunk.title.split()}]
        return self._reply(
            retriever_pb2.SearchResponse(
                results=found or [chunk("off", "d9", OFF, "Menu", 0.05)], accessible_documents=3, readable_documents=3
            )
        )

    @staticmethod
    async def _reply(reply: Any) -> Any:
        return reply


def answering_mesh(corpus: Corpus, **answerer: Any) -> FakeMesh:
    mesh = FakeMesh()
    mesh.retriever = corpus  # type: ignore[assignment]
    mesh.reranker = Stub(Rerank=rpc_error(grpc.StatusCode.UNAVAILABLE))  # retrieval order: the grade decides
    final = answerer_pb2.AnswerFinal(answer="Mayor of Port Ellis.", grounded=True, grounding_score=1.0, model="m")
    mesh.answerer = Stub(
        CheckInput=answerer_pb2.CheckInputResponse(allowed=True),
        Answer=[answerer_pb2.AnswerEvent(token="Mayor of Port Ellis."), answerer_pb2.AnswerEvent(final=final)],
        **answerer,
    )
    return mesh


async def chat(
    mesh: FakeMesh, question: str, mode: str = "auto", bounds: AgentBounds | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, agent=bounds)
    prepared = await orchestrator.prepare(USER, ChatRequest(question=question, mode=mode))  # type: ignore[arg-type]
    return prepared, [e async for e in orchestrator.run(prepared)]


# --- the planner's rules -----------------------------------------------------------------------------------------


def test_rules_split_several_questions_comparisons_and_described_entities() -> None:
    several = "Who founded Acme Corp? When did Acme Corp move to Boston?"
    assert plan_by_rules(several, route(several)).sub_questions == [
        "Who founded Acme Corp?",
        "When did Acme Corp move to Boston?",
    ]
    joined = "Who wrote the Tarn Report, and when was it published?"
    assert plan_by_rules(joined, route(joined)).sub_questions == ["Who wrote the Tarn Report", "when was it published?"]
    compared = "Which company was founded first, IBM or Microsoft?"
    plan = plan_by_rules(compared, route(compared))
    assert plan.method == "rules" and len(plan.sub_questions) == 2
    assert plan.sub_questions[0].startswith("IBM") and plan.sub_questions[1].startswith("Microsoft")
    described = plan_by_rules(BRIDGE_QUESTION, route(BRIDGE_QUESTION))
    assert described.sub_questions == ["the director who made Dawn Harbor hold later", f"What office did {BRIDGE}?"]
    simple = "When was IBM founded?"
    assert plan_by_rules(simple, route(simple)).sub_questions == []


def test_auto_is_agentic_for_several_questions_comparisons_and_bridges_only() -> None:
    def auto(question: str) -> bool:
        return wants_agentic(ChatRequest(question=question), route(question), plan_by_rules(question, route(question)))

    assert auto("Who founded Acme Corp? When did Acme Corp move to Boston?")
    assert auto("Which company was founded first, IBM or Microsoft?")
    assert auto(BRIDGE_QUESTION)
    assert not auto("When was IBM founded?")
    assert not auto("What is the relationship between IBM and Armonk?")  # one search and the graph serve it
    forced = ChatRequest(question="When was IBM founded?", mode="agentic")
    assert wants_agentic(forced, route(forced.question), plan_by_rules(forced.question, route(forced.question)))


def test_the_bridge_is_a_name_of_the_best_evidence_the_query_does_not_name() -> None:
    found = bridge_entities([chunk("c1", "d1", FILM, "Dawn Harbor")], "the director who made Dawn Harbor")
    assert found[0] == "Mara Quill" and "Dawn Harbor" not in found


# --- the pipeline: bridge, decisions, model fallback, bounds, events ---------------------------------------------


async def test_a_bridge_question_searches_the_bridge_entity_found_in_the_first_step() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    prepared, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    assert prepared.mode == "agentic"
    queries = [q for q, _ in corpus.searches]
    assert queries[0] == "the director who made Dawn Harbor hold later"
    assert queries[1] == "What office did Mara Quill?"  # the bridge entity fills the second sub-question
    steps = [e["data"] for e in events if e["event"] == "step"]
    assert [s["decision"] for s in steps] == ["found", "found"] and steps[0]["bridge"] == "Mara Quill"
    final = events[-1]["data"]
    assert final["mode"] == "agentic" and final["steps"] == steps
    assert {s["document_id"] for s in final["sources"]} == {"d1", "d2"}  # the evidence of both steps
    # every search carried the asking user's identity (the retriever applies its row-level security)
    assert all(metadata == USER.metadata() for _, metadata in corpus.searches)


async def test_direct_mode_searches_once_and_lists_no_steps() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"))
    prepared, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION, mode="direct")
    assert prepared.mode == "direct" and len(corpus.searches) == 1
    assert not [e for e in events if e["event"] == "step"] and events[-1]["data"]["steps"] is None


async def test_a_step_without_evidence_retries_once_then_gives_up_honestly() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"))  # nothing about the director
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    steps = [e["data"] for e in events if e["event"] == "step"]
    assert steps[0]["decision"] == "found"
    assert steps[1]["decision"] == "gave_up" and len(steps[1]["queries"]) == 2  # one reformulation
    final = events[-1]["data"]
    assert any("No relevant evidence for" in note for note in final["notes"])
    assert {s["document_id"] for s in final["sources"]} == {"d1"}


async def test_no_step_finding_evidence_declines_instead_of_answering() -> None:
    corpus = Corpus()
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    final = events[-1]["data"]
    assert final["outcome"] == "no_sources" and final["sources"] == []
    assert [s["decision"] for s in final["steps"]] == ["gave_up", "gave_up"]


async def test_the_model_plans_when_the_rules_find_no_split() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    mesh = answering_mesh(corpus, Rewrite=answerer_pb2.RewriteResponse(question="Who directed Dawn Harbor?"))
    prepared, _ = await chat(mesh, "Dawn Harbor: later career", mode="agentic")
    plan = next(s for s in prepared.stages if s["stage"] == "plan")
    assert plan["method"] == "llm" and plan["sub_questions"][0] == "Who directed Dawn Harbor?"
    assert mesh.answerer.requests["Rewrite"].history[0].content == "Dawn Harbor: later career"
    queries = [q for q, _ in corpus.searches]
    assert queries[0] == "Who directed Dawn Harbor?" and "Mara Quill" in queries[1]
    assert prepared.llm_tokens > 0


async def test_a_failed_or_unaffordable_model_plan_degrades_to_one_step() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"))
    mesh = answering_mesh(corpus, Rewrite=rpc_error(grpc.StatusCode.UNAVAILABLE))
    prepared, events = await chat(mesh, "Dawn Harbor: later career", mode="agentic")
    assert prepared.sub_questions == ["Dawn Harbor: later career"]
    assert events[-1]["data"]["degraded"][-1]["step"] == "plan"
    mesh = answering_mesh(corpus, Rewrite=rpc_error(grpc.StatusCode.INTERNAL))
    prepared, _ = await chat(mesh, "Dawn Harbor: later career", "agentic", AgentBounds(max_llm_tokens=10))
    assert "Rewrite" not in mesh.answerer.requests and prepared.sub_questions == ["Dawn Harbor: later career"]
    assert any("token budget" in note for note in prepared.notes)


async def test_the_step_bound_cuts_and_the_answer_rests_on_the_steps_before() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION, bounds=AgentBounds(max_steps=1))
    final = events[-1]["data"]
    assert final["outcome"] == "answer" and [s["decision"] for s in final["steps"]] == ["found", "cut"]
    assert final["steps"][1]["cut"] == "the step limit (1)"
    assert any(note.startswith("Step 2 (") and "step limit" in note for note in final["notes"])
    assert len(corpus.searches) == 1


async def test_the_time_bound_cuts_the_next_step() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    orchestrator = Orchestrator(
        answering_mesh(corpus), Deadlines(), min_relevance=0.25, agent=AgentBounds(max_seconds=5)
    )
    iterate = next(s for s in orchestrator.chat.before if isinstance(s, Iterate))
    now = [100.0]

    def clock() -> float:
        now[0] += 2.0  # every look at the clock: two seconds later
        return now[0]

    iterate.clock = clock
    prepared = await orchestrator.prepare(USER, ChatRequest(question=BRIDGE_QUESTION))
    assert prepared.agent_steps[-1]["decision"] == "cut" and "time limit" in prepared.agent_steps[-1]["cut"]
    assert any("time limit" in note for note in prepared.notes)


# --- through the HTTP API: the stream and the JSON reply match the spec -------------------------------------------


def test_an_agentic_chat_and_its_step_events_match_the_spec(tmp_path: Path) -> None:
    from openapi_contract import CHAT, problems, response_schema, stream_problems
    from test_gateway_bad_input import FakeMesh as HttpMesh
    from test_gateway_bad_input import make_client
    from test_gateway_contract import sse

    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    mesh = HttpMesh()
    mesh.retriever.Search = corpus.Search  # type: ignore[method-assign]
    for client in make_client(tmp_path, mesh):
        spec = client.get("/openapi.json").json()
        body = client.post("/api/v1/chat", json={"question": BRIDGE_QUESTION}).json()
        assert body["mode"] == "agentic" and len(body["steps"]) == 2, body
        assert problems(spec, response_schema(spec, *CHAT), body) == []
        events = sse(client, {"question": BRIDGE_QUESTION})
        assert [name for name, _ in events].count("step") == 2
        assert stream_problems(spec, events) == []
        assert client.post("/api/v1/chat", json={"question": "x", "mode": "deep"}).status_code == 422
