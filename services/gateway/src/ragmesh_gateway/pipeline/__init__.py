"""A request through the mesh as a pipeline of named steps (see docs/architecture.md, "The request path").

Each step (`step.Step`) is one class that owns its span, its stage record, its timeout and its degrade rule,
and reads and writes one `RequestState`; `compose.Orchestrator` lists them into the chat and search pipelines.
Required steps (guardrail, understand, retrieve, grade, answer, verify) fail the request with the step named;
optional ones (rerank, link, graph; the embedder inside retrieve, the rewrite model inside understand) degrade, and
every degradation is logged, recorded on the span and reported in the final event.
"""

from ragmesh_gateway.pipeline.compose import Orchestrator
from ragmesh_gateway.pipeline.events import INGESTING, MESSAGES, NO_MATCH_IN_FILTER, NO_PERMISSION, NO_SOURCES
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Pipeline, Step

__all__ = [
    "INGESTING",
    "MESSAGES",
    "NO_MATCH_IN_FILTER",
    "NO_PERMISSION",
    "NO_SOURCES",
    "Orchestrator",
    "Pipeline",
    "RequestState",
    "Step",
]
