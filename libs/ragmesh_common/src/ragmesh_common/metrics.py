"""Prometheus metrics of the gRPC services and the ingestion worker (prometheus-client, its default registry).

Every `GrpcService` counts and times each RPC with `MetricsInterceptor`, and serves `GET /metrics` in
Prometheus' text format on RAGMESH_METRICS_PORT (plaintext HTTP, the metrics only; 0 = none, the default):

- `ragmesh_grpc_server_handled_total{grpc_service, grpc_method, grpc_code}`: finished RPCs by status code;
  errors are the codes other than OK.
- `ragmesh_grpc_server_handling_seconds{grpc_service, grpc_method}`: an RPC's duration (a stream until its
  last message), histogram.
- `ragmesh_grpc_server_in_flight{grpc_service}`: RPCs running now.
- `ragmesh_answerer_queue_depth`, `ragmesh_answerer_active_generations`, `ragmesh_answerer_admission_refusals_total{reason}`,
  `ragmesh_llm_tokens_total{type, model}`, `ragmesh_llm_generations_total{outcome}`: the answerer's admission
  queue and its model's token use.
- `ragmesh_ingestion_documents_total{outcome}`, `ragmesh_ingestion_failures_total{stage}`,
  `ragmesh_ingestion_backlog`: the ingest worker (its metrics port: RAGMESH_METRICS_PORT of its process).
- `ragmesh_connector_runs_total{connector_id, kind, status}`, `ragmesh_connector_items_total{connector_id, kind,
  outcome}`, `ragmesh_connector_run_seconds{kind}`: the worker's connector runs (the connector's UUID, not its
  admin-given name, which could say what the source holds).

No label holds a user, a department, a document or a question: label values are service, method and stage names,
status codes, connector ids and the configured model's name.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from wsgiref.simple_server import WSGIServer

import grpc
from grpc import aio
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

logger = logging.getLogger(__name__)

# seconds: a catalogue lookup (a millisecond) to a generation on a CPU model (minutes)
RPC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

RPC_HANDLED = Counter(
    "ragmesh_grpc_server_handled",
    "gRPC calls finished, by service, method and status code",
    ["grpc_service", "grpc_method", "grpc_code"],
)
RPC_SECONDS = Histogram(
    "ragmesh_grpc_server_handling_seconds",
    "gRPC call duration (a server stream until its last message), by service and method",
    ["grpc_service", "grpc_method"],
    buckets=RPC_BUCKETS,
)
RPC_IN_FLIGHT = Gauge("ragmesh_grpc_server_in_flight", "gRPC calls running now", ["grpc_service"])

ANSWERER_QUEUE_DEPTH = Gauge("ragmesh_answerer_queue_depth", "Generations waiting in the answerer's admission queue")
ANSWERER_ACTIVE = Gauge("ragmesh_answerer_active_generations", "Generations holding a slot of the answerer")
ANSWERER_REFUSALS = Counter(
    "ragmesh_answerer_admission_refusals",
    "Generations the answerer refused as busy (RESOURCE_EXHAUSTED), by reason",
    ["reason"],
)
LLM_TOKENS = Counter(
    "ragmesh_llm_tokens", "Tokens the answerer's model read (prompt) and wrote (completion)", ["type", "model"]
)
LLM_GENERATIONS = Counter("ragmesh_llm_generations", "Model generations by outcome (ok, error)", ["outcome"])

INGEST_DOCUMENTS = Counter(
    "ragmesh_ingestion_documents",
    "Ingestion runs by outcome (ready, failed, retrying, superseded)",
    ["outcome"],
)
INGEST_FAILURES = Counter(
    "ragmesh_ingestion_failures", "Ingestion runs that failed, by the stage that failed them", ["stage"]
)
INGEST_BACKLOG = Gauge("ragmesh_ingestion_backlog", "Ingestion tasks waiting in the broker's queue")
CONNECTOR_RUNS = Counter(
    "ragmesh_connector_runs",
    "Connector runs by connector (its id), kind (folder, web) and status (succeeded, partial, failed, skipped)",
    ["connector_id", "kind", "status"],
)
CONNECTOR_ITEMS = Counter(
    "ragmesh_connector_items",
    "Items a connector's runs handled, by outcome (new, changed, unchanged, deleted, acl_changed, skipped, failed)",
    ["connector_id", "kind", "outcome"],
)
CONNECTOR_RUN_SECONDS = Histogram(
    "ragmesh_connector_run_seconds", "A connector run's duration", ["kind"], buckets=(*RPC_BUCKETS, 900, 3600)
)


def split_method(full: str) -> tuple[str, str]:
    """'/ragmesh.retriever.v1.Retriever/Search' -> ('ragmesh.retriever.v1.Retriever', 'Search')."""
    service, _, method = full.lstrip("/").rpartition("/")
    return service or "unknown", method or "unknown"


def _code(context: aio.ServicerContext[Any, Any], failed: BaseException | None) -> str:
    """The call's status code: what the servicer set (abort sets it too), UNKNOWN for an escaped exception."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):  # grpc.aio keeps the cygrpc integer in some versions
        return next((c.name for c in grpc.StatusCode if c.value[0] == code), "UNKNOWN")
    if failed is None:
        return "OK"
    return "CANCELLED" if isinstance(failed, asyncio.CancelledError) else "UNKNOWN"


