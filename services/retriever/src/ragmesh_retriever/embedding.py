"""The retriever's own query embedding: for a Search that arrives without a vector (embed_query), the
embedder is called while the permission lookup and the lexical leg run, so its latency hides behind them."""

from __future__ import annotations

from grpc import aio

from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from ragmesh_common.identity import UserContext
from ragmesh_common.server import mesh_channel


class QueryEmbedder:
    def __init__(self, addr: str, timeout_s: float) -> None:
        self.addr = addr
        self.timeout_s = timeout_s
        self._channel: aio.Channel | None = None
        self._stub: embedder_pb2_grpc.EmbedderServiceAsyncStub | None = None

    async def embed(self, user: UserContext, text: str) -> list[float]:
        """The query's vector; raises grpc.aio.AioRpcError when the embedder fails or times out."""
        if self._stub is None:
            self._channel = mesh_channel(self.addr)
            self._stub = embedder_pb2_grpc.EmbedderServiceStub(self._channel)
        reply = await self._stub.Embed(
            embedder_pb2.EmbedRequest(texts=[text], is_query=True), metadata=user.metadata(), timeout=self.timeout_s
        )
        return list(reply.vectors[0].values)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(grace=None)
            self._channel = self._stub = None
