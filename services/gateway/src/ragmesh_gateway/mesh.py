"""gRPC clients for every hop of the mesh, one channel per service, and how a failed hop is reported."""

from __future__ import annotations

import asyncio
import logging
from types import MappingProxyType

import grpc
from grpc import aio

from ragmesh.answerer.v1 import answerer_pb2_grpc
from ragmesh.embedder.v1 import embedder_pb2_grpc
from ragmesh.graph.v1 import graph_pb2_grpc
from ragmesh.parser.v1 import parser_pb2_grpc
from ragmesh.reranker.v1 import reranker_pb2_grpc
from ragmesh.retriever.v1 import retriever_pb2_grpc
from ragmesh_common.errors import redact_addresses
from ragmesh_common.server import mesh_channel
from ragmesh_gateway.config import Settings

# gRPC status -> HTTP status for errors the user should see as their own fault
CLIENT_ERRORS = MappingProxyType(
    {
        grpc.StatusCode.INVALID_ARGUMENT: 400,
        grpc.StatusCode.NOT_FOUND: 404,
        grpc.StatusCode.PERMISSION_DENIED: 403,
        grpc.StatusCode.UNAUTHENTICATED: 401,
    }
)

UNAVAILABLE_CAUSES = MappingProxyType(
    {
        grpc.StatusCode.UNAVAILABLE: "the service is unreachable",
        grpc.StatusCode.DEADLINE_EXCEEDED: "no reply within the deadline",
        grpc.StatusCode.RESOURCE_EXHAUSTED: "the service is overloaded",
        grpc.StatusCode.CANCELLED: "the call was cancelled",
        grpc.StatusCode.FAILED_PRECONDITION: "the service is not configured for this",
        grpc.StatusCode.UNIMPLEMENTED: "the service does not implement this call",
        grpc.StatusCode.INTERNAL: "the service failed internally",
        grpc.StatusCode.UNKNOWN: "the service failed internally",
        grpc.StatusCode.DATA_LOSS: "the service failed internally",
    }
)

# The service behind each step the gateway names in errors, so an operator reads which deployment to look at.
# A step that calls several services (plan, iterate) is not listed: its message names the step only.
STEP_SERVICES = MappingProxyType(
    {
        "guardrail": "answerer",
        "understand": "answerer",
        "retrieve": "retriever",
        "grade": "retriever",
        "rerank": "reranker",
        "graph": "graph",
        "answer": "answerer",
        "verify": "answerer",
        "catalogue": "retriever",
        "conversation": "retriever",
        "cache": "retriever",
        "parse": "parser",
    }
)

logger = logging.getLogger(__name__)


class StepFailed(Exception):
    """A hop failed. `http_status` is 4xx for the caller's mistakes and 503 for an unavailable required hop."""

    def __init__(self, step: str, message: str, http_status: int = 503, *, retry_after: int | None = None) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message
        self.http_status = http_status
        self.retry_after = retry_after  # seconds, when the hop said it is busy rather than down

    @property
    def service(self) -> str | None:
        return STEP_SERVICES.get(self.step)

    def payload(self) -> dict[str, str | int]:
        """The error as the API reports it (an `error` event's data, an HTTP error's detail)."""
        data: dict[str, str | int] = {"step": self.step, "message": self.message, "status": self.http_status}
        if self.service:
            data["service"] = self.service
        if self.retry_after:
            data["retry_after"] = self.retry_after
        return data

    @classmethod
    def from_rpc(cls, step: str, exc: aio.AioRpcError, *, retry_after: int | None = None) -> StepFailed:
        code = exc.code()
        status = CLIENT_ERRORS.get(code, 503)
        detail = redact_addresses(exc.details() or code.name)  # a refusal's own message, without peers
        if status == 503:
            # gRPC's details name addresses and ports ("ipv4:127.0.0.1:50053: Connection refused") and a
            # service's internals: they go to the log, and the client gets the step and the cause
            logger.warning("%s step failed: %s: %s", step, code.name, exc.details())
            service = STEP_SERVICES.get(step)
            where = f"the {step} step ({service} service)" if service else f"the {step} step"
            detail = f"{where} is unavailable ({code.name}: {UNAVAILABLE_CAUSES.get(code, 'failed')})"
        return cls(step, detail, status, retry_after=retry_after)


class Mesh:
    """Channels and stubs for the six services the gateway calls. One per app, built in its lifespan."""

    def __init__(self, *, parser: str, embedder: str, retriever: str, reranker: str, graph: str, answerer: str) -> None:
        self.addresses = {
            "parser": parser,
            "embedder": embedder,
            "retriever": retriever,
            "reranker": reranker,
            "graph": graph,
            "answerer": answerer,
        }
        self._channels: dict[str, aio.Channel] = {name: mesh_channel(addr) for name, addr in self.addresses.items()}
        self.parser = parser_pb2_grpc.ParserServiceStub(self._channels["parser"])
        self.embedder = embedder_pb2_grpc.EmbedderServiceStub(self._channels["embedder"])
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(self._channels["retriever"])
        self.reranker = reranker_pb2_grpc.RerankerServiceStub(self._channels["reranker"])
        self.graph = graph_pb2_grpc.GraphServiceStub(self._channels["graph"])
        self.answerer = answerer_pb2_grpc.AnswererServiceStub(self._channels["answerer"])

    @classmethod
    def from_settings(cls, settings: Settings) -> Mesh:
        return cls(
            parser=settings.parser_addr,
            embedder=settings.embedder_addr,
            retriever=settings.retriever_addr,
            reranker=settings.reranker_addr,
            graph=settings.graph_addr,
            answerer=settings.answerer_addr,
        )

    async def health(self, timeout: float = 2.0) -> dict[str, str]:  # the gRPC deadline of each check
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        async def check(channel: aio.Channel) -> str:
            try:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=timeout
                )
                return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
            except aio.AioRpcError as exc:
                return f"UNREACHABLE ({exc.code().name})"

        # in parallel: a hung service must not push /readyz past its probe's timeout
        statuses = await asyncio.gather(*(check(channel) for channel in self._channels.values()))
        return dict(zip(self._channels, statuses, strict=True))

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(grace=None)
