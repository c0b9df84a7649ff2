"""Least privilege in the running local stack: what each process really holds, read from /proc/<pid>/environ.

The unit test (libs/ragmesh_dev/tests/test_devstack_env.py) checks the environment the stack builds; this one
checks the processes that run with it, including a process the supervisor restarted, against the same
expectations: the parser, embedder, reranker and answerer hold no database password (only the insert-only traces
role's), no user-JWT secret, no graph password and no signing key.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from ragmesh_dev.devstack import SERVICES, Stack

pytestmark = pytest.mark.e2e

EXPECTED = {
    "gateway": {"app_password", "jwt_secret", "signing_key", "connectors_password"},
    "ingest-worker": {"signing_key", "connectors_password"},
    "connectors-beat": set(),  # Celery beat: the broker only
    "retriever": {"app_password"},
    "graph": {"neo4j_password"},
    "parser": set(),
    "embedder": set(),
    "reranker": set(),
    "answerer": set(),
    "llm": set(),
}


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.split("=", 1) for entry in raw.decode(errors="replace").split("\0") if "=" in entry)


def held(env: dict[str, str], secrets: dict[str, str]) -> set[str]:
    return {name for name, value in secrets.items() if any(value in v for v in env.values())}


def test_each_running_process_holds_only_its_secrets(mesh: Stack) -> None:
    secrets = {
        "app_password": mesh.secret("postgres_app_password"),
        "owner_password": mesh.postgres.password,
        "jwt_secret": mesh.jwt_secret,
        "neo4j_password": mesh.secret("arcadedb_password"),
        "signing_key": mesh.internal_keys()[0].strip().splitlines()[1],
        "connectors_password": mesh.secret("postgres_connectors_password"),
    }
    assert (
        {p.name for p in mesh.processes}
        == set(EXPECTED)
        == {*SERVICES, "gateway", "ingest-worker", "connectors-beat", "llm"}
    )
    seen = {p.name: held(environ(p.popen.pid), secrets) for p in mesh.processes}
    assert seen == EXPECTED
    traces_password = mesh.secret("postgres_traces_password")
    for process in mesh.processes:
        env = environ(process.popen.pid)
        if process.name not in ("llm", "connectors-beat"):  # neither traces anything
            assert traces_password in env["RAG_TRACES_DSN"], process.name


def test_the_traces_dsn_a_service_holds_can_write_spans_and_read_nothing(mesh: Stack) -> None:
    dsn = environ(next(p for p in mesh.processes if p.name == "parser").popen.pid)["RAG_TRACES_DSN"]
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        for table in ("documents", "chunks", "rag_traces"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT 1 FROM {table} LIMIT 1")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT rag_traces_prune(0.000001, 0, 1000)")
    # and spans do arrive through it: an upload makes the parser (and the rest of the ingestion) write some
    headers = {"Authorization": f"Bearer {mesh.token('lp-user', 'lp-ops', ['employee'])}"}
    with httpx.Client(base_url=mesh.gateway_url, timeout=300) as client:
        reply = client.post(
            "/api/v1/documents",
            headers=headers,
            files={"file": ("spans.md", b"# Spans\n\nThe traces role writes the parser's spans.\n", "text/markdown")},
        )
        assert reply.status_code == 202, reply.text
    deadline = time.monotonic() + 300
    with psycopg.connect(mesh.postgres.owner_dsn()) as conn:
        while not conn.execute("SELECT 1 FROM rag_traces WHERE service = 'parser' LIMIT 1").fetchone():
            assert time.monotonic() < deadline, "no span of the parser in rag_traces"
            conn.commit()
            time.sleep(1)


def test_a_restarted_process_gets_the_same_environment(mesh: Stack) -> None:
    parser = next(p for p in mesh.processes if p.name == "parser")
    before = environ(parser.popen.pid)
    old_pid = parser.popen.pid
    os.kill(old_pid, 9)
    deadline = time.monotonic() + 120
    while parser.popen.pid == old_pid or parser.popen.poll() is not None:
        assert time.monotonic() < deadline, "the supervisor did not restart the parser"
        time.sleep(0.2)
    after = environ(parser.popen.pid)
    for env in (before, after):
        env.pop("PYTEST_CURRENT_TEST", None)  # pytest's, passed on from the test run: the one thing that changes
    assert after == before
