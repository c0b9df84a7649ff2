"""Durability: data outlives a stop (SIGINT, as Ctrl-C on `make run`) and a restart on the same data dir, and a
document whose ingest worker is killed mid-way still ends `ready`, once, with no duplicated chunks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import neo4j
import psycopg
import pytest

from ragmesh_dev.devstack import DEFAULT_PORTS, PORT_VARS, Stack
from ragmesh_dev.ports import free_port, port_open

from .conftest import DOCS, auth, wait_document

pytestmark = pytest.mark.e2e

ALICE_MD = DOCS / "md" / "sources" / "wiki.md"
BOB_DOCX = DOCS / "docx" / "sources" / "textbox.docx"
SLOW_PDF = DOCS / "pdf" / "sources" / "normal_4pages.pdf"  # parsing takes long enough to kill the worker in it
START_SECONDS = 420.0

if not DOCS.is_dir():
    pytest.skip(f"shared documents not found at {DOCS}", allow_module_level=True)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("durable")


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {name: free_port() for name in DEFAULT_PORTS}


def run_stack(data_dir: Path, ports: dict[str, int]) -> subprocess.Popen[bytes]:
    """`make run` as a user runs it: python -m ragmesh_dev.devstack run, stopped with SIGINT."""
    env = {
        **os.environ,
        **{PORT_VARS[name]: str(port) for name, port in ports.items()},
        "GATEWAY_RATE_LIMIT_PER_MINUTE": "1000",
    }
    out = data_dir / "devstack.out"
    offset = out.stat().st_size if out.exists() else 0
    with out.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "ragmesh_dev.devstack", "run", "--data-dir", str(data_dir)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + START_SECONDS
    # the banner, not /readyz: the gateway is ready to chat before the parser (uploads) has warmed up
    while time.monotonic() < deadline:
        assert process.poll() is None, out.read_text()[-3000:]
        if "ragmesh is up." in out.read_text(errors="replace")[offset:]:
            return process
        time.sleep(1)
    process.send_signal(signal.SIGINT)
    process.wait(120)
    raise AssertionError(f"the stack was not ready after {START_SECONDS:.0f}s")


def stop_stack(process: subprocess.Popen[bytes], ports: dict[str, int]) -> None:
    process.send_signal(signal.SIGINT)
    assert process.wait(180) == 0
    left = [name for name, port in ports.items() if port_open("127.0.0.1", port)]
    assert not left, f"still listening after the stop: {left}"


def upload(client: httpx.Client, token: str, path: Path, acl: str = "") -> str:
    with path.open("rb") as fh:
        reply = client.post(
            "/api/v1/documents",
            headers=auth(token),
            files={"file": (path.name, fh)},
            data={"acl": acl} if acl else None,
        )
    assert reply.status_code == 202, reply.text
    return str(reply.json()["document_id"])


def snapshot(stack: Stack, client: httpx.Client, tokens: dict[str, str]) -> dict[str, Any]:
    """Everything that must survive: documents as each user sees them (status, chunk count, ACL), chunk rows,
    graph entities per document, and the stored traces."""
    seen: dict[str, Any] = {}
    for user, token in tokens.items():
        docs = client.get("/api/v1/documents", headers=auth(token)).json()["documents"]
        seen[f"documents:{user}"] = sorted(
            (
                d["document_id"],
                d["status"],
                d["chunk_count"],
                tuple(sorted(d["acl"].get("departments", []))),
                tuple(sorted(d["acl"].get("users", []))),
            )
            for d in docs
        )
    with psycopg.connect(stack.postgres.owner_dsn()) as conn:
        seen["chunks"] = conn.execute("SELECT document_id::text, count(*) FROM chunks GROUP BY 1 ORDER BY 1").fetchall()
        seen["traces"] = {row[0] for row in conn.execute("SELECT DISTINCT trace_id FROM rag_traces")}
    with (
        neo4j.GraphDatabase.driver(
            f"bolt://127.0.0.1:{stack.ports['arcadedb_bolt']}", auth=("root", stack.secret("arcadedb_password"))
        ) as driver,
        driver.session(database="ragmesh") as session,
    ):
        seen["entities"] = sorted(
            tuple(r.values())
            for r in session.run(
                "MATCH (e:Entity)-[:MENTIONED_IN]->(c:Chunk) RETURN c.document_id AS d, count(DISTINCT e) AS n"
            )
        )
    return seen


@pytest.fixture(scope="module")
def tokens(data_dir: Path, ports: dict[str, int]) -> dict[str, str]:
    keys = Stack(data_dir, ports=ports, supervise=False)
    return {
        "alice": keys.token("alice", "eng", ["employee"]),
        "bob": keys.token("bob", "hr", ["employee"]),
        "admin": keys.token("root-admin", "it", ["admin"]),
    }


def test_everything_survives_a_stop_and_restart(data_dir: Path, ports: dict[str, int], tokens: dict[str, str]) -> None:
    process = run_stack(data_dir, ports)
    view = Stack(data_dir, ports=ports, supervise=False)  # reads the same secrets; starts nothing
    try:
        with httpx.Client(base_url=view.gateway_url, timeout=300) as client:
            alice = upload(client, tokens["alice"], ALICE_MD)
            bob = upload(client, tokens["bob"], BOB_DOCX, acl='{"departments": ["hr"], "users": ["alice"]}')
            for token, document_id in ((tokens["alice"], alice), (tokens["bob"], bob)):
                assert wait_document(client, token, document_id)["status"] == "ready"
            assert (
                client.post(
                    "/api/v1/chat",
                    headers=auth(tokens["alice"]),
                    json={"question": "When was IBM founded?", "max_tokens": 16},
                ).status_code
                == 200
            )
            time.sleep(3)  # the span exporters flush every 0.5 s
            before = snapshot(view, client, tokens)
    finally:
        stop_stack(process, ports)
    assert len(before["documents:alice"]) == 2 and len(before["documents:bob"]) == 1
    assert before["traces"] and before["entities"]

    process = run_stack(data_dir, ports)
    try:
        with httpx.Client(base_url=view.gateway_url, timeout=300) as client:
            after = snapshot(view, client, tokens)
    finally:
        stop_stack(process, ports)
    # spans still in the exporters' queues at the snapshot land later (the stop flushes them): more, never fewer
    assert before.pop("traces") <= after.pop("traces")
    assert after == before


@pytest.fixture(scope="module")
def stack(data_dir: Path, ports: dict[str, int]) -> Iterator[Stack]:
    stack = Stack(data_dir, ports=ports, extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "1000"})
    try:
        stack.start(timeout=START_SECONDS)
        yield stack
    finally:
        stack.stop()


def test_worker_killed_mid_document(stack: Stack, tokens: dict[str, str]) -> None:
    with httpx.Client(base_url=stack.gateway_url, timeout=300) as client:
        document_id = upload(client, tokens["alice"], SLOW_PDF)
        deadline = time.monotonic() + 300
        while (
            client.get(f"/api/v1/documents/{document_id}", headers=auth(tokens["alice"])).json()["status"] == "queued"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        worker = stack.process("ingest-worker").popen
        status = client.get(f"/api/v1/documents/{document_id}", headers=auth(tokens["alice"])).json()["status"]
        assert status in ("parsing", "embedding", "indexing"), status  # mid-document
        worker.kill()
        doc = wait_document(client, tokens["alice"], document_id)
    assert doc["status"] == "ready", doc
    assert any(r["name"] == "ingest-worker" for r in stack.restarts)
    with psycopg.connect(stack.postgres.owner_dsn()) as conn:
        total, distinct, _paragraphs = conn.execute(
            "SELECT count(*), count(DISTINCT (level, ordinal, text)), count(*) FILTER (WHERE level = 3) "
            "FROM chunks WHERE document_id = %s",
            (document_id,),
        ).fetchone()
    assert total > 0 and total == distinct, "duplicated chunks"
    assert doc["chunk_count"] > 0
