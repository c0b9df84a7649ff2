"""Connectors through the public HTTP API on the real mesh. A folder connector: an admin adds it, Celery beat runs it on its
schedule, its documents are ingested like uploads and answer a chat with citations for the readers its ACL mapping
names only; edited and deleted files, and an ACL changed in the mapping file, reach the documents at the next run;
deleting the connector deletes its documents. A web connector crawls a site served by this test on loopback (never
the internet): pages become documents, an edited page a new version, a page gone (404) a deleted document.

Its documents are readable by departments conn-e2e, conn-hr and (after the change) conn-out only, and are deleted
at the end (test_mesh_e2e asserts that carol, of sales, reads nothing)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack
from ragmesh_dev.websites import Site, serve

from .conftest import SETTLE_SECONDS, auth, settled

pytestmark = pytest.mark.e2e

NAME = "e2e-share"
OWNER = f"connector:{NAME}"
GUIDE_V1 = "# Quibbleflux manual\n\nThe quibbleflux engine was invented in 1987 by Marta Velnik in Tromso.\n"
GUIDE_V2 = (
    "# Quibbleflux manual\n\nThe quibbleflux engine was invented in 1991 by Marta Velnik in Tromso, "
    "after four years of trials.\n"
)
PAY = "# Pay bands\n\nThe zenthrop pay band review happens every April for the whole staff.\n"
MAPPING_V1 = "acl: {departments: [conn-e2e]}\nrules:\n  - match: 'hr/*'\n    acl: {departments: [conn-hr]}\n"
MAPPING_V2 = "acl: {departments: [conn-e2e, conn-out]}\nrules:\n  - match: 'hr/*'\n    acl: {departments: [conn-hr]}\n"
RUN_DONE = ("succeeded", "partial", "failed", "interrupted", "skipped")


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "admin": mesh.token("conn-admin", "it", ["admin"]),
        "cora": mesh.token("cora", "conn-e2e", ["employee"]),
        "hank": mesh.token("hank", "conn-hr", ["employee"]),
        "ollie": mesh.token("ollie", "conn-out", ["employee"]),
    }


@pytest.fixture(scope="module")
def share(mesh: Stack) -> Path:
    root = Path(mesh.env("ingest-worker")["CONNECTORS_ALLOWED_ROOTS"]) / NAME
    (root / "hr").mkdir(parents=True, exist_ok=True)
    (root / "guide.md").write_text(GUIDE_V1)
    (root / "hr" / "pay.md").write_text(PAY)
    (root / ".ragmesh-acl.yaml").write_text(MAPPING_V1)
    (root / ".drafts.md").write_text("# hidden\n\nnever synced\n")
    return root


@pytest.fixture(scope="module")
def connector(client: httpx.Client, tokens: dict[str, str], share: Path) -> Iterator[dict[str, Any]]:
    body = {"name": NAME, "kind": "folder", "config": {"root": str(share)}, "schedule_seconds": 3600}
    reply = client.post("/api/v1/admin/connectors", headers=auth(tokens["admin"]), json=body)
    assert reply.status_code == 201, reply.text
    created = reply.json()
    yield created
    path = f"/api/v1/admin/connectors/{created['connector_id']}"
    if client.get(path, headers=auth(tokens["admin"])).status_code == 200:
        client.delete(path, headers=auth(tokens["admin"]))


def wait_run(client: httpx.Client, token: str, connector_id: str, run_id: str | None = None) -> dict[str, Any]:
    """The connector's run (`run_id`, or its first scheduled one) once it has finished."""
    deadline = time.monotonic() + SETTLE_SECONDS
    runs: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        reply = client.get(f"/api/v1/admin/connectors/{connector_id}/runs", headers=auth(token))
        runs = reply.json()["runs"] if reply.status_code == 200 else []  # else a 503 on a loaded machine: ask again
        for run in runs:
            if (run["run_id"] == run_id or (run_id is None and run["trigger"] == "schedule")) and run[
                "status"
            ] in RUN_DONE:
                return run
        time.sleep(1)
    raise AssertionError(f"run {run_id or 'scheduled'} did not finish: {runs}")


