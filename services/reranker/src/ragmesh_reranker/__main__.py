"""Entry point: python -m ragmesh_reranker."""
from __future__ import annotations

import asyncio
import os

from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_reranker.config import Settings
from ragmesh_reranker.server import build_service


async def main() -> None:
    setup_logging("reranker")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    settings = Settings.from_env()
    setup_telemetry("reranker")
    service, _ = build_service(settings)
    try:
        await service.serve_forever()
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    asyncio.run(main())
