"""Runs the answerer: `python -m ragmesh_answerer`."""
from __future__ import annotations

import asyncio

from ragmesh_common.logs import setup_logging
from ragmesh_common.telemetry import setup_telemetry

from ragmesh_answerer.config import Settings
from ragmesh_answerer.llm import OllamaChat
from ragmesh_answerer.server import build_service


async def main() -> None:
    setup_logging("answerer")
    settings = Settings.from_env()
    setup_telemetry("answerer", instrument_httpx=True)
    llm = OllamaChat(settings.ollama_host, settings.model, settings.timeout_seconds)
    await build_service(settings, llm).serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
