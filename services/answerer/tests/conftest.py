"""Fixtures for the answerer tests: the embedded model server and an answerer speaking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from ragmesh_answerer.config import Settings
from ragmesh_answerer.server import build_service
from ragmesh_common.server import GrpcService
from ragmesh_dev.local_ollama import InProcessServer


@pytest.fixture(scope="session")
def local_ollama() -> Iterator[InProcessServer]:
    """The llama.cpp stand-in for Ollama, in-process on a free port (loads the 135M model once)."""
    server = InProcessServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture(scope="session")
async def answerer_service(local_ollama: InProcessServer) -> AsyncIterator[GrpcService]:
    """An answerer on port 0: greedy decoding, a fixed seed and few tokens so answers are stable and quick."""
    settings = Settings.defaults(
        local_ollama.url, port=0, temperature=0.0, seed=7, max_tokens=48, timeout_seconds=120.0
    )
    service = build_service(settings)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()
