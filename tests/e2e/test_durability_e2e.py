"""Durability: data outlives a stop (SIGINT, as Ctrl-C on `make run`) and a restart on the same data dir; an upload
the gateway acknowledged outlives a kill -9 of every process of the stack (PostgreSQL durable by default); and a
document whose ingest worker is killed mid-way still ends `ready`, once, with no duplicated chunks."""

from __future__ import annotations

import contextlib
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
    """`make run` as a user runs it: python -m ragmesh_dev.devstack run, stopped with SIGINT (in a session of its
    own, so that killing its process group cannot hit the test run)."""
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
            start_new_session=True,
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


def parent_pids() -> dict[int, int]:
    """pid -> parent pid of every process on the machine (from /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # the command name may hold spaces and parens
        except (OSError, IndexError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    return parents


def stack_pids(root: int, data_dir: Path) -> set[int]:
    """The devstack process, everything it started, and the postmaster (pg_ctl daemonizes it) with its backends."""
    parents = parent_pids()
    roots = {root}
    with contextlib.suppress(OSError, ValueError, IndexError):
        roots.add(int((data_dir / "postgres" / "pgdata" / "postmaster.pid").read_text().split()[0]))
    found = {pid for pid in roots if pid in parents}
    while True:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        if not more:
            return found
        found |= more


def kill_9_everything(process: subprocess.Popen[bytes], data_dir: Path) -> set[int]:
    """SIGKILL to every process group of the stack, the devstack's own first (its supervisor restarts nothing
    after that); again until none of its processes is left. Returns the process groups killed."""
    killed: set[int] = set()
    mine = os.getpgid(0)
    deadline = time.monotonic() + 60
    while pids := stack_pids(process.pid, data_dir):
        assert time.monotonic() < deadline, f"still alive after kill -9: {pids}"
        groups = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                groups.append(os.getpgid(pid))
        for group in sorted(set(groups), key=lambda g: g != process.pid):
            assert group != mine, "the stack shares the test run's process group"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
            killed.add(group)
        process.poll()  # reaps the devstack process once it is gone
        time.sleep(0.2)
    return killed


def wait_ready(client: httpx.Client, token: str, document_id: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = client.get(f"/api/v1/documents/{document_id}", headers=auth(token)).json()
        if doc["status"] in ("ready", "failed"):
            return doc
        time.sleep(0.5)
    raise AssertionError(f"document {document_id} not ready after {timeout}s")


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
                "MATCH (c:Chunk)-[:MENTIONS]->(e:Entity) RETURN c.document_id AS d, count(DISTINCT e) AS n"
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


def test_an_acknowledged_upload_survives_kill_9_of_the_whole_stack(tmp_path: Path, ports: dict[str, int]) -> None:
    data_dir = tmp_path / "killed"
    data_dir.mkdir()
    view = Stack(data_dir, ports=ports, supervise=False)  # reads the same secrets; starts nothing
    alice = view.token("alice", "eng", ["employee"])
    process = run_stack(data_dir, ports)
    try:
        with psycopg.connect(view.postgres.owner_dsn()) as conn:
            settings = dict(
                conn.execute(
                    "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit')"
                ).fetchall()
            )
        assert settings == {"fsync": "on", "synchronous_commit": "on"}
        with httpx.Client(base_url=view.gateway_url, timeout=300) as client:
            document_id = upload(client, alice, ALICE_MD)  # 202: acknowledged
            groups = kill_9_everything(process, data_dir)
    except BaseException:
        kill_9_everything(process, data_dir)
        raise
    assert len(groups) >= 3, groups  # the devstack's own, the postmaster's, and the services' sessions
    deadline = time.monotonic() + 60
    while left := [name for name, port in ports.items() if port_open("127.0.0.1", port)]:
        assert time.monotonic() < deadline, f"still listening after kill -9: {left}"
        time.sleep(0.5)

    process = run_stack(data_dir, ports)
    try:
        with httpx.Client(base_url=view.gateway_url, timeout=300) as client:
            reply = client.get(f"/api/v1/documents/{document_id}", headers=auth(alice))
            assert reply.status_code == 200, f"the acknowledged upload is gone: {reply.text}"
            doc = wait_ready(client, alice, document_id)
            assert doc["status"] == "ready", doc
            assert doc["chunk_count"] > 0
            found = client.post(
                "/api/v1/search",
                headers=auth(alice),
                json={
                    "query": "When was IBM founded?",
                    "document_ids": [document_id],
                    "top_k": 3,
                    "relevance_gate": False,
                    "rerank": False,
                },
            )
            assert found.status_code == 200, found.text
            assert found.json()["results"], "the document is ready but its chunks are not searchable"
    finally:
        stop_stack(process, ports)


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
