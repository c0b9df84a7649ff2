"""The `ragmesh` CLI against the real mesh, run as a user runs it (`python -m ragmesh_cli` in a subprocess):
ingest a folder with --wait, ask, search, docs list/show/rm, traces as admin and as a non-admin, a bad token.

The documents belong to user dana of department cli-e2e, readable by that department only, and are deleted at
the end, so that the other end-to-end tests (carol reads nothing) do not see them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import DOCS, settled, wait_document

pytestmark = pytest.mark.e2e

FILES = [
    DOCS / "md" / "sources" / "wiki.md",
    DOCS / "md" / "sources" / "duck.md",
    DOCS / "csv" / "sources" / "csv-comma.csv",
]
USER, DEPARTMENT = "dana", "cli-e2e"

if not DOCS.is_dir():
    pytest.skip(f"shared documents not found at {DOCS}", allow_module_level=True)


def ragmesh(mesh: Stack, token: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGMESH_URL": mesh.gateway_url, "RAGMESH_TOKEN": token, "COLUMNS": "250"}
    env.pop("GATEWAY_JWT_SECRET", None)
    return subprocess.run(
        [sys.executable, "-m", "ragmesh_cli", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def dana(mesh: Stack) -> str:
    return mesh.token(USER, DEPARTMENT, ["employee"])


@pytest.fixture(scope="module")
def ingested(mesh: Stack, dana: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The folder ingested with --wait; {file name: document id}. Whatever is left is deleted afterwards."""
    folder = tmp_path_factory.mktemp("cli-docs")
    (folder / "nested").mkdir()
    for i, source in enumerate(FILES):
        (folder / ("nested" if i else ".") / source.name).symlink_to(source)
    (folder / "nested" / "notes.xyz").write_text("not a supported format")
    done = ragmesh(
        mesh,
        dana,
        "ingest",
        str(folder),
        "--wait",
        "--concurrency",
        "2",
        "--acl",
        f'{{"departments": ["{DEPARTMENT}"]}}',
    )
    listed = ragmesh(mesh, dana, "docs", "list", "--json")
    ids = (
        {d["filename"]: d["document_id"] for d in json.loads(listed.stdout)["documents"]}
        if listed.returncode == 0
        else {}
    )
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if line.count("│") > 2}
        for source in FILES:
            row = next(line for name, line in rows.items() if name.endswith(source.name))
            assert " ready " in row and " chunks" in row, row
        assert "skipped" in next(line for name, line in rows.items() if name.endswith("notes.xyz"))
        assert "3 ready · 1 skipped" in done.stdout
        assert set(ids) == {f.name for f in FILES}
        yield ids
    finally:
        with httpx.Client(base_url=mesh.gateway_url, timeout=60) as client:
            for document_id in ids.values():
                client.delete(f"/api/v1/documents/{document_id}", headers={"Authorization": f"Bearer {dana}"})


def test_ingest_then_docs_list_and_show(mesh: Stack, dana: str, ingested: dict[str, str]) -> None:
    listed = ragmesh(mesh, dana, "docs", "list")
    assert listed.returncode == 0, listed.stderr
    assert "3 of 3 documents" in listed.stdout and all(i in listed.stdout for i in ingested.values())
    shown = ragmesh(mesh, dana, "docs", "show", ingested["wiki.md"])
    assert shown.returncode == 0, shown.stderr
    assert "wiki.md" in shown.stdout and f"departments: {DEPARTMENT}" in shown.stdout
    # the chunks endpoint is listed where the server has it, and said to be missing where it does not
    assert "chunks: not available on this server" in shown.stdout or " chunks" in shown.stdout
    as_json = json.loads(ragmesh(mesh, dana, "docs", "show", ingested["duck.md"], "--json").stdout)
    assert as_json["document"]["status"] == "ready" and as_json["document"]["owner_user"] == USER
    # another department reads none of them
    other = ragmesh(mesh, mesh.token("erin", "other-dept", ["employee"]), "docs", "show", ingested["wiki.md"])
    assert other.returncode == 1 and other.stderr.startswith("error: HTTP 404"), other.stderr


def test_ask_streams_an_answer_with_sources(mesh: Stack, dana: str, ingested: dict[str, str]) -> None:
    done = ragmesh(mesh, dana, "ask", "When was IBM founded and what is its nickname?")
    assert done.returncode == 0, done.stdout + done.stderr
    answer, _, footer = done.stdout.partition("\nSources\n")
    assert answer.strip(), done.stdout
    assert "[1] IBM" in footer, done.stdout  # wiki.md's title (its first heading)
    assert "trace " in footer
    search = ragmesh(mesh, dana, "search", "International Business Machines", "--json")
    assert search.returncode == 0, search.stderr
    assert ingested["wiki.md"] in {r["document_id"] for r in json.loads(search.stdout)["results"]}


