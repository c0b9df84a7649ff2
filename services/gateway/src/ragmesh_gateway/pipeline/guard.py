"""guard: the answerer's input guardrail (CheckInput) on the question and the chat history, once per request,
before anything reads them (the rewrite model, the search). Required: a refusal is HTTP 400 naming the step."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh_common import attributes as attr
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.messages import guardrail_reason
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step


class Guard(Step):
    name = "guardrail"
    span = "guardrail"

    def __init__(self, mesh: Mesh, timeout: float) -> None:
        self.mesh = mesh
        self.timeout = timeout

    async def run(self, state: RequestState) -> dict[str, Any]:
        check = await self.mesh.answerer.CheckInput(
            answerer_pb2.CheckInputRequest(question=state.question, history=state.answer_history()),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_GUARDRAIL_ALLOWED, check.allowed)
        span.set_attribute(attr.RAG_GUARDRAIL_RULES, list(check.rules))
        if not check.allowed:
            raise StepFailed(self.name, guardrail_reason(check.reason, list(check.rules), state.question), 400)
        return {}
