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
    from ragmesh_common.testing import local_signer
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()
    # Services started in this process verify internal identity tokens with a key pair made for this run, and
    # a gateway app made here signs with it (the e2e mesh brings its own keys, through the Stack).
    local_signer()
    # The key of the identity assertions PostgreSQL's row-level security verifies (ragmesh_common.rls): the
    # `postgres` fixture's migration stores it, retrievers built in tests sign with it.
    os.environ.setdefault("RETRIEVER_RLS_KEY", secrets.token_hex(32))


@dataclass(frozen=True)
class PostgresInfo:
    owner_dsn: str
    app_dsn: str
    app_role: str
    host: str
    port: int
    rls_key: str  # signs the identity assertions RLS trusts
    traces_dsn: str  # the insert-only traces role (RAG_TRACES_DSN)
    retention_dsn: str  # the trace retention role (GATEWAY_TRACES_RETENTION_DSN)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresInfo]:
    """An embedded PostgreSQL 18 + pgvector with the ragmesh schema; services use the app role."""
    from ragmesh_dev.engines.postgres import EmbeddedPostgres
    from ragmesh_dev.ports import free_port
    from ragmesh_retriever.migrate import apply_schema

    server = EmbeddedPostgres(tmp_path_factory.mktemp("postgres"), free_port())
    server.start()
    password, traces_password, retention_password = (secrets.token_urlsafe(12) for _ in range(3))
    rls_key = os.environ["RETRIEVER_RLS_KEY"]
    # a low retention floor, so tests can prune a few rows (the default keeps a day and 10,000 spans)
    apply_schema(
        server.owner_dsn(),
        "ragmesh_app",
        password,
        384,
        rls_key=rls_key,
        traces_password=traces_password,
        retention_password=retention_password,
        traces_floor_hours=0.1,
        traces_floor_rows=10,
    )
    where = f"{server.host}:{server.port}/{server.database}"
    try:
        yield PostgresInfo(
            owner_dsn=server.owner_dsn(),
            app_dsn=f"postgresql://ragmesh_app:{password}@{where}",
            app_role="ragmesh_app",
            host=server.host,
            port=server.port,
            rls_key=rls_key,
            traces_dsn=f"postgresql://ragmesh_traces:{traces_password}@{where}",
            retention_dsn=f"postgresql://ragmesh_retention:{retention_password}@{where}",
        )
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connectors_dsn(postgres: PostgresInfo) -> str:
    """The connector tables' role (CONNECTORS_DSN). The migration creates it without LOGIN; a password is given
    here once for the session (a role's password is cluster-wide)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    password = secrets.token_urlsafe(12)
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER ROLE ragmesh_connectors LOGIN PASSWORD '{password}'")
    params = conninfo_to_dict(postgres.owner_dsn)
    params.update(user="ragmesh_connectors", password=password)
    return make_conninfo(**params)


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