def test_traces_for_admins_only(mesh: Stack, dana: str, ingested: dict[str, str]) -> None:
    admin = mesh.token("cli-admin", "it", ["admin"])
    listed = ragmesh(mesh, admin, "traces", "--limit", "5", "--json")
    assert listed.returncode == 0, listed.stderr
    traces = json.loads(listed.stdout)["traces"]
    assert traces, "the ingest and the chat above left traces"
    shown = ragmesh(mesh, admin, "traces", "show", traces[0]["trace_id"])
    assert shown.returncode == 0, shown.stderr
    assert f"trace {traces[0]['trace_id']}" in shown.stdout
    refused = ragmesh(mesh, dana, "traces")
    assert refused.returncode == 1
    assert refused.stderr.strip() == "error: HTTP 403: admin role required"


def test_bad_token_and_minted_token(mesh: Stack, dana: str, ingested: dict[str, str]) -> None:
    bad = ragmesh(mesh, "not-a-jwt", "docs", "list")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("error: HTTP 401: ") and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    minted = ragmesh(
        mesh,
        "",
        "token",
        "--user",
        USER,
        "--department",
        DEPARTMENT,
        "--roles",
        "employee",
        "--data-dir",
        str(mesh.data_dir),
    )
    assert minted.returncode == 0, minted.stderr
    listed = ragmesh(mesh, minted.stdout.strip(), "docs", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["total"] == 3


def test_stale_documents_are_listed_and_reingested(
    mesh: Stack, dana: str, ingested: dict[str, str], client: httpx.Client
) -> None:
    """A document an older parser read (its reading below the parser's: here set back to 0, as for documents
    parsed before readings were recorded) is listed by `docs list --stale` and parsed again by `docs reingest
    --stale`; then nothing is stale."""
    reading = client.get("/api/v1/formats", headers={"Authorization": f"Bearer {dana}"}).json()["parser_version"]
    assert reading >= 1
    wiki = ingested["wiki.md"]
    assert json.loads(ragmesh(mesh, dana, "docs", "list", "--stale", "--json").stdout)["total"] == 0
    with psycopg.connect(mesh.postgres.owner_dsn()) as conn:
        conn.execute("UPDATE documents SET parser_version = 0 WHERE id = %s", (wiki,))
    stale = json.loads(ragmesh(mesh, dana, "docs", "list", "--stale", "--mine", "--json").stdout)
    assert [d["document_id"] for d in stale["documents"]] == [wiki] and stale["documents"][0]["parser_version"] == 0
    reader = mesh.token("erin", DEPARTMENT, ["employee"])  # reads it, does not own it
    assert json.loads(ragmesh(mesh, reader, "docs", "list", "--stale", "--json").stdout)["total"] == 1
    assert json.loads(ragmesh(mesh, reader, "docs", "list", "--stale", "--mine", "--json").stdout)["total"] == 0
    done = ragmesh(mesh, dana, "docs", "reingest", "--stale")
    assert done.returncode == 0, done.stderr
    assert "re-ingesting 1 documents" in done.stdout and wiki in done.stdout
    doc = wait_document(client, dana, wiki, lambda d: settled(d) and d["parser_version"] == reading)
    assert (doc["status"], doc["version"]) == ("ready", 1)  # a re-ingest replaces the version in place
    again = ragmesh(mesh, dana, "docs", "reingest", "--stale")
    assert again.returncode == 0 and "no stale documents" in again.stdout, again.stdout + again.stderr


def test_docs_rm_deletes_and_reports_the_rest(mesh: Stack, dana: str, ingested: dict[str, str]) -> None:
    ids = list(ingested.values())
    refused = ragmesh(mesh, mesh.token("erin", DEPARTMENT, ["employee"]), "docs", "rm", ids[0])  # a reader, not owner
    assert refused.returncode == 1 and refused.stderr.startswith(f"error: {ids[0]}: HTTP 403"), refused.stderr
    done = ragmesh(mesh, dana, "docs", "rm", *ids)
    assert done.returncode == 0, done.stderr
    assert all(f"deleted {i}" in done.stdout for i in ids)
    assert json.loads(ragmesh(mesh, dana, "docs", "list", "--json").stdout)["total"] == 0
    again = ragmesh(mesh, dana, "docs", "rm", ids[0])
    assert again.returncode == 1 and "HTTP 404" in again.stderr
