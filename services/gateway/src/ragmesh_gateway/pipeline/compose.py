"""The gateway's pipelines, composed of the same steps: chat (streamed or not) and search.

    chat:   guardrail → conversation → understand → cache → plan → retrieve → rerank → grade → communities
            → distinct → define → table → budget ┃ graph → cache pin → answer → cache store → verify ⇒ record turn
                                                         (a cache hit ends the steps at cache)
                                                         └ agentic: iterate (retrieve → rerank → grade per
                                                           sub-question; tools: fetch_section, graph_neighbours)
    search:                                           understand → retrieve → rerank → grade → graph

(communities: a collection-level question's map-reduce over community reports; distinct: one source per text;
define: a source that says what the asked term is; table: the rest of the table a question for its largest or
smallest row is about; budget: the answer within the
LLM token bound; ┃: the response starts; before it a failure is an HTTP status, after it an `error` event. conversation runs
only for a chat with a `conversation_id`; ⇒: a hook on the final event, answered or declined.)
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from ragmesh.common.v1 import common_pb2
from ragmesh_common.context import UserContext
from ragmesh_gateway.cache import SemanticCache
from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.grading import Thresholds
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest, SearchRequest
from ragmesh_gateway.pipeline.agentic import ClauseParser, DirectOnly, Iterate, PlanStep
from ragmesh_gateway.pipeline.answer import Answer, Verify
from ragmesh_gateway.pipeline.budget import AnswerBudget
from ragmesh_gateway.pipeline.cache import CacheLookup, CachePin, CacheStore
from ragmesh_gateway.pipeline.communities import Communities
from ragmesh_gateway.pipeline.conversation import Conversation, RecordTurn
from ragmesh_gateway.pipeline.define import Define
from ragmesh_gateway.pipeline.distinct import Distinct
from ragmesh_gateway.pipeline.events import Event
from ragmesh_gateway.pipeline.grade import Grade
from ragmesh_gateway.pipeline.graph import Graph
from ragmesh_gateway.pipeline.guard import Guard
from ragmesh_gateway.pipeline.link import Link
from ragmesh_gateway.pipeline.rerank import Rerank
from ragmesh_gateway.pipeline.retrieve import Retrieve
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Pipeline
from ragmesh_gateway.pipeline.table import WholeTable
from ragmesh_gateway.pipeline.tools import Tools
from ragmesh_gateway.pipeline.understand import Understand


@dataclass(frozen=True)
class AgentBounds:
    """The bounds of a multi-step answer (GATEWAY_AGENT_MAX_STEPS, _MAX_SECONDS, _MAX_LLM_TOKENS), and the spaCy
    pipeline its planner parses described entities with (GATEWAY_PLANNER_SPACY_MODEL; "": the rules alone)."""

    max_steps: int = 6
    max_seconds: float = 60.0
    max_llm_tokens: int = 4000
    planner_model: str = ""


class Orchestrator:
    """The steps built once per app (clients, deadlines, thresholds), and the pipelines that list them."""

    def __init__(
        self,
        mesh: Mesh,
        deadlines: Deadlines,
        *,
        min_relevance: float,
        candidates: int = 30,
        graph_enabled: bool = True,
        graph_leg: str = "off",
        graph_seed_passages: int = 0,
        graph_placement: str = "fuse",
        graph_placed: int = 1,
        linked_documents: int = 0,
        respell_questions: bool = False,
        link_passages: int = 2,
        define_depth: int = 0,
        table_chunks: int = 0,
        default_context: dict[str, Any] | None = None,
        relevance: Thresholds | None = None,
        corrective_alpha: float = 0.3,
        corrective_candidates: int = 60,
        cache: SemanticCache | None = None,
        agent: AgentBounds | None = None,
    ) -> None:
        agent = agent or AgentBounds()
        self.candidates = candidates
        understand = Understand(mesh, deadlines.rewrite)
        retrieve = Retrieve(
            mesh,
            deadlines.retrieve,
            default_context,
            graph_leg=graph_leg if graph_enabled else "off",
            graph_timeout=deadlines.graph,
            graph_seed_passages=graph_seed_passages,
            graph_placement=graph_placement,
            graph_placed=graph_placed,
            placed_after=link_passages,
            respell=respell_questions,
        )
        rerank = Rerank(mesh, deadlines.rerank)
        link = Link(mesh, deadlines.retrieve, default=linked_documents, passages=link_passages)
        graph = Graph(mesh, deadlines.graph, enabled=graph_enabled)
        grade = Grade(
            mesh,
            deadlines.retrieve,
            # GATEWAY_MIN_RELEVANCE stays the cosine below which a chunk is no evidence at all
            relevance or Thresholds(vector_weak=min_relevance),
            corrective_alpha=corrective_alpha,
            corrective_candidates=corrective_candidates,
            default_context=default_context,
        )
        self.chat = Pipeline(
            before=[
                Guard(mesh, deadlines.guardrail),
                Conversation(mesh, deadlines.retrieve),
                understand,
                CacheLookup(mesh, cache, deadlines.embed),
                PlanStep(mesh, deadlines.rewrite, agent.max_llm_tokens, ClauseParser(agent.planner_model)),
                DirectOnly(retrieve),
                DirectOnly(rerank),
                DirectOnly(grade),
                Iterate(
                    [retrieve, rerank, grade],
                    max_steps=agent.max_steps,
                    max_seconds=agent.max_seconds,
                    tools=Tools(mesh, deadlines.retrieve, deadlines.graph, graph_enabled=graph_enabled),
                ),
                link,  # after the direct search's grade, or after the agent's merged steps
                Communities(mesh, deadlines.communities, enabled=graph_enabled),
                Distinct(),
                Define(mesh, deadlines.retrieve, depth=define_depth, default_context=default_context),
                WholeTable(mesh, deadlines.retrieve, chunks=table_chunks),
                AnswerBudget(agent.max_llm_tokens),
            ],
            during=[
                graph,
                CachePin(cache),
                Answer(mesh, deadlines.answer),
                CacheStore(cache),
                Verify(),
            ],
            finish=[RecordTurn(mesh, deadlines.retrieve)],
        )
        self.search_pipeline = Pipeline(before=[understand, retrieve, rerank, grade, link, graph])

    async def prepare(self, user: UserContext, request: ChatRequest) -> RequestState:
        """The chat's steps before the response. Raises StepFailed (4xx/503) before any byte is streamed."""
        return await self.chat.prepare(RequestState.for_chat(user, request, self.candidates))

    def run(self, state: RequestState) -> AsyncGenerator[Event, None]:
        """Streams progress, tokens and the final event (with sources) of a prepared chat."""
        return self.chat.stream(state)

    async def search(
        self, user: UserContext, request: SearchRequest
    ) -> tuple[RequestState, list[common_pb2.ScoredChunk]]:
        """Retrieval only (the search API and the benchmarks): understand, retrieve, rerank, grade; no answer."""
        state = await self.search_pipeline.prepare(RequestState.for_search(user, request))
        return state, state.results[: request.top_k]
