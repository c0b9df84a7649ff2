"""Entry point: python -m ragmesh_graph."""
from __future__ import annotations

import asyncio

from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_graph.config import Settings
from ragmesh_graph.server import build_service


async def main() -> None:
    setup_logging("graph")
    settings = Settings.from_env()
    setup_telemetry("graph")
    try:
        await build_service(settings).serve_forever()
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    asyncio.run(main())
