"""RerankerService: cross-encoder scores; without a model, OK with `configured=false` and the reason.

Not configured is a deployment choice, not a failed call: answering it with an error status would mark the
caller's gRPC client span (and so every chat trace) as an error. The caller records a degradation instead."""

from __future__ import annotations

import asyncio
import logging

from grpc import aio
from opentelemetry import trace

from ragmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.errors import InvalidArgument, Unavailable, grpc_errors
from ragmesh_common.server import GrpcService
from ragmesh_reranker.config import Settings
from ragmesh_reranker.model import CrossEncoder

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

NOT_CONFIGURED = "no reranker model configured (set RERANKER_MODEL)"


class RerankerServicer(reranker_pb2_grpc.RerankerServiceServicer):
    """Scores passages against a query; without RERANKER_MODEL it serves and says it is not configured."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model: CrossEncoder | None = None
        self._lock = asyncio.Lock()  # one model call at a time; concurrent ones queue here

    async def load(self) -> None:
        if not self.settings.model:
            logger.warning("%s: Rerank answers configured=false and the gateway keeps retrieval order", NOT_CONFIGURED)
            return
        self.model = await asyncio.to_thread(CrossEncoder, self.settings)
        logger.info("reranker ready: %s on %s", self.settings.model, self.settings.device)

    def _ready_model(self) -> CrossEncoder:
        if self.model is None:
            raise Unavailable("reranker is warming up (model not loaded yet)")
        return self.model

    @grpc_errors
    async def Rerank(
        self,
        request: reranker_pb2.RerankRequest,
        context: aio.ServicerContext[reranker_pb2.RerankRequest, reranker_pb2.RerankResponse],
    ) -> reranker_pb2.RerankResponse:
        if not self.settings.model:
            trace.get_current_span().set_attribute(attr.RAG_RERANK_CONFIGURED, False)
            return reranker_pb2.RerankResponse(configured=False, unconfigured_reason=NOT_CONFIGURED)
        model = self._ready_model()
        if not request.query.strip():
            raise InvalidArgument("query must not be empty")
        if not request.passages:
            raise InvalidArgument("passages must not be empty")
        if len(request.passages) > self.settings.max_passages:
            raise InvalidArgument(
                f"at most {self.settings.max_passages} passages per request "
                f"(RERANKER_MAX_PASSAGES), got {len(request.passages)}"
            )
        with tracer.start_as_current_span("rerank") as span:
            span.set_attribute(attr.RAG_RERANK_CANDIDATES, len(request.passages))
            async with self._lock:
                scores = await asyncio.to_thread(
                    model.score, request.query, list(request.passages), normalize=request.normalize
                )
        return reranker_pb2.RerankResponse(scores=scores, configured=True)


def build_service(settings: Settings) -> tuple[GrpcService, RerankerServicer]:
    """The gRPC service (SERVING once the model is warm, or at once without a model) and its servicer."""
    servicer = RerankerServicer(settings)

    def add(server: aio.Server) -> list[str]:
        reranker_pb2_grpc.add_RerankerServiceServicer_to_server(servicer, server)
        return [reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name]

    return GrpcService("reranker", add, host=settings.host, port=settings.port, warmup=servicer.load), servicer
