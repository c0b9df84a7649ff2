"""Least privilege in the local stack: each process holds exactly the secrets it uses.

The expected table is written out here on its own (not read from devstack.PROCESS_SECRETS): a change to who holds
a secret has to be made in both places. The check looks at secret *values*, so a secret that slips into another
variable (a DSN, a URL) or comes in from the shell that starts the stack is caught too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ragmesh_dev.devstack import DEFAULT_PORTS, PROCESS_SECRETS, SERVICES, Stack

PORTS = {name: 1 for name in DEFAULT_PORTS}  # nothing here listens

# process -> the secrets it may hold (by what they are, not by variable name)
EXPECTED = {
    "gateway": {"traces_dsn", "app_dsn", "jwt_secret", "signing_key", "redis_password", "connectors_dsn"},
    "ingest-worker": {"traces_dsn", "signing_key", "redis_password", "connectors_dsn"},
    "connectors-beat": {"redis_password"},
    "retriever": {"traces_dsn", "app_dsn"},
    "graph": {"traces_dsn", "neo4j_password"},
    "parser": {"traces_dsn"},
    "embedder": {"traces_dsn"},
    "reranker": {"traces_dsn"},
    "answerer": {"traces_dsn"},
    "llm": set(),
}


def secrets_of(stack: Stack) -> dict[str, str]:
    """Each secret of the stack by what it is; the app password stands for the app DSN (it is its secret part)."""
    return {
        "app_dsn": stack.secret("postgres_app_password"),
        "jwt_secret": stack.jwt_secret,
        "neo4j_password": stack.secret("arcadedb_password"),
        "redis_password": stack.secret("redis_password"),
        "connectors_dsn": stack.secret("postgres_connectors_password"),
        "signing_key": stack.internal_keys()[0].strip().splitlines()[1],  # a line of the private key's body
        "caller_key": stack.caller_keys()[0].strip().splitlines()[1],  # the dev caller's: no process holds it
        "postgres_owner_password": "",  # filled in below: the owner's password must reach no process at all
    }


def held(env: dict[str, str], secrets: dict[str, str]) -> set[str]:
    return {name for name, value in secrets.items() if value and any(value in v for v in env.values())}


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Stack:
    stack = Stack(tmp_path, ports=PORTS, supervise=False)
    # a shell that has every secret exported: none of them may pass through to a process that does not hold it
    monkeypatch.setenv("GATEWAY_JWT_SECRET", stack.jwt_secret)
    monkeypatch.setenv("RETRIEVER_DATABASE_URL", stack.app_dsn)
    monkeypatch.setenv("NEO4J_PASSWORD", stack.secret("arcadedb_password"))
    monkeypatch.setenv("RAGMESH_INTERNAL_SIGNING_KEY", stack.internal_keys()[0])
    monkeypatch.setenv("RAGMESH_OWNER_DSN", "postgresql://postgres:owner-secret@127.0.0.1:1/ragmesh")
    return stack


def test_every_process_holds_exactly_the_secrets_it_uses(stack: Stack) -> None:
    secrets = {**secrets_of(stack), "postgres_owner_password": "owner-secret"}
    assert set(EXPECTED) == {*SERVICES, "gateway", "ingest-worker", "connectors-beat", "llm"} == set(PROCESS_SECRETS)
    report = {}
    for process in EXPECTED:
        env = stack.env(process)
        report[process] = held(env, secrets)
        assert ("traces_dsn" in EXPECTED[process]) == ("RAG_TRACES_DSN" in env), process
        # every process still knows where the others are and how to check their tokens
        assert env["RAGMESH_INTERNAL_PUBLIC_KEY"].startswith("-----BEGIN PUBLIC KEY-----")
        assert env["RETRIEVER_ADDR"] == stack.addr("retriever")
    assert report == {p: expected - {"traces_dsn"} for p, expected in EXPECTED.items()}


def test_a_process_the_table_does_not_name_holds_no_secret(stack: Stack) -> None:
    secrets = {**secrets_of(stack), "postgres_owner_password": "owner-secret"}
    for process in ("", "some-tool", "flaky"):
        env = stack.env(process)
        assert held(env, secrets) == set(), process
        assert "RAG_TRACES_DSN" not in env


def test_extra_env_overrides_settings_everywhere_and_secrets_only_where_held(tmp_path: Path) -> None:
    stack = Stack(
        tmp_path,
        ports=PORTS,
        supervise=False,
        extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "1000", "NEO4J_PASSWORD": "other-password"},
    )
    assert stack.env("parser")["GATEWAY_RATE_LIMIT_PER_MINUTE"] == "1000"
    assert stack.env("graph")["NEO4J_PASSWORD"] == "other-password"
    assert "other-password" not in stack.env("parser").values()
    assert "NEO4J_PASSWORD" not in stack.env("gateway")


def test_the_traces_dsn_is_not_the_app_dsn_by_accident(stack: Stack) -> None:
    """Span writers use TRACES_ROLE's DSN (RAG_TRACES_DSN); the processes without a database get nothing else."""
    for process in ("parser", "embedder", "reranker", "answerer", "ingest-worker", "graph"):
        env = stack.env(process)
        assert env["RAG_TRACES_DSN"] == stack.traces_dsn
        assert "RETRIEVER_DATABASE_URL" not in env and "GATEWAY_TRACES_DSN" not in env


