"""graph: relations from the entity graph around the question, given to the answerer as context. Optional:
a down graph answers without graph context. Runs when the router says the question needs it (relations,
multi-hop) and the request and the deployment allow it."""

from __future__ import annotations

from typing import Any

from grpc import aio
from opentelemetry import trace

from ragmesh.graph.v1 import graph_pb2
from ragmesh_common import attributes as attr
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step


class Graph(Step):
    name = "graph"
    span = "graph context"
    required = False

    def __init__(self, mesh: Mesh, timeout: float, *, enabled: bool = True) -> None:
        self.mesh = mesh
        self.timeout = timeout
        self.enabled = enabled

    def applies(self, state: RequestState) -> bool:
        wanted = isinstance(state.request, ChatRequest) and state.request.graph
        use_graph = state.route.use_graph if state.route is not None else True
        return state.answering and self.enabled and wanted and use_graph

    async def run(self, state: RequestState) -> dict[str, Any]:
        reply = await self.mesh.graph.GetContext(
            graph_pb2.GetContextRequest(
                query=state.query,
                # the user's document filter, if any; the graph reads only what the catalogue says the user may read
                document_ids=state.document_ids,
                max_depth=2,
                limit=6,
            ),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        trace.get_current_span().set_attribute(attr.RAG_GRAPH_RELATIONS, len(reply.relations))
        state.facts = [f"{r.source} — {r.type.lower().replace('_', ' ')} — {r.target}" for r in reply.relations]
        return {"facts": len(state.facts)}

    def degraded_reason(self, exc: aio.AioRpcError) -> str:
        return f"graph {exc.code().name}; answered without graph context"

    def fallback(self, state: RequestState, reason: str) -> dict[str, Any]:
        super().fallback(state, reason)
        return {"facts": 0}
