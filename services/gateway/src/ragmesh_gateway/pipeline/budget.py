"""The LLM token bound of a multi-step answer (GATEWAY_AGENT_MAX_LLM_TOKENS) over every LLM call of the request.

Every call to the answerer's model adds its estimated tokens (prompt and reply cap) to `state.llm_tokens`: the
follow-up rewrite (understand), the planner's fallback (plan) and the answer's generation (answer). Before a
call, the bound is checked. The answer is the last call and the one that matters, so when it would pass the
bound it is made smaller instead of skipped: the last sources are left out (each step's best come first, so
the later steps' evidence goes first), then the reply cap is lowered; the note names what was cut. Only when
not even the question with one source fits is the answer step cut: the chat declines, with the note.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

from ragmesh_common import attributes as attr
from ragmesh_gateway.models import ChatRequest, Outcome
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step

logger = logging.getLogger(__name__)

PROMPT_TOKENS = 200  # the answerer's instructions and source framing (ragmesh_answerer.prompting), estimated
DEFAULT_REPLY_TOKENS = 64  # ANSWERER_MAX_TOKENS' default: the reply cap of a request that says 0
MIN_REPLY_TOKENS = 16  # below this the answer is no answer
FACT_TOKENS = 80  # the graph step's facts, given after this step (6 relations of a few words each), reserved


def estimate_tokens(*texts: str) -> int:
    """Tokens of an LLM call, estimated (about 4/3 per word; the bound is a budget, not a bill)."""
    return sum(len(t.split()) for t in texts) * 4 // 3 + 1


def answer_prompt_tokens(state: RequestState, sources: int) -> int:
    """The answer call's prompt with the first `sources` sources: question, sources, graph facts, history."""
    texts = [state.query, *(r.chunk.text for r in state.results[:sources]), *(t.content for t in state.history)]
    graph = isinstance(state.request, ChatRequest) and state.request.graph
    return PROMPT_TOKENS + estimate_tokens(*texts) + (FACT_TOKENS if graph else 0)


class AnswerBudget(Step):
    """budget: the answer call fitted into what the LLM token bound leaves (agentic chats). Runs before the
    response starts (a cut answer step declines), with the graph's facts reserved."""

    name = "budget"

    def __init__(self, max_llm_tokens: int) -> None:
        self.max_llm_tokens = max_llm_tokens

    def applies(self, state: RequestState) -> bool:
        return state.answering and state.mode == "agentic" and isinstance(state.request, ChatRequest)

    async def run(self, state: RequestState) -> dict[str, Any]:
        request = state.request
        assert isinstance(request, ChatRequest)
        left = self.max_llm_tokens - state.llm_tokens
        reply = request.max_tokens or DEFAULT_REPLY_TOKENS
        given = min(request.top_k, len(state.results))
        sources = given
        while sources > 1 and answer_prompt_tokens(state, sources) + MIN_REPLY_TOKENS > left:
            sources -= 1
        prompt = answer_prompt_tokens(state, sources)
        span = trace.get_current_span()
        if prompt + MIN_REPLY_TOKENS > left:
            state.notes.append(
                f"The answer step was cut by the LLM token limit ({self.max_llm_tokens}): the steps before it "
                "used the budget, and no answer was generated."
            )
            logger.warning("answer cut by the LLM token bound (%d used of %d)", state.llm_tokens, self.max_llm_tokens)
            span.add_event("agent step cut", {"rag.agent.cut": "the LLM token limit"})
            state.outcome = Outcome.NO_SOURCES
            return {"cut": "answer", "llm_tokens": state.llm_tokens}
        if sources < given:
            dropped = state.results[sources:given]
            del state.results[sources:given]
            state.notes.append(
                f"The answer step was cut by the LLM token limit ({self.max_llm_tokens}): it rests on the first "
                f"{sources} of {given} sources ({len(dropped)} left out)."
            )
        if prompt + reply > left:
            reply = left - prompt
            state.answer_max_tokens = reply
            state.notes.append(
                f"The answer step was cut by the LLM token limit ({self.max_llm_tokens}): its reply was capped "
                f"at {reply} tokens."
            )
        state.llm_tokens += prompt + reply
        span.set_attribute(attr.RAG_AGENT_LLM_TOKENS, state.llm_tokens)
        return {"llm_tokens": state.llm_tokens, "relevant": sources}
