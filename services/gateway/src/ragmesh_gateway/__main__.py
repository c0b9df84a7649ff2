"""Entry point: python -m ragmesh_gateway (uvicorn serving the FastAPI app)."""
from __future__ import annotations

import asyncio

import uvicorn

from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_gateway.app import create_app
from ragmesh_gateway.config import Settings


async def main() -> None:
    setup_logging("gateway")
    settings = Settings.from_env()
    setup_telemetry("gateway", instrument_psycopg=False, instrument_redis=True)
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    CeleryInstrumentor().instrument()
    app = create_app(settings)
    # One server span per request: the ASGI "http send"/"http receive" child spans would add one span per
    # streamed SSE event (every token of a chat) to the trace and to rag_traces, and cost the hot path CPU.
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz", exclude_spans=["receive", "send"])
    server = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info",
                                           timeout_graceful_shutdown=10))
    try:
        await server.serve()
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    asyncio.run(main())
