"""OpenTelemetry setup shared by every service, and the span exporter to PostgreSQL `rag_traces`.

Only standard `OTEL_*` variables plus `RAG_TRACES_DSN` configure it:
- `OTEL_SERVICE_NAME` overrides the service name;
- `OTEL_EXPORTER_OTLP_ENDPOINT` adds an OTLP exporter (production: the collector);
- `RAG_TRACES_DSN` adds the PostgreSQL exporter (table `rag_traces`), as the insert-only `ragmesh_traces`
  role: it may insert spans and nothing else (sql/traces.sql);
- `OTEL_SDK_DISABLED=true` turns tracing off.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, service, kind, start_time, end_time, duration_ms, "
    "status_code, status_message, attributes, events"
)
# A batch goes in as one INSERT of arrays unnested on the server: one statement and one round trip, the
# rows parsed in bulk. Not COPY: `rag_traces` is under row-level security (only admins read it), and COPY
# FROM refuses such a table. ON CONFLICT skips a span already stored (an export retried after its commit
# was lost); it names no conflict target, because a target needs SELECT on the table, which the policy
# applies to the new rows, and writers may not read. `_INSERT` is the same for one row.
_INSERT = f"""
INSERT INTO rag_traces ({_COLUMNS})
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT DO NOTHING
"""
_INSERT_BATCH = f"""
INSERT INTO rag_traces ({_COLUMNS})
SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[],
                     %s::timestamptz[], %s::float8[], %s::text[], %s::text[], %s::jsonb[], %s::jsonb[])
ON CONFLICT DO NOTHING
"""


def _ts(ns: int | None) -> datetime | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _jsonable(value: object) -> object:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def span_row(span: ReadableSpan) -> tuple[object, ...]:
    ctx = span.get_span_context()
    assert ctx is not None
    parent = span.parent
    start, end = span.start_time, span.end_time
    duration = (end - start) / 1e6 if start is not None and end is not None else None
    attrs = {k: _jsonable(v) for k, v in (span.attributes or {}).items()}
    events = [
        {
            "name": e.name,
            "time": ts.isoformat() if (ts := _ts(e.timestamp or None)) else None,
            "attributes": {k: _jsonable(v) for k, v in (e.attributes or {}).items()},
        }
        for e in span.events
    ]
    service = str(span.resource.attributes.get("service.name", "unknown"))
    return (
        format(ctx.trace_id, "032x"),
        format(ctx.span_id, "016x"),
        format(parent.span_id, "016x") if parent is not None else None,
        span.name,
        service,
        span.kind.name.lower(),
        _ts(start),
        _ts(end),
        duration,
        span.status.status_code.name.lower(),
        span.status.description or "",
        json.dumps(attrs),
        json.dumps(events),
    )


def write_rows(conn: psycopg.Connection[Any], rows: Sequence[tuple[object, ...]]) -> None:
    """Stores span rows on an autocommit connection in one statement, skipping spans already stored."""
    if rows:
        conn.execute(_INSERT_BATCH, [list(column) for column in zip(*rows, strict=True)])


class PostgresSpanExporter(SpanExporter):
    """Writes finished spans to the `rag_traces` table (one row per span)."""

    def __init__(self, dsn: str, connect_timeout: float = 5.0) -> None:
        self._dsn = dsn
        self._timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def _connection(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._dsn, connect_timeout=int(self._timeout), autocommit=True)
        return self._conn

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        rows = [span_row(s) for s in spans]
        with self._lock, suppress_instrumentation():
            try:
                conn = self._connection()
                write_rows(conn, rows)
                return SpanExportResult.SUCCESS
            except Exception:  # telemetry must never break the service
                logger.warning("could not write %d spans to rag_traces", len(rows), exc_info=True)
                if self._conn is not None:
                    with contextlib.suppress(Exception):  # the connection is broken; closing it may fail too
                        self._conn.close()
                    self._conn = None
                return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def setup_telemetry(
    service_name: str,
    *,
    instrument_grpc: bool = True,
    instrument_psycopg: bool = False,
    instrument_httpx: bool = False,
    instrument_redis: bool = False,
) -> TracerProvider | None:
    """Installs the global tracer provider with the configured exporters and instrumentations."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    provider = TracerProvider(resource=Resource.create({"service.name": name, "service.namespace": "ragmesh"}))
    delay = int(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", "1000"))
    dsn = os.environ.get("RAG_TRACES_DSN")
    if dsn:
        provider.add_span_processor(BatchSpanProcessor(PostgresSpanExporter(dsn), schedule_delay_millis=delay))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    if instrument_grpc:
        from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient, GrpcAioInstrumentorServer, filters

        # health probes every few seconds would bury the request traces
        GrpcAioInstrumentorServer(filter_=filters.negate(filters.health_check())).instrument()
        GrpcAioInstrumentorClient(filter_=filters.negate(filters.health_check())).instrument()
    if instrument_psycopg:
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        PsycopgInstrumentor().instrument(enable_commenter=False)
    if instrument_httpx:
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor().instrument()
    if instrument_redis:
        from opentelemetry.instrumentation.redis import RedisInstrumentor

        RedisInstrumentor().instrument()
    logger.info(
        "telemetry for %s: postgres=%s otlp=%s", name, bool(dsn), bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    )
    return provider


def shutdown_telemetry() -> None:
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()
