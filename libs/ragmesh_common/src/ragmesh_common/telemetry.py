"""OpenTelemetry setup shared by every service, and the span exporter to PostgreSQL `rag_traces`.

Only standard `OTEL_*` variables plus `RAG_TRACES_DSN` configure it:
- `OTEL_SERVICE_NAME` overrides the service name;
- `OTEL_TRACES_EXPORTER`: a comma-separated list of `otlp`, `console`, `none`. Unset, it is `otlp` when an OTLP
  endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), else none;
- `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` (default, port 4317) or
  `http/protobuf` (port 4318, `/v1/traces` appended to the generic endpoint). The exporters read the endpoints,
  `_HEADERS`, `_TIMEOUT`, `_COMPRESSION`, `_CERTIFICATE` and `_INSECURE` variables themselves, per signal first;
- `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` puts the prompt and the answer on the model span
  (`gen_ai.input.messages`, OpenInference `input.value`/`output.value`) and the retrieved text on the retrieval
  span. Off by default: a trace store then holds document content, readable by whoever reads the traces;
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

from ragmesh_common import attributes

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


EXPORTERS = ("otlp", "console", "none")
PROTOCOLS = ("grpc", "http/protobuf")


def _env(*names: str) -> str:
    """The first of `names` that is set (a per-signal variable before the generic one)."""
    return next((value.strip() for name in names if (value := os.environ.get(name, "")).strip()), "")


def standard_exporters() -> list[SpanExporter]:
    """The span exporters the standard OTEL_* variables ask for (module docstring); a bad value exits naming it."""
    chosen = _env("OTEL_TRACES_EXPORTER").lower()
    if not chosen:
        chosen = "otlp" if _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") else "none"
    names = [n.strip() for n in chosen.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXPORTERS]
    if unknown:
        raise SystemExit(f"OTEL_TRACES_EXPORTER: {unknown} not supported; use {', '.join(EXPORTERS)}")
    exporters: list[SpanExporter] = []
    if "otlp" in names:
        protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL").lower() or "grpc"
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

            exporters.append(GrpcExporter())
        elif protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

            exporters.append(HttpExporter())
        else:
            raise SystemExit(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} not supported; use {' or '.join(PROTOCOLS)}")
    if "console" in names:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporters.append(ConsoleSpanExporter())
    return exporters


def capture_content() -> bool:
    """OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: prompts, answers and retrieved text on spans (off)."""
    return _env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").lower() == "true"


def llm_content_attributes(messages: Sequence[dict[str, str]]) -> dict[str, str]:
    """The prompt, as GenAI and OpenInference attributes, when content capture is on; nothing otherwise."""
    if not capture_content():
        return {}
    text = json.dumps([{"role": m.get("role", ""), "content": m.get("content", "")} for m in messages])
    return {
        attributes.GEN_AI_INPUT_MESSAGES: text,
        attributes.OI_INPUT_VALUE: text,
        attributes.OI_INPUT_MIME_TYPE: "application/json",
    }


def llm_output_attributes(text: str) -> dict[str, str]:
    """The model's answer, as GenAI and OpenInference attributes, when content capture is on; nothing otherwise."""
    if not capture_content() or not text:
        return {}
    return {
        attributes.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "content": text}]),
        attributes.OI_OUTPUT_VALUE: text,
    }


def token_attributes(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """A generation's token counts in OpenInference's names (the gen_ai.usage.* ones are set beside them)."""
    return {
        attributes.OI_LLM_TOKENS_PROMPT: prompt_tokens,
        attributes.OI_LLM_TOKENS_COMPLETION: completion_tokens,
        attributes.OI_LLM_TOKENS_TOTAL: prompt_tokens + completion_tokens,
    }


RETRIEVAL_DOCUMENTS_ON_SPAN = 20  # the best-ranked results a retrieval span lists (attributes stay bounded)


def retrieval_attributes(query: str, documents: Sequence[tuple[str, str, float, str]]) -> dict[str, str | float]:
    """OpenInference attributes of a retrieval span: its kind and the best documents' ids and scores (`documents`:
    chunk id, document id, score, text), the query and the chunks' text only with content capture on."""
    content = capture_content()
    found: dict[str, str | float] = {attributes.OI_SPAN_KIND: "RETRIEVER"}
    if content:
        found[attributes.OI_INPUT_VALUE] = query
    for i, (chunk_id, document_id, score, text) in enumerate(documents[:RETRIEVAL_DOCUMENTS_ON_SPAN]):
        found[attributes.retrieval_document(i, "id")] = chunk_id
        found[attributes.retrieval_document(i, "score")] = float(score)
        found[attributes.retrieval_document(i, "metadata")] = json.dumps({"document_id": document_id})
        if content:
            found[attributes.retrieval_document(i, "content")] = text
    return found


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
    exporters = standard_exporters()
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=delay))
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
        "telemetry for %s: postgres=%s exporters=%s", name, bool(dsn), [type(e).__name__ for e in exporters] or "none"
    )
    return provider


def shutdown_telemetry() -> None:
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()