def wait_document(
    client: httpx.Client, token: str, document_id: str, done: Callable[[dict[str, Any]], bool] = settled
) -> dict[str, Any]:
    """The document once `done` holds. A reply that is not 200 (a catalogue deadline on a loaded machine) is asked
    again; the document must be readable, so a 404 that lasts fails the wait."""
    deadline = time.monotonic() + SETTLE_SECONDS
    reply: httpx.Response | None = None
    while time.monotonic() < deadline:
        reply = client.get(f"/api/v1/documents/{document_id}", headers=auth(token))
        if reply.status_code == 200 and done(reply.json()):
            return reply.json()  # type: ignore[no-any-return]
        time.sleep(0.5)
    raise AssertionError(f"document {document_id} did not get there: {reply.text if reply else ''}")


def connector_docs(client: httpx.Client, token: str) -> dict[str, dict[str, Any]]:
    reply = client.get("/api/v1/documents", headers=auth(token), params={"owner": OWNER, "limit": 50})
    assert reply.status_code == 200, reply.text
    return {d["filename"]: d for d in reply.json()["documents"]}


def search(client: httpx.Client, token: str, query: str) -> list[dict[str, Any]]:
    reply = client.post(
        "/api/v1/search",
        headers=auth(token),
        json={"query": query, "top_k": 10, "relevance_gate": False, "rerank": False},
    )
    assert reply.status_code == 200, reply.text
    return [r for r in reply.json()["results"] if "quibbleflux" in r["snippet"].lower()]


def test_folder_connector_end_to_end(
    client: httpx.Client, tokens: dict[str, str], share: Path, connector: dict[str, Any]
) -> None:
    admin, cid = tokens["admin"], connector["connector_id"]
    assert client.get("/api/v1/admin/connectors", headers=auth(tokens["cora"])).status_code == 403

    # the first run comes from Celery beat: the connector is due as soon as it is created
    first = wait_run(client, admin, cid)
    assert first["status"] == "succeeded", first
    assert first["counts"]["new"] == 2 and first["counts"]["failed"] == 0, first

    docs = connector_docs(client, tokens["cora"])
    assert set(docs) == {"guide.md"}  # hr/pay.md is for conn-hr; .drafts.md is hidden
    guide = wait_document(client, tokens["cora"], docs["guide.md"]["document_id"])
    assert guide["status"] == "ready" and guide["owner_user"] == OWNER, guide
    pay_id = connector_docs(client, tokens["hank"])["pay.md"]["document_id"]
    assert wait_document(client, tokens["hank"], pay_id)["status"] == "ready"

    chat = client.post(
        "/api/v1/chat",
        headers=auth(tokens["cora"]),
        json={"question": "When was the quibbleflux engine invented?", "relevance_gate": False},
    )
    assert chat.status_code == 200, chat.text
    answer = chat.json()
    assert answer["outcome"] == "answer", answer
    assert any(s["document_id"] == guide["document_id"] for s in answer["sources"]), answer["sources"]

    # a user outside the ACL never sees it, by search or chat
    assert search(client, tokens["ollie"], "quibbleflux engine invented") == []
    outsider = client.post(
        "/api/v1/chat",
        headers=auth(tokens["ollie"]),
        json={"question": "When was the quibbleflux engine invented?", "relevance_gate": False},
    ).json()
    assert guide["document_id"] not in {s["document_id"] for s in outsider.get("sources", [])}
    assert "quibbleflux" not in outsider.get("answer", "").lower()
    assert client.get(f"/api/v1/documents/{pay_id}", headers=auth(tokens["cora"])).status_code == 404

    # edit one file, delete another, widen the ACL in the mapping file; run now
    (share / "guide.md").write_text(GUIDE_V2)
    (share / "hr" / "pay.md").unlink()
    (share / ".ragmesh-acl.yaml").write_text(MAPPING_V2)
    queued = client.post(f"/api/v1/admin/connectors/{cid}/runs", headers=auth(admin))
    assert queued.status_code == 202, queued.text
    second = wait_run(client, admin, cid, queued.json()["run_id"])
    assert second["status"] == "succeeded", second
    counts = second["counts"]
    assert (counts["changed"], counts["deleted"], counts["acl_changed"], counts["new"]) == (1, 1, 1, 0), second

    guide = wait_document(client, tokens["cora"], guide["document_id"], lambda d: settled(d) and d["version"] == 2)
    assert guide["status"] == "ready", guide
    assert any("1991" in r["snippet"] for r in search(client, tokens["cora"], "quibbleflux engine invented"))
    assert any("1991" in r["snippet"] for r in search(client, tokens["ollie"], "quibbleflux engine invented"))
    assert client.get(f"/api/v1/documents/{pay_id}", headers=auth(tokens["hank"])).status_code == 404

    listed = client.get(f"/api/v1/admin/connectors/{cid}", headers=auth(admin)).json()
    assert listed["documents"] == 1 and listed["last_run"]["status"] == "succeeded"

    # deleting the connector deletes its documents
    assert client.delete(f"/api/v1/admin/connectors/{cid}", headers=auth(admin)).status_code == 202
    deadline = time.monotonic() + SETTLE_SECONDS
    while client.get(f"/api/v1/admin/connectors/{cid}", headers=auth(admin)).status_code != 404:
        assert time.monotonic() < deadline, "the connector was not deleted"
        time.sleep(1)
    assert connector_docs(client, tokens["ollie"]) == {} and connector_docs(client, tokens["cora"]) == {}


