"""graph: relations from the entity graph around the question, given to the answerer as context. Optional:
a down graph answers without graph context. Runs when the router says the question needs it (relations,
multi-hop) and the request and the deployment allow it; in a search, when the request asks for `graph`.
What it found is the reply's `graph` field: the entities the question names and the facts used, each with the
readable chunks it came from."""

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
        if isinstance(state.request, ChatRequest):
            wanted = state.request.graph and (state.route.use_graph if state.route is not None else True)
        else:
            wanted = state.request.graph  # a search: when asked
        return state.answering and self.enabled and wanted

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
        graph = state.graph or {"entities": [], "facts": [], "communities": []}
        graph["entities"] = [
            {"id": e.id, "name": e.name, "type": e.type, "mentions": e.mentions, "chunk_ids": list(e.chunk_ids)}
            for e in reply.matched
        ]
        graph["facts"] = [
            {
                "source": r.source,
                "relation": r.type.lower().replace("_", " "),
                "target": r.target,
                "chunk_ids": list(r.chunk_ids),
            }
            for r in reply.relations
        ]
        state.graph = graph
        return {"facts": len(state.facts), "entities": len(reply.matched)}

    def degraded_reason(self, exc: aio.AioRpcError) -> str:
        return f"graph {exc.code().name}; answered without graph context"

    def fallback(self, state: RequestState, reason: str) -> dict[str, Any]:
        super().fallback(state, reason)
        return {"facts": 0}
