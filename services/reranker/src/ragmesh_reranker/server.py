"""RerankerService: cross-encoder scores, or FAILED_PRECONDITION when no model is configured."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from grpc import aio
from opentelemetry import trace

from ragmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.errors import FailedPrecondition, InvalidArgument, grpc_errors
from ragmesh_common.server import GrpcService
from ragmesh_reranker.config import Settings

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

NOT_CONFIGURED = "no reranker model configured (set RERANKER_MODEL)"


class RerankerServicer(reranker_pb2_grpc.RerankerServiceServicer):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model: Any = None
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        if not self.settings.model:
            logger.warning("%s: Rerank answers FAILED_PRECONDITION and the gateway keeps retrieval order",
                           NOT_CONFIGURED)
            return
        from FlagEmbedding import FlagReranker

        try:
            self.model = await asyncio.to_thread(
                FlagReranker, self.settings.model, use_fp16=self.settings.fp16, devices=[self.settings.device],
                batch_size=self.settings.batch_size, max_length=self.settings.max_length)
            await asyncio.to_thread(self.model.compute_score, [("warm", "up")])
        except Exception as exc:
            raise RuntimeError(f"RERANKER_MODEL={self.settings.model} could not be loaded: {exc}") from exc
        logger.info("reranker ready: %s on %s", self.settings.model, self.settings.device)

    @property
    def model_name(self) -> str:
        return Path(self.settings.model).name if self.settings.model else ""

    @grpc_errors
    async def Rerank(self, request: reranker_pb2.RerankRequest, context: aio.ServicerContext) -> reranker_pb2.RerankResponse:
        if self.model is None:
            raise FailedPrecondition(NOT_CONFIGURED)
        if not request.query.strip():
            raise InvalidArgument("query must not be empty")
        if not request.passages:
            raise InvalidArgument("passages must not be empty")
        if len(request.passages) > self.settings.max_passages:
            raise InvalidArgument(f"at most {self.settings.max_passages} passages (RERANKER_MAX_PASSAGES)")
        pairs = [(request.query, p) for p in request.passages]
        with tracer.start_as_current_span("rerank") as span:
            span.set_attribute(attr.RAG_RERANK_CANDIDATES, len(pairs))
            async with self._lock:
                scores = await asyncio.to_thread(self.model.compute_score, pairs, normalize=request.normalize)
        if not isinstance(scores, list):
            scores = [float(scores)]
        return reranker_pb2.RerankResponse(scores=[float(s) for s in scores], model=self.model_name)

    @grpc_errors
    async def GetModelInfo(self, request: reranker_pb2.GetModelInfoRequest, context: aio.ServicerContext) -> reranker_pb2.ModelInfo:
        if self.model is None:
            return reranker_pb2.ModelInfo(configured=False, state=NOT_CONFIGURED, device=self.settings.device)
        return reranker_pb2.ModelInfo(configured=True, model=self.model_name, device=self.settings.device, state="ready")


def build_service(settings: Settings) -> tuple[GrpcService, RerankerServicer]:
    servicer = RerankerServicer(settings)

    def add(server: aio.Server) -> list[str]:
        reranker_pb2_grpc.add_RerankerServiceServicer_to_server(servicer, server)
        return [reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name]

    return GrpcService("reranker", add, host=settings.host, port=settings.port, warmup=servicer.load), servicer