def test_web_connector_end_to_end(client: httpx.Client, tokens: dict[str, str]) -> None:
    site = Site()
    server, _ = serve(site)
    admin = tokens["admin"]
    try:
        site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private\n")
        site.html("/", '<title>Plimsoll wiki</title><a href="/ferries">ferries</a> <a href="/private/x">x</a>')
        site.html("/ferries", "<h1>Ferries</h1><p>The plimsoll ferry to Vardholm leaves every Tuesday at noon.</p>")
        site.html("/private/x", "<p>The plimsoll vault code is never crawled.</p>")
        body = {
            "name": "e2e-site",
            "kind": "web",
            "config": {"seeds": [f"{site.base}/"], "allowed_hosts": [f"127.0.0.1:{site.port}"], "max_depth": 1},
            "acl": {"departments": ["conn-e2e"]},
        }
        created = client.post("/api/v1/admin/connectors", headers=auth(admin), json=body)
        assert created.status_code == 201, created.text
        cid = created.json()["connector_id"]
        queued = client.post(f"/api/v1/admin/connectors/{cid}/runs", headers=auth(admin)).json()
        first = wait_run(client, admin, cid, queued["run_id"])
        assert first["status"] == "succeeded" and first["counts"]["new"] == 2, first
        assert any("robots.txt" in p["reason"] for p in first["problems"]) and not site.requested("/private/x")

        docs = {
            d["title"]: d
            for d in client.get(
                "/api/v1/documents", headers=auth(tokens["cora"]), params={"owner": "connector:e2e-site"}
            ).json()["documents"]
        }
        ferries = next(d for d in docs.values() if d["filename"].startswith("ferries"))
        assert wait_document(client, tokens["cora"], ferries["document_id"])["status"] == "ready"
        hits = client.post(
            "/api/v1/search",
            headers=auth(tokens["cora"]),
            json={"query": "plimsoll ferry Vardholm", "top_k": 5, "relevance_gate": False, "rerank": False},
        ).json()["results"]
        assert any(h["document_id"] == ferries["document_id"] for h in hits), hits
        hidden = client.post(
            "/api/v1/search",
            headers=auth(tokens["ollie"]),
            json={"query": "plimsoll ferry Vardholm", "top_k": 5, "relevance_gate": False, "rerank": False},
        ).json()["results"]
        assert all(h["document_id"] != ferries["document_id"] for h in hidden)

        site.html("/", "<title>Plimsoll wiki</title><p>No links any more.</p>")
        del site.pages["/ferries"]
        queued = client.post(f"/api/v1/admin/connectors/{cid}/runs", headers=auth(admin)).json()
        second = wait_run(client, admin, cid, queued["run_id"])
        assert second["counts"]["deleted"] == 1 and second["counts"]["changed"] == 1, second
        assert (
            client.get(f"/api/v1/documents/{ferries['document_id']}", headers=auth(tokens["cora"])).status_code == 404
        )
    finally:
        server.shutdown()
        server.server_close()
        for connector in client.get("/api/v1/admin/connectors", headers=auth(admin)).json()["connectors"]:
            if connector["name"] == "e2e-site":
                client.delete(f"/api/v1/admin/connectors/{connector['connector_id']}", headers=auth(admin))
