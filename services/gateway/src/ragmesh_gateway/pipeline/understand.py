"""understand: make a follow-up self-contained (rules, then the answerer's model for what they cannot
resolve; a failed model rewrite degrades to the rule result) and route the question (kind, levels, strategy,
graph use, sub-queries), and take the user's language hint for the search (the request's `language`, else
Accept-Language). Local rules, well under a millisecond without the model."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh_common import attributes as attr
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.messages import ACCEPT_LANGUAGE, accepted_language
from ragmesh_gateway.pipeline.budget import estimate_tokens
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step
from ragmesh_gateway.query import Rewrite, arewrite_followup, route

LEVEL_ORDER = ["document", "section", "paragraph"]


def language_hint(asked: str | None, accept_language: str) -> str:
    """The search's language hint: the request's `language` ("de-CH" -> "de"), else the first language of the
    Accept-Language header by its q-values, else "" (the retriever detects). The retriever uses it for short or
    unclear queries only, and ignores (logged, traced) one it has no text search configuration for."""
    if asked:
        return asked.split("-", 1)[0].lower()
    return accepted_language(accept_language, None) or ""


class Understand(Step):
    name = "understand"

    def __init__(self, mesh: Mesh, rewrite_timeout: float) -> None:
        self.mesh = mesh
        self.timeout = rewrite_timeout

    def span_name(self, state: RequestState) -> str | None:
        # A span only when there is something to understand (history to rewrite from, or routing): a
        # self-contained question without routing passes through unchanged, and a span costs ~60 µs.
        return "understand query" if state.history or state.request.routing else None

    async def run(self, state: RequestState) -> dict[str, Any]:
        rewrite = await self._rewrite(state) if state.history else None
        if rewrite is not None and rewrite.rewritten:
            state.query = rewrite.text
            state.rewritten_question = rewrite.text if rewrite.text != state.question else None
        plan = route(state.query) if state.request.routing else None
        state.language = language_hint(state.request.language, ACCEPT_LANGUAGE.get())
        state.route = plan
        request = state.request
        state.levels = list(request.levels)
        if not state.levels and plan is not None and plan.levels != ["paragraph"]:
            state.levels = sorted({*plan.levels, "paragraph"}, key=LEVEL_ORDER.index)  # never lose the paragraphs
        state.strategy = request.strategy or (plan.strategy if plan else "direct")
        self._trace(rewrite, state)
        return {
            "query": state.query,
            "rewritten": bool(rewrite and rewrite.rewritten),
            "kind": plan.kind if plan else None,
            "multi_hop": plan.multi_hop if plan else None,
            **({"language": state.language} if state.language else {}),
        }

    async def _rewrite(self, state: RequestState) -> Rewrite:
        history: list[tuple[str, str]] = [(t.role, t.content) for t in state.history]
        rewrite = await arewrite_followup(
            state.question,
            history,
            timeout=self.timeout,
            llm=lambda question, turns: self._model_rewrite(state, question, turns),
        )
        if rewrite.degraded:
            state.degrade("rewrite", f"{rewrite.degraded}; kept the rule rewrite")
        return rewrite

    async def _model_rewrite(self, state: RequestState, question: str, history: list[tuple[str, str]]) -> str:
        """The answerer's model rewrites a follow-up the rules could not resolve (its own deadline)."""
        reply = await self.mesh.answerer.Rewrite(
            answerer_pb2.RewriteRequest(
                question=question,
                history=[answerer_pb2.ChatTurn(role=role, content=content) for role, content in history],
            ),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        # the LLM token bound of an agentic chat counts every model call (pipeline/budget.py)
        state.llm_tokens += estimate_tokens(question, *(content for _, content in history), reply.question)
        return reply.question

    @staticmethod
    def _trace(rewrite: Rewrite | None, state: RequestState) -> None:
        span = trace.get_current_span()
        if state.language:
            span.set_attribute(attr.RAG_SEARCH_LANGUAGE_HINT, state.language)
        span.set_attribute(attr.RAG_QUERY_REWRITTEN, bool(rewrite and rewrite.rewritten))
        if rewrite is not None:
            span.set_attribute(attr.RAG_QUERY_REWRITE_METHOD, "llm" if rewrite.reason == "llm" else "rules")
        plan = state.route
        if plan is not None:
            span.set_attribute(attr.RAG_QUERY_KIND, plan.kind)
            span.set_attribute(attr.RAG_QUERY_MULTI_HOP, plan.multi_hop)
            span.set_attribute(attr.RAG_QUERY_STRATEGY, plan.strategy)
            span.set_attribute(attr.RAG_QUERY_SUB_QUERIES, len(plan.sub_queries))
