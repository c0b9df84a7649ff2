"""Bulk ingestion through `ragmesh ingest` against the real mesh: a run of a few hundred small files interrupted
with Ctrl-C (SIGINT) midway stops cleanly (exit code 130, a summary, no traceback), and the same command run
again finishes it: the files already ingested are skipped by content hash, none is uploaded twice, none is lost.
The lookup behind it (POST /api/v1/documents/lookup) answers only for documents the caller may read.

The documents belong to user bulk-dana of department bulk-e2e and are deleted at the end."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, upload

pytestmark = pytest.mark.e2e

USER, DEPARTMENT = "bulk-dana", "bulk-e2e"
FILES = 240
INTERRUPT_AFTER = 40  # documents created before the Ctrl-C
TOPICS = ("harbour", "glacier", "orchard", "foundry", "observatory", "vineyard", "lighthouse", "quarry")


def cli_env(mesh: Stack, token: str) -> dict[str, str]:
    env = {**os.environ, "RAGMESH_URL": mesh.gateway_url, "RAGMESH_TOKEN": token, "COLUMNS": "250"}
    env.pop("GATEWAY_JWT_SECRET", None)
    return env


def mine(client: httpx.Client, token: str) -> list[dict[str, str]]:
    """Every document of the caller's (paged)."""
    docs: list[dict[str, str]] = []
    cursor = ""
    while True:
        page = client.get(
            "/api/v1/documents", headers=auth(token), params={"owner": USER, "limit": 1000, "cursor": cursor}
        )
        assert page.status_code == 200, page.text
        body = page.json()
        docs += body["documents"]
        cursor = body["next_cursor"]
        if not cursor:
            return docs


@pytest.fixture(scope="module")
def dana(mesh: Stack) -> str:
    return mesh.token(USER, DEPARTMENT, ["employee"])


@pytest.fixture(scope="module")
def http(mesh: Stack, dana: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as client:
        yield client
        for doc in mine(client, dana):
            client.delete(f"/api/v1/documents/{doc['document_id']}", headers=auth(dana))


def test_lookup_answers_only_for_readable_documents(mesh: Stack, http: httpx.Client, dana: str) -> None:
    content = b"The bulk lookup probe: a note only the bulk-e2e department may read."
    sha = hashlib.sha256(content).hexdigest()
    created = upload(http, dana, "probe.md", content, {"departments": [DEPARTMENT]})
    assert created.status_code == 202, created.text
    document_id = created.json()["document_id"]

    def lookup(token: str, **body: object) -> httpx.Response:
        return http.post("/api/v1/documents/lookup", headers=auth(token), json=body)

    owner = lookup(dana, content_sha256=[sha.upper(), "0" * 64], mine=True).json()
    assert [d["document_id"] for d in owner["documents"]] == [document_id]
    colleague = mesh.token("bulk-erin", DEPARTMENT, ["employee"])  # may read it, does not own it
    assert [d["document_id"] for d in lookup(colleague, content_sha256=[sha]).json()["documents"]] == [document_id]
    assert lookup(colleague, content_sha256=[sha], mine=True).json()["documents"] == []
    outsider = mesh.token("bulk-mallory", "elsewhere", ["employee"])  # the hash of what they may not read: nothing
    assert lookup(outsider, content_sha256=[sha]).json() == {"documents": [], "total": 0, "next_cursor": ""}
    bad = lookup(dana, content_sha256=["not-a-hash"])
    assert bad.status_code == 422 and "content_sha256" in bad.text
    assert lookup(dana, content_sha256=[]).status_code == 422
    assert lookup(dana, content_sha256=["a" * 64] * 1001).status_code == 422
    http.delete(f"/api/v1/documents/{document_id}", headers=auth(dana))


def test_bulk_ingest_interrupted_then_resumed(
    mesh: Stack, http: httpx.Client, dana: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("bulk")
    hashes: dict[str, str] = {}
    for i in range(FILES):
        text = (
            f"# Note {i}\n\nField note {i} about the {TOPICS[i % len(TOPICS)]}: inspected on day {i % 28 + 1}, "
            f"sample {i * 7919 % 10007}, nothing unusual recorded.\n"
        )
        path = folder / f"sub{i % 4}" / f"note-{i:04d}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        hashes[str(path)] = hashlib.sha256(text.encode()).hexdigest()
    acl = json.dumps({"departments": [DEPARTMENT]})
    args = [sys.executable, "-m", "ragmesh_cli", "ingest", str(folder), "--concurrency", "4", "--acl", acl, "--json"]

    first = subprocess.Popen(args, env=cli_env(mesh, dana), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while len(mine(http, dana)) < INTERRUPT_AFTER:
        assert first.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "the bulk run did not get going"
        time.sleep(0.2)
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, out[-2000:] + err[-3000:]
    assert "Traceback" not in err and "interrupted:" in err, err[-3000:]
    done_first = json.loads(out)
    assert INTERRUPT_AFTER <= len(done_first) < FILES, "the summary lists what finished before the interrupt"
    assert {o["status"] for o in done_first} <= {"queued", "duplicate"}, [
        o for o in done_first if o["status"] == "error"
    ]
    # the uploads in flight at the Ctrl-C finished: the summary accounts for every document the run created
    assert {o["document_id"] for o in done_first} == {d["document_id"] for d in mine(http, dana)}

    second = subprocess.run(args, env=cli_env(mesh, dana), capture_output=True, text=True, timeout=1200, check=False)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    outcomes = json.loads(second.stdout)
    statuses = Counter(o["status"] for o in outcomes)
    assert sum(statuses.values()) == FILES and set(statuses) <= {"present", "queued", "duplicate"}, [
        o for o in outcomes if o["status"] == "error"
    ]
    # what the first run finished is not sent again (the gateway's duplicate check is only the backstop)
    assert statuses["present"] >= len(done_first), statuses
    assert statuses["duplicate"] <= 4, statuses

    docs = mine(http, dana)
    by_hash = Counter(d["content_sha256"] for d in docs)
    assert len(docs) == FILES and set(by_hash) == set(hashes.values()), "every file is a document"
    assert max(by_hash.values()) == 1, "no file became two documents"
    ids = {o["path"]: o["document_id"] for o in outcomes}
    assert {hashes[p]: ids[p] for p in hashes} == {d["content_sha256"]: d["document_id"] for d in docs}

    third = subprocess.run(args, env=cli_env(mesh, dana), capture_output=True, text=True, timeout=600, check=False)
    assert third.returncode == 0, third.stderr[-3000:]
    assert Counter(o["status"] for o in json.loads(third.stdout)) == {"present": FILES}
