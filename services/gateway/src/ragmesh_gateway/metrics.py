"""Prometheus metrics of the gateway (`GET /metrics`, prometheus-client's text format), one registry per app.

- `ragmesh_http_requests_total{method, route, status}` and `ragmesh_http_request_duration_seconds{method, route}`:
  every HTTP request by its route template (`/api/v1/documents/{document_id}`, never the path itself, so no
  document id), a streamed response until its last byte. Errors are the 4xx/5xx `status` values.
- `ragmesh_pipeline_step_duration_seconds{pipeline, step}`: each pipeline step's own time (the `ms` the steps
  measure and report in their progress records, pipeline/step.py), for chat and search.
- `ragmesh_pipeline_step_failures_total{pipeline, step, status}`: a step that failed the request (its HTTP status).
- `ragmesh_answerer_refusals_total`: chats the answerer refused as busy (RESOURCE_EXHAUSTED with retry-after).
- `ragmesh_cache_lookups_total{result}` (hit, miss), `ragmesh_cache_stores_total`,
  `ragmesh_cache_refusals_total{reason}` (unreadable: a source the asker cannot read now; changed: a source changed
  since the answer was cached), `ragmesh_cache_errors_total`, `ragmesh_cache_invalidations_total`: the semantic
  cache as this replica saw it (hit rate: `rate(ragmesh_cache_lookups_total{result="hit"}[5m]) /
  rate(ragmesh_cache_lookups_total[5m])`). The all-replica totals are in Redis (GET /api/v1/admin/cache).

No label holds a user, a department, a document or a question: the label values are routes, methods, statuses
and step names, a small fixed set.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# seconds: a probe or a search (milliseconds) to a queued chat on a CPU model (minutes)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
CACHE_RESULTS = {"hits": "hit", "misses": "miss"}
CACHE_REFUSALS = ("unreadable", "changed")
UNMATCHED = "unmatched"  # a path no route serves (a 404): one label value for all of them


class GatewayMetrics:
    """The app's collectors, in a registry of its own (two apps in one process share none)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "ragmesh_http_requests",
            "HTTP requests by route template, method and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ragmesh_http_request_duration_seconds",
            "HTTP request duration (a stream until its last byte) by route template and method",
            ["method", "route"],
            buckets=HTTP_BUCKETS,
            registry=self.registry,
        )
        self.steps = Histogram(
            "ragmesh_pipeline_step_duration_seconds",
            "The time of each pipeline step, as the step measures it",
            ["pipeline", "step"],
            buckets=STEP_BUCKETS,
            registry=self.registry,
        )
        self.step_failures = Counter(
            "ragmesh_pipeline_step_failures",
            "Steps that failed a request, by the HTTP status they gave it",
            ["pipeline", "step", "status"],
            registry=self.registry,
        )
        self.refusals = Counter(
            "ragmesh_answerer_refusals",
            "Chats the answerer refused as busy (queue full or wait over budget), as the gateway saw them",
            registry=self.registry,
        )

        self.cache_lookups = Counter(
            "ragmesh_cache_lookups",
            "Semantic cache lookups by result (hit, miss)",
            ["result"],
            registry=self.registry,
        )
        self.cache_stores = Counter(
            "ragmesh_cache_stores", "Answers stored in the semantic cache", registry=self.registry
        )
        self.cache_refusals = Counter(
            "ragmesh_cache_refusals",
            "Close cached answers not served, by reason (unreadable, changed)",
            ["reason"],
            registry=self.registry,
        )
        self.cache_errors = Counter(
            "ragmesh_cache_errors", "Lookups that failed (Redis or the access check)", registry=self.registry
        )
        self.cache_invalidations = Counter(
            "ragmesh_cache_invalidations", "Cached answers dropped by a document change", registry=self.registry
        )
        self.cache_cleared = Counter(
            "ragmesh_cache_cleared", "Cached answers dropped by an admin's clear", registry=self.registry
        )
        for result in CACHE_RESULTS.values():  # every series from the start: a rate over a scrape with none is 0
            self.cache_lookups.labels(result)
        for reason in CACHE_REFUSALS:
            self.cache_refusals.labels(reason)

    def cache_counted(self, stat: str, n: int, reason: str) -> None:
        """A semantic cache statistic (cache.SemanticCache's observer)."""
        if stat in CACHE_RESULTS:
            self.cache_lookups.labels(CACHE_RESULTS[stat]).inc(n)
        elif stat == "refused" and reason in CACHE_REFUSALS:
            self.cache_refusals.labels(reason).inc(n)
        elif stat == "stores":
            self.cache_stores.inc(n)
        elif stat == "errors":
            self.cache_errors.inc(n)
        elif stat == "invalidated":
            self.cache_invalidations.inc(n)
        elif stat == "cleared":
            self.cache_cleared.inc(n)

    def stages(self, pipeline: str, records: Iterable[dict[str, Any]]) -> None:
        """Step records (`{"stage", "ms", ...}`): each step's time."""
        for record in records:
            ms = record.get("ms")
            if isinstance(ms, int | float):
                self.steps.labels(pipeline, str(record.get("stage"))).observe(ms / 1000)

    def failed(self, pipeline: str, data: dict[str, Any]) -> None:
        """A step's failure (StepFailed's payload, an `error` event's data)."""
        self.step_failures.labels(pipeline, str(data.get("step")), str(data.get("status"))).inc()
        if data.get("retry_after"):
            self.refusals.inc()

    def event(self, item: dict[str, Any]) -> None:
        """A chat event as it goes out: a step done, or the failure that ends the chat."""
        if item["event"] == "progress" and item["data"].get("status") == "done":
            self.stages("chat", (item["data"],))
        elif item["event"] == "error":
            self.failed("chat", item["data"])

    async def scrape(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None) if isinstance(route, BaseRoute) else None
    return path if isinstance(path, str) else UNMATCHED


class MetricsMiddleware:
    """Counts and times every HTTP request by its route's template (FastAPI puts the matched route in the scope)."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before the response started

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = route_template(scope)
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)
