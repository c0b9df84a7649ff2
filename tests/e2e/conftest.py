"""The whole mesh started once for the end-to-end tests: separate processes, real ports, embedded engines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
from ragmesh_dev.ports import free_port


@pytest.fixture(scope="session")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data = tmp_path_factory.mktemp("mesh")
    ports = {name: free_port() for name in DEFAULT_PORTS}
    stack = Stack(data, ports=ports, extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "1000", "LOG_LEVEL": "INFO"})
    try:
        stack.start(timeout=420)
    except Exception:
        for log in sorted(Path(data, "logs").glob("*.log")):
            print(f"==== {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        raise
    yield stack
    stack.stop()
