"""EmbedderService: Embed over gRPC."""

from __future__ import annotations

import asyncio
import logging

from grpc import aio
from opentelemetry import trace

from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.errors import InvalidArgument, Unavailable, grpc_errors
from ragmesh_common.server import GrpcService
from ragmesh_embedder.config import Settings
from ragmesh_embedder.model import EmbeddingModel, MicroBatcher

logger = logging.getLogger(__name__)


class EmbedderServicer(embedder_pb2_grpc.EmbedderServiceServicer):
    """Validates requests and hands their texts to the micro-batcher; the model loads in `load` (warm-up)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model: EmbeddingModel | None = None
        self.batcher: MicroBatcher | None = None

    async def load(self) -> None:
        self.model = await asyncio.to_thread(EmbeddingModel, self.settings)
        self.batcher = MicroBatcher(self.model, self.settings.batch_size, self.settings.batch_wait_ms)
        self.batcher.start()
        logger.info("embedder ready: %s (%d-d) on %s", self.model.name, self.model.dimension, self.settings.device)

    @grpc_errors
    async def Embed(
        self,
        request: embedder_pb2.EmbedRequest,
        context: aio.ServicerContext[embedder_pb2.EmbedRequest, embedder_pb2.EmbedResponse],
    ) -> embedder_pb2.EmbedResponse:
        if not request.texts:
            raise InvalidArgument("texts must not be empty")
        if len(request.texts) > self.settings.max_texts:
            raise InvalidArgument(
                f"at most {self.settings.max_texts} texts per request (EMBEDDER_MAX_TEXTS), got {len(request.texts)}"
            )
        for i, text in enumerate(request.texts):
            if not text.strip():
                raise InvalidArgument(f"text {i} is empty")
        if self.batcher is None or self.model is None:
            raise Unavailable("embedder is warming up (model not loaded yet)")
        span = trace.get_current_span()  # the gRPC server span: no child span of the same extent
        span.set_attribute(attr.RAG_EMBED_TEXTS, len(request.texts))
        span.set_attribute(attr.RAG_EMBED_BATCH, self.settings.batch_size)
        vectors = await self.batcher.embed(list(request.texts), is_query=request.is_query)
        return embedder_pb2.EmbedResponse(vectors=[embedder_pb2.Vector(values=v.tolist()) for v in vectors])


def build_service(settings: Settings) -> tuple[GrpcService, EmbedderServicer]:
    """The gRPC service (health SERVING once the model is loaded and warm) and its servicer."""
    servicer = EmbedderServicer(settings)

    def add(server: aio.Server) -> list[str]:
        embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, server)
        return [embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name]

    async def on_stop() -> None:
        if servicer.batcher is not None:
            await servicer.batcher.stop()

    return GrpcService(
        "embedder", add, host=settings.host, port=settings.port, warmup=servicer.load, on_stop=on_stop
    ), servicer
