"""Documents at production grade through the HTTP API and the CLI against the real mesh: dedup, a new version
without a search gap, re-ingest, PATCH of the ACL (the next search and chat follow it), audit, chunk listing for
readers only, list filters with cursor paging, the admin problems view, zero-text and mismatched uploads.

The documents belong to user olga of department docs-e2e and are deleted at the end (test_mesh_e2e asserts
that carol reads nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, settled, upload, wait_document

pytestmark = pytest.mark.e2e

DEPARTMENT = "docs-e2e"
V1 = b"# Zorblax reactor\n\nThe zorblax reactor runs on quantum fluxcap alphacore fuel and hums quietly.\n"
V2 = b"# Zorblax reactor\n\nThe zorblax reactor runs on quantum fluxcap betacore fuel and glows blue.\n"
NOTES = b"Quarterly glimmerwort inventory: the glimmerwort stock is counted every Friday by the warehouse team.\n"
CLI_DOC = b"# Snorkelberry\n\nSnorkelberry pies are baked with frostmint and served warm at the docs festival.\n"


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "olga": mesh.token("olga", DEPARTMENT, ["employee"]),
        "rita": mesh.token("rita", DEPARTMENT, ["employee"]),  # reads by department
        "otto": mesh.token("otto", "docs-e2e-out", ["employee"]),  # reads nothing until the ACL names him
        "admin": mesh.token("docs-admin", "it", ["admin"]),
    }


@pytest.fixture(scope="module")
def owned(client: httpx.Client, tokens: dict[str, str]) -> Iterator[list[str]]:
    """Ids of the documents created here; all deleted at the end."""
    ids: list[str] = []
    yield ids
    for document_id in ids:
        client.delete(f"/api/v1/documents/{document_id}", headers=auth(tokens["olga"]))


def search(client: httpx.Client, token: str, query: str, document_id: str) -> list[dict[str, Any]]:
    reply = client.post(
        "/api/v1/search",
        headers=auth(token),
        json={"query": query, "document_ids": [document_id], "top_k": 10, "relevance_gate": False, "rerank": False},
    )
    assert reply.status_code == 200, reply.text
    return reply.json()["results"]


@pytest.fixture(scope="module")
def reactor(client: httpx.Client, tokens: dict[str, str], owned: list[str]) -> str:
    reply = upload(client, tokens["olga"], "reactor.md", V1, {"departments": [DEPARTMENT]})
    assert reply.status_code == 202, reply.text
    document_id = reply.json()["document_id"]
    owned.append(document_id)
    doc = wait_document(client, tokens["olga"], document_id, settled)
    assert doc["status"] == "ready" and doc["version"] == 1, doc
    return document_id


def test_identical_bytes_are_the_same_document(client: httpx.Client, tokens: dict[str, str], reactor: str) -> None:
    again = upload(client, tokens["olga"], "copy-of-reactor.md", V1)
    assert again.status_code == 200, again.text
    assert again.json()["duplicate"] is True and again.json()["document_id"] == reactor
    listed = client.get("/api/v1/documents?owner=olga", headers=auth(tokens["olga"])).json()
    assert [d["document_id"] for d in listed["documents"]].count(reactor) == 1 and listed["total"] == 1


def test_a_new_version_replaces_the_old_without_a_gap(
    client: httpx.Client, tokens: dict[str, str], reactor: str
) -> None:
    seen: list[tuple[bool, bool]] = []
    stop, searching = threading.Event(), threading.Event()
    errors: list[str] = []

    def loop() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=300) as searcher:
            while not stop.is_set():
                try:
                    texts = " ".join(r["snippet"] for r in search(searcher, tokens["rita"], "zorblax reactor", reactor))
                except AssertionError as exc:
                    errors.append(str(exc))
                    return
                seen.append(("alphacore" in texts, "betacore" in texts))
                searching.set()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        assert searching.wait(timeout=300) and not errors, errors  # the loop has seen version 1 before the PUT
        reply = client.put(
            f"/api/v1/documents/{reactor}/content", headers=auth(tokens["olga"]), files={"file": ("reactor.md", V2)}
        )
        assert reply.status_code == 202, reply.text
        body = reply.json()
        assert (body["ingesting_version"], body["pending_version"], body["status"]) == (2, 2, "ready")
        with client.stream("GET", f"/api/v1/documents/{reactor}/events", headers=auth(tokens["olga"])) as events:
            statuses = [json.loads(line[5:])["status"] for line in events.iter_lines() if line.startswith("data:")]
        assert statuses[-1] == "ready", statuses
        doc = wait_document(client, tokens["olga"], reactor, lambda d: settled(d) and d["version"] == 2)
        assert doc["status"] == "ready" and not doc["pending_error"]
        for _ in range(3):  # a few searches after the swap
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=300)
    assert not errors, errors
    assert seen and all(alpha != beta for alpha, beta in seen), seen  # always exactly one version's text
    assert seen[0] == (True, False) and seen[-1] == (False, True)
    unchanged = client.put(
        f"/api/v1/documents/{reactor}/content", headers=auth(tokens["olga"]), files={"file": ("reactor.md", V2)}
    )
    assert unchanged.status_code == 200 and unchanged.json()["unchanged"] is True
    refused = client.put(
        f"/api/v1/documents/{reactor}/content", headers=auth(tokens["rita"]), files={"file": ("reactor.md", V1)}
    )
    assert refused.status_code == 403


def test_reingest_keeps_the_document_searchable(client: httpx.Client, tokens: dict[str, str], reactor: str) -> None:
    assert client.post(f"/api/v1/documents/{reactor}/reingest", headers=auth(tokens["rita"])).status_code == 403
    reply = client.post(f"/api/v1/documents/{reactor}/reingest", headers=auth(tokens["olga"]))
    assert reply.status_code == 202, reply.text
    assert any("betacore" in r["snippet"] for r in search(client, tokens["rita"], "zorblax", reactor))
    doc = wait_document(client, tokens["olga"], reactor, settled)
    assert (doc["status"], doc["version"]) == ("ready", 2)
    assert any("betacore" in r["snippet"] for r in search(client, tokens["rita"], "zorblax", reactor))


def test_chunks_are_listed_for_readers_only(client: httpx.Client, tokens: dict[str, str], reactor: str) -> None:
    body = client.get(f"/api/v1/documents/{reactor}/chunks?level=paragraph", headers=auth(tokens["rita"])).json()
    assert body["chunks"] and all(c["level"] == "paragraph" for c in body["chunks"])
    assert any("betacore" in c["text"] for c in body["chunks"]) and body["chunks"][0]["token_count"] > 0
    assert client.get(f"/api/v1/documents/{reactor}/chunks", headers=auth(tokens["otto"])).status_code == 404


def test_acl_change_applies_to_the_next_search_and_chat(
    client: httpx.Client, tokens: dict[str, str], reactor: str
) -> None:
    path = f"/api/v1/documents/{reactor}"
    assert client.patch(path, headers=auth(tokens["rita"]), json={"title": "mine"}).status_code == 403
    assert client.patch(path, headers=auth(tokens["otto"]), json={"title": "mine"}).status_code == 404
    assert client.patch(path, headers=auth(tokens["olga"]), json={"acl": {"department": ["x"]}}).status_code == 422
    assert client.patch(path, headers=auth(tokens["olga"]), json={}).status_code == 422
    assert not search(client, tokens["otto"], "zorblax reactor", reactor)
    reply = client.patch(path, headers=auth(tokens["olga"]), json={"acl": {"users": ["otto"]}, "title": "Reactor"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["acl"]["users"] == ["otto"] and reply.json()["title"] == "Reactor"
    assert search(client, tokens["otto"], "zorblax reactor", reactor)
    assert not search(client, tokens["rita"], "zorblax reactor", reactor)  # the department lost access at once
    chat = client.post(
        "/api/v1/chat",
        headers=auth(tokens["otto"]),
        json={
            "question": "What fuel does the zorblax reactor run on?",
            "document_ids": [reactor],
            "relevance_gate": False,
        },
    )
    assert chat.status_code == 200, chat.text
    assert any(s["document_id"] == reactor for s in chat.json()["sources"])
    entries = client.get(f"{path}/audit", headers=auth(tokens["olga"])).json()["entries"]
    update = [e for e in entries if e["action"] == "update"]
    assert update and update[-1]["actor"] == "olga" and "otto" in json.dumps(update[-1]["after"])
    assert {"create", "new_version", "reingest"} <= {e["action"] for e in entries}
    assert client.get(f"{path}/audit", headers=auth(tokens["otto"])).status_code == 403
    assert client.get(f"{path}/audit", headers=auth(tokens["admin"])).status_code == 200
    back = client.patch(path, headers=auth(tokens["olga"]), json={"acl": {"departments": [DEPARTMENT]}})
    assert back.status_code == 200 and not search(client, tokens["otto"], "zorblax reactor", reactor)


def test_an_uploads_title_is_kept_and_without_one_the_documents_heading_titles_it(
    client: httpx.Client, tokens: dict[str, str], owned: list[str]
) -> None:
    content = b"# Glimmerwort field notes\n\nThe glimmerwort beds were weeded on Tuesday by the north crew.\n"
    headers = auth(tokens["olga"])
    titled = upload(client, tokens["olga"], "notes_v1.md", content, title="Crew log")
    untitled = upload(client, tokens["olga"], "notes_v2.md", content + b"\nSecond copy.\n")
    assert titled.status_code == untitled.status_code == 202, (titled.text, untitled.text)
    assert (titled.json()["title"], titled.json()["title_given"]) == ("Crew log", True)
    assert (untitled.json()["title"], untitled.json()["title_given"]) == ("notes_v2", False)  # until parsed
    owned.extend([titled.json()["document_id"], untitled.json()["document_id"]])
    kept = wait_document(client, tokens["olga"], titled.json()["document_id"], settled)
    parsed = wait_document(client, tokens["olga"], untitled.json()["document_id"], settled)
    assert (kept["status"], kept["title"]) == ("ready", "Crew log")  # the parser's heading did not replace it
    assert (parsed["status"], parsed["title"]) == ("ready", "Glimmerwort field notes")
    hits = client.post(
        "/api/v1/search",
        headers=headers,
        json={"query": "glimmerwort beds weeded", "top_k": 5, "relevance_gate": False, "rerank": False},
    ).json()["results"]
    titles = {h["document_id"]: h["title"] for h in hits}
    assert titles.get(kept["document_id"]) == "Crew log"  # what sources show is the title the person gave
    assert titles.get(parsed["document_id"]) == "Glimmerwort field notes"


def test_list_filters_and_cursor_paging(
    client: httpx.Client, tokens: dict[str, str], reactor: str, owned: list[str]
) -> None:
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    reply = upload(client, tokens["olga"], "glimmerwort.txt", NOTES)
    assert reply.status_code == 202, reply.text
    notes = reply.json()["document_id"]
    owned.append(notes)
    wait_document(client, tokens["olga"], notes, settled)
    headers = auth(tokens["olga"])
    ids: list[str] = []
    cursor = ""
    for _ in range(10):
        page = client.get(
            "/api/v1/documents",
            headers=headers,
            params={
                "owner": "olga",
                "status": ["ready", "failed"],
                "limit": 1,
                "cursor": cursor,
                "updated_since": since,
            },
        ).json()
        ids += [d["document_id"] for d in page["documents"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert {reactor, notes} <= set(ids) and len(ids) == len(set(ids))
    md = client.get("/api/v1/documents", headers=headers, params={"owner": "olga", "format": "md"}).json()
    assert reactor in [d["document_id"] for d in md["documents"]] and notes not in [
        d["document_id"] for d in md["documents"]
    ]
    future = client.get("/api/v1/documents", headers=headers, params={"updated_since": "2999-01-01T00:00:00Z"}).json()
    assert future["total"] == 0
    assert (
        client.get("/api/v1/documents", headers=headers, params={"updated_since": "2025-01-01T00:00:00"}).status_code
        == 422
    )


def test_zero_text_fails_and_shows_in_the_admin_view(
    client: httpx.Client, tokens: dict[str, str], owned: list[str]
) -> None:
    reply = upload(client, tokens["olga"], "links.html", b'<html><body><img src="a.png"><a href="x"></a></body></html>')
    assert reply.status_code == 202, reply.text
    document_id = reply.json()["document_id"]
    owned.append(document_id)
    doc = wait_document(client, tokens["olga"], document_id, settled)
    # the parser refuses it ("no text content found"), or the worker finds no paragraph text: failed either way
    assert doc["status"] == "failed" and ("no extractable text" in doc["error"] or "no text" in doc["error"]), doc
    assert client.get("/api/v1/admin/documents/problems", headers=auth(tokens["olga"])).status_code == 403
    problems = client.get("/api/v1/admin/documents/problems", headers=auth(tokens["admin"])).json()["documents"]
    mine = [p for p in problems if p["document"]["document_id"] == document_id]
    assert mine and mine[0]["problem"] == "failed" and mine[0]["reason"] == doc["error"]
    mismatched = upload(client, tokens["olga"], "notes.txt", b"\x89PNG\r\n\x1a\n" + bytes(32))
    assert mismatched.status_code == 415


def ragmesh(mesh: Stack, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGMESH_URL": mesh.gateway_url, "RAGMESH_TOKEN": token, "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-m", "ragmesh_cli", *args], capture_output=True, text=True, env=env, check=False, timeout=900
    )


def test_the_cli_skips_what_is_present_and_shows_chunks(
    mesh: Stack, client: httpx.Client, tokens: dict[str, str], owned: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "snorkelberry.md"
    path.write_bytes(CLI_DOC)
    (tmp_path / "logo.gif").write_bytes(b"GIF89a")
    first = ragmesh(mesh, tokens["olga"], "ingest", str(tmp_path), "--wait", "--json")
    outcomes = {Path(o["path"]).name: o for o in json.loads(first.stdout or "[]")}
    if "snorkelberry.md" in outcomes and outcomes["snorkelberry.md"]["document_id"]:
        owned.append(outcomes["snorkelberry.md"]["document_id"])
    assert outcomes["snorkelberry.md"]["status"] == "ready", first.stdout + first.stderr
    assert outcomes["logo.gif"]["status"] == "skipped"  # the gateway's formats, asked once
    second = ragmesh(mesh, tokens["olga"], "ingest", str(path), "--json")
    [again] = json.loads(second.stdout)
    # the same bytes are already olga's document: not uploaded again (the API's own duplicate check is above)
    assert again["status"] == "present" and again["document_id"] == outcomes["snorkelberry.md"]["document_id"]
    shown = ragmesh(mesh, tokens["olga"], "docs", "show", again["document_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    chunks = json.loads(shown.stdout)["chunks"]["chunks"]
    assert any("Snorkelberry" in c["text"] for c in chunks)
