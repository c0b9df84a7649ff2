"""Entry point: python -m ragmesh_parser."""
from __future__ import annotations

import asyncio

from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_parser.config import Settings
from ragmesh_parser.server import build_service


async def main() -> None:
    setup_logging("parser")
    settings = Settings.from_env()
    setup_telemetry("parser")
    try:
        await build_service(settings).serve_forever()
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    asyncio.run(main())
