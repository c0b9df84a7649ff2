"""Fixtures shared by every test folder: real embedded engines, started once per session when asked for."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_DATA = Path(__file__).resolve().parent.parent / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    """`kill` of a test run (SIGTERM) interrupts it like Ctrl-C: fixtures are torn down, so the embedded engines
    and the e2e mesh, which run in sessions of their own, stop with it. And a test key pair for internal identity."""
    from ragmesh_common.tokens import use_local_keys
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()
    # Services started in this process verify internal identity tokens with a key pair made for this run, and
    # UserContext.metadata() signs with it (the e2e mesh brings its own keys, through the Stack).
    use_local_keys("test")


@dataclass(frozen=True)
class PostgresInfo:
    owner_dsn: str
    app_dsn: str
    app_role: str
    host: str
    port: int


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresInfo]:
    """An embedded PostgreSQL 18 + pgvector with the ragmesh schema; services use the app role."""
    from ragmesh_dev.engines.postgres import EmbeddedPostgres
    from ragmesh_dev.ports import free_port
    from ragmesh_retriever.migrate import apply_schema

    server = EmbeddedPostgres(tmp_path_factory.mktemp("postgres"), free_port())
    server.start()
    password = secrets.token_urlsafe(12)
    apply_schema(server.owner_dsn(), "ragmesh_app", password, 384)
    try:
        yield PostgresInfo(
            owner_dsn=server.owner_dsn(),
            app_dsn=f"postgresql://ragmesh_app:{password}@{server.host}:{server.port}/{server.database}",
            app_role="ragmesh_app",
            host=server.host,
            port=server.port,
        )
    finally:
        server.stop()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared evaluation data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port nothing listens on, held by this process for the test (no other process can take it)."""
    from ragmesh_dev.ports import refused_port as hold

    with hold() as port:
        yield port
