"""One logging setup for every process (the services, the gateway with uvicorn's access log, the ingest worker):
level from LOG_LEVEL, one line per record, the format from RAGMESH_LOG_FORMAT:

- `text` (default): `2026-01-01 12:00:00,000 INFO retriever ragmesh_retriever.server: ... trace_id=... span_id=...`
- `json`: one JSON object per line: `time` (ISO 8601, UTC), `level`, `service`, `logger`, `message`, `trace_id`,
  `span_id` (both "" outside a span), and `exception` (the traceback) when there is one.

The trace and span ids come from OpenTelemetry's logging instrumentation (opentelemetry-instrumentation-logging:
its record factory puts the current span's ids on every record), so a log line leads to its trace in the
dashboard or any tracing backend, and back.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime

from opentelemetry.instrumentation.logging import LoggingInstrumentor

FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON (trace ids from the instrumentation's record attributes)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": _trace_field(record, "otelTraceID"),
            "span_id": _trace_field(record, "otelSpanID"),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__(f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        trace_id = _trace_field(record, "otelTraceID")
        return f"{text} trace_id={trace_id} span_id={_trace_field(record, 'otelSpanID')}" if trace_id else text


def _trace_field(record: logging.LogRecord, name: str) -> str:
    value = str(getattr(record, name, "") or "")
    return "" if value.strip("0") == "" else value  # the instrumentation writes "0" outside a span


def log_format() -> str:
    choice = os.environ.get("RAGMESH_LOG_FORMAT", "text").strip().lower() or "text"
    if choice not in FORMATS:
        raise SystemExit(f"RAGMESH_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {choice!r}")
    return choice


def formatter(service: str) -> logging.Formatter:
    return JsonFormatter(service) if log_format() == "json" else TextFormatter(service)


def setup_logging(service: str) -> None:
    """Replaces the root logger's handlers with one stderr handler in the configured format. Libraries that log
    through their own loggers (uvicorn started with `log_config=None`, Celery with its logging signal handled)
    reach the root handler and come out in the same format."""
    level = os.environ.get("LOG_LEVEL", "INFO").upper()
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(service))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    instrumentor = LoggingInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        # ids only: no OpenTelemetry log handler (the logs go to stderr, where the platform collects them)
        instrumentor.instrument(inject_trace_context=True, enable_log_auto_instrumentation=False)