class MetricsInterceptor(aio.ServerInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    """Counts and times every unary-request RPC (every RPC of ragmesh); health checks and reflection included,
    as their own service label."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            return handler
        service, method = split_method(handler_call_details.method)
        changes: dict[str, Any] = {}
        if handler.unary_unary is not None:
            changes["unary_unary"] = _timed_unary(handler.unary_unary, service, method)
        if handler.unary_stream is not None:
            changes["unary_stream"] = _timed_stream(handler.unary_stream, service, method)
        timed: grpc.RpcMethodHandler[Any, Any] = handler._replace(**changes)  # type: ignore[attr-defined]  # a namedtuple at runtime
        return timed


def _observe(service: str, method: str, started: float, code: str) -> None:
    RPC_IN_FLIGHT.labels(service).dec()
    RPC_HANDLED.labels(service, method, code).inc()
    RPC_SECONDS.labels(service, method).observe(time.perf_counter() - started)


def _timed_unary(behaviour: Callable[..., Awaitable[Any]], service: str, method: str) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        started = time.perf_counter()
        RPC_IN_FLIGHT.labels(service).inc()
        failed: BaseException | None = None
        try:
            return await behaviour(request, context)
        except BaseException as exc:
            failed = exc
            raise
        finally:
            _observe(service, method, started, _code(context, failed))

    return call


def _timed_stream(behaviour: Callable[..., Any], service: str, method: str) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        started = time.perf_counter()
        RPC_IN_FLIGHT.labels(service).inc()
        failed: BaseException | None = None
        try:
            result = behaviour(request, context)
            if hasattr(result, "__aiter__"):
                async for item in result:
                    yield item
            else:  # a coroutine that writes with context.write(), or one that only aborts (a refused call)
                await result
        except BaseException as exc:
            failed = exc
            raise
        finally:
            _observe(service, method, started, _code(context, failed))

    return call


class MetricsServer:
    """prometheus-client's own HTTP server (a daemon thread) serving `registry` on host:port; port 0 picks one."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry = REGISTRY) -> None:
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        server, thread = start_http_server(port, addr=host, registry=registry)
        self._server, self._thread = server, thread
        self.port = int(server.server_port)
        logger.info("Prometheus metrics on http://%s:%d/metrics", host, self.port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def count_generation(model: str, outcome: str, prompt_tokens: int, completion_tokens: int) -> None:
    """One generation of the answerer's model: its outcome (ok, error) and the tokens it read and wrote."""
    LLM_GENERATIONS.labels(outcome).inc()
    if prompt_tokens:
        LLM_TOKENS.labels("prompt", model).inc(prompt_tokens)
    if completion_tokens:
        LLM_TOKENS.labels("completion", model).inc(completion_tokens)
