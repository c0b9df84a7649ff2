"""gRPC clients for the four services an ingestion calls, one channel each."""

from __future__ import annotations

from grpc import aio

from ragmesh.embedder.v1 import embedder_pb2_grpc
from ragmesh.graph.v1 import graph_pb2_grpc
from ragmesh.parser.v1 import parser_pb2_grpc
from ragmesh.retriever.v1 import retriever_pb2_grpc
from ragmesh_common.server import mesh_channel
from ragmesh_ingestion.config import Settings


class Clients:
    """Channels and stubs for parser, embedder, retriever and graph."""

    def __init__(self, *, parser: str, embedder: str, retriever: str, graph: str) -> None:
        self._channels: dict[str, aio.Channel] = {
            name: mesh_channel(addr)
            for name, addr in (("parser", parser), ("embedder", embedder), ("retriever", retriever), ("graph", graph))
        }
        self.parser = parser_pb2_grpc.ParserServiceStub(self._channels["parser"])
        self.embedder = embedder_pb2_grpc.EmbedderServiceStub(self._channels["embedder"])
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(self._channels["retriever"])
        self.graph = graph_pb2_grpc.GraphServiceStub(self._channels["graph"])

    def channel(self, name: str) -> aio.Channel:
        """The channel to "parser", "embedder", "retriever" or "graph" (to wait until it is ready)."""
        return self._channels[name]

    @classmethod
    def from_settings(cls, settings: Settings) -> Clients:
        return cls(
            parser=settings.parser_addr,
            embedder=settings.embedder_addr,
            retriever=settings.retriever_addr,
            graph=settings.graph_addr,
        )

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(grace=None)
