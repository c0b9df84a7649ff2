"""Fixtures for the answerer tests: the local model server (llama_cpp.server) and an answerer speaking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from ragmesh_answerer.config import Settings
from ragmesh_answerer.server import build_service
from ragmesh_common.server import GrpcService
from ragmesh_dev.llm_server import LlamaServer


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2-135M, on a free port (loads the model once)."""
    server = LlamaServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture(scope="session")
async def answerer_service(llama_server: LlamaServer) -> AsyncIterator[GrpcService]:
    """An answerer on port 0: greedy decoding, a fixed seed and few tokens so answers are stable and quick."""
    settings = Settings.for_openai(
        llama_server.base_url, port=0, temperature=0.0, seed=7, max_tokens=48, timeout_seconds=120.0
    )
    service = build_service(settings)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()