def test_the_traces_role_writes_spans_and_reads_or_erases_nothing(postgres: Any) -> None:
    """What a process holding only RAG_TRACES_DSN can do with it: insert spans, nothing else."""
    import psycopg

    from ragmesh_common.telemetry import write_rows

    dsn = postgres.traces_dsn  # the role the migration (apply_schema) creates
    row = ("a" * 32, "b" * 16, None, "probe", "parser", "internal", None, None, None, "ok", "", "{}", "[]")
    with psycopg.connect(dsn, autocommit=True) as conn:
        write_rows(conn, [(*row[:6], datetime.now(UTC), *row[7:])])
        for statement in (
            "SELECT count(*) FROM rag_traces",
            "DELETE FROM rag_traces",
            "SELECT count(*) FROM documents",
            "SELECT count(*) FROM chunks",
            "SELECT rag_traces_prune(0.000001, 0, 1000)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    with psycopg.connect(postgres.owner_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM rag_traces WHERE span_id = %s", ("b" * 16,)).fetchone() == (1,)


def test_dev_mtls_gives_each_service_its_own_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography import x509

    monkeypatch.setenv("RAGMESH_TLS_KEY", "/somewhere/else.key")  # never inherited: each process has its own
    stack = Stack(tmp_path, ports=PORTS, supervise=False, mtls=True)
    seen = {}
    for process in (*SERVICES, "gateway", "ingest-worker"):
        env = stack.env(process)
        cert = x509.load_pem_x509_certificate(Path(env["RAGMESH_TLS_CERT"]).read_bytes())
        assert f"CN={process}" in cert.subject.rfc4514_string()
        assert Path(env["RAGMESH_TLS_KEY"]).stat().st_mode & 0o077 == 0, "a private key readable by others"
        seen[process] = env["RAGMESH_TLS_KEY"]
        ca = x509.load_pem_x509_certificate(Path(env["RAGMESH_TLS_CA"]).read_bytes())
        cert.verify_directly_issued_by(ca)
    assert len(set(seen.values())) == len(seen)
    assert not any(k.startswith("RAGMESH_TLS_") for k in stack.env("llm"))
    assert not any(k.startswith("RAGMESH_TLS_") for k in Stack(tmp_path, ports=PORTS, mtls=False).env("parser"))


def test_the_embedded_postgres_is_durable_unless_told_otherwise(postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from ragmesh_dev.engines.postgres import EmbeddedPostgres

    with psycopg.connect(postgres.owner_dsn) as conn:
        assert conn.execute("SHOW fsync").fetchone() == ("on",)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
    monkeypatch.setenv("POSTGRES_DURABLE", "false")
    assert EmbeddedPostgres(Path("/nonexistent"), 1).durable is False
    monkeypatch.setenv("POSTGRES_DURABLE", "maybe")
    with pytest.raises(SystemExit, match="POSTGRES_DURABLE must be true or false"):
        EmbeddedPostgres(Path("/nonexistent"), 1)


def test_the_graph_engines_heap_comes_from_the_environment_and_bad_sizes_are_refused() -> None:
    from ragmesh_dev.devstack import ARCADEDB_HEAP, arcadedb_heap

    assert arcadedb_heap({}) == ARCADEDB_HEAP == "512m"
    assert arcadedb_heap({"RAGMESH_ARCADEDB_HEAP": "3g"}) == "3g"
    with pytest.raises(ValueError, match="RAGMESH_ARCADEDB_HEAP"):
        arcadedb_heap({"RAGMESH_ARCADEDB_HEAP": "lots"})
