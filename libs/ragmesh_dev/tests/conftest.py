"""Fixtures for the development package's tests: the local model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragmesh_dev.local_ollama import InProcessServer


@pytest.fixture(scope="session")
def local_ollama() -> Iterator[InProcessServer]:
    """The llama.cpp stand-in for Ollama, in-process on a free port (loads the 135M model once)."""
    server = InProcessServer().start()
    try:
        yield server
    finally:
        server.stop()
