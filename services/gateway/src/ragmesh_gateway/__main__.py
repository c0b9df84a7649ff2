"""Entry point: python -m ragmesh_gateway (uvicorn serving the FastAPI app)."""

from __future__ import annotations

import uvicorn

from ragmesh_common.logs import setup_logging
from ragmesh_common.server import run_event_loop
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_gateway.app import create_app
from ragmesh_gateway.config import Settings


async def main() -> None:
    setup_logging("gateway")
    settings = Settings.from_env()
    setup_telemetry("gateway", instrument_psycopg=False, instrument_redis=True)
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    CeleryInstrumentor().instrument()
    app = create_app(
        settings
    )  # reads RAGMESH_INTERNAL_SIGNING_KEY (failing fast without it); HTTP server spans: FastAPI's own OpenTelemetry support (see create_app)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level="info",
            log_config=None,  # uvicorn's loggers (the access log too) go through setup_logging's handler and format
            timeout_graceful_shutdown=10,
            h11_max_incomplete_event_size=settings.max_header_bytes,
        )
    )
    try:
        await server.serve()
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    run_event_loop(main())
